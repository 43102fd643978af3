package sim_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/sim"
)

// metastable is a quick setup of a service that can fail metastably:
// 35 requests a second (Poisson) for 70 s to 5 workers of 100 ms (a
// capacity of 50 a second) with a queue of 2 s of work; attempts time
// out after timeout and are served anyway; from 10 s to 15 s the service
// loses half its workers (kind capacity) or serves at half speed (kind
// slow).
func metastable(kind string, timeout time.Duration, opts ...retry.Option) sim.Scenario {
	f := sim.Fault{Start: 10 * time.Second, Length: 5 * time.Second, Capacity: 0.5}
	if kind == "slow" {
		f = sim.Fault{Start: 10 * time.Second, Length: 5 * time.Second, Slow: 2}
	}
	return sim.Scenario{
		Duration: 70 * time.Second,
		Load:     sim.Load{Rate: 35},
		Service: sim.Service{Workers: 5, ServiceTime: sim.Spread(100*time.Millisecond, 0.1), QueueLength: 100,
			Network: sim.Fixed(5 * time.Millisecond), Faults: []sim.Fault{f}},
		Fleet: sim.Fleet{Options: func(sim.Client) []retry.Option {
			return append([]retry.Option{retry.WithAttemptTimeout(timeout)}, opts...)
		}},
		Seed: 1,
	}
}

var budgetOff = retry.WithBudget(retry.Budget{Off: true})

// TestRunMetastable: without a defence, the retries of attempts that time
// out (the engine's own per-attempt timeout, on the virtual clock) keep
// the queue full after the trigger ends: no window recovers to the end of
// the run, 11 L later, and most of the work is wasted; the default budget
// recovers within 2 L. With a timeout longer than the queue's wait,
// nothing sustains itself.
func TestRunMetastable(t *testing.T) {
	cases := []struct {
		name       string
		s          sim.Scenario
		metastable bool
	}{
		{name: "capacity halved, no defence", s: metastable("capacity", time.Second, budgetOff), metastable: true},
		{name: "service time doubled, no defence", s: metastable("slow", time.Second, budgetOff), metastable: true},
		{name: "a timeout past the queue's wait, no defence", s: metastable("capacity", 3*time.Second, budgetOff)},
		{name: "capacity halved, the defaults", s: metastable("capacity", time.Second)},
		{name: "service time doubled, the defaults", s: metastable("slow", time.Second)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep, err := sim.Run(c.s)
			if err != nil {
				t.Fatal(err)
			}
			f := rep.Total
			t.Logf("goodput %.1f / %.1f / %.1f, %.2f×, wasted %.0f%%, recovered %v after %v",
				f.Goodput.Before, f.Goodput.During, f.Goodput.After, f.Amplification(), 100*f.WastedShare(), f.Recovered, f.Recovery)
			if f.Goodput.Before < 0.85*35 {
				t.Errorf("goodput before the trigger %.1f/s, want about 35", f.Goodput.Before)
			}
			if c.metastable {
				if f.Recovered || f.Goodput.After > 0.05*35 || f.Amplification() < 2.3 || f.WastedShare() < 0.5 {
					t.Errorf("recovered %v, goodput after %.1f/s, %.2f×, wasted %.0f%%: want down to the end, near 3 attempts a request, most work wasted",
						f.Recovered, f.Goodput.After, f.Amplification(), 100*f.WastedShare())
				}
				if n := f.Failed[retry.ReasonExhausted.String()]; n == 0 {
					t.Errorf("failed %v, want calls exhausted by timeouts", f.Failed)
				}
				return
			}
			if !f.Recovered || f.Recovery > 10*time.Second || f.Goodput.After < 0.85*35 {
				t.Errorf("recovered %v after %v, goodput after %.1f/s: want within 2 L (10s), about 35/s", f.Recovered, f.Recovery, f.Goodput.After)
			}
		})
	}
}

// TestRunDeterministic: the same scenario and seed give the same report,
// hedges, timeouts and a fleet included; another seed, other draws.
func TestRunDeterministic(t *testing.T) {
	s := metastable("capacity", time.Second, retry.WithHedge(retry.Hedge{}))
	s.Fleet.Clients = 7
	s.Fleet.Weights = []float64{1, 2, 3, 4, 5, 6, 70}
	a, err := sim.Run(s)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := sim.Run(s)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("two runs of one scenario differ:\n%+v\n%+v", a.Total, b.Total)
	}
	s.Seed = 2
	if c, _ := sim.Run(s); reflect.DeepEqual(a.Total, c.Total) {
		t.Errorf("seeds 1 and 2 gave the same figures")
	}
	if a.Stats[6].Hedges == 0 {
		t.Errorf("no hedge: %+v", a.Stats[6])
	}
}

// TestRunClients: each client's figures add up to the fleet's, and the
// load splits by weight.
func TestRunClients(t *testing.T) {
	s := metastable("capacity", time.Second)
	s.Fleet.Clients = 3
	s.Fleet.Weights = []float64{1, 1, 98}
	rep, err := sim.Run(s)
	if err != nil {
		t.Fatal(err)
	}
	var sum sim.Figures
	failed := map[string]int{}
	for _, c := range rep.Clients {
		sum.Requests += c.Requests
		sum.Succeeded += c.Succeeded
		sum.Unfinished += c.Unfinished
		sum.Attempts += c.Attempts
		sum.Errors += c.Errors
		sum.Work += c.Work
		sum.Wasted += c.Wasted
		for k, v := range c.Failed {
			failed[k] += v
		}
	}
	tot := rep.Total
	if sum.Requests != tot.Requests || sum.Succeeded != tot.Succeeded || sum.Unfinished != tot.Unfinished || sum.Attempts != tot.Attempts ||
		sum.Errors != tot.Errors || sum.Work != tot.Work || sum.Wasted != tot.Wasted || !reflect.DeepEqual(failed, tot.Failed) {
		t.Errorf("clients add up to %+v (failed %v), total %+v", sum, failed, tot)
	}
	if n := float64(rep.Clients[2].Requests) / float64(tot.Requests); n < 0.96 || n > 0.995 {
		t.Errorf("client 2 made %.1f%% of the requests, want about 98%%", 100*n)
	}
	if len(rep.Stats) != 3 {
		t.Errorf("%d stats, want one per client", len(rep.Stats))
	}
}

// TestRunFaults: an outage fails every attempt in it at once with 503; a
// half recovery about half of them; a hang never answers, so the engine's
// attempt timeout ends each; a spike slows the service.
func TestRunFaults(t *testing.T) {
	base := func(f sim.Fault, opts ...retry.Option) sim.Scenario {
		return sim.Scenario{Duration: 20 * time.Second, Drain: time.Minute, Load: sim.Load{Rate: 50, Steady: true},
			Service: sim.Service{Network: sim.Fixed(time.Millisecond), ServiceTime: sim.Fixed(10 * time.Millisecond), Faults: []sim.Fault{f}},
			Fleet:   sim.Fleet{Options: func(sim.Client) []retry.Option { return append([]retry.Option{budgetOff}, opts...) }}, Seed: 1}
	}
	cases := []struct {
		name  string
		s     sim.Scenario
		check func(t *testing.T, r *sim.Report)
	}{
		{name: "outage", s: base(sim.Fault{Start: 5 * time.Second, Length: 5 * time.Second, Fail: 1}), check: func(t *testing.T, r *sim.Report) {
			f := r.Total
			if f.FaultRequests != 250 || f.FaultAttempts < 500 || f.Errors < f.FaultAttempts || f.Succeeded < 750 {
				t.Errorf("%d requests in the outage, %d attempts in it, %d errors, %d succeeded", f.FaultRequests, f.FaultAttempts, f.Errors, f.Succeeded)
			}
		}},
		{name: "half recovery", s: base(sim.Fault{Fail: 0.5}, retry.WithPolicy(retry.Policy{MaxAttempts: 1})), check: func(t *testing.T, r *sim.Report) {
			if share := float64(r.Total.Succeeded) / float64(r.Total.Requests); share < 0.45 || share > 0.55 {
				t.Errorf("%.1f%% succeeded in one attempt, want about half", 100*share)
			}
		}},
		{name: "hang", s: base(sim.Fault{Start: 5 * time.Second, Length: 5 * time.Second, Fail: 1, Hang: true},
			retry.WithAttemptTimeout(300*time.Millisecond), retry.WithPolicy(retry.Policy{MaxAttempts: 1})), check: func(t *testing.T, r *sim.Report) {
			if n := r.Total.Failed[retry.ReasonExhausted.String()]; n != 250 || r.Total.Unfinished != 0 {
				t.Errorf("failed %v, %d unfinished; want the 250 calls of the hang exhausted", r.Total.Failed, r.Total.Unfinished)
			}
			if worst := r.Latency(1); worst != 300*time.Millisecond {
				t.Errorf("slowest call %v, want the attempt timeout, 300ms", worst)
			}
		}},
		{name: "spike", s: base(sim.Fault{Slow: 10}), check: func(t *testing.T, r *sim.Report) {
			if got, want := r.Latency(0.5), 102*time.Millisecond; got != want {
				t.Errorf("median latency %v, want %v (10 × 10ms, and the network)", got, want)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := sim.Run(c.s)
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, r)
		})
	}
}

// TestRunAttemptTimeout: the engine's per-attempt timeout runs on the
// virtual clock: an attempt's context has a deadline on it and ends with
// context.DeadlineExceeded, and the call's three attempts and its backoff
// take their time in virtual time, not in real time (without a budget,
// which would keep the second timeout's retry for successes to earn).
func TestRunAttemptTimeout(t *testing.T) {
	var deadlines []time.Duration
	var errs []error
	start := time.Now()
	rep, err := sim.Run(sim.Scenario{
		Duration: time.Second, Drain: time.Minute, Load: sim.Load{Rate: 1, Steady: true},
		Service: sim.Service{ServiceTime: sim.Fixed(time.Hour)},
		Fleet: sim.Fleet{
			Options: func(c sim.Client) []retry.Option {
				return []retry.Option{budgetOff, retry.WithAttemptTimeout(2 * time.Second), retry.WithPolicy(retry.Policy{Jitter: retry.Jitter{Kind: retry.JitterNone}})}
			},
			Observe: func(ctx context.Context, n int, err error) {
				dl, _ := ctx.Deadline()
				deadlines = append(deadlines, dl.Sub(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)))
				errs = append(errs, err)
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Attempts at 0s, 3s (after 2s and a 1s wait) and 7s (2s, a 2s wait).
	if want := []time.Duration{2 * time.Second, 5 * time.Second, 9 * time.Second}; !reflect.DeepEqual(deadlines, want) {
		t.Errorf("the attempts' deadlines %v, want %v", deadlines, want)
	}
	for _, e := range errs {
		if !errors.Is(e, context.DeadlineExceeded) {
			t.Errorf("attempt ended with %v, want context.DeadlineExceeded", e)
		}
	}
	if got := rep.Latency(1); got != 9*time.Second || time.Since(start) > 5*time.Second {
		t.Errorf("the call took %v of virtual time (%v of real time), want 9s", got, time.Since(start))
	}
	if rep.Total.Work != 3*time.Hour || rep.Total.Wasted != rep.Total.Work {
		t.Errorf("work %v, wasted %v; want 3h of work (the service goes on for callers gone), all wasted", rep.Total.Work, rep.Total.Wasted)
	}
}

// TestRunAll: RunAll gives each scenario the report Run gives it, in the
// scenarios' order, and calls done once a run; a scenario that cannot run
// is refused before any runs, with its InputError; a run's error comes
// back joined.
func TestRunAll(t *testing.T) {
	var scenarios []sim.Scenario
	for seed := range uint64(5) {
		s := metastable("capacity", time.Second)
		s.Duration, s.Seed = 20*time.Second, seed
		scenarios = append(scenarios, s)
	}
	done := 0
	reps, err := sim.RunAll(scenarios, func() { done++ })
	if err != nil || len(reps) != len(scenarios) || done != len(scenarios) {
		t.Fatalf("%d reports, %d calls of done, %v; want %d and %d, no error", len(reps), done, err, len(scenarios), len(scenarios))
	}
	for i, s := range scenarios {
		if one := run(t, s); !reflect.DeepEqual(one.Total, reps[i].Total) {
			t.Errorf("scenario %d: RunAll's figures are not Run's:\n%+v\n%+v", i, reps[i].Total, one.Total)
		}
	}
	ran := 0
	bad := append(scenarios[:1:1], sim.Scenario{Duration: time.Minute, Load: sim.Load{Rate: -5}})
	_, err = sim.RunAll(bad, func() { ran++ })
	var in *sim.InputError
	if !errors.As(err, &in) || in.Field != "Load.Rate" || in.Value != -5.0 || in.Rule != "must be in [0, 1e7] requests per second" || ran != 0 {
		t.Errorf("a negative rate: %v (%+v), %d runs; want its InputError and none run", err, in, ran)
	}
	failing := scenarios[0]
	failing.Fleet.Options = func(sim.Client) []retry.Option { return []retry.Option{retry.WithHedge(retry.Hedge{Max: -1})} }
	if _, err := sim.RunAll([]sim.Scenario{scenarios[0], failing}, nil); err == nil || errors.As(err, &in) {
		t.Errorf("a client's bad option: %v, want the option's error", err)
	}
}
