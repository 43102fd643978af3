package main

import (
	"html"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	"gonum.org/v1/plot/vg"
)

type simRun struct {
	sim *loadSim
	res *loadResult
}

// simResult runs s.
func simResult(t *testing.T, s *loadSim) simRun {
	t.Helper()
	res, err := s.run()
	if err != nil {
		t.Fatal(err)
	}
	return simRun{s, res}
}

// TestLoadRates: each bucket's rate counts over the time it was
// simulated, and the series ends with the last bucket in which anything
// drawn happened: no line drops at the end for want of time.
func TestLoadRates(t *testing.T) {
	full := func(n, per int) []bucket {
		b := make([]bucket, n)
		for i := range b {
			b[i] = bucket{arrivals: per, hits: per, done: per}
		}
		return b
	}
	cases := []struct {
		name     string
		series   []bucket
		end      float64 // seconds, when the simulation stopped
		edges    []float64
		arrivals []float64
		hits     []float64
	}{
		{name: "a last bucket of only calls ending (not drawn)",
			series: append(full(3, 10), bucket{done: 10}, bucket{}), end: 3.0,
			edges: []float64{0, 1, 2, 3}, arrivals: []float64{10, 10, 10}, hits: []float64{10, 10, 10}},
		{name: "a last bucket simulated for 0.6 of its width",
			series: append(full(3, 10), bucket{hits: 6}, bucket{}), end: 3.6,
			edges: []float64{0, 1, 2, 3, 3.6}, arrivals: []float64{10, 10, 10, 0}, hits: []float64{10, 10, 10, 10}},
		{name: "a last bucket under half a width joins the one before",
			series: append(full(3, 10), bucket{hits: 2}, bucket{}), end: 3.2,
			edges: []float64{0, 1, 2, 3.2}, arrivals: []float64{10, 10, 10.0 / 1.2}, hits: []float64{10, 10, 12 / 1.2}},
		{name: "a simulation stopped at a bucket's edge: its events join the bucket before",
			series: append(full(2, 4), bucket{hits: 1, failedCalls: 1}), end: 2.0,
			edges: []float64{0, 1, 2}, arrivals: []float64{4, 4}, hits: []float64{4, 5}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &loadResult{series: c.series, bucketWidth: time.Second, VirtualEnd: c.end}
			lr := r.rates()
			near := func(a, b []float64) bool {
				return slices.EqualFunc(a, b, func(x, y float64) bool { return x-y < 1e-9 && y-x < 1e-9 })
			}
			if !near(lr.edges, c.edges) || !near(lr.arrivals, c.arrivals) || !near(lr.hits, c.hits) {
				t.Errorf("edges %v, arrivals %v, hits %v\nwant edges %v, arrivals %v, hits %v",
					lr.edges, lr.arrivals, lr.hits, c.edges, c.arrivals, c.hits)
			}
		})
	}
}

// TestLoadRatesSim: on the engine, a steady load keeps its rate to the
// series' last bucket, and README's outage ends at the offered rate.
func TestLoadRatesSim(t *testing.T) {
	cases := []struct {
		name    string
		sim     loadSim
		endAt   float64 // seconds: the series' end
		tail    float64 // hits per second in the last bucket, ±10%
		arrives float64 // requests per second in the last bucket
	}{
		{name: "always up", sim: loadSim{rate: 50, duration: 5 * time.Second, clients: 1, latency: 10 * time.Millisecond,
			horizon: time.Minute, bucket: time.Second, seed: 1}, endAt: 5, tail: 50, arrives: 50},
		{name: "README's outage", sim: loadSim{rate: 100, duration: 2 * time.Minute, clients: 1, latency: 10 * time.Millisecond,
			horizon: 12 * time.Minute, bucket: time.Second, seed: 1, srv: server{outageStart: 30 * time.Second, outageEnd: 90 * time.Second}},
			endAt: 120, tail: 100, arrives: 100},
		{name: "200ms buckets", sim: loadSim{rate: 100, duration: 3 * time.Second, clients: 1, latency: 10 * time.Millisecond,
			horizon: time.Minute, bucket: 200 * time.Millisecond, seed: 1}, endAt: 3, tail: 100, arrives: 100},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lr := simResult(t, &c.sim).res.rates()
			n := len(lr.hits)
			if n == 0 {
				t.Fatal("no series")
			}
			if end := lr.edges[n]; end < c.endAt-0.05 || end > c.endAt+0.05 {
				t.Errorf("series ends at %vs, want %vs", end, c.endAt)
			}
			if h := lr.hits[n-1]; h < 0.9*c.tail || h > 1.1*c.tail {
				t.Errorf("last bucket: %v hits/s, want %v ± 10%% (hits %v)", h, c.tail, lr.hits[max(0, n-5):])
			}
			if a := lr.arrivals[n-1]; a < 0.9*c.arrives || a > 1.1*c.arrives {
				t.Errorf("last bucket: %v arrivals/s, want %v ± 10%%", a, c.arrives)
			}
		})
	}
}

// TestLoadChart: with a retry budget, the load chart draws beside the run
// the same run without a budget, on the same axes, each panel headed by
// its hits per request (during the outage: 1.03 and 2.93); with
// --budget off, one panel, the budget in the note.
func TestLoadChart(t *testing.T) {
	readme := func(opts ...retry.Option) *loadSim {
		return &loadSim{rate: 100, duration: 2 * time.Minute, clients: 1, latency: 10 * time.Millisecond, horizon: 12 * time.Minute,
			bucket: time.Second, seed: 1, srv: server{outageStart: 30 * time.Second, outageEnd: 90 * time.Second},
			opts: append([]retry.Option{retry.WithPolicy(retry.Policy{})}, opts...)}
	}
	cases := []struct {
		name     string
		sim      *loadSim
		budget   string
		headings []string
		note     string // in the note
	}{
		{name: "the default budget, beside none", sim: readme(), budget: "default",
			headings: []string{"budget default: 1.03 hits per request in the outage", "budget off: 2.93 hits per request in the outage"}},
		{name: "a budget of the flag's, beside none", sim: readme(retry.WithBudget(retry.Budget{Ratio: 0.5})), budget: "ratio=0.5",
			headings: []string{"budget ratio=0.5: 1.09 hits per request in the outage", "budget off: 2.93 hits per request in the outage"}},
		{name: "no budget: one panel", sim: readme(retry.WithBudget(retry.Budget{Off: true})), budget: "off", note: "budget off"},
		{name: "no outage: hits per request over the run", sim: &loadSim{rate: 50, duration: 10 * time.Second, clients: 1, latency: 10 * time.Millisecond,
			horizon: time.Minute, bucket: time.Second, seed: 1, srv: server{failRate: 0.5}, opts: []retry.Option{retry.WithPolicy(retry.Policy{})}}, budget: "default",
			headings: []string{"budget default: 1.10 hits per request", "budget off: 1.67 hits per request"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			run := simResult(t, c.sim)
			ch := run.res.chart(run.sim, "default", c.budget)
			if !slices.Equal(ch.headings, c.headings) || len(ch.beside) != max(len(c.headings)-1, 0) {
				t.Errorf("%d panels beside the first, headings %q; want headings %q", len(ch.beside), ch.headings, c.headings)
			}
			if !strings.Contains(ch.note, c.note) {
				t.Errorf("note %q, want %q in it", ch.note, c.note)
			}
			for _, p := range ch.beside {
				if p.X.Min != ch.X.Min || p.X.Max != ch.X.Max || p.Y.Min != ch.Y.Min || p.Y.Max != ch.Y.Max {
					t.Errorf("a panel's axes [%v, %v]×[%v, %v], the first's [%v, %v]×[%v, %v]",
						p.X.Min, p.X.Max, p.Y.Min, p.Y.Max, ch.X.Min, ch.X.Max, ch.Y.Min, ch.Y.Max)
				}
			}
		})
	}
}

// TestLoadSeriesVisible: each series of a load chart is drawn wider than
// every series drawn over it, so that where two meet the one under shows
// on both sides; the legend names each once.
func TestLoadSeriesVisible(t *testing.T) {
	for i, under := range loadSeries {
		for _, over := range loadSeries[i+1:] {
			if under.width <= over.width {
				t.Errorf("%q (%gpt) is drawn under %q (%gpt): want it wider", under.name, under.width, over.name, over.width)
			}
		}
	}
	names := make([]string, len(loadSeries))
	for i, s := range loadSeries {
		names[i] = s.name
	}
	slices.Sort(names)
	if legend := slices.Sorted(slices.Values(legendOrder)); !slices.Equal(names, legend) {
		t.Errorf("legend %q, series %q", legend, names)
	}
}

// TestLatencyChart: the chart of sim --hedge reads "calls slower than" on
// its share axis, marks 0.1% (p99.9) and each run's p99.9 on it, as the
// table prints it, and labels its latency axis at 1, 2 and 5 of each unit
// across its three decades.
func TestLatencyChart(t *testing.T) {
	res := readHedgeRecording(t)
	out, err := res.latencyChart(readmeHedge()).render(20*vg.Centimeter, 11*vg.Centimeter, "svg")
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range regexp.MustCompile(`>([^<]+)</text>`).FindAllStringSubmatch(string(out), -1) {
		texts = append(texts, html.UnescapeString(m[1]))
	}
	want := []string{"calls slower than", "100%", "10%", "1%", "0.1%", "0.01%", "p99.9: 0.1% of calls slower",
		"10ms", "20ms", "50ms", "100ms", "200ms", "500ms", "1s", "no hedging", "hedging at p95"}
	for _, row := range res.Rows {
		want = append(want, msLabel(row.P999))
	}
	for _, w := range want {
		if !slices.Contains(texts, w) {
			t.Errorf("no text %q in %q", w, texts)
		}
	}
}
