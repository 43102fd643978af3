package chart

import (
	"fmt"
	"image/color"
	"math"
	"strings"
	"time"

	"github.com/steadyhq/retry/sim"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// loadRates are a load chart's rates per bucket: bucket i spans
// [edges[i], edges[i+1]) seconds; each series is per second.
type loadRates struct {
	edges  []float64
	series [4][]float64 // by loadSeries
}

// rates returns a report's series as rates, from the start to the end of
// the last bucket in which anything drawn happened. A bucket counts over
// the time it was simulated: the last one ends when the run did, and one
// cut to under half a bucket joins the bucket before, so that no series
// drops at the end for want of time rather than of load.
func rates(rep *sim.Report) loadRates {
	w, series := rep.Resolution.Seconds(), rep.Total.Series
	counts := func(b sim.Bucket) [4]int { return [4]int{b.Attempts, b.Failed, b.Errors, b.Arrivals} }
	last := -1
	for i, b := range series {
		if counts(b) != [4]int{} {
			last = i
		}
	}
	var lr loadRates
	if last < 0 {
		return lr
	}
	end := min(float64(last+1)*w, rep.End.Seconds())
	n := last + 1
	if end-float64(last)*w < w/2 && last > 0 {
		n-- // the last bucket joins the one before
	}
	for i := range n {
		lr.edges = append(lr.edges, float64(i)*w)
	}
	lr.edges = append(lr.edges, end)
	for i := range n {
		c := counts(series[i])
		if i == n-1 {
			for _, b := range series[i+1 : last+1] { // a joined bucket
				for k, v := range counts(b) {
					c[k] += v
				}
			}
		}
		for k, v := range c {
			lr.series[k] = append(lr.series[k], float64(v)/(lr.edges[i+1]-lr.edges[i]))
		}
	}
	return lr
}

// loadSeries are the series of a load chart, in the order they are drawn:
// each wider than those drawn over it, so that one that meets another
// shows on both sides of it. The legend lists them in legendOrder.
var loadSeries = []struct {
	name  string
	col   color.Color
	width float64 // points
}{
	{name: "server hits", col: Palette[0], width: 3.6},
	{name: "calls given up", col: color.RGBA{0xcc, 0x79, 0xa7, 0xff}, width: 2.2},
	{name: "failed hits", col: Palette[1], width: 1.3},
	{name: "requests arriving", col: color.Black, width: 0.9},
}

var legendOrder = []int{3, 0, 2, 1}

// LoadPanel is a run a load chart draws in a panel of its own, under its
// Heading when the chart has several.
type LoadPanel struct {
	Report  *sim.Report
	Heading string
}

// Load draws the load on the server over time of each run, side by side
// on the same axes, each rate as steps, the outage shaded when it has a
// Length.
func Load(note string, panels []LoadPanel, outage sim.Fault) *Chart {
	ch := New("Load on the server", note)
	all := make([]loadRates, len(panels))
	top, end := 1.0, 1.0
	for i, pn := range panels {
		all[i] = rates(pn.Report)
		for _, sr := range all[i].series {
			for _, v := range sr {
				top = max(top, v)
			}
		}
		if n := len(all[i].edges); n > 0 {
			end = max(end, all[i].edges[n-1])
		}
	}
	top *= 1.08
	var thumbs map[string]plot.Thumbnailer
	for i, pn := range panels {
		p := ch.Plot
		if i > 0 {
			p = New("", "").Plot
			ch.Beside = append(ch.Beside, p)
		}
		var shade plot.Thumbnailer
		if outage.Length > 0 {
			shade = shadeSpan(p, ms(outage.Start), min(ms(outage.Start+outage.Length), 1000*end), top)
		}
		t := loadPanel(p, all[i], end, top)
		if i == 0 {
			thumbs = t
			thumbs["outage"] = shade
			p.Y.Label.Text = "per second"
		}
		if pn.Heading != "" {
			ch.Headings = append(ch.Headings, pn.Heading)
		}
	}
	for _, k := range legendOrder {
		if t := thumbs[loadSeries[k].name]; t != nil {
			ch.Legend(loadSeries[k].name, t)
		}
	}
	if t := thumbs["outage"]; t != nil {
		ch.Legend("outage", t)
	}
	return ch
}

// shadeSpan shades [a, b) milliseconds on p, to top, and returns it.
func shadeSpan(p *plot.Plot, a, b, top float64) plot.Thumbnailer {
	if a >= b {
		return nil
	}
	poly, err := plotter.NewPolygon(plotter.XYs{{X: a, Y: 0}, {X: b, Y: 0}, {X: b, Y: top}, {X: a, Y: top}})
	if err != nil {
		return nil
	}
	poly.Color = color.Gray{Y: 0xe4}
	poly.LineStyle.Width = 0
	p.Add(poly)
	return poly
}

// loadPanel draws a run's rates on p, on axes to end seconds and top per
// second, and returns the thumbnails of what it drew, by name.
func loadPanel(p *plot.Plot, lr loadRates, end, top float64) map[string]plot.Thumbnailer {
	thumbs := map[string]plot.Thumbnailer{}
	p.X.Label.Text = "time"
	p.X.Tick.Marker = DurationTicks{}
	for k, sr := range loadSeries {
		rates := lr.series[k]
		if len(rates) == 0 {
			continue
		}
		xys := make(plotter.XYs, 0, len(rates)+1)
		for i, v := range rates {
			xys = append(xys, plotter.XY{X: 1000 * lr.edges[i], Y: v})
		}
		xys = append(xys, plotter.XY{X: 1000 * lr.edges[len(rates)], Y: rates[len(rates)-1]}) // the last bucket's right edge
		l, err := plotter.NewLine(xys)
		if err != nil {
			continue
		}
		l.StepStyle = plotter.PostStep
		l.Color, l.Width = sr.col, vg.Points(sr.width)
		switch k {
		case 0:
			l.FillColor = Tint(sr.col, 0.15)
		case 3:
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2.5)}
		}
		p.Add(l)
		thumbs[sr.name] = l
	}
	p.X.Min, p.X.Max = 0, 1000*end
	p.Y.Min, p.Y.Max = 0, top
	return thumbs
}

// metaWidths are the widths of the rows' lines, in points, widest first:
// each is drawn over the wider ones before it, so that lines that meet
// (every row before the trigger) all show.
var metaWidths = []float64{5, 4, 3.2, 2.5, 1.9, 1.4, 1}

// GoodputRow is a row a goodput chart draws: its name and its run's
// series.
type GoodputRow struct {
	Name   string
	Series []sim.Bucket
}

// Goodput draws the goodput of each row over a run of duration, and the
// requests arriving (the first row's), each a mean over 5 s (the windows
// of the rule of recovery), the trigger shaded.
func Goodput(note string, rows []GoodputRow, duration time.Duration, trigger sim.Fault) *Chart {
	ch := New("Goodput through a trigger, by defence", note)
	ch.X.Label.Text = "time"
	ch.X.Tick.Marker = DurationTicks{}
	ch.Y.Label.Text = "successful calls per second (5 s mean)"
	top := 1.0
	for _, r := range rows {
		for _, b := range r.Series {
			top = max(top, float64(b.Arrivals), float64(b.Succeeded))
		}
	}
	top *= 1.08
	dur := duration.Seconds()
	shade := shadeSpan(ch.Plot, ms(trigger.Start), min(ms(trigger.Start+trigger.Length), 1000*dur), top)
	// Each point is the mean over the window of recovery's rule centred
	// on it, from the first whole window to the last.
	mean := func(v func(sim.Bucket) int, series []sim.Bucket) plotter.XYs {
		var xys plotter.XYs
		for k := 0; k+5 <= len(series); k++ {
			sum := 0
			for _, b := range series[k : k+5] {
				sum += v(b)
			}
			span := min(float64(k+5), dur) - float64(k)
			xys = append(xys, plotter.XY{X: 1000 * (float64(k) + span/2), Y: float64(sum) / span})
		}
		return xys
	}
	line := func(xys plotter.XYs, col color.Color, width float64, label string) *plotter.Line {
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil
		}
		l.Color, l.Width = col, vg.Points(width)
		ch.Add(l)
		ch.Legend(label, l)
		return l
	}
	for i, r := range rows {
		if len(r.Series) >= 5 {
			line(mean(func(b sim.Bucket) int { return b.Succeeded }, r.Series), Palette[i%len(Palette)], metaWidths[min(i, len(metaWidths)-1)], r.Name)
		}
	}
	if len(rows) > 0 && len(rows[0].Series) >= 5 {
		// grey: black is a row's colour
		if l := line(mean(func(b sim.Bucket) int { return b.Arrivals }, rows[0].Series), Grey, 0.9, "requests arriving"); l != nil {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2.5)}
		}
	}
	if shade != nil {
		ch.Legend("trigger", shade)
	}
	ch.X.Min, ch.X.Max = 0, 1000*dur
	ch.Y.Min, ch.Y.Max = 0, top
	return ch
}

// LatencyRow is a run a latency chart draws: its name, its calls'
// latencies in order, and their 99.9th percentile, in milliseconds.
type LatencyRow struct {
	Mode      string
	P999      float64
	Latencies []time.Duration
}

// Latency draws each run of sim --hedge as the share of its calls
// slower than each latency, both axes logarithmic, so that the tail shows,
// with the p99.9 that the table prints marked on each curve where it
// crosses 0.1%. Each curve keeps the steps that move it by more than a
// 2000th of an axis, all of them in the tail, where the steps are wide.
func Latency(note string, rows []LatencyRow) *Chart {
	ch := New("Latency with and without hedging", note)
	ch.X.Label.Text = "latency"
	ch.X.Tick.Marker = DurationTicks{Log: true}
	ch.Y.Label.Text = "calls slower than"
	ch.Y.Tick.Marker = tailTicks{}
	logMS := func(d time.Duration) float64 { return math.Log10(max(ms(d), 1e-3)) }
	lo, hi, calls := math.Inf(1), math.Inf(-1), 1
	for _, row := range rows {
		if n := len(row.Latencies); n > 0 {
			lo, hi, calls = min(lo, logMS(row.Latencies[0])), max(hi, logMS(row.Latencies[n-1])), max(calls, n)
		}
	}
	if lo > hi { // no latency: an axis from 1ms to 1s
		lo, hi = 0, 3
	}
	xmin, xmax := lo-0.05, hi+0.05
	ymin, ymax := math.Log10(0.5/float64(calls)), 0.05
	const p999 = -3 // log10 of 0.1%
	mark, _ := plotter.NewLine(plotter.XYs{{X: xmin, Y: p999}, {X: xmax, Y: p999}})
	mark.Color, mark.Width, mark.Dashes = Grey, vg.Points(0.8), []vg.Length{vg.Points(2), vg.Points(2)}
	ch.Add(mark)
	for i, row := range rows {
		n := len(row.Latencies)
		xys := make(plotter.XYs, 0, min(n, 4000))
		for j, d := range row.Latencies {
			pt := plotter.XY{X: logMS(d), Y: math.Log10(float64(n-j) / float64(n))}
			if k := len(xys); k > 0 && j < n-1 && pt.X-xys[k-1].X < (xmax-xmin)/2000 && xys[k-1].Y-pt.Y < (ymax-ymin)/2000 {
				continue
			}
			xys = append(xys, pt)
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			continue
		}
		l.StepStyle = plotter.PostStep
		l.Color, l.Width = Palette[i], vg.Points(1.4)
		ch.Add(l)
		ch.Legend(row.Mode, l)
		if row.P999 <= 0 {
			continue
		}
		// The p99.9 under the mark, beside its dot, towards the middle.
		d := plotter.XY{X: math.Log10(row.P999), Y: p999}
		dot, _ := plotter.NewScatter(plotter.XYs{d})
		dot.Color, dot.Radius, dot.Shape = Palette[i], vg.Points(2.6), draw.CircleGlyph{}
		ch.Add(dot)
		lb, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{d}, Labels: []string{fmt.Sprintf("%.1fms", row.P999)}})
		if err != nil {
			continue
		}
		sty := style(tickSize, Palette[i], draw.XLeft)
		sty.YAlign = draw.YTop
		off := vg.Point{X: 5, Y: -3}
		if d.X > (xmin+xmax)/2 {
			sty.XAlign, off.X = draw.XRight, -5
		}
		lb.TextStyle[0], lb.Offset = sty, off
		ch.Add(lb)
	}
	ch.Legend("p99.9: 0.1% of calls slower", mark)
	ch.X.Min, ch.X.Max = xmin, xmax
	ch.Y.Min, ch.Y.Max = ymin, ymax
	return ch
}

// tailTicks labels a log10 axis of shares: 100%, 10%, 1%, 0.1%, ...
type tailTicks struct{}

func (tailTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Ceil(lo); e <= hi; e++ {
		label := strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.4f", 100*math.Pow(10, e)), "0"), ".") + "%"
		ticks = append(ticks, plot.Tick{Value: e, Label: label})
	}
	return ticks
}

// ms returns d in milliseconds, the unit of a chart's time axes.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
