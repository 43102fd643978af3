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

	"github.com/steadyhq/retry/cmd/retry/internal/chart"
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
func drawn(ch *chart.Chart, w, h vg.Length) (*textRecorder, chart.Layout) {
	rec := newTextRecorder(w, h)
	lay := ch.Draw(draw.New(rec))
	return rec, lay
}

func overlaps(a, b vg.Rectangle) bool {
	return a.Min.X < b.Max.X && b.Min.X < a.Max.X && a.Min.Y < b.Max.Y && b.Min.Y < a.Max.Y
}

// simChartSet is the charts of sim that testCharts returns, simulated once
// for every test that checks them.
type simChartSet struct {
	once        sync.Once
	readme, off *chart.Chart
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
		out := simOutputOf(t, "--hedge")
		simCharts.hedge = out.rows.(hedgeResult).Rows
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
	ch   *chart.Chart
	w, h vg.Length
} {
	t.Helper()
	curveCase := func(args ...string) *chart.Chart {
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
		ch   *chart.Chart
		w, h vg.Length
	}{
		{name: "README curve", ch: curveCase("--attempts", "11", "ojs", "zizq"), w: 16 * cm, h: 10 * cm},
		{name: "README sim", ch: readme, w: 20 * cm, h: 11 * cm},
		{name: "seven curves", ch: curveCase("--attempts", "8", "ojs", "zizq", "daycry", "ratchet", "daycry:base=1s",
			`{"initial_interval":"PT0.1S","jitter":{"kind":"decorrelated"}}`, `{"backoff_strategy":"linear"}`), w: 16 * cm, h: 14 * cm},
		{name: "narrow", ch: curveCase("--attempts", "30", "--limit", "30", "zizq", "ratchet:retries=29"), w: 9 * cm, h: 8 * cm},
		{name: "cumulative", ch: func() *chart.Chart {
			curves, _ := flagCurves(t, "--preset", "zizq")
			ch, err := curveChart(curves, curveOptions{limit: 30, samples: 200, seed: 1, scale: scaleAuto, cumulative: true})
			if err != nil {
				t.Fatal(err)
			}
			return ch
		}(), w: 16 * cm, h: 10 * cm},
		{name: "narrow sim", ch: readme, w: 10 * cm, h: 8 * cm},
		{name: "sim without a budget: one panel", ch: simulated(t).off, w: 20 * cm, h: 11 * cm},
		{name: "README hedge", ch: latencyChart(hedge), w: 20 * cm, h: 11 * cm},
		{name: "narrow hedge", ch: latencyChart(hedge), w: 10 * cm, h: 8 * cm},
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
			labels := c.ch.Labels()
			if len(lay.Legend) != len(labels) || len(lay.Legend) == 0 {
				t.Fatalf("%d legend boxes for %d entries", len(lay.Legend), len(labels))
			}
			if len(lay.Data) != 1+len(c.ch.Beside) || len(lay.Headings) != len(c.ch.Headings) {
				t.Fatalf("%d data areas and %d headings for %d panels and %d headings",
					len(lay.Data), len(lay.Headings), 1+len(c.ch.Beside), len(c.ch.Headings))
			}
			width := vg.Length(0)
			for i, d := range lay.Data {
				width += d.Size().X
				if low := c.h / vg.Length(4+len(c.ch.Beside)); d.Size().Y < low { // panels side by side: headings over them
					t.Errorf("data area %v: too low in a %v×%v picture", d.Size(), c.w, c.h)
				}
				for _, o := range lay.Data[:i] {
					if overlaps(d, o) {
						t.Errorf("data areas %v and %v overlap", d, o)
					}
				}
				for j, h := range lay.Headings {
					if overlaps(h, d) {
						t.Errorf("heading %q at %v overlaps the data area %v", c.ch.Headings[j], h, d)
					}
				}
			}
			if width < c.w/2 {
				t.Errorf("data areas %v wide in all: too narrow in a %v×%v picture", width, c.w, c.h)
			}
			for i, b := range lay.Legend {
				for _, d := range slices.Concat(lay.Data, lay.Headings) {
					if overlaps(b, d) {
						t.Errorf("legend entry %q at %v overlaps the data area or heading %v", labels[i], b, d)
					}
				}
				for j, o := range lay.Legend[:i] {
					if overlaps(b, o) {
						t.Errorf("legend entries %q and %q overlap", labels[i], labels[j])
					}
				}
				if b.Min.X < 0 || b.Max.X > c.w {
					t.Errorf("legend entry %q spans x %v..%v, outside the picture", labels[i], b.Min.X, b.Max.X)
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
			out, err := c.ch.Render(c.w, c.h, "svg")
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
				if e[4] != chart.SVGFamily {
					t.Errorf("font-family %q, want %q", e[4], chart.SVGFamily)
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
