package sim_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/sim"
)

// fleetBudget is a fleet's retry budget kept in one place, as on Redis,
// reached through retry.SharedBudget: over a sliding window of 10 s,
// retries may reach 10% of the calls that succeeded; each decision is a
// round trip of rtt on the simulation's clock.
type fleetBudget struct {
	clock retry.Clock
	rtt   time.Duration
	mu    sync.Mutex
	first []time.Time
	retry []time.Time
	trips int
}

func (b *fleetBudget) Won(string, int) {
	b.mu.Lock()
	b.first = append(b.first, b.clock.Now())
	b.mu.Unlock()
}

func (b *fleetBudget) Retry(ctx context.Context, _ string, _ bool, now time.Time) bool {
	if b.clock.Sleep(ctx, b.rtt) != nil { // the round trip to the store
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.trips++
	since := now.Add(-10 * time.Second)
	recent := func(ts []time.Time) int {
		n := 0
		for _, t := range ts {
			if t.After(since) {
				n++
			}
		}
		return n
	}
	if float64(recent(b.retry)+1) > 0.1*float64(recent(b.first)) {
		return false
	}
	b.retry = append(b.retry, now)
	return true
}

// TestFleetSharedBudget: a budget the whole fleet shares through
// retry.SharedBudget, reached in a round trip on the simulation's clock,
// bounds a full outage's load at 100 clients to about what its rule
// gives the fleet, where a budget of its own for each client, each with
// its stock of tokens, lets far more through.
func TestFleetSharedBudget(t *testing.T) {
	outage := func(options func(sim.Client) []retry.Option) *sim.Report {
		rep, err := sim.Run(sim.Scenario{
			Duration: 40 * time.Second, Drain: time.Minute,
			Load:    sim.Load{Rate: 100, Steady: true},
			Service: sim.Service{Network: sim.Fixed(5 * time.Millisecond), Faults: []sim.Fault{{Start: 10 * time.Second, Length: 20 * time.Second, Fail: 1}}},
			Fleet:   sim.Fleet{Clients: 100, Options: options},
			Seed:    1,
		})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	var shared *fleetBudget
	fleet := outage(func(c sim.Client) []retry.Option {
		if shared == nil {
			shared = &fleetBudget{clock: c.Clock, rtt: time.Millisecond}
		}
		return []retry.Option{retry.WithBudget(retry.Budget{Shared: shared})}
	})
	own := outage(nil)
	amp := func(r *sim.Report) float64 { return float64(r.Total.FaultAttempts) / float64(r.Total.FaultRequests) }
	t.Logf("outage load: %.3f× with one fleet budget (%d round trips), %.3f× with one budget each", amp(fleet), shared.trips, amp(own))
	if amp(fleet) > 1.15 || amp(own) < 1.3 || shared.trips == 0 {
		t.Errorf("outage load %.3f× with the fleet's budget, %.3f× with one each; want at most 1.15× and far more", amp(fleet), amp(own))
	}
}

// TestFleetQuietClients: 100 quiet clients, one call every 10 s each,
// then a burst of 10 calls each during a 2 s restart of the service:
// without a budget, the retries after the restart carry every call
// through; the default budget's stock of 12 tokens, kept by each client,
// cannot carry 10 calls that each need two retries, their first ones
// falling within the restart.
func TestFleetQuietClients(t *testing.T) {
	run := func(opts ...retry.Option) sim.Figures {
		rep, err := sim.Run(sim.Scenario{
			Duration: 60 * time.Second, Drain: time.Minute,
			Load:    sim.Load{Rate: 10, Bursts: []sim.Burst{{At: 30 * time.Second, Calls: 10}}},
			Service: sim.Service{Network: sim.Fixed(500 * time.Microsecond), Faults: []sim.Fault{{Start: 29 * time.Second, Length: 2 * time.Second, Fail: 1}}},
			Fleet:   sim.Fleet{Clients: 100, Options: func(sim.Client) []retry.Option { return opts }},
			Seed:    1,
		})
		if err != nil {
			t.Fatal(err)
		}
		return rep.Total
	}
	off, def := run(budgetOff), run()
	t.Logf("without a budget: %d of %d succeeded; the default budget: %d (failed %v)", off.Succeeded, off.Requests, def.Succeeded, def.Failed)
	if off.Succeeded != off.Requests || off.Requests < 1500 {
		t.Errorf("without a budget %d of %d calls succeeded, want all", off.Succeeded, off.Requests)
	}
	if def.Failed[retry.ReasonBudget.String()] == 0 {
		t.Errorf("the default budget denied nothing: %v", def.Failed)
	}
}

// TestFleetJumps: a client's clock that jumps an hour ahead stops its
// calls that wait for a retry at their MaxElapsed (reason deadline); the
// others' calls use their attempts.
func TestFleetJumps(t *testing.T) {
	rep, err := sim.Run(sim.Scenario{
		Duration: 2 * time.Second, Drain: time.Minute,
		Load:    sim.Load{Rate: 10, Steady: true},
		Service: sim.Service{Faults: []sim.Fault{{Fail: 1}}},
		Fleet: sim.Fleet{Clients: 2, Jumps: []sim.Jump{{At: 2500 * time.Millisecond, By: time.Hour, Clients: []int{1}}},
			Options: func(sim.Client) []retry.Option {
				return []retry.Option{budgetOff, retry.WithMaxElapsed(10 * time.Minute)}
			}},
		Seed: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	steady, jumped := rep.Clients[0].Failed, rep.Clients[1].Failed
	if steady[retry.ReasonExhausted.String()] != 10 || jumped[retry.ReasonDeadline.String()] == 0 {
		t.Errorf("client 0 failed %v, client 1 (its clock an hour ahead at 2.5s) %v; want all exhausted, and deadlines", steady, jumped)
	}
}

// TestFleetObserve: Observe sees every attempt of the fleet's calls,
// with the call's identity.
func TestFleetObserve(t *testing.T) {
	seen := map[sim.Call][]int{}
	rep, err := sim.Run(sim.Scenario{
		Duration: time.Second, Drain: time.Minute,
		Load:    sim.Load{Rate: 20, Steady: true},
		Service: sim.Service{Faults: []sim.Fault{{Fail: 0.5}}},
		Fleet: sim.Fleet{Clients: 3, Options: func(sim.Client) []retry.Option { return []retry.Option{budgetOff} },
			Observe: func(ctx context.Context, n int, err error) {
				c, ok := sim.CallOf(ctx)
				if !ok {
					t.Errorf("attempt %d: no call in its context", n)
				}
				seen[c] = append(seen[c], n)
			}},
		Seed: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	attempts := 0
	for c, ns := range seen {
		attempts += len(ns)
		if c.Client != c.Index%3 || ns[0] != 1 || ns[len(ns)-1] != len(ns) {
			t.Errorf("call %+v: attempts %v", c, ns)
		}
	}
	if len(seen) != 20 || attempts != rep.Total.Attempts {
		t.Errorf("%d calls and %d attempts seen, want 20 and %d", len(seen), attempts, rep.Total.Attempts)
	}
	if _, ok := sim.CallOf(context.Background()); ok {
		t.Error("a call outside a run")
	}
}
