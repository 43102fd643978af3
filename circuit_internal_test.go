package retry

import (
	"sync"
	"testing"
	"time"
)

// TestCircuit steps one circuit through fixed instants: each step asks it
// to let an attempt through at a time, or reports an outcome of the
// generation an earlier step was given, and checks the state after.
func TestCircuit(t *testing.T) {
	spec := Breaker{FailureRatio: 0.5, MinRequests: 4, Window: 10 * time.Second, OpenTimeout: 30 * time.Second, Probes: 2}
	const closed, half, open = BreakerClosed, BreakerHalfOpen, BreakerOpen
	t0 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	ok, fail, left := error(nil), errBreakerFailure, errBreakerExcluded
	type step struct {
		at      time.Duration // since t0
		allow   bool          // ask to let an attempt through (else: report outcome of attempt #of)
		refused bool          // want the ask refused
		wait    time.Duration // want this wait when refused
		of      int           // the allow step whose attempt this outcome is for
		outcome error
		state   string // the state after the step; "" leaves it unchecked
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "trips at the ratio once MinRequests are counted", steps: []step{
			{at: 0, allow: true, state: closed},
			{at: 0, allow: true, state: closed},
			{at: 0, allow: true, state: closed},
			{at: 0, allow: true, state: closed},
			{at: time.Second, of: 0, outcome: fail, state: closed},
			{at: time.Second, of: 1, outcome: ok, state: closed},
			{at: time.Second, of: 2, outcome: fail, state: closed}, // 3 counted: below MinRequests
			{at: time.Second, of: 3, outcome: ok, state: closed},   // 2 of 4 failed, but only a failure trips
			{at: 2 * time.Second, allow: true, state: closed},
			{at: 2 * time.Second, of: 8, outcome: fail, state: open}, // 3 of 5
			{at: 3 * time.Second, allow: true, refused: true, wait: 29 * time.Second, state: open},
		}},
		{name: "excluded outcomes are not counted", steps: []step{
			{at: 0, allow: true}, {at: 0, allow: true}, {at: 0, allow: true}, {at: 0, allow: true},
			{at: 0, of: 0, outcome: left, state: closed},
			{at: 0, of: 1, outcome: fail, state: closed},
			{at: 0, of: 2, outcome: fail, state: closed},
			{at: 0, of: 3, outcome: fail, state: closed}, // 3 counted
		}},
		{name: "the window slides: old failures drop out", steps: []step{
			{at: 0, allow: true}, {at: 0, allow: true}, {at: 0, allow: true},
			{at: 0, of: 0, outcome: fail}, {at: 0, of: 1, outcome: fail}, {at: 0, of: 2, outcome: fail, state: closed},
			{at: 11 * time.Second, allow: true},
			{at: 11 * time.Second, of: 6, outcome: fail, state: closed}, // the three are out of the window
		}},
		{name: "open, then half-open at OpenTimeout, Probes successes close", steps: []step{
			{at: 0, allow: true}, {at: 0, allow: true}, {at: 0, allow: true}, {at: 0, allow: true},
			{at: 0, of: 0, outcome: fail}, {at: 0, of: 1, outcome: fail}, {at: 0, of: 2, outcome: fail}, {at: 0, of: 3, outcome: fail, state: open},
			{at: 30*time.Second - 1, allow: true, refused: true, wait: 1, state: open},
			{at: 30 * time.Second, allow: true, state: half},
			{at: 30 * time.Second, allow: true, state: half},
			{at: 30 * time.Second, allow: true, refused: true, wait: 0, state: half}, // both probes in flight
			{at: 31 * time.Second, of: 9, outcome: ok, state: half},
			{at: 31 * time.Second, of: 10, outcome: ok, state: closed},
		}},
		{name: "a failed probe opens it again; a late outcome of an old generation is dropped", steps: []step{
			{at: 0, allow: true}, {at: 0, allow: true}, {at: 0, allow: true}, {at: 0, allow: true}, {at: 0, allow: true},
			{at: 0, of: 0, outcome: fail}, {at: 0, of: 1, outcome: fail}, {at: 0, of: 2, outcome: fail}, {at: 0, of: 3, outcome: fail, state: open},
			{at: 30 * time.Second, allow: true, state: half},
			{at: 30 * time.Second, of: 4, outcome: ok, state: half}, // from the closed generation
			{at: 31 * time.Second, of: 9, outcome: fail, state: open},
			{at: 32 * time.Second, allow: true, refused: true, wait: 29 * time.Second, state: open},
		}},
		{name: "an excluded probe frees its place", steps: []step{
			{at: 0, allow: true}, {at: 0, allow: true}, {at: 0, allow: true}, {at: 0, allow: true},
			{at: 0, of: 0, outcome: fail}, {at: 0, of: 1, outcome: fail}, {at: 0, of: 2, outcome: fail}, {at: 0, of: 3, outcome: fail, state: open},
			{at: 30 * time.Second, allow: true}, {at: 30 * time.Second, allow: true},
			{at: 30 * time.Second, allow: true, refused: true},
			{at: 30 * time.Second, of: 8, outcome: left, state: half},
			{at: 30 * time.Second, allow: true, state: half},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c circuit
			gens := map[int]uint64{}
			for i, s := range tt.steps {
				now := t0.Add(s.at)
				if s.allow {
					gen, ok, wait, _ := c.allow(now, &spec)
					gens[i] = gen
					if ok == s.refused || (s.refused && wait != s.wait) {
						t.Fatalf("step %d: allow = %v, wait %v; want refused %v, wait %v", i, ok, wait, s.refused, s.wait)
					}
				} else {
					gen, found := gens[s.of]
					if !found {
						t.Fatalf("step %d: no allow at step %d", i, s.of)
					}
					c.done(gen, s.outcome, now, &spec)
				}
				if st, _ := c.current(now); s.state != "" && st.String() != s.state {
					t.Fatalf("step %d: state %v, want %v", i, st, s.state)
				}
			}
		})
	}
}

// TestCircuitClosedSuccesses: a closed circuit lets attempts through and
// counts their successes without its lock or the clock; they reach the
// window at the next reading of the clock, spread evenly over the time
// since the reading before, those the window no longer covers left out.
func TestCircuitClosedSuccesses(t *testing.T) {
	spec := Breaker{FailureRatio: 0.5, MinRequests: 4, Window: 10 * time.Second, OpenTimeout: 30 * time.Second, Probes: 1}
	t0 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		successes int           // counted without the lock after a reading at t0
		failAt    time.Duration // then one failure, the next reading
		wantOK    int64         // successes in the window after it
		wantState string
	}{
		{name: "all in the window", successes: 3, failAt: time.Second, wantOK: 3, wantState: BreakerClosed},
		{name: "the same instant", successes: 3, failAt: 0, wantOK: 3, wantState: BreakerClosed},
		{name: "half the spell is out of the window", successes: 10, failAt: 20500 * time.Millisecond, wantOK: 5, wantState: BreakerClosed}, // 9.5 s of 20.5 s in the window's slices
		{name: "long ago: almost none left", successes: 100, failAt: 1000 * time.Second, wantOK: 1, wantState: BreakerClosed},               // 9 s of 1000 s
		{name: "none left: the failure alone is below MinRequests", successes: 2, failAt: time.Hour, wantOK: 0, wantState: BreakerClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c circuit
			if _, ok, _, _ := c.allow(t0, &spec); !ok { // read under the lock: closed, published
				t.Fatal("a new circuit refused an attempt")
			}
			gen, ok := c.closed()
			if !ok {
				t.Fatal("a closed circuit read under its lock is not published")
			}
			for range tt.successes {
				if !c.succeeded(gen) {
					t.Fatal("a success of the closed generation was not counted")
				}
			}
			now := t0.Add(tt.failAt)
			c.done(gen, errBreakerFailure, now, &spec)
			c.mu.Lock()
			ok0, failed := c.counts(now, &spec)
			c.mu.Unlock()
			if ok0 != tt.wantOK || failed != 1 {
				t.Errorf("counts %d ok, %d failed; want %d ok, 1 failed", ok0, failed, tt.wantOK)
			}
			if st, _ := c.current(now); st.String() != tt.wantState {
				t.Errorf("state %v, want %v", st, tt.wantState)
			}
		})
	}
	t.Run("a late success of an old generation is dropped", func(t *testing.T) {
		var c circuit
		c.allow(t0, &spec)
		gen, _ := c.closed()
		for range 4 {
			c.done(gen, errBreakerFailure, t0, &spec)
		}
		if _, ok := c.closed(); ok {
			t.Fatal("a tripped circuit still lets attempts through without its lock")
		}
		if c.succeeded(gen) {
			t.Error("a success of the closed generation was counted once the circuit opened")
		}
	})
	t.Run("successes from many goroutines are counted whichever stripe each took", func(t *testing.T) {
		var c circuit
		c.allow(t0, &spec)
		gen, _ := c.closed()
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 100 {
					c.succeeded(gen)
				}
			})
		}
		wg.Wait()
		c.done(gen, errBreakerFailure, t0.Add(time.Second), &spec)
		c.mu.Lock()
		ok, _ := c.counts(t0.Add(time.Second), &spec)
		c.mu.Unlock()
		if ok != 800 {
			t.Errorf("%d successes in the window, want 800", ok)
		}
	})
}
