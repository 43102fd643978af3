package sim_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/sim"
)

// TestPeers: the peers' rules give, under a full outage of 60 s after 20 s
// of health, the load their definitions predict, in requests' worth: the
// window rule 1 + Ratio + PerSecond/rate, the AWS quota's 500 tokens at 14
// a retry, spent once, 1 + 35/(60·rate); and none of them costs a
// success under 10% independent failures. Each client has its own.
func TestPeers(t *testing.T) {
	rules := []struct {
		name  string
		fresh func(c sim.Client) (retry.SharedBudget, func(context.Context, int, error))
		want  func(rate float64) float64
	}{
		{name: "old rule", fresh: func(c sim.Client) (retry.SharedBudget, func(context.Context, int, error)) {
			b := sim.NewWindowBudget(c.Clock, 0.15, 2)
			return b, b.Observe
		}, want: func(rate float64) float64 { return 1 + 0.15 + 2/rate }},
		{name: "Finagle", fresh: func(c sim.Client) (retry.SharedBudget, func(context.Context, int, error)) {
			b := sim.NewWindowBudget(c.Clock, 0.2, 10)
			return b, b.Observe
		}, want: func(rate float64) float64 { return 1 + 0.2 + 10/rate }},
		{name: "AWS quota", fresh: func(sim.Client) (retry.SharedBudget, func(context.Context, int, error)) {
			q := sim.NewTokenQuota()
			return q, q.Observe
		}, want: func(rate float64) float64 { return 1 + math.Floor(500.0/14)/(60*rate) }},
	}
	for _, rule := range rules {
		for _, rate := range []float64{10, 100} {
			run := func(f sim.Fault, dur time.Duration) sim.Figures {
				var observe func(context.Context, int, error)
				rep, err := sim.Run(sim.Scenario{Duration: dur, Drain: time.Minute, Seed: 1, Load: sim.Load{Rate: rate, Steady: true},
					Service: sim.Service{Network: sim.Fixed(5 * time.Millisecond), Faults: []sim.Fault{f}},
					Fleet: sim.Fleet{Options: func(c sim.Client) []retry.Option {
						b, obs := rule.fresh(c)
						observe = obs
						return []retry.Option{retry.WithBudget(retry.Budget{Shared: b})}
					}, Observe: func(ctx context.Context, n int, err error) {
						if observe != nil {
							observe(ctx, n, err)
						}
					}}})
				if err != nil {
					t.Fatal(err)
				}
				return rep.Total
			}
			down := run(sim.Fault{Start: 20 * time.Second, Length: time.Minute, Fail: 1}, 80*time.Second)
			flaky := run(sim.Fault{Fail: 0.1}, time.Minute)
			amp := float64(down.FaultAttempts) / float64(down.FaultRequests)
			if w := rule.want(rate); math.Abs(amp-w) > 0.01 {
				t.Errorf("%s at %g/s: outage load %.3f×, want %.3f×", rule.name, rate, amp, w)
			}
			if s := float64(flaky.Succeeded) / float64(flaky.Requests); s < 0.998 {
				t.Errorf("%s at %g/s: success %.3f%% under 10%% failures, want at least 99.8%%", rule.name, rate, 100*s)
			}
		}
	}
}
