// Package chart draws the charts of retry plot and retry sim --plot in
// one house style: a title and a note, the legend in a band of its own,
// then one panel of data or several side by side, as SVG or PNG.
package chart

import (
	"bytes"
	"cmp"
	"fmt"
	"html"
	"image/color"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Chart is what plot and sim --plot draw: a title and a note on top, the
// legend in a band of its own under them (never over the data), then the
// axes and the data, in one panel or in several side by side, each under
// its heading. Every text stays inside the picture, with room to spare for
// a viewer whose fallback font is wider than ours.
type Chart struct {
	*plot.Plot              // the first panel's axes and data; its own title and legend stay unused
	Beside     []*plot.Plot // further panels, right of the first, with data areas of its size
	Headings   []string     // with panels beside the first, the heading over each
	title      string
	note       string // a line under the title, smaller and Grey
	entries    []legendEntry
}

// legendEntry is one item of a chart's legend.
type legendEntry struct {
	label  string
	thumbs []plot.Thumbnailer
}

// chartFont is the typeface of every chart: Liberation Sans has the
// metrics of Arial and Helvetica, the fonts an SVG viewer falls back on.
var chartFont = font.Font{Typeface: "Liberation", Variant: "Sans"}

// SVGFamily is the font-family an SVG names: ours first, then the fonts
// with the same metrics.
const SVGFamily = "'Liberation Sans',Arial,Helvetica,sans-serif"

// Palette is the curves' colours (Okabe and Ito's, told apart in every
// common colour blindness).
var Palette = []color.Color{
	color.RGBA{0x00, 0x72, 0xb2, 0xff}, // blue
	color.RGBA{0xd5, 0x5e, 0x00, 0xff}, // vermillion
	color.RGBA{0x00, 0x9e, 0x73, 0xff}, // bluish green
	color.RGBA{0xcc, 0x79, 0xa7, 0xff}, // reddish purple
	color.RGBA{0xe6, 0x9f, 0x00, 0xff}, // orange
	color.RGBA{0x56, 0xb4, 0xe9, 0xff}, // sky blue
	color.RGBA{0x00, 0x00, 0x00, 0xff}, // black
}

// Tint returns c mixed with white, share a of c: an opaque pale colour
// for bands and shaded spans, which every SVG renderer draws alike (some,
// such as ImageMagick's own, ignore fill-opacity).
func Tint(c color.Color, a float64) color.Color {
	r, g, b, _ := c.RGBA()
	mix := func(v uint32) uint8 { return uint8(math.Round(a*float64(v>>8) + (1-a)*255)) }
	return color.RGBA{R: mix(r), G: mix(g), B: mix(b), A: 0xff}
}

// Grey is the colour of axes, ticks and notes.
var Grey = color.Gray{Y: 0x55}

// Sizes of the chart's parts.
const (
	chartMargin  = 8  // points around everything
	fallbackRoom = 16 // points kept free at the right for wider fonts
	titleSize    = 13
	noteSize     = 9.5
	labelSize    = 10.5
	tickSize     = 9.5
	legendSize   = 9.5
	thumbWidth   = 22

	// fallbackWidth is how much wider than ours a fallback font may draw
	// a text (DejaVu Sans draws about 10% wider than Liberation Sans):
	// the room a legend entry takes.
	fallbackWidth = 1.15
)

// New returns an empty chart in the house style.
func New(title, note string) *Chart {
	p := plot.New()
	for _, sty := range []*text.Style{&p.X.Label.TextStyle, &p.Y.Label.TextStyle} {
		sty.Font = font.From(chartFont, labelSize)
	}
	for _, sty := range []*text.Style{&p.X.Tick.Label, &p.Y.Tick.Label} {
		sty.Font = font.From(chartFont, tickSize)
		sty.Color = Grey
	}
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Color = Grey
		a.Tick.Color = Grey
		a.Tick.Length = vg.Points(4)
		a.Label.Padding = vg.Points(4)
	}
	p.BackgroundColor = nil // draw fills the whole picture
	return &Chart{Plot: p, title: title, note: note}
}

// Legend adds an entry to the legend.
func (c *Chart) Legend(label string, thumbs ...plot.Thumbnailer) {
	c.entries = append(c.entries, legendEntry{label, thumbs})
}

// Labels returns the legend's labels, in order.
func (c *Chart) Labels() []string {
	var labels []string
	for _, e := range c.entries {
		labels = append(labels, e.label)
	}
	return labels
}

// Layout says where Draw put the data, the headings and the legend's
// entries.
type Layout struct {
	Data     []vg.Rectangle // one a panel
	Headings []vg.Rectangle
	Legend   []vg.Rectangle
}

// panelGap is the room between two panels side by side, in points.
const panelGap = 14

// style returns a text style of the chart's font.
func style(size vg.Length, col color.Color, xalign draw.XAlignment) text.Style {
	return text.Style{Font: font.From(chartFont, size), Color: col, XAlign: xalign, YAlign: draw.YTop, Handler: plot.DefaultTextHandler}
}

// Draw draws the chart on dc.
func (c *Chart) Draw(dc draw.Canvas) Layout {
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	area := draw.Crop(dc, chartMargin, -chartMargin, chartMargin, -chartMargin)
	top := area.Max.Y
	center := (area.Min.X + area.Max.X - fallbackRoom) / 2
	for _, t := range []struct {
		text string
		sty  text.Style
	}{{c.title, style(titleSize, color.Black, draw.XCenter)}, {c.note, style(noteSize, Grey, draw.XCenter)}} {
		for _, line := range wrap(t.text, t.sty, area.Max.X-area.Min.X-fallbackRoom) {
			dc.FillText(t.sty, vg.Point{X: center, Y: top}, line)
			top -= t.sty.Height(line) + 2
		}
	}
	var lay Layout
	if len(c.entries) > 0 {
		top -= 4
		var boxes []vg.Rectangle
		boxes, top = c.drawLegend(dc, area.Min.X+4, area.Max.X-fallbackRoom, top)
		lay.Legend = boxes
		top -= 4
	}
	pc := area
	pc.Max.Y = top
	pc.Max.X -= fallbackRoom / 2
	if len(c.Beside) == 0 {
		fitTicks(c.Plot, pc)
		c.Plot.Draw(pc)
		lay.Data = []vg.Rectangle{c.Plot.DataCanvas(pc).Rectangle}
		return lay
	}
	c.drawPanels(dc, pc, &lay)
	return lay
}

// drawPanels draws the panels side by side in pc, their data areas of one
// size, each under its heading, centred over its tile and wrapped to its
// width.
func (c *Chart) drawPanels(dc draw.Canvas, pc draw.Canvas, lay *Layout) {
	panels := append([]*plot.Plot{c.Plot}, c.Beside...)
	sty := style(labelSize-0.5, color.Black, draw.XCenter)
	tileW := (pc.Max.X - pc.Min.X - panelGap*vg.Length(len(panels)-1)) / vg.Length(len(panels))
	lines := make([][]string, len(panels))
	headH := vg.Length(0)
	for i := range panels {
		if i < len(c.Headings) {
			lines[i] = wrap(c.Headings[i], sty, tileW)
		}
		h := vg.Length(0)
		for _, l := range lines[i] {
			h += sty.Height(l) + 2
		}
		headH = max(headH, h)
	}
	tiles := draw.Tiles{Cols: len(panels), Rows: 1, PadX: panelGap, PadTop: headH + 4}
	cans := plot.Align([][]*plot.Plot{panels}, tiles, pc)
	for i, p := range panels {
		fitTicks(p, cans[0][i])
		p.Draw(cans[0][i])
		lay.Data = append(lay.Data, p.DataCanvas(cans[0][i]).Rectangle)
		tile := cans[0][i].Rectangle
		x, y := (tile.Min.X+tile.Max.X)/2, tile.Max.Y+headH+2
		box := vg.Rectangle{Min: vg.Point{X: x, Y: y}, Max: vg.Point{X: x, Y: y}}
		for _, l := range lines[i] {
			dc.FillText(sty, vg.Point{X: x, Y: y}, l)
			w := sty.Width(l) * fallbackWidth
			box.Min.X, box.Max.X = min(box.Min.X, x-w/2), max(box.Max.X, x+w/2)
			y -= sty.Height(l) + 2
			box.Min.Y = y
		}
		lay.Headings = append(lay.Headings, box)
	}
}

// wrap breaks s into lines at spaces, each at most width wide in sty
// even in a fallback font.
func wrap(s string, sty text.Style, width vg.Length) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && sty.Width(line+" "+w)*fallbackWidth > width {
			lines = append(lines, line)
			line = ""
		}
		line = strings.TrimPrefix(line+" "+w, " ")
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// drawLegend lays the entries out in rows from left to right, wrapping
// within [left, right], and returns their boxes and the y under the last row.
func (c *Chart) drawLegend(dc draw.Canvas, left, right, top vg.Length) ([]vg.Rectangle, vg.Length) {
	sty := style(legendSize, color.Black, draw.XLeft)
	rowH := sty.Height("Xg") + 4
	gap := sty.Width("  ")
	x, y := left, top
	var boxes []vg.Rectangle
	for _, e := range c.entries {
		label := e.label
		width := func() vg.Length { return thumbWidth + gap/2 + sty.Width(label)*fallbackWidth }
		for r := []rune(label); width() > right-left && len(r) > 1; { // wider than a row: shortened
			r = r[:len(r)-1]
			label = strings.TrimRight(string(r), " ,:") + "…"
		}
		w := width()
		if x > left && x+w > right {
			x, y = left, y-rowH
		}
		box := vg.Rectangle{Min: vg.Point{X: x, Y: y - rowH + 4}, Max: vg.Point{X: x + w, Y: y}}
		icon := draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: x, Y: box.Min.Y + 1},
			Max: vg.Point{X: x + thumbWidth, Y: box.Max.Y - 1},
		}}
		for _, t := range e.thumbs {
			t.Thumbnail(&icon)
		}
		dc.FillText(sty, vg.Point{X: x + thumbWidth + gap/2, Y: y}, label)
		boxes = append(boxes, box)
		x += w + 1.5*gap
	}
	return boxes, y - rowH
}

// pngDPI is the resolution of a PNG image: twice the 96 pixels an inch at
// which a browser shows the SVG of the same size, for screens that draw two
// pixels a point (a 16cm by 10cm chart is 1210×756).
const pngDPI = 2 * 96

// Render draws the chart as an SVG or PNG image.
func (c *Chart) Render(width, height vg.Length, format string) ([]byte, error) {
	var canvas vg.CanvasWriterTo
	switch format {
	case "png":
		canvas = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(pngDPI))}
	default:
		var err error
		if canvas, err = draw.NewFormattedCanvas(width, height, format); err != nil {
			return nil, err
		}
	}
	c.Draw(draw.New(canvas))
	var buf bytes.Buffer
	if _, err := canvas.WriteTo(&buf); err != nil {
		return nil, err
	}
	if format == "svg" {
		return portableSVG(buf.Bytes()), nil
	}
	return buf.Bytes(), nil
}

// Save renders c to output ("-" for w) in format.
func Save(c *Chart, width, height vg.Length, format, output string, w io.Writer) error {
	b, err := c.Render(width, height, format)
	if err != nil {
		return err
	}
	if output == "-" {
		_, err = w.Write(b)
		return err
	}
	return os.WriteFile(output, b, 0o644)
}

// svgText is a text element as gonum/plot's SVG canvas writes it.
var svgText = regexp.MustCompile(`(?s)<text ([^>]*?)style="font-family:Liberation Sans;([^"]*?font-size:([0-9.]+)px[^"]*)">([^<]*)</text>`)

// svgFill is the style of a filled shape without an outline.
var svgFill = regexp.MustCompile(`style="fill:(#[0-9A-Fa-f]{6})"`)

// portableSVG makes an SVG look the same in every common renderer: each
// text names fonts of the same metrics as ours and states its length,
// which browsers honour whatever font they use; a filled shape says it
// has no outline, which ImageMagick's renderer would otherwise draw.
func portableSVG(svg []byte) []byte {
	svg = svgFill.ReplaceAll(svg, []byte(`style="fill:$1;stroke:none"`))
	return svgText.ReplaceAllFunc(svg, func(m []byte) []byte {
		sub := svgText.FindSubmatch(m)
		size, err := strconv.ParseFloat(string(sub[3]), 64)
		if err != nil {
			return m
		}
		s := html.UnescapeString(string(sub[4]))
		face := plot.DefaultTextHandler.Cache().Lookup(chartFont, vg.Length(size))
		w := face.Width(s).Points()
		return fmt.Appendf(nil, `<text %stextLength="%.2f" lengthAdjust="spacingAndGlyphs" style="font-family:%s;%s">%s</text>`,
			sub[1], w, SVGFamily, sub[2], sub[4])
	})
}

// DurationTicks labels an axis of milliseconds in human units (ms, s,
// min, h, d), at round values of those units: on a log axis, about one a
// decade (1s, 10s, 1min, 10min, 1h, 6h, 1d, ...) with the round values
// between them as unlabelled ticks, or when the axis spans at most three
// such decades, every 1, 2 and 5 of a unit (10ms, 20ms, 50ms, 100ms, ...);
// on a linear one, every step. A log
// axis is a linear one of log10(milliseconds): gonum/plot's own log scale
// places a centred axis label at the linear middle of the range, and pads
// the data area for it.
//
// Given room, the axis' length in points, it keeps its labels apart: the
// log axis drops the labels between its decades, then those of decades too
// close to the one labelled before, the linear one takes longer steps,
// until no two labels are closer than gap, centre to centre.
type DurationTicks struct {
	Log       bool
	room, gap vg.Length // 0 when unknown
}

// The least distance between two labels of an axis, centre to centre, in
// points: on the x axis, room for "1.5min" and a space in a fallback font;
// on the y axis, a line and a half.
const (
	minLabelGapX = 42
	minLabelGapY = 1.5 * tickSize
)

// roundMS are round durations in milliseconds, in order.
var roundMS = func() []float64 {
	var v []float64
	for _, m := range []float64{1e-3, 1e-2, 1e-1, 1, 10, 100} { // 1µs to 500ms
		v = append(v, m, 2*m, 5*m)
	}
	s, mi, h, d := 1e3, 60e3, 3600e3, 86400e3
	v = append(v, s, 2*s, 5*s, 10*s, 15*s, 30*s, mi, 2*mi, 5*mi, 10*mi, 15*mi, 30*mi, h, 2*h, 3*h, 6*h, 12*h)
	for m := d; m < 1e6*d; m *= 10 {
		v = append(v, m, 2*m, 5*m)
	}
	return v
}()

// decadeMS are the values a log axis labels: about one a decade.
var decadeMS = []float64{1e-3, 1e-2, 1e-1, 1, 10, 100, 1e3, 10e3, 60e3, 600e3, 3600e3, 6 * 3600e3, 86400e3,
	10 * 86400e3, 100 * 86400e3, 1000 * 86400e3, 10000 * 86400e3, 100000 * 86400e3}

// Ticks returns the ticks of an axis from lo to hi.
func (t DurationTicks) Ticks(lo, hi float64) []plot.Tick {
	if t.Log {
		ticks := logDurationTicks(lo, hi, true)
		if t.crowded(ticks, lo, hi) {
			ticks = logDurationTicks(lo, hi, false)
		}
		if t.crowded(ticks, lo, hi) { // decades too close: every other one, or fewer
			slices.SortStableFunc(ticks, func(a, b plot.Tick) int { return cmp.Compare(a.Value, b.Value) })
			last := math.Inf(-1)
			for i, tk := range ticks {
				if tk.Label == "" {
					continue
				}
				if (tk.Value-last)/(hi-lo)*t.room.Points() < t.gap.Points() {
					ticks[i].Label = ""
					continue
				}
				last = tk.Value
			}
		}
		return ticks
	}
	ticks := linearDurationTicks(lo, hi, 5)
	for n := 4; n >= 1 && t.crowded(ticks, lo, hi); n-- {
		ticks = linearDurationTicks(lo, hi, n)
	}
	return ticks
}

// crowded reports whether two labels of ticks on an axis from lo to hi
// would be closer than minLabelGap in t.room.
func (t DurationTicks) crowded(ticks []plot.Tick, lo, hi float64) bool {
	if t.room <= 0 || !(hi > lo) {
		return false
	}
	var values []float64
	for _, tk := range ticks {
		if tk.Label != "" {
			values = append(values, tk.Value)
		}
	}
	slices.Sort(values)
	for i := 1; i < len(values); i++ {
		if (values[i]-values[i-1])/(hi-lo)*t.room.Points() < t.gap.Points() {
			return true
		}
	}
	return false
}

// fitTicks gives the duration ticks of p's axes their length on c.
func fitTicks(p *plot.Plot, c draw.Canvas) {
	size := p.DataCanvas(c).Rectangle.Size()
	if dt, ok := p.X.Tick.Marker.(DurationTicks); ok {
		dt.room, dt.gap = size.X, minLabelGapX
		p.X.Tick.Marker = dt
	}
	if dt, ok := p.Y.Tick.Marker.(DurationTicks); ok {
		dt.room, dt.gap = size.Y, minLabelGapY
		p.Y.Tick.Marker = dt
	}
}

// logDurationTicks are the ticks of a log axis; minor asks for labels at
// 1, 2 and 5 of each unit when the axis spans at most three decades.
func logDurationTicks(loLog, hiLog float64, minor bool) []plot.Tick {
	lo, hi := math.Pow(10, loLog), math.Pow(10, hiLog)
	in := func(v float64) bool { return v >= lo*(1-1e-9) && v <= hi*(1+1e-9) }
	decades := 0
	for _, v := range decadeMS {
		if in(v) {
			decades++
		}
	}
	var ticks []plot.Tick
	labelled := 0
	for _, v := range roundMS {
		if !in(v) {
			continue
		}
		tk := plot.Tick{Value: math.Log10(v)}
		if slices.Contains(decadeMS, v) || minor && decades <= 3 && leading125(v) {
			tk.Label = DurationLabel(v)
			labelled++
		}
		ticks = append(ticks, tk)
	}
	if labelled < 2 { // a short span between round values: label its ends
		ticks = append(ticks, plot.Tick{Value: loLog, Label: DurationLabel(lo)}, plot.Tick{Value: hiLog, Label: DurationLabel(hi)})
	}
	return ticks
}

// leading125 reports whether v is 1, 2 or 5 of its unit, or 10, 20 or 50,
// or 100, 200 or 500.
func leading125(v float64) bool {
	_, n, _ := DurationUnit(v)
	for n >= 10 && math.Mod(n, 10) == 0 {
		n /= 10
	}
	return n == 1 || n == 2 || n == 5
}

// linearDurationTicks are the ticks of a linear axis: a label at each
// round step, the shortest that makes at most steps of them.
func linearDurationTicks(lo, hi float64, steps int) []plot.Tick {
	span := hi - lo
	if !(span > 0) {
		return []plot.Tick{{Value: lo, Label: DurationLabel(lo)}}
	}
	step := roundMS[len(roundMS)-1]
	for _, s := range roundMS {
		if span/s <= float64(steps) {
			step = s
			break
		}
	}
	var ticks []plot.Tick
	for i := math.Ceil(lo / step); i*step <= hi+step*1e-9; i++ {
		v := i * step
		ticks = append(ticks, plot.Tick{Value: v, Label: DurationLabel(v)})
		if half := v + step/2; half <= hi {
			ticks = append(ticks, plot.Tick{Value: half})
		}
	}
	return ticks
}

// DurationUnit returns v milliseconds in the largest of the units d, h,
// min, s, ms and µs in which it is at least 1; round reports whether it
// has at most one decimal there, or else is a whole number under 100 in
// the next unit down, which is then chosen (90s is 1.5min, 75s stays 75s,
// 1250ms is 1.25s).
func DurationUnit(v float64) (name string, n float64, round bool) {
	units := []struct {
		name string
		ms   float64
	}{{"d", float64(24 * time.Hour / time.Millisecond)}, {"h", 3600e3}, {"min", 60e3}, {"s", 1e3}, {"ms", 1}, {"µs", 1e-3}}
	isRound := func(n, scale float64) bool { return math.Abs(n*scale-math.Round(n*scale)) < 1e-6*n*scale }
	for i, u := range units {
		n := v / u.ms
		if n < 1 && i < len(units)-1 {
			continue
		}
		if isRound(n, 10) {
			return u.name, n, true
		}
		if i+1 < len(units) {
			if m := v / units[i+1].ms; m < 100 && isRound(m, 1) {
				return units[i+1].name, m, true
			}
		}
		return u.name, n, false
	}
	return "µs", v * 1e3, false
}

// DurationLabel formats v milliseconds as a tick label: 500ms, 1.5s,
// 10min, 6h, 2d.
func DurationLabel(v float64) string {
	if v == 0 {
		return "0"
	}
	name, n, round := DurationUnit(v)
	if round {
		return strconv.FormatFloat(math.Round(n*10)/10, 'f', -1, 64) + name
	}
	return strconv.FormatFloat(n, 'f', max(0, 2-int(math.Floor(math.Log10(n)))), 64) + name
}

// IntegerTicks labels whole numbers from 1 at round steps (1, 2, 5, 10,
// ...), always 1, with an unlabelled tick at every whole number while they
// are few.
type IntegerTicks struct{}

// Ticks returns the ticks of an axis from lo to hi.
func (IntegerTicks) Ticks(lo, hi float64) []plot.Tick {
	lo = math.Max(math.Ceil(lo), 1)
	step := 1.0
	for m := 1.0; (hi-lo)/step > 10; m *= 10 {
		for _, s := range []float64{m, 2 * m, 5 * m} {
			if step = s; (hi-lo)/step <= 10 {
				break
			}
		}
	}
	label := func(v float64) plot.Tick { return plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)} }
	var ticks []plot.Tick
	if hi-lo <= 50 {
		for v := lo; v <= hi; v++ {
			if v == 1 || math.Mod(v, step) == 0 {
				ticks = append(ticks, label(v))
			} else {
				ticks = append(ticks, plot.Tick{Value: v})
			}
		}
		return ticks
	}
	if lo == 1 {
		ticks = append(ticks, label(1))
	}
	for v := math.Ceil(lo/step) * step; v <= hi; v += step {
		if v != 1 {
			ticks = append(ticks, label(v))
		}
	}
	return ticks
}
