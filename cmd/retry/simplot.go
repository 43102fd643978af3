package main

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/steadyhq/retry"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// loadRates are the rates a load chart draws, per bucket of the time
// series: bucket i spans [edges[i], edges[i+1]) seconds.
type loadRates struct {
	edges                               []float64
	arrivals, hits, failedHits, givenUp []float64 // per second
}

// rates returns the time series as rates, from the start to the end of
// the last bucket in which anything drawn happened. A bucket counts over
// the time it was simulated: the last one ends when the simulation did,
// and one cut to under half a bucket joins the bucket before it, so that
// no series drops at the end for want of time rather than of load.
func (r *loadResult) rates() loadRates {
	w := r.bucketWidth.Seconds()
	last := -1
	for i, b := range r.series {
		if b.arrivals > 0 || b.hits > 0 || b.failedHits > 0 || b.failedCalls > 0 {
			last = i
		}
	}
	var lr loadRates
	if last < 0 {
		return lr
	}
	end := min(float64(last+1)*w, r.VirtualEnd)
	n := last + 1
	if end-float64(last)*w < w/2 && last > 0 {
		n-- // the last bucket joins the one before
	}
	lr.edges = make([]float64, n+1)
	for i := range n {
		lr.edges[i] = float64(i) * w
	}
	lr.edges[n] = end
	for i := range n {
		b := r.series[i]
		if i == n-1 {
			for _, c := range r.series[i+1 : last+1] { // a joined bucket
				b.arrivals += c.arrivals
				b.hits += c.hits
				b.failedHits += c.failedHits
				b.failedCalls += c.failedCalls
			}
		}
		span := lr.edges[i+1] - lr.edges[i]
		lr.arrivals = append(lr.arrivals, float64(b.arrivals)/span)
		lr.hits = append(lr.hits, float64(b.hits)/span)
		lr.failedHits = append(lr.failedHits, float64(b.failedHits)/span)
		lr.givenUp = append(lr.givenUp, float64(b.failedCalls)/span)
	}
	return lr
}

// loadSeries are the series of a load chart, in the order they are drawn:
// each wider than those drawn over it, so that one that meets another (the
// hits and the arrivals before and after an outage, the hits and the
// failed hits in it, the calls given up and the arrivals) shows on both
// sides of it. The legend lists them in legendOrder.
var loadSeries = []struct {
	name  string
	col   color.Color
	width float64 // points
	dash  bool
}{
	{name: "server hits", col: palette[0], width: 3.6},
	{name: "calls given up", col: color.RGBA{0xcc, 0x79, 0xa7, 0xff}, width: 2.2},
	{name: "failed hits", col: palette[1], width: 1.3},
	{name: "requests arriving", col: color.Black, width: 0.9, dash: true},
}

var legendOrder = []string{"requests arriving", "server hits", "failed hits", "calls given up"}

// rates returns the series of loadSeries' name.
func (lr loadRates) series(name string) []float64 {
	switch name {
	case "server hits":
		return lr.hits
	case "failed hits":
		return lr.failedHits
	case "calls given up":
		return lr.givenUp
	}
	return lr.arrivals
}

// chart draws the load over time: each rate as steps, one a bucket, and
// the outage shaded. With a retry budget (budget is --budget's value), a
// second panel beside it draws the same run without one (--budget off),
// on the same axes, so that what the budget spares the server shows; each
// panel's heading gives its server hits per request, during the outage
// when there is one.
func (r *loadResult) chart(s *loadSim, policy, budget string) *chart {
	runs := []struct {
		res    *loadResult
		budget string
	}{{r, budget}}
	if budget != "off" {
		off := *s
		off.opts = append(slices.Clip(s.opts), retry.WithBudget(retry.Budget{Off: true}))
		if res, err := off.run(); err == nil {
			runs = append(runs, struct {
				res    *loadResult
				budget string
			}{res, "off"})
		}
	}
	setup := []string{strconv.FormatFloat(s.rate, 'f', -1, 64) + " requests/s for " + durationLabel(ms(s.duration))}
	if s.clients > 1 {
		setup = append(setup, fmt.Sprintf("%d clients", s.clients))
	}
	if s.srv.outageEnd > 0 {
		setup = append(setup, "down from "+durationLabel(ms(s.srv.outageStart))+" to "+durationLabel(ms(s.srv.outageEnd)))
	}
	if s.srv.failRate > 0 {
		setup = append(setup, fmt.Sprintf("%g%% of attempts failing", 100*s.srv.failRate))
	}
	if s.srv.capacity > 0 {
		setup = append(setup, fmt.Sprintf("capacity %g/s", s.srv.capacity))
	}
	setup = append(setup, "policy "+policy)
	if len(runs) == 1 {
		setup = append(setup, "budget "+budget)
	}
	ch := newChart("Load on the server", strings.Join(setup, ", "))

	rates := make([]loadRates, len(runs))
	top, end := 1.0, 1.0
	for i, run := range runs {
		rates[i] = run.res.rates()
		for _, sr := range loadSeries {
			for _, v := range rates[i].series(sr.name) {
				top = max(top, v)
			}
		}
		if n := len(rates[i].edges); n > 0 {
			end = max(end, rates[i].edges[n-1])
		}
	}
	top *= 1.08
	var outage plotter.XYs
	if s.srv.outageEnd > 0 {
		a, b := ms(s.srv.outageStart), ms(min(s.srv.outageEnd, s.horizon))
		if b = min(b, 1000*end); a < b {
			outage = plotter.XYs{{X: a, Y: 0}, {X: b, Y: 0}, {X: b, Y: top}, {X: a, Y: top}}
		}
	}
	var thumbs map[string]plot.Thumbnailer
	for i, run := range runs {
		p := ch.Plot
		if i > 0 {
			p = newChart("", "").Plot
			ch.beside = append(ch.beside, p)
		}
		t := loadPanel(p, rates[i], outage, end, top)
		if i == 0 {
			thumbs = t
			p.Y.Label.Text = "per second"
		}
		if len(runs) > 1 {
			amp, where := run.res.Amplification, ""
			if s.srv.outageEnd > 0 {
				amp, where = run.res.OutageAmp, " in the outage"
			}
			ch.headings = append(ch.headings, fmt.Sprintf("budget %s: %.2f hits per request%s", run.budget, amp, where))
		}
	}
	for _, name := range legendOrder {
		if t := thumbs[name]; t != nil {
			ch.legend(name, t)
		}
	}
	if t := thumbs["outage"]; t != nil {
		ch.legend("outage", t)
	}
	return ch
}

// loadPanel draws a run's rates on p, the outage shaded, on axes to end
// seconds and top per second, and returns the thumbnails of what it drew,
// by name.
func loadPanel(p *plot.Plot, lr loadRates, outage plotter.XYs, end, top float64) map[string]plot.Thumbnailer {
	thumbs := map[string]plot.Thumbnailer{}
	p.X.Label.Text = "time"
	p.X.Tick.Marker = durationTicks{}
	if outage != nil {
		if poly, err := plotter.NewPolygon(outage); err == nil {
			poly.Color = color.Gray{Y: 0xe4}
			poly.LineStyle.Width = 0
			p.Add(poly)
			thumbs["outage"] = poly
		}
	}
	for _, sr := range loadSeries {
		rates := lr.series(sr.name)
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
		if sr.name == "server hits" {
			l.FillColor = tint(sr.col, 0.15)
		}
		if sr.dash {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2.5)}
		}
		p.Add(l)
		thumbs[sr.name] = l
	}
	p.X.Min, p.X.Max = 0, 1000*end
	p.Y.Min, p.Y.Max = 0, top
	return thumbs
}

// latencyChart draws each run of sim --hedge as the share of its calls
// slower than each latency, both axes logarithmic, so that the tail shows,
// with the p99.9 that the table prints marked on each curve where it
// crosses 0.1%. Each curve keeps the steps that move it by more than a
// 2000th of an axis, all of them in the tail, where the steps are wide.
func (r *hedgeResult) latencyChart(s *hedgeSim) *chart {
	note := fmt.Sprintf("%d requests; attempts take %s, %g%% of them %g× longer; hedge delay at p%g of recent latencies",
		s.requests, human(s.base), 100*s.slowP, s.slowX, s.pct)
	ch := newChart("Latency with and without hedging", note)
	ch.X.Label.Text = "latency"
	ch.X.Tick.Marker = durationTicks{log: true}
	ch.Y.Label.Text = "calls slower than"
	ch.Y.Tick.Marker = tailTicks{}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, row := range r.Rows {
		if n := len(row.lat); n > 0 {
			lo, hi = min(lo, logMS(row.lat[0])), max(hi, logMS(row.lat[n-1]))
		}
	}
	if lo > hi { // no latency: an axis from 1ms to 1s
		lo, hi = 0, 3
	}
	xmin, xmax := lo-0.05, hi+0.05
	ymin, ymax := math.Log10(0.5/float64(max(s.requests, 1))), 0.05
	const p999 = -3 // log10 of 0.1%
	mark, _ := plotter.NewLine(plotter.XYs{{X: xmin, Y: p999}, {X: xmax, Y: p999}})
	mark.Color, mark.Width, mark.Dashes = grey, vg.Points(0.8), []vg.Length{vg.Points(2), vg.Points(2)}
	ch.Add(mark)
	var dots plotter.XYs
	var labels []string
	for i, row := range r.Rows {
		n := len(row.lat)
		xys := make(plotter.XYs, 0, min(n, 4000))
		for j, d := range row.lat {
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
		l.Color, l.Width = palette[i], vg.Points(1.4)
		ch.Add(l)
		ch.legend(row.Mode, l)
		if row.P999 > 0 {
			dot, _ := plotter.NewScatter(plotter.XYs{{X: math.Log10(row.P999), Y: p999}})
			dot.Color, dot.Radius, dot.Shape = palette[i], vg.Points(2.6), draw.CircleGlyph{}
			ch.Add(dot)
			dots = append(dots, plotter.XY{X: math.Log10(row.P999), Y: p999})
			labels = append(labels, msLabel(row.P999))
		}
	}
	// The p99.9 values under the mark, beside their dots, towards the
	// middle of the axis.
	for i, d := range dots {
		lb, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{d}, Labels: labels[i : i+1]})
		if err != nil {
			continue
		}
		sty := style(tickSize, palette[i], draw.XLeft)
		sty.YAlign = draw.YTop
		off := vg.Point{X: 5, Y: -3}
		if d.X > (xmin+xmax)/2 {
			sty.XAlign, off.X = draw.XRight, -5
		}
		lb.TextStyle[0], lb.Offset = sty, off
		ch.Add(lb)
	}
	ch.legend("p99.9: 0.1% of calls slower", mark)
	ch.X.Min, ch.X.Max = xmin, xmax
	ch.Y.Min, ch.Y.Max = ymin, ymax
	return ch
}

// logMS is log10 of d in milliseconds, at least -3 (1µs).
func logMS(d time.Duration) float64 { return math.Log10(max(ms(d), 1e-3)) }

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
