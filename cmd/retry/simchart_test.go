package main

import (
	"fmt"
	"html"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/steadyhq/retry/sim"
	"gonum.org/v1/plot/vg"
)

// simFlagsOf parses sim's flags.
func simFlagsOf(t *testing.T, args ...string) *simFlags {
	t.Helper()
	f := &simFlags{}
	if err := f.command(&env{}).ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	return f
}

// loadChart returns the chart `retry sim args... --plot` draws.
func loadChart(t *testing.T, args ...string) *chart {
	t.Helper()
	l, err := loadSetupOf(&env{}, simFlagsOf(t, args...))
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.run()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := res.chart(l)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// chartTexts returns the texts of a chart drawn as SVG.
func chartTexts(t *testing.T, ch *chart) []string {
	t.Helper()
	svg, err := ch.render(20*vg.Centimeter, 11*vg.Centimeter, "svg")
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range regexp.MustCompile(`>([^<]+)</text>`).FindAllStringSubmatch(string(svg), -1) {
		texts = append(texts, html.UnescapeString(m[1]))
	}
	return texts
}

// TestLoadRates: each bucket's rate counts over the time it was
// simulated, and the series ends with the last bucket in which anything
// drawn happened: no line drops at the end for want of time.
func TestLoadRates(t *testing.T) {
	full := func(n, per int) []sim.Bucket {
		b := make([]sim.Bucket, n)
		for i := range b {
			b[i] = sim.Bucket{Arrivals: per, Attempts: per, Succeeded: per}
		}
		return b
	}
	cases := []struct {
		name     string
		series   []sim.Bucket
		end      float64 // seconds, when the run stopped
		edges    []float64
		arrivals []float64
		hits     []float64
	}{
		{name: "a last bucket of only calls succeeding (not drawn)", series: append(full(3, 10), sim.Bucket{Succeeded: 10}, sim.Bucket{}), end: 3.0,
			edges: []float64{0, 1, 2, 3}, arrivals: []float64{10, 10, 10}, hits: []float64{10, 10, 10}},
		{name: "a last bucket simulated for 0.6 of its width", series: append(full(3, 10), sim.Bucket{Attempts: 6}, sim.Bucket{}), end: 3.6,
			edges: []float64{0, 1, 2, 3, 3.6}, arrivals: []float64{10, 10, 10, 0}, hits: []float64{10, 10, 10, 10}},
		{name: "a last bucket under half a width joins the one before", series: append(full(3, 10), sim.Bucket{Attempts: 2}, sim.Bucket{}), end: 3.2,
			edges: []float64{0, 1, 2, 3.2}, arrivals: []float64{10, 10, 10.0 / 1.2}, hits: []float64{10, 10, 12 / 1.2}},
		{name: "a run stopped at a bucket's edge: its events join the bucket before", series: append(full(2, 4), sim.Bucket{Attempts: 1, Failed: 1}), end: 2.0,
			edges: []float64{0, 1, 2}, arrivals: []float64{4, 4}, hits: []float64{4, 5}},
		{name: "nothing drawn", series: []sim.Bucket{{Succeeded: 3}}, end: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := &sim.Report{Total: sim.Figures{Series: c.series}, Resolution: time.Second, End: time.Duration(c.end * float64(time.Second))}
			lr := rates(rep)
			near := func(a, b []float64) bool {
				if len(a) != len(b) {
					return false
				}
				for i := range a {
					if math.Abs(a[i]-b[i]) > 1e-9 {
						return false
					}
				}
				return true
			}
			if !near(lr.edges, c.edges) || !near(lr.series[3], c.arrivals) || !near(lr.series[0], c.hits) {
				t.Errorf("edges %v, arrivals %v, hits %v; want %v, %v, %v", lr.edges, lr.series[3], lr.series[0], c.edges, c.arrivals, c.hits)
			}
		})
	}
}

// TestLoadChart: with a retry budget, the load chart draws beside the run
// the same run without one, each panel headed with its hits per request
// in the outage; without a budget, one panel. Its legend names every
// series and the outage.
func TestLoadChart(t *testing.T) {
	args := []string{"--rate", "20", "--duration", "40s", "--outage", "10s:20s"}
	two := chartTexts(t, loadChart(t, args...))
	one := chartTexts(t, loadChart(t, append(args, "--budget", "off")...))
	for _, w := range []string{"requests arriving", "server hits", "failed hits", "calls given up", "outage", "per second", "time"} {
		if !slices.Contains(two, w) || !slices.Contains(one, w) {
			t.Errorf("no text %q in both charts:\n%q\n%q", w, two, one)
		}
	}
	headings := func(texts []string) (n int) {
		for _, tx := range texts {
			if strings.HasPrefix(tx, "budget ") && strings.HasSuffix(tx, " hits per request in the outage") {
				n++
			}
		}
		return n
	}
	if headings(two) != 2 || headings(one) != 0 {
		t.Errorf("%d and %d panel headings, want 2 with a budget and none without", headings(two), headings(one))
	}
}

// TestLatencyChart: the chart of sim --hedge reads "calls slower than" on
// a log axis of shares, and marks each run's p99.9.
func TestLatencyChart(t *testing.T) {
	rows := simulated(t).hedge
	texts := chartTexts(t, latencyChart(hedgeNote, rows))
	for _, w := range []string{"calls slower than", "latency", "100%", "0.1%", "no hedging", "hedging at p95", "p99.9: 0.1% of calls slower",
		fmt.Sprintf("%.1fms", rows[0].P999), fmt.Sprintf("%.1fms", rows[1].P999)} {
		if !slices.Contains(texts, w) {
			t.Errorf("no text %q in the chart: %q", w, texts)
		}
	}
}
