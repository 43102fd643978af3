//go:build !race

package main

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/sim"
)

// TestFleetDefaultsFigures: the defaults hold for a fleet of clients, for
// a quiet client and under partial failure, on the simulator's models,
// each client a default Retrier (without a budget where said):
//
//   - the metastable failure of sim --metastable ends within twice the
//     trigger's length (L, 10 s) at 1, 10, 100 and 1,000 clients, and
//     within L with the shedder in front; without a defence, never;
//   - a full outage of 60 s loads the service with at most 1.10× the
//     requests for one client at 10, 100 and 1,000 requests a second, and
//     at most 1.25× for fleets of 10, 100 and 1,000 clients at 1 request
//     a second each;
//   - a client that calls every 10 s, then makes 10 calls at once as its
//     service restarts for 400 ms, or 5 as it restarts for 1 s, loses none
//     of them (for 10 seeds);
//   - under 10%, 20% and 30% independent failures, fast or timing out, at
//     10, 100 and 1,000 requests a second, as many calls succeed as
//     without a budget within half a point at 10% and 20%, and 1.5
//     points at 30%.
func TestFleetDefaultsFigures(t *testing.T) {
	t.Run("metastable", func(t *testing.T) {
		for _, shed := range []bool{false, true} {
			args := []string{"sim", "--metastable", "--clients", "1,10,100,1000", "--json"}
			most := 20.0
			if shed {
				args, most = append(args, "--shed"), 10
			}
			stdout, stderr, code := cli(t, "", args...)
			var rows []metaRow
			if err := json.Unmarshal([]byte(stdout), &rows); code != 0 || err != nil {
				t.Fatalf("%v: status %d, %v: %s", args, code, err, stderr)
			}
			seen := 0
			for _, r := range rows {
				switch {
				case r.Name == "defaults":
					seen++
					if r.RecoveryS != nil {
						t.Logf("shed %v, %d clients: the defaults recovered after %gs", shed, r.Clients, *r.RecoveryS)
					}
					if r.RecoveryS == nil || *r.RecoveryS > most {
						t.Errorf("shed %v, %d clients: the defaults recovered %v after %v, want within %gs", shed, r.Clients, r.Recovered, r.RecoveryS, most)
					}
				case r.Name == "no defence" && !shed && r.Recovered:
					t.Errorf("%d clients: no defence recovered, want never (the model lost its failure)", r.Clients)
				}
			}
			if seen != 4 {
				t.Errorf("%d rows of the defaults, want 4", seen)
			}
		}
	})
	run := func(t *testing.T, s sim.Scenario, opts ...retry.Option) sim.Figures {
		t.Helper()
		s.Drain = time.Minute
		s.Service.Network = sim.Fixed(5 * time.Millisecond)
		if s.Fleet.Clients == 0 {
			s.Fleet.Clients = 1
		}
		s.Fleet.Options = func(sim.Client) []retry.Option { return append(opts, retry.WithAttemptTimeout(time.Second)) }
		rep, err := sim.Run(s)
		if err != nil {
			t.Fatal(err)
		}
		return rep.Total
	}
	t.Run("outages", func(t *testing.T) {
		for _, c := range []struct {
			clients int
			rate    float64
			most    float64
		}{{1, 10, 1.10}, {1, 100, 1.10}, {1, 1000, 1.10}, {10, 10, 1.25}, {100, 100, 1.25}, {1000, 1000, 1.25}} {
			f := run(t, sim.Scenario{Duration: 80 * time.Second, Seed: 1, Load: sim.Load{Rate: c.rate, Steady: true},
				Service: sim.Service{Faults: []sim.Fault{{Start: 20 * time.Second, Length: time.Minute, Fail: 1}}},
				Fleet:   sim.Fleet{Clients: c.clients}})
			amp := float64(f.FaultAttempts) / float64(f.FaultRequests)
			t.Logf("%d clients at %g/s: %.3f× in a full outage", c.clients, c.rate, amp)
			if amp > c.most {
				t.Errorf("%d clients at %g/s: %.3f×, want at most %.2f×", c.clients, c.rate, amp, c.most)
			}
		}
	})
	t.Run("quiet client", func(t *testing.T) {
		for _, c := range []struct {
			calls int
			down  time.Duration
		}{{10, 400 * time.Millisecond}, {5, time.Second}} {
			for seed := range uint64(10) {
				f := run(t, sim.Scenario{Duration: time.Minute, Seed: seed,
					Load:    sim.Load{Rate: 0.1, Steady: true, Bursts: []sim.Burst{{At: 55 * time.Second, Calls: c.calls}}},
					Service: sim.Service{Faults: []sim.Fault{{Start: 55 * time.Second, Length: c.down, Fail: 1}}}})
				if f.Succeeded != f.Requests {
					t.Errorf("seed %d, %d calls in a restart of %v: %d of %d succeeded (failed %v), want all", seed, c.calls, c.down, f.Succeeded, f.Requests, f.Failed)
				}
			}
		}
	})
	t.Run("partial failure", func(t *testing.T) {
		for _, hang := range []bool{false, true} {
			for _, p := range []float64{0.1, 0.2, 0.3} {
				for _, rate := range []float64{10, 100, 1000} {
					s := sim.Scenario{Duration: time.Minute, Seed: 1, Load: sim.Load{Rate: rate, Steady: true},
						Service: sim.Service{Faults: []sim.Fault{{Fail: p, Hang: hang}}}}
					share := func(f sim.Figures) float64 { return float64(f.Succeeded) / float64(f.Requests) }
					on, off := share(run(t, s)), share(run(t, s, retry.WithBudget(retry.Budget{Off: true})))
					t.Logf("%g%% failing (timeouts %v) at %g/s: %.2f%% succeed, %.2f%% without a budget", 100*p, hang, rate, 100*on, 100*off)
					if most := map[bool]float64{true: 0.015, false: 0.005}[p > 0.25]; off-on > most {
						t.Errorf("%s at %g/s: %.2f%% succeed, %.2f%% without a budget; want within %g points",
							fmt.Sprintf("%g%% %s", 100*p, map[bool]string{true: "timing out", false: "fast"}[hang]), rate, 100*on, 100*off, 100*most)
					}
				}
			}
		}
	})
}

// TestBudgetFaultsFigures: the default budget's bounds hold under the
// faults a fleet meets, on the simulator's model: a full outage of 60 s
// loads the service with at most 1.25× the requests of a fleet of 100
// clients whose starts are spread over 70 s, whose rates differ 100×
// (half of them at 100 times the other half's), whose clocks jump an hour
// ahead or back 5 s into the outage, or whose service fails only by
// timing out; and at most 1.10× for one client at 100 requests a second
// under the same clock jumps and timeouts. A service that comes back half
// way (a full outage, then 2 minutes of 50% failures, fast or timing out)
// gets no more than without a budget, and no client is kept from it
// after: the calls recover within 5 s of the faults' end.
func TestBudgetFaultsFigures(t *testing.T) {
	outage := []sim.Fault{{Start: 80 * time.Second, Length: time.Minute, Fail: 1}}
	spread := make([]time.Duration, 100)
	weights := make([]float64, 100)
	for i := range spread {
		spread[i] = time.Duration(i) * 700 * time.Millisecond
		weights[i] = float64(1 + 99*(i%2))
	}
	jump := func(by time.Duration) []sim.Jump { return []sim.Jump{{At: 85 * time.Second, By: by}} }
	hang := []sim.Fault{{Start: 80 * time.Second, Length: time.Minute, Fail: 1, Hang: true}}
	for _, c := range []struct {
		name  string
		fleet sim.Fleet
		rate  float64
		fault []sim.Fault
		most  float64
	}{
		{name: "staggered starts", fleet: sim.Fleet{Clients: 100, Starts: spread}, rate: 100, fault: outage, most: 1.25},
		{name: "rates 100× apart", fleet: sim.Fleet{Clients: 100, Weights: weights}, rate: 100, fault: outage, most: 1.25},
		{name: "clocks an hour ahead", fleet: sim.Fleet{Clients: 100, Jumps: jump(time.Hour)}, rate: 100, fault: outage, most: 1.25},
		{name: "clocks an hour back", fleet: sim.Fleet{Clients: 100, Jumps: jump(-time.Hour)}, rate: 100, fault: outage, most: 1.25},
		{name: "timeouts only", fleet: sim.Fleet{Clients: 100}, rate: 100, fault: hang, most: 1.25},
		{name: "one client, clock an hour ahead", fleet: sim.Fleet{Jumps: jump(time.Hour)}, rate: 100, fault: outage, most: 1.10},
		{name: "one client, clock an hour back", fleet: sim.Fleet{Jumps: jump(-time.Hour)}, rate: 100, fault: outage, most: 1.10},
		{name: "one client, timeouts only", rate: 100, fault: hang, most: 1.10},
	} {
		s := sim.Scenario{Duration: 140 * time.Second, Drain: time.Minute, Seed: 1, Load: sim.Load{Rate: c.rate, Steady: true},
			Service: sim.Service{Network: sim.Fixed(5 * time.Millisecond), Faults: c.fault}, Fleet: c.fleet}
		s.Fleet.Options = func(sim.Client) []retry.Option { return []retry.Option{retry.WithAttemptTimeout(time.Second)} }
		rep, err := sim.Run(s)
		if err != nil {
			t.Fatal(err)
		}
		f := rep.Total
		amp := float64(f.FaultAttempts) / float64(f.FaultRequests)
		t.Logf("%s: %.3f× the requests in the outage", c.name, amp)
		if amp > c.most {
			t.Errorf("%s: %.3f× the requests in the outage, want at most %.2f×", c.name, amp, c.most)
		}
	}
	for _, hang := range []bool{false, true} {
		faults := []sim.Fault{{Start: 20 * time.Second, Length: time.Minute, Fail: 1, Hang: hang}, {Start: 80 * time.Second, Length: 2 * time.Minute, Fail: 0.5, Hang: hang}}
		load := map[bool]float64{}
		for _, off := range []bool{false, true} {
			s := sim.Scenario{Duration: 4 * time.Minute, Drain: time.Minute, Seed: 1, Load: sim.Load{Rate: 100, Steady: true},
				Service: sim.Service{Network: sim.Fixed(5 * time.Millisecond), Faults: faults},
				Fleet: sim.Fleet{Clients: 10, Options: func(sim.Client) []retry.Option {
					if off {
						return []retry.Option{retry.WithAttemptTimeout(time.Second), retry.WithBudget(retry.Budget{Off: true})}
					}
					return []retry.Option{retry.WithAttemptTimeout(time.Second)}
				}}}
			rep, err := sim.Run(s)
			if err != nil {
				t.Fatal(err)
			}
			f := rep.Total
			load[off] = float64(f.FaultAttempts) / float64(f.FaultRequests)
			if !off && (!f.Recovered || f.Recovery > 5*time.Second) {
				t.Errorf("half recovery (timeouts %v): recovered %v after %v, want within 5s of the faults' end", hang, f.Recovered, f.Recovery)
			}
		}
		t.Logf("half recovery (timeouts %v): %.3f× with the budget, %.3f× without", hang, load[false], load[true])
		if load[false] > load[true] {
			t.Errorf("half recovery (timeouts %v): %.3f× with the budget, %.3f× without; want no more", hang, load[false], load[true])
		}
	}
}
