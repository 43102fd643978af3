package chart

import (
	"math"
	"testing"
	"time"

	"github.com/steadyhq/retry/sim"
)

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
