package sim_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/shed"
	"github.com/steadyhq/retry/sim"
)

// overload is 150 requests a second, steady, for 30 s, to 10 workers of
// 100 ms (a capacity of 100 a second) with a queue of 0.5 s of work;
// attempts time out after 1 s; clients retry at most once.
func overload() sim.Scenario {
	return sim.Scenario{
		Duration: 30 * time.Second, Drain: 10 * time.Second,
		Load:    sim.Load{Rate: 150, Steady: true},
		Service: sim.Service{Workers: 10, ServiceTime: sim.Fixed(100 * time.Millisecond), QueueLength: 50, Network: sim.Fixed(5 * time.Millisecond)},
		Fleet: sim.Fleet{Options: func(sim.Client) []retry.Option {
			return []retry.Option{budgetOff, retry.WithAttemptTimeout(time.Second), retry.WithPolicy(retry.Policy{MaxAttempts: 2})}
		}},
		Seed: 1,
	}
}

// TestServiceRefusals: a full queue refuses with 503 at once ("queue
// full"); a bound on the wait refuses what would wait longer ("queue
// wait"); a refusal's cost takes workers' time from the attempts
// admitted.
func TestServiceRefusals(t *testing.T) {
	free, err := sim.Run(overload())
	if err != nil {
		t.Fatal(err)
	}
	costly := overload()
	costly.Service.RefusalCost = 20 * time.Millisecond
	paid, err := sim.Run(costly)
	if err != nil {
		t.Fatal(err)
	}
	bounded := overload()
	bounded.Service.QueueLength, bounded.Service.QueueWait = 0, 300*time.Millisecond
	bounded.Fleet.Options = func(sim.Client) []retry.Option { return []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 1})} }
	waited, err := sim.Run(bounded)
	if err != nil {
		t.Fatal(err)
	}
	if n := free.Total.Refused["queue full"]; n == 0 || n > free.Total.Errors {
		t.Errorf("refused %v, %d errors; want queue full", free.Total.Refused, free.Total.Errors)
	}
	t.Logf("%d calls succeeded with a cost of refusals, %d without", paid.Total.Succeeded, free.Total.Succeeded)
	if paid.Total.Succeeded >= free.Total.Succeeded-100 {
		t.Errorf("%d calls succeeded with a cost of refusals, %d without: want far fewer", paid.Total.Succeeded, free.Total.Succeeded)
	}
	if n := waited.Total.Refused["queue wait"]; n == 0 || waited.Total.Refused["queue full"] != 0 || waited.Latency(1) > 410*time.Millisecond {
		t.Errorf("refused %v, slowest call %v; want refusals for the wait only, and no call waiting past the bound (at most 410ms)", waited.Total.Refused, waited.Latency(1))
	}
}

// TestServiceShed: the real shedder in front of the workers, in virtual
// time: it admits what its limit allows, queues first attempts for a
// while, sheds retries first, and tells each refused attempt when to come
// back; the engine waits at least that.
func TestServiceShed(t *testing.T) {
	s := overload()
	s.Service.Shed = &shed.Options{Initial: 10, MaxRetryAfter: 4 * time.Second}
	var hints int
	s.Fleet.Observe = func(_ context.Context, n int, err error) {
		if se := (*retry.StatusError)(nil); errors.As(err, &se) && se.RetryAfter > 0 {
			hints++
		}
	}
	rep, err := sim.Run(s)
	if err != nil {
		t.Fatal(err)
	}
	shedded := 0
	for why, n := range rep.Total.Refused {
		if strings.HasPrefix(why, "shed: ") {
			shedded += n
		}
	}
	t.Logf("refused %v; %d of %d calls succeeded, %.2f×", rep.Total.Refused, rep.Total.Succeeded, rep.Total.Requests, rep.Total.Amplification())
	if shedded == 0 || hints < shedded || rep.Total.Refused["queue full"] != 0 {
		t.Errorf("refused %v, %d with a Retry-After; want every refusal shed's, each with one", rep.Total.Refused, hints)
	}
	if rep.Total.Succeeded < 2500 {
		t.Errorf("%d calls succeeded, want about the capacity's 3000", rep.Total.Succeeded)
	}
	again, _ := sim.Run(s)
	if again.Total.Succeeded != rep.Total.Succeeded || again.Total.Attempts != rep.Total.Attempts {
		t.Errorf("two runs with shed differ: %+v, %+v", again.Total, rep.Total)
	}
}

// TestServiceConflicts: under optimistic concurrency, 50 clients that
// each write once at the same instant all get through with full jitter,
// in more writes than clients.
func TestServiceConflicts(t *testing.T) {
	rep, err := sim.Run(sim.Scenario{
		Duration: time.Millisecond, Drain: time.Hour,
		Load:    sim.Load{Bursts: []sim.Burst{{Calls: 1}}},
		Service: sim.Service{Conflicts: true, Network: sim.Normal(10*time.Millisecond, 2*time.Millisecond)},
		Fleet: sim.Fleet{Clients: 50, Options: func(sim.Client) []retry.Option {
			return []retry.Option{budgetOff, retry.WithPolicy(retry.Policy{MaxAttempts: 1000, InitialInterval: 10 * time.Millisecond,
				MaxInterval: 2 * time.Second, Jitter: retry.Jitter{Kind: retry.JitterFull}})}
		}},
		Seed: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	f := rep.Total
	if f.Requests != 50 || f.Succeeded != 50 || f.Attempts <= 50 || f.Errors != f.Attempts-50 {
		t.Errorf("%d of %d calls succeeded in %d writes, %d conflicts; want all 50, each conflict a write that failed", f.Succeeded, f.Requests, f.Attempts, f.Errors)
	}
}
