package main

import (
	"image"
	"image/color"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// textRecorder is a vg.Canvas that keeps the box of every text drawn on
// it, in the picture's coordinates, after the canvas' transforms.
type textRecorder struct {
	w, h  vg.Length
	m     affine
	stack []affine
	texts []placedText
}

type placedText struct {
	text string
	box  vg.Rectangle
}

// affine maps (x, y) to (a·x + b·y + c, d·x + e·y + f).
type affine struct{ a, b, c, d, e, f float64 }

var identity = affine{a: 1, e: 1}

func (m affine) then(n affine) affine { // m applied after n: m∘n
	return affine{
		a: m.a*n.a + m.b*n.d, b: m.a*n.b + m.b*n.e, c: m.a*n.c + m.b*n.f + m.c,
		d: m.d*n.a + m.e*n.d, e: m.d*n.b + m.e*n.e, f: m.d*n.c + m.e*n.f + m.f,
	}
}

func (m affine) apply(x, y float64) (float64, float64) {
	return m.a*x + m.b*y + m.c, m.d*x + m.e*y + m.f
}

func newTextRecorder(w, h vg.Length) *textRecorder {
	return &textRecorder{w: w, h: h, m: identity}
}

func (r *textRecorder) Size() (vg.Length, vg.Length)        { return r.w, r.h }
func (r *textRecorder) SetLineWidth(vg.Length)              {}
func (r *textRecorder) SetLineDash([]vg.Length, vg.Length)  {}
func (r *textRecorder) SetColor(color.Color)                {}
func (r *textRecorder) Stroke(vg.Path)                      {}
func (r *textRecorder) Fill(vg.Path)                        {}
func (r *textRecorder) DrawImage(vg.Rectangle, image.Image) {}
func (r *textRecorder) Push()                               { r.stack = append(r.stack, r.m) }
func (r *textRecorder) Pop() {
	r.m = r.stack[len(r.stack)-1]
	r.stack = r.stack[:len(r.stack)-1]
}
func (r *textRecorder) Rotate(rad float64) {
	sin, cos := math.Sincos(rad)
	r.m = r.m.then(affine{a: cos, b: -sin, d: sin, e: cos})
}
func (r *textRecorder) Translate(pt vg.Point) {
	r.m = r.m.then(affine{a: 1, c: pt.X.Points(), e: 1, f: pt.Y.Points()})
}
func (r *textRecorder) Scale(x, y float64) { r.m = r.m.then(affine{a: x, e: y}) }

func (r *textRecorder) FillString(f font.Face, pt vg.Point, s string) {
	ext := f.Extents()
	x0, x1 := pt.X.Points(), (pt.X + f.Width(s)).Points()
	y0, y1 := (pt.Y - ext.Descent).Points(), (pt.Y + ext.Ascent).Points()
	box := vg.Rectangle{Min: vg.Point{X: vg.Length(math.Inf(1)), Y: vg.Length(math.Inf(1))}, Max: vg.Point{X: vg.Length(math.Inf(-1)), Y: vg.Length(math.Inf(-1))}}
	for _, c := range [][2]float64{{x0, y0}, {x0, y1}, {x1, y0}, {x1, y1}} {
		x, y := r.m.apply(c[0], c[1])
		box.Min.X, box.Max.X = min(box.Min.X, vg.Length(x)), max(box.Max.X, vg.Length(x))
		box.Min.Y, box.Max.Y = min(box.Min.Y, vg.Length(y)), max(box.Max.Y, vg.Length(y))
	}
	r.texts = append(r.texts, placedText{s, box})
}

// drawn draws ch at w×h on a recorder and returns the recorder and the
// layout.
func drawn(ch *chart, w, h vg.Length) (*textRecorder, layout) {
	rec := newTextRecorder(w, h)
	lay := ch.draw(draw.New(rec))
	return rec, lay
}

func overlaps(a, b vg.Rectangle) bool {
	return a.Min.X < b.Max.X && b.Min.X < a.Max.X && a.Min.Y < b.Max.Y && b.Min.Y < a.Max.Y
}

// simChartSet is the charts of sim that testCharts returns, simulated once
// for every test that checks them.
type simChartSet struct {
	once        sync.Once
	readme, off *chart
	hedge       []hedgeRow
	err         error
}

var simCharts simChartSet

// simulated returns simCharts, simulating them the first time.
func simulated(t *testing.T) *simChartSet {
	t.Helper()
	simCharts.once.Do(func() {
		simCharts.readme = loadChart(t, "--rate", "100", "--duration", "2m", "--outage", "30s:60s")
		simCharts.off = loadChart(t, "--rate", "100", "--duration", "2m", "--outage", "30s:60s", "--budget", "off")
		simCharts.hedge, simCharts.err = hedgeRuns(1, nil)
	})
	if simCharts.err != nil || simCharts.readme == nil || simCharts.off == nil {
		t.Fatalf("the charts of sim: %v", simCharts.err)
	}
	return &simCharts
}

// testCharts are the charts the layout tests check: the README's three, and
// ones that stretch the layout (many curves, long labels, a narrow canvas).
func testCharts(t *testing.T) []struct {
	name string
	ch   *chart
	w, h vg.Length
} {
	t.Helper()
	curveCase := func(args ...string) *chart {
		curves, limit := flagCurves(t, args...)
		ch, err := curveChart(curves, curveOptions{limit: limit, samples: 200, seed: 1, scale: scaleAuto})
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	readme, hedge := simulated(t).readme, simulated(t).hedge
	cm := vg.Centimeter
	return []struct {
		name string
		ch   *chart
		w, h vg.Length
	}{
		{name: "README curve", ch: curveCase("--attempts", "11", "ojs", "zizq"), w: 16 * cm, h: 10 * cm},
		{name: "README sim", ch: readme, w: 20 * cm, h: 11 * cm},
		{name: "seven curves", ch: curveCase("--attempts", "8", "ojs", "zizq", "daycry", "ratchet", "daycry:base=1s",
			`{"initial_interval":"PT0.1S","jitter":{"kind":"decorrelated"}}`, `{"backoff_strategy":"linear"}`), w: 16 * cm, h: 14 * cm},
		{name: "narrow", ch: curveCase("--attempts", "30", "--limit", "30", "zizq", "ratchet:retries=29"), w: 9 * cm, h: 8 * cm},
		{name: "cumulative", ch: func() *chart {
			curves, _ := flagCurves(t, "--preset", "zizq")
			ch, err := curveChart(curves, curveOptions{limit: 30, samples: 200, seed: 1, scale: scaleAuto, cumulative: true})
			if err != nil {
				t.Fatal(err)
			}
			return ch
		}(), w: 16 * cm, h: 10 * cm},
		{name: "narrow sim", ch: readme, w: 10 * cm, h: 8 * cm},
		{name: "sim without a budget: one panel", ch: simulated(t).off, w: 20 * cm, h: 11 * cm},
		{name: "README hedge", ch: latencyChart(hedgeNote, hedge), w: 20 * cm, h: 11 * cm},
		{name: "narrow hedge", ch: latencyChart(hedgeNote, hedge), w: 10 * cm, h: 8 * cm},
	}
}

// TestChartTextInside: every text of a chart (title, note, legend, tick
// labels, axis labels) lies inside the picture, measured with the font
// the chart is drawn in.
func TestChartTextInside(t *testing.T) {
	for _, c := range testCharts(t) {
		t.Run(c.name, func(t *testing.T) {
			rec, _ := drawn(c.ch, c.w, c.h)
			if len(rec.texts) < 8 {
				t.Fatalf("%d texts drawn, want the title, legend, ticks and axis labels", len(rec.texts))
			}
			for _, tx := range rec.texts {
				b := tx.box
				if b.Min.X < 0 || b.Min.Y < 0 || b.Max.X > c.w || b.Max.Y > c.h {
					t.Errorf("text %q spans x %.1f..%.1f, y %.1f..%.1f: outside the %.1f×%.1f picture",
						tx.text, b.Min.X, b.Max.X, b.Min.Y, b.Max.Y, c.w.Points(), c.h.Points())
				}
			}
		})
	}
}

// TestTextsApart: no two texts of a chart overlap, tick labels of a
// narrow axis included.
func TestTextsApart(t *testing.T) {
	for _, c := range testCharts(t) {
		t.Run(c.name, func(t *testing.T) {
			rec, _ := drawn(c.ch, c.w, c.h)
			for i, a := range rec.texts {
				for _, b := range rec.texts[:i] {
					if overlaps(a.box, b.box) {
						t.Errorf("texts %q at %v and %q at %v overlap", a.text, a.box, b.text, b.box)
					}
				}
			}
		})
	}
}

// TestLegendOutsideData: the legend's entries lie outside the data areas
// and the panels' headings, apart from one another, and under the title;
// panels side by side do not overlap, nor do their headings and data.
func TestLegendOutsideData(t *testing.T) {
	for _, c := range testCharts(t) {
		t.Run(c.name, func(t *testing.T) {
			_, lay := drawn(c.ch, c.w, c.h)
			if len(lay.legend) != len(c.ch.entries) || len(lay.legend) == 0 {
				t.Fatalf("%d legend boxes for %d entries", len(lay.legend), len(c.ch.entries))
			}
			if len(lay.data) != 1+len(c.ch.beside) || len(lay.headings) != len(c.ch.headings) {
				t.Fatalf("%d data areas and %d headings for %d panels and %d headings",
					len(lay.data), len(lay.headings), 1+len(c.ch.beside), len(c.ch.headings))
			}
			width := vg.Length(0)
			for i, d := range lay.data {
				width += d.Size().X
				if low := c.h / vg.Length(4+len(c.ch.beside)); d.Size().Y < low { // panels side by side: headings over them
					t.Errorf("data area %v: too low in a %v×%v picture", d.Size(), c.w, c.h)
				}
				for _, o := range lay.data[:i] {
					if overlaps(d, o) {
						t.Errorf("data areas %v and %v overlap", d, o)
					}
				}
				for j, h := range lay.headings {
					if overlaps(h, d) {
						t.Errorf("heading %q at %v overlaps the data area %v", c.ch.headings[j], h, d)
					}
				}
			}
			if width < c.w/2 {
				t.Errorf("data areas %v wide in all: too narrow in a %v×%v picture", width, c.w, c.h)
			}
			for i, b := range lay.legend {
				for _, d := range slices.Concat(lay.data, lay.headings) {
					if overlaps(b, d) {
						t.Errorf("legend entry %q at %v overlaps the data area or heading %v", c.ch.entries[i].label, b, d)
					}
				}
				for j, o := range lay.legend[:i] {
					if overlaps(b, o) {
						t.Errorf("legend entries %q and %q overlap", c.ch.entries[i].label, c.ch.entries[j].label)
					}
				}
				if b.Min.X < 0 || b.Max.X > c.w {
					t.Errorf("legend entry %q spans x %v..%v, outside the picture", c.ch.entries[i].label, b.Min.X, b.Max.X)
				}
			}
		})
	}
}

// svgTextElem is a text element of an SVG: position, stated length and
// whether it sits inside a rotated group.
var svgTextElem = regexp.MustCompile(`<text x="([^"]+)" y="([^"]+)" transform="scale\(1, -1\)"\s*textLength="([^"]+)" lengthAdjust="spacingAndGlyphs"\s*style="font-family:([^;]+);`)

// TestSVGText: in the SVG written, every text states its length and
// names fonts of our metrics before the generic family, and the texts
// that are not rotated lie inside the viewBox by their stated length.
func TestSVGText(t *testing.T) {
	for _, c := range testCharts(t) {
		t.Run(c.name, func(t *testing.T) {
			out, err := c.ch.render(c.w, c.h, "svg")
			if err != nil {
				t.Fatal(err)
			}
			svg := string(out)
			all := strings.Count(svg, "<text ")
			elems := svgTextElem.FindAllStringSubmatch(svg, -1)
			if all == 0 || len(elems) != all {
				t.Fatalf("%d text elements, %d with textLength and the font list", all, len(elems))
			}
			for _, e := range elems {
				if e[4] != svgFamily {
					t.Errorf("font-family %q, want %q", e[4], svgFamily)
				}
			}
			if strings.Contains(svg, `style="fill:#`) && regexp.MustCompile(`style="fill:#[0-9A-Fa-f]{6}"`).MatchString(svg) {
				t.Errorf("a filled shape without stroke:none, which ImageMagick outlines")
			}
			// Unrotated texts: the group flips y, so y is minus the
			// baseline's height above the bottom edge.
			rotated := regexp.MustCompile(`(?s)<g transform="rotate\([^)]*\)">\s*<text[^>]*>([^<]*)</text>`)
			skip := map[string]bool{}
			for _, m := range rotated.FindAllStringSubmatch(svg, -1) {
				skip[m[1]] = true
			}
			texts := regexp.MustCompile(`(?s)<text x="([^"]+)" y="([^"]+)"[^>]*textLength="([^"]+)"[^>]*>([^<]*)</text>`).FindAllStringSubmatch(svg, -1)
			for _, m := range texts {
				if skip[m[4]] {
					continue
				}
				x, _ := strconv.ParseFloat(m[1], 64)
				y, _ := strconv.ParseFloat(m[2], 64)
				l, _ := strconv.ParseFloat(m[3], 64)
				if x < 0 || x+l > c.w.Points() || -y < 0 || -y > c.h.Points() {
					t.Errorf("text %q at x %.1f..%.1f, baseline %.1f: outside %.1f×%.1f", m[4], x, x+l, -y, c.w.Points(), c.h.Points())
				}
			}
		})
	}
}

// TestDurationTicks: delay axes are labelled in human units at round
// values, about one a decade on a log axis.
func TestDurationTicks(t *testing.T) {
	const s, mi, h, d = 1e3, 60e3, 3600e3, 86400e3
	cases := []struct {
		name      string
		log       bool
		lo, hi    float64   // milliseconds
		room, gap vg.Length // the axis' length, the labels' least distance
		want      []string
	}{
		{name: "log, 9ms to 1.7s in 200pt: decades only", log: true, lo: 9, hi: 1.7 * s, room: 200, gap: 42, want: []string{"10ms", "100ms", "1s"}},
		{name: "log, 1ms to 2d in 80pt: decades 14pt apart", log: true, lo: 1, hi: 2 * d, room: 80, gap: 14, want: []string{"1ms", "100ms", "10s", "10min", "6h"}},
		{name: "linear, 0 to 2min in 100pt: 1min steps", hi: 2 * mi, room: 100, gap: 42, want: []string{"0", "1min", "2min"}},
		{name: "log, 0.5s to 3h", log: true, lo: 0.5 * s, hi: 3 * h, want: []string{"1s", "10s", "1min", "10min", "1h"}},
		{name: "log, 1ms to 2d", log: true, lo: 1, hi: 2 * d, want: []string{"1ms", "10ms", "100ms", "1s", "10s", "1min", "10min", "1h", "6h", "1d"}},
		{name: "log, 20s to 30d", log: true, lo: 20 * s, hi: 30 * d, want: []string{"1min", "10min", "1h", "6h", "1d", "10d"}},
		{name: "log, 9ms to 1.7s: three decades, 1, 2 and 5 of each labelled", log: true, lo: 9, hi: 1.7 * s,
			want: []string{"10ms", "20ms", "50ms", "100ms", "200ms", "500ms", "1s"}},
		{name: "log, 9ms to 25s: four decades, one label each", log: true, lo: 9, hi: 25 * s, want: []string{"10ms", "100ms", "1s", "10s"}},
		{name: "log, short span: its ends labelled too", log: true, lo: 0.8 * s, hi: 1.25 * s, want: []string{"1s", "800ms", "1.25s"}},
		{name: "log, between round values", log: true, lo: 1.1 * s, hi: 1.3 * s, want: []string{"1.1s", "1.3s"}},
		{name: "linear, 0 to 3s", hi: 3 * s, want: []string{"0", "1s", "2s", "3s"}},
		{name: "linear, 0 to 400s", hi: 400 * s, want: []string{"0", "2min", "4min", "6min"}},
		{name: "linear, 0 to 90s", hi: 90 * s, want: []string{"0", "30s", "1min", "1.5min"}},
		{name: "linear, 0 to 2min", hi: 2 * mi, want: []string{"0", "30s", "1min", "1.5min", "2min"}},
		{name: "linear, 0 to 800ms", hi: 800, want: []string{"0", "200ms", "400ms", "600ms", "800ms"}},
		{name: "linear, 0 to 3d", hi: 3 * d, want: []string{"0", "1d", "2d", "3d"}},
	}
	human := regexp.MustCompile(`^(0|[0-9]+(\.[0-9]+)?(µs|ms|s|min|h|d))$`)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lo, hi := c.lo, c.hi
			if c.log {
				lo, hi = math.Log10(lo), math.Log10(hi)
			}
			var got []string
			for _, tk := range (durationTicks{log: c.log, room: c.room, gap: c.gap}).Ticks(lo, hi) {
				if tk.Value < lo-1e-9 || tk.Value > hi+1e-9 {
					t.Errorf("tick %q at %v: outside the axis [%v, %v]", tk.Label, tk.Value, lo, hi)
				}
				if tk.Label == "" {
					continue
				}
				if !human.MatchString(tk.Label) {
					t.Errorf("tick label %q: not a number in ms, s, min, h or d", tk.Label)
				}
				got = append(got, tk.Label)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("labels %q, want %q", got, c.want)
			}
		})
	}
}

func TestDurationLabel(t *testing.T) {
	cases := []struct {
		ms   float64
		want string
	}{
		{want: "0"}, {ms: 0.5, want: "500µs"}, {ms: 1, want: "1ms"}, {ms: 250, want: "250ms"}, {ms: 1250, want: "1.25s"}, {ms: 1500, want: "1.5s"}, {ms: 75e3, want: "75s"},
		{ms: 90e3, want: "1.5min"}, {ms: 600e3, want: "10min"}, {ms: 5400e3, want: "1.5h"}, {ms: 30 * 3600e3, want: "30h"}, {ms: 36 * 3600e3, want: "1.5d"}, {ms: 25 * 86400e3, want: "25d"},
	}
	for _, c := range cases {
		if got := durationLabel(c.ms); got != c.want {
			t.Errorf("durationLabel(%v) = %q, want %q", c.ms, got, c.want)
		}
	}
}

func TestIntegerTicks(t *testing.T) {
	cases := []struct {
		lo, hi float64
		want   []string
	}{
		{lo: 1, hi: 10, want: []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10"}},
		{lo: 1, hi: 25, want: []string{"1", "5", "10", "15", "20", "25"}},
		{lo: 1, hi: 20, want: []string{"1", "2", "4", "6", "8", "10", "12", "14", "16", "18", "20"}},
		{lo: 0.5, hi: 1.5, want: []string{"1"}},
		{lo: 1, hi: 1000, want: []string{"1", "100", "200", "300", "400", "500", "600", "700", "800", "900", "1000"}},
	}
	for _, c := range cases {
		var got []string
		for _, tk := range (integerTicks{}).Ticks(c.lo, c.hi) {
			if tk.Label != "" {
				got = append(got, tk.Label)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("[%v, %v]: labels %q, want %q", c.lo, c.hi, got, c.want)
		}
	}
}
