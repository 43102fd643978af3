package sim_test

import (
	"testing"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/sim"
)

// TestHedges: the engine's hedges run on the virtual clock: on a service
// whose attempts take 10-15 ms and 1% of them 100 times longer, a hedge
// at the 95th percentile of recent latencies cuts the 99.9th percentile
// tenfold or more for at most 7% more attempts (about 5.6%: the delay
// follows the latencies of the attempts that returned first, without the
// slow ones their hedges beat).
func TestHedges(t *testing.T) {
	run := func(h retry.Hedge) *sim.Report {
		rep, err := sim.Run(sim.Scenario{
			Duration: 2 * time.Second, Drain: time.Minute,
			Load:    sim.Load{Rate: 2000},
			Service: sim.Service{ServiceTime: sim.Spread(12500*time.Microsecond, 0.2).Tail(0.01, 100)},
			Fleet: sim.Fleet{Options: func(sim.Client) []retry.Option {
				return []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 3}), retry.WithHedge(h)}
			}},
			Seed: 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	plain, hedged := run(retry.Hedge{Max: 1}), run(retry.Hedge{Percentile: 95, Ceiling: 20 * time.Millisecond})
	st := hedged.Stats[0]
	drop := float64(plain.Latency(0.999)) / float64(hedged.Latency(0.999))
	extra := hedged.Total.Amplification()/plain.Total.Amplification() - 1
	t.Logf("p99.9 %v -> %v (%.1f×) for %.2f%% more attempts; %d hedges, %d won", plain.Latency(0.999), hedged.Latency(0.999), drop, 100*extra, st.Hedges, st.HedgeWins)
	if plain.Stats[0].Hedges != 0 || st.Hedges == 0 || st.HedgeWins == 0 {
		t.Errorf("hedges %d without, %d with (%d won)", plain.Stats[0].Hedges, st.Hedges, st.HedgeWins)
	}
	if drop < 10 || extra > 0.07 {
		t.Errorf("p99.9 falls %.1f× for %.2f%% more attempts; want ≥ 10× for ≤ 7%%", drop, 100*extra)
	}
	if hedged.Total.Succeeded != hedged.Total.Requests {
		t.Errorf("%d of %d hedged calls succeeded", hedged.Total.Succeeded, hedged.Total.Requests)
	}
}
