package retry_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry"
)

// memStore is an in-memory retry.BreakerStore standing for a store that
// several processes share, with the rules of the Redis one (its window
// never slides: the tests stay within it). down makes Sync fail; slow
// makes it wait for its context.
type memStore struct {
	interval time.Duration
	mu       sync.Mutex
	fleet    map[string]*memBreaker
	down     bool
	slow     bool
	delay    time.Duration // each Sync answers after it
	syncs    atomic.Int64
	claims   atomic.Int64
}

type memBreaker struct {
	state               string
	gen                 uint64
	until               time.Time
	successes, failures uint64
	claimed, ok         uint32
}

var errStoreDown = errors.New("store down")

func newMemStore(interval time.Duration) *memStore {
	return &memStore{interval: interval, fleet: make(map[string]*memBreaker)}
}

func (s *memStore) SyncInterval() time.Duration { return s.interval }

func (s *memStore) Sync(ctx context.Context, b retry.Breaker, in []retry.BreakerSync) ([]retry.BreakerFleet, error) {
	s.syncs.Add(1)
	s.mu.Lock()
	down, slow, delay := s.down, s.slow, s.delay
	s.mu.Unlock()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	if slow {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if down {
		return nil, errStoreDown
	}
	out := make([]retry.BreakerFleet, len(in))
	for i, e := range in {
		out[i] = s.sync(b, e)
	}
	return out, nil
}

// sync applies one breaker's sync, as the Redis store's script does.
func (s *memStore) sync(b retry.Breaker, in retry.BreakerSync) retry.BreakerFleet {
	if in.Claim {
		s.claims.Add(1)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.fleet[in.Name]
	if f == nil {
		f = &memBreaker{state: retry.BreakerClosed}
		s.fleet[in.Name] = f
	}
	now := time.Now()
	open := func() {
		*f = memBreaker{state: retry.BreakerOpen, gen: f.gen + 1, until: now.Add(b.OpenTimeout)}
	}
	if f.state == retry.BreakerOpen && !now.Before(f.until) {
		*f = memBreaker{state: retry.BreakerHalfOpen, gen: f.gen + 1, until: f.until}
	}
	if in.Generation == f.gen {
		switch f.state {
		case retry.BreakerClosed:
			f.successes += in.Successes
			f.failures += in.Failures
			n := f.successes + f.failures
			if n > 0 && n >= uint64(b.MinRequests) && float64(f.failures) >= b.FailureRatio*float64(n) {
				open()
			}
		case retry.BreakerHalfOpen:
			f.claimed -= min(f.claimed, in.ProbeReleases)
			f.ok += in.ProbeSuccesses
			switch {
			case in.ProbeFailures > 0:
				open()
			case f.ok >= b.Probes:
				*f = memBreaker{state: retry.BreakerClosed, gen: f.gen + 1}
			}
		}
	}
	out := retry.BreakerFleet{State: f.state, Generation: f.gen}
	if f.state == retry.BreakerOpen {
		out.OpenFor = f.until.Sub(now)
	}
	if in.Claim && f.state == retry.BreakerHalfOpen && f.claimed < b.Probes {
		f.claimed++
		out.Claimed = true
	}
	return out
}

func (s *memStore) set(down, slow bool) {
	s.mu.Lock()
	s.down, s.slow = down, slow
	s.mu.Unlock()
}

func (s *memStore) state(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.fleet[name]; f != nil {
		return f.state
	}
	return retry.BreakerClosed
}

// fleet builds n Retriers sharing store, one attempt per call.
func fleet(n int, store retry.BreakerStore, spec retry.Breaker, opts ...retry.Option) []*retry.Retrier {
	spec.Store = store
	rs := make([]*retry.Retrier, n)
	for i := range rs {
		rs[i] = retry.New(append([]retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 1}), retry.WithBreaker(spec)}, opts...)...)
	}
	return rs
}

func succeed(context.Context) error { return nil }
func failing(context.Context) error { return errTransient }

// TestSharedBreakerLocalDecisions: calls in the closed state never wait on
// the store: 3 Retriers × 1,000 calls over 100 intervals make about one
// Sync per Retrier per interval, where a store consulted per call (the
// design of gobreaker's DistributedCircuitBreaker) makes two per call.
func TestSharedBreakerLocalDecisions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 10 * time.Millisecond
		store := newMemStore(interval)
		rs := fleet(3, store, retry.Breaker{MinRequests: 10, FailureRatio: 0.5})
		for range 1000 {
			for _, r := range rs {
				if err := r.Run(t.Context(), succeed); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(interval / 10)
		}
		synctest.Wait()
		if n := store.syncs.Load(); n < 3*90 || n > 3*102 {
			t.Errorf("%d Syncs for 3,000 calls over 100 intervals, want about 300", n)
		}
		store.mu.Lock()
		defer store.mu.Unlock()
		if f := store.fleet[""]; f.successes < 2960 {
			t.Errorf("the fleet counted %d successes, want about 3,000 but the last interval's", f.successes)
		}
	})
}

// TestSharedBreakerOpensForAll: failures spread over the fleet, none
// enough alone, trip it on their sum; every Retrier sees it open within
// two intervals, is refused without an attempt until the same instant,
// and after it Probes attempts go through fleet-wide; their outcome closes
// or reopens the breaker for all.
func TestSharedBreakerOpensForAll(t *testing.T) {
	tests := []struct {
		name   string
		probes uint32
		probe  error // the probes' outcome
		want   string
	}{
		{name: "one probe succeeds", probes: 1, want: retry.BreakerClosed},
		{name: "three probes succeed", probes: 3, want: retry.BreakerClosed},
		{name: "the probe fails", probes: 1, probe: errTransient, want: retry.BreakerOpen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const interval = 10 * time.Millisecond
				store := newMemStore(interval)
				spec := retry.Breaker{MinRequests: 9, FailureRatio: 1, OpenTimeout: time.Second, Probes: tt.probes, MaxWait: 1500 * time.Millisecond}
				rs := fleet(3, store, spec)
				for range 3 {
					for _, r := range rs {
						_ = r.Run(t.Context(), failing)
					}
				}
				// Each Retrier's calls sync: the first sync sends the
				// counts, the next sees the trip. These calls' own
				// outcomes (Permanent) are left out of the counts.
				tripped := time.Now()
				for time.Since(tripped) < 2*interval {
					time.Sleep(interval / 2)
					for _, r := range rs {
						_ = retry.Run(t.Context(), func(context.Context) error { return retry.Permanent(errTransient) }, r, retry.WithMaxElapsed(time.Millisecond))
					}
				}
				synctest.Wait() // the last round trips' replies
				for i, r := range rs {
					err := retry.Run(t.Context(), succeed, r, retry.WithMaxElapsed(time.Millisecond))
					var re *retry.Error
					if !errors.As(err, &re) || re.Reason != retry.ReasonBreakerOpen || re.Attempts != 0 {
						t.Fatalf("Retrier %d two intervals after the fleet's 9 failures: %v, want breaker_open with no attempt", i, err)
					}
				}
				if store.state("") != retry.BreakerOpen {
					t.Fatalf("the store's breaker is %v, want open", store.state(""))
				}
				store.mu.Lock()
				until := store.fleet[""].until
				store.mu.Unlock()
				// Four waiters on each Retrier wake at the instant the
				// fleet's open time ends; Probes of them run, each for
				// 50 ms, before any other attempt.
				var mu sync.Mutex
				var starts []time.Time
				var wg sync.WaitGroup
				for _, r := range rs {
					for range 4 {
						wg.Go(func() {
							_ = r.Run(t.Context(), func(context.Context) error {
								mu.Lock()
								starts = append(starts, time.Now())
								mu.Unlock()
								time.Sleep(50 * time.Millisecond)
								return tt.probe
							})
						})
					}
				}
				wg.Wait()
				probes := 0
				for _, at := range starts {
					if at.Before(until) {
						t.Errorf("an attempt at %v, before the open time ended at %v", at, until)
					}
					if at.Before(until.Add(50 * time.Millisecond)) {
						probes++
						if at.Sub(until) > time.Microsecond {
							t.Errorf("a probe at %v, want at the end of the open time, %v", at.Sub(until), until)
						}
					}
				}
				if probes != int(tt.probes) {
					t.Errorf("%d attempts while the probes ran, want %d (of %d in all)", probes, tt.probes, len(starts))
				}
				if got := store.state(""); got != tt.want {
					t.Errorf("the store's breaker is %v after the probes, want %v", got, tt.want)
				}
				time.Sleep(2 * interval)
				for i, r := range rs {
					_ = retry.Run(t.Context(), succeed, r, retry.WithMaxElapsed(time.Millisecond))
					time.Sleep(interval)
					_ = retry.Run(t.Context(), succeed, r, retry.WithMaxElapsed(time.Millisecond))
					if got := r.Stats().Breakers[""]; got != tt.want {
						t.Errorf("Retrier %d sees %v, want %v", i, got, tt.want)
					}
				}
			})
		})
	}
}

// TestSharedBreakerFallback: with the store down or slow, calls are decided
// by the local breaker after at most StoreWait, counted in
// Stats.BreakerFallbacks, none held past its deadline; when the store
// answers again, the fleet's state decides once more.
func TestSharedBreakerFallback(t *testing.T) {
	tests := []struct {
		name       string
		down, slow bool
		maxHeld    time.Duration // how long one call may wait for the store
	}{
		{name: "down", down: true},
		{name: "slow", slow: true, maxHeld: 10 * time.Millisecond}, // half the deadline
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const interval = 10 * time.Millisecond
				store := newMemStore(interval)
				rs := fleet(1, store, retry.Breaker{MinRequests: 3, FailureRatio: 0.5, OpenTimeout: time.Minute, StoreWait: 50 * time.Millisecond})
				r := rs[0]
				_ = r.Run(t.Context(), succeed)
				synctest.Wait()
				store.set(tt.down, tt.slow)
				time.Sleep(3 * interval) // the view is stale
				for i := range 3 {
					start := time.Now()
					ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
					err := r.Run(ctx, failing)
					cancel()
					held := time.Since(start)
					if held > tt.maxHeld {
						t.Errorf("call %d held %v, want at most %v", i, held, tt.maxHeld)
					}
					var re *retry.Error
					if !errors.As(err, &re) || (re.Reason != retry.ReasonExhausted && re.Reason != retry.ReasonBreakerOpen) {
						t.Errorf("call %d: %v", i, err)
					}
				}
				s := r.Stats()
				if s.BreakerFallbacks == 0 {
					t.Errorf("no fallbacks counted: %+v", s)
				}
				// The local breaker, told each outcome, is open.
				err := retry.Run(t.Context(), succeed, r, retry.WithMaxElapsed(time.Millisecond))
				var re *retry.Error
				if !errors.As(err, &re) || re.Reason != retry.ReasonBreakerOpen {
					t.Errorf("with the store %s after 3 failures: %v, want the local breaker open", tt.name, err)
				}
				store.set(false, false)
				synctest.Wait()
				time.Sleep(3 * interval)
				_ = retry.Run(t.Context(), succeed, r, retry.WithMaxElapsed(time.Millisecond))
				synctest.Wait()
				before := r.Stats().BreakerFallbacks
				if err := r.Run(t.Context(), succeed); err != nil {
					t.Errorf("with the store back (closed for the fleet): %v", err)
				}
				if after := r.Stats().BreakerFallbacks; after != before {
					t.Errorf("fallbacks %d → %d with the store back", before, after)
				}
			})
		})
	}
}

// TestSharedBreakerExclusions: outcomes the breaker leaves out (the
// caller's cancellation, Permanent errors) never reach the fleet's
// counts, and a panic is counted as a failure and goes on.
func TestSharedBreakerExclusions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 10 * time.Millisecond
		store := newMemStore(interval)
		rs := fleet(1, store, retry.Breaker{MinRequests: 100, FailureRatio: 0.5})
		r := rs[0]
		for range 5 {
			_ = r.Run(t.Context(), func(context.Context) error { return retry.Permanent(errTransient) })
			ctx, cancel := context.WithCancel(t.Context())
			_ = r.Run(ctx, func(context.Context) error { cancel(); return context.Canceled })
		}
		func() {
			defer func() {
				if p := recover(); p != "boom" {
					t.Fatalf("recovered %v, want boom", p)
				}
			}()
			_ = r.Run(t.Context(), func(context.Context) error { panic("boom") })
		}()
		time.Sleep(2 * interval) // the timer sends the counts
		synctest.Wait()
		store.mu.Lock()
		f := *store.fleet[""]
		store.mu.Unlock()
		if f.failures != 1 || f.successes != 0 {
			t.Errorf("the fleet counted %d failures and %d successes, want only the panic's failure", f.failures, f.successes)
		}
	})
}

// TestBreakersOnFleet: Stats.BreakersOnFleet is nil without a
// Breaker.Store; with one it says, per breaker, whether the fleet's state
// made the last decision, and Stats.Breakers gives the state of the
// breaker that decided: the fleet's while the store answers, the
// process's own while it fails.
func TestBreakersOnFleet(t *testing.T) {
	if st := retry.New(retry.WithBreaker(retry.Breaker{})).Stats(); st.BreakersOnFleet != nil {
		t.Errorf("without a Store: BreakersOnFleet %v, want nil", st.BreakersOnFleet)
	}
	// Virtual time: the polls below cannot run out of time on a loaded machine.
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore(5 * time.Millisecond)
		// Each process fails 4 calls of the 8 MinRequests: the fleet opens
		// on their sum, while each process's own breaker stays closed.
		spec := retry.Breaker{MinRequests: 8, OpenTimeout: time.Minute, StoreWait: 20 * time.Millisecond}
		rs := fleet(2, store, spec)
		fail := func(context.Context) error { return errTransient }
		// The calls that look: their outcomes (Permanent) are left out of
		// the counts.
		look := func(context.Context) error { return retry.Permanent(errTransient) }
		call := func(r *retry.Retrier, fn func(context.Context) error) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
			defer cancel()
			r.Run(ctx, fn)
		}
		tests := []struct {
			name    string
			down    bool
			fails   int // failing calls of each process first
			onFleet bool
			state   string
		}{
			{name: "store answers, fleet closed", onFleet: true, state: retry.BreakerClosed},
			{name: "store answers, fleet open", fails: 4, onFleet: true, state: retry.BreakerOpen},
			{name: "store down: the process's own breaker decides", down: true, onFleet: false, state: retry.BreakerClosed},
			{name: "store back: the fleet's state again", onFleet: true, state: retry.BreakerOpen},
		}
		for _, tt := range tests {
			// Steps in order, each on the state the one before left.
			func() {
				store.set(tt.down, false)
				for range tt.fails {
					for _, r := range rs {
						call(r, fail)
					}
				}
				var st retry.Stats
				deadline := time.Now().Add(time.Second)
				for {
					for _, r := range rs {
						call(r, look)
					}
					st = rs[0].Stats()
					if on, ok := st.BreakersOnFleet[""]; ok && on == tt.onFleet && st.Breakers[""] == tt.state {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s: BreakersOnFleet %v, Breakers %v; want on fleet %v, state %q", tt.name, st.BreakersOnFleet, st.Breakers, tt.onFleet, tt.state)
					}
					time.Sleep(time.Millisecond)
				}
			}()
		}
	})
}

// TestSharedBreakerProbeOutcomeKept: a probe's outcome that fails to reach
// the store (the store went down as the probe ran) is sent with the next
// sync that reaches it: the fleet's breaker closes, instead of staying
// half-open with its claim taken.
func TestSharedBreakerProbeOutcomeKept(t *testing.T) {
	// Virtual time: the fleet's breaker is open for 30 ms, a window a
	// loaded machine's scheduler could let the poll below miss.
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore(5 * time.Millisecond)
		spec := retry.Breaker{MinRequests: 2, FailureRatio: 1, OpenTimeout: 30 * time.Millisecond, Probes: 1, StoreWait: 50 * time.Millisecond}
		r := fleet(1, store, spec)[0]
		// A probe whose call's context ends is released, not a success.
		call := func(fn func(context.Context) error) {
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			defer cancel()
			r.Run(ctx, fn)
		}
		// look makes the syncs that carry the counts; it gives up at once
		// where the breaker would have it wait out the open time, which
		// would let the state move on to half-open under the poll.
		look := func() {
			_ = retry.Run(t.Context(), func(context.Context) error { return retry.Permanent(errTransient) }, r, retry.WithMaxElapsed(time.Millisecond))
		}
		waitState := func(want string) {
			t.Helper()
			for deadline := time.Now().Add(time.Second); store.state("") != want; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the fleet's breaker is %s, want %s", store.state(""), want)
				}
				look()
			}
		}
		call(func(context.Context) error { return errTransient })
		call(func(context.Context) error { return errTransient })
		waitState(retry.BreakerOpen)
		var probed atomic.Bool
		for deadline := time.Now().Add(time.Second); !probed.Load(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("no probe granted")
			}
			call(func(context.Context) error {
				probed.Store(true)
				store.set(true, false) // down as the probe runs: its outcome's sync fails
				return nil
			})
		}
		time.Sleep(20 * time.Millisecond) // a sync or two fail
		if got := store.state(""); got != retry.BreakerHalfOpen {
			t.Fatalf("the fleet's breaker is %s while the store is down after the probe, want half_open", got)
		}
		store.set(false, false)
		waitState(retry.BreakerClosed)
	})
}

// TestSharedBreakerLateRoundTrip: a process with calls whose round trips
// come late (each answers after two and a half intervals) decides on the
// view it has, up to four intervals old, without a call waiting for the
// store or falling back to its own breaker.
func TestSharedBreakerLateRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 10 * time.Millisecond
		store := newMemStore(interval)
		r := fleet(1, store, retry.Breaker{StoreWait: 50 * time.Millisecond})[0]
		_ = r.Run(t.Context(), succeed)
		synctest.Wait()
		store.mu.Lock()
		store.delay = 5 * interval / 2
		store.mu.Unlock()
		var longest time.Duration
		for range 200 {
			start := time.Now()
			if err := r.Run(t.Context(), succeed); err != nil {
				t.Fatal(err)
			}
			longest = max(longest, time.Since(start))
			time.Sleep(interval / 10)
		}
		time.Sleep(5 * interval) // the last round trip ends
		if st := r.Stats(); longest > 0 || st.BreakerFallbacks != 0 {
			t.Errorf("a call waited %v; %d fallbacks: want none, the view at most four intervals old", longest, st.BreakerFallbacks)
		}
	})
}
