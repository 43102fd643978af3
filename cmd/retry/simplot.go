package main

import (
	"fmt"
	"image/color"
	"strconv"
	"strings"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
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

// chart draws the load over time: each rate as steps, one a bucket, and
// the outage shaded.
func (r *loadResult) chart(s *loadSim, policy, budget string) *chart {
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
	setup = append(setup, "policy "+policy, "budget "+budget)
	ch := newChart("Load on the server", strings.Join(setup, ", "))
	ch.X.Label.Text = "time"
	ch.X.Tick.Marker = durationTicks{}
	ch.Y.Label.Text = "per second"

	lr := r.rates()
	series := []struct {
		name  string
		rates []float64
		col   color.Color
		width float64
		dash  bool
	}{
		{"server hits", lr.hits, palette[0], 1.2, false},
		{"failed hits", lr.failedHits, palette[1], 1.2, false},
		{"calls given up", lr.givenUp, color.RGBA{0x6a, 0x3d, 0x9a, 0xff}, 1.1, false},
		{"requests arriving", lr.arrivals, color.Black, 1.1, true},
	}
	top := 1.0
	for _, sr := range series {
		for _, v := range sr.rates {
			top = max(top, v)
		}
	}
	top *= 1.08
	end := 1.0
	if n := len(lr.edges); n > 0 {
		end = lr.edges[n-1]
	}
	ch.X.Min, ch.X.Max = 0, 1000*end
	ch.Y.Min, ch.Y.Max = 0, top
	var outage *plotter.Polygon
	if s.srv.outageEnd > 0 {
		a, b := ms(s.srv.outageStart), ms(min(s.srv.outageEnd, s.horizon))
		b = min(b, 1000*end)
		if a < b {
			outage, _ = plotter.NewPolygon(plotter.XYs{{X: a, Y: 0}, {X: b, Y: 0}, {X: b, Y: top}, {X: a, Y: top}})
		}
	}
	if outage != nil {
		outage.Color = color.Gray{Y: 0xe4}
		outage.LineStyle.Width = 0
		ch.Add(outage)
	}
	lines := make(map[string]*plotter.Line)
	for _, sr := range series {
		if len(sr.rates) == 0 {
			continue
		}
		xys := make(plotter.XYs, 0, len(sr.rates)+1)
		for i, v := range sr.rates {
			xys = append(xys, plotter.XY{X: 1000 * lr.edges[i], Y: v})
		}
		xys = append(xys, plotter.XY{X: 1000 * end, Y: sr.rates[len(sr.rates)-1]}) // the last bucket's right edge
		l, err := plotter.NewLine(xys)
		if err != nil {
			continue
		}
		l.StepStyle = plotter.PostStep
		l.Color, l.Width = sr.col, vg.Points(sr.width)
		if sr.name == "server hits" {
			l.FillColor = tint(sr.col, 0.2)
		}
		if sr.dash {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2.5)}
		}
		ch.Add(l)
		lines[sr.name] = l
	}
	for _, name := range []string{"requests arriving", "server hits", "failed hits", "calls given up"} {
		if l := lines[name]; l != nil {
			ch.legend(name, l)
		}
	}
	if outage != nil {
		ch.legend("outage", outage)
	}
	return ch
}
