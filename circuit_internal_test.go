package retry

import (
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
