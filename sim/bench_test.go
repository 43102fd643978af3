package sim_test

import (
	"testing"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/sim"
)

// BenchmarkFleet: 1,000 clients, each with the defaults and an attempt
// timeout, for 3 simulated minutes of 70 requests a second (12,600
// calls, Poisson) against a service that loses half its capacity for 10
// s: the run the package documents at well under 10 s on two cores.
func BenchmarkFleet(b *testing.B) {
	s := sim.Scenario{
		Duration: 3 * time.Minute,
		Load:     sim.Load{Rate: 70},
		Service: sim.Service{Workers: 10, ServiceTime: sim.Spread(100*time.Millisecond, 0.1), QueueLength: 200,
			Network: sim.Fixed(5 * time.Millisecond), Faults: []sim.Fault{{Start: 30 * time.Second, Length: 10 * time.Second, Capacity: 0.5}}},
		Fleet: sim.Fleet{Clients: 1000, Options: func(sim.Client) []retry.Option {
			return []retry.Option{retry.WithAttemptTimeout(time.Second)}
		}},
		Seed: 1,
	}
	for b.Loop() {
		rep, err := sim.Run(s)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(rep.Total.Attempts), "attempts/op")
	}
}
