package sim_test

import (
	"math"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/sim"
)

// chain runs n layers, each with opts, in front of a service in a full
// outage: 20 requests a second for 30 s; the fleet's client sends each
// once.
func chain(t *testing.T, n int, opts ...retry.Option) *sim.Report {
	t.Helper()
	layers := make([]sim.Layer, n)
	for i := range layers {
		layers[i].Options = func(sim.Client) []retry.Option { return opts }
	}
	rep, err := sim.Run(sim.Scenario{
		Duration: 30 * time.Second, Drain: 24 * time.Hour,
		Load:    sim.Load{Rate: 20, Steady: true},
		Service: sim.Service{Network: sim.Fixed(5 * time.Millisecond), Faults: []sim.Fault{{Fail: 1}}},
		Fleet:   sim.Fleet{Options: func(sim.Client) []retry.Option { return []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 1})} }},
		Layers:  layers,
		Seed:    1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total.Unfinished != 0 {
		t.Fatalf("%d calls unfinished", rep.Total.Unfinished)
	}
	return rep
}

// TestLayers: in a chain of N services under a full outage at the bottom,
// 3 attempts at every layer send 3^i times the requests to layer i and
// 3^N to the service; retries at one layer (the engine's rule, without a
// budget) 2i+1; the defaults at every layer at most 1.2× for N = 3,
// because a call that serves a retry makes one attempt: at each layer
// below the first, the calls held to one attempt are the requests marked
// retries that the layer above sent, and no retry is sent while serving
// one.
func TestLayers(t *testing.T) {
	naive := []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 3}), budgetOff, retry.WithNestedRetries(true)}
	cases := []struct {
		name    string
		layers  int
		opts    []retry.Option
		exact   func(i int) int // requests layer i (N: the service) receives per request
		maxLoad float64
	}{
		{name: "naive, 1 layer", layers: 1, opts: naive, exact: pow3},
		{name: "naive, 3 layers", layers: 3, opts: naive, exact: pow3},
		{name: "rule only, 3 layers", layers: 3, opts: []retry.Option{budgetOff}, exact: func(i int) int { return 2*i + 1 }},
		{name: "defaults, 3 layers", layers: 3, maxLoad: 1.2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := chain(t, c.layers, c.opts...)
			req := rep.Total.Requests
			got := func(i int) int {
				if i == c.layers {
					return rep.Total.Attempts
				}
				return rep.Layers[i].Received
			}
			if c.exact != nil {
				for i := 0; i <= c.layers; i++ {
					if want := c.exact(i) * req; got(i) != want {
						t.Errorf("hop %d received %d, want %d (%d per request)", i, got(i), want, c.exact(i))
					}
				}
				return
			}
			if amp := rep.Total.Amplification(); amp > c.maxLoad {
				t.Errorf("%.3f× at the bottom, want at most %g×", amp, c.maxLoad)
			}
			for i, l := range rep.Layers {
				above := 0
				if i > 0 {
					above = rep.Layers[i-1].Retries + rep.Layers[i-1].HeldToOne
					if above == 0 {
						t.Errorf("layer %d: the layer above sent no retry, so the rule was not tried", i)
					}
				}
				if l.HeldToOne != above || l.NestedRetries != 0 {
					t.Errorf("layer %d: %d calls held to one attempt, %d retries while serving one; want %d and 0", i, l.HeldToOne, l.NestedRetries, above)
				}
			}
		})
	}
}

func pow3(i int) int { return int(math.Pow(3, float64(i))) }
