package retry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry"
)

// tripOnFirst is a breaker that opens on the first counted failure.
var tripOnFirst = retry.Breaker{MinRequests: 1, FailureRatio: 1, OpenTimeout: time.Second, MaxWait: time.Minute}

func stateOf(r *retry.Retrier, key string) string {
	return r.Stats().Breakers[key]
}

// TestBreakerOpensAfterVolume: the breaker opens once MinRequests counted
// attempts saw FailureRatio failures, not before.
func TestBreakerOpensAfterVolume(t *testing.T) {
	tests := []struct {
		name     string
		spec     retry.Breaker
		outcomes []bool // true: the attempt fails
		want     string
	}{
		{name: "below the volume", spec: retry.Breaker{MinRequests: 5, FailureRatio: 0.5}, outcomes: []bool{true, true, true, true}, want: retry.BreakerClosed},
		{name: "at the volume", spec: retry.Breaker{MinRequests: 5, FailureRatio: 0.5}, outcomes: []bool{true, true, true, true, true}, want: retry.BreakerOpen},
		{name: "ratio not reached", spec: retry.Breaker{MinRequests: 4, FailureRatio: 0.75}, outcomes: []bool{true, false, true, false, true, false}, want: retry.BreakerClosed},
		{name: "ratio reached", spec: retry.Breaker{MinRequests: 4, FailureRatio: 0.5}, outcomes: []bool{false, true, false, true}, want: retry.BreakerOpen},
		{name: "defaults: 20 requests at 50%", spec: retry.Breaker{}, outcomes: append(make([]bool, 10), repeatBool(true, 10)...), want: retry.BreakerOpen},
		{name: "defaults: 19 requests do not trip", spec: retry.Breaker{}, outcomes: repeatBool(true, 19), want: retry.BreakerClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}), retry.WithBreaker(tt.spec))
				for _, fail := range tt.outcomes {
					_ = r.Run(t.Context(), func(context.Context) error {
						if fail {
							return errTransient
						}
						return nil
					})
				}
				if got := stateOf(r, ""); got != tt.want {
					t.Fatalf("state %v, want %v", got, tt.want)
				}
			})
		})
	}
}

func repeatBool(v bool, n int) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestBreakerDoesNotConsumeAttempts: a 3-attempt call that meets an open
// breaker twice still gets 3 real attempts, waiting out each open period.
func TestBreakerDoesNotConsumeAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var changes []string
		r := retry.New(
			retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond, Jitter: retry.Jitter{Kind: retry.JitterNone}}),
			retry.WithBreaker(withOnChange(tripOnFirst, func(_, from, to string) { changes = append(changes, from+">"+to) })),
		)
		var seen []int
		start := time.Now()
		err := r.Run(t.Context(), func(ctx context.Context) error {
			seen = append(seen, retry.AttemptFrom(ctx))
			if len(seen) < 3 {
				return errTransient
			}
			return nil
		})
		if err != nil {
			t.Fatalf("err = %v, want success on the third attempt", err)
		}
		if fmt.Sprint(seen) != "[1 2 3]" {
			t.Errorf("attempts seen %v, want [1 2 3]", seen)
		}
		// Each failure opens the breaker for 1 s; the waits are exact to
		// the nanosecond (gobreaker reopens just past its expiry).
		if elapsed := time.Since(start); elapsed < 2*time.Second || elapsed > 2*time.Second+10 {
			t.Errorf("elapsed %v, want 2s of open breaker", elapsed)
		}
		s := r.Stats()
		if s.Attempts != 3 || s.BreakerWaits != 2 || s.BreakerDenied != 0 {
			t.Errorf("stats %+v: want 3 attempts and 2 breaker waits", s)
		}
		want := "closed>open open>half_open half_open>open open>half_open half_open>closed"
		if got := strings.Join(changes, " "); got != want {
			t.Errorf("changes %q, want %q", got, want)
		}
	})
}

// TestBreakerOpenWait: the wait for an open breaker is taken when it fits
// the deadline and MaxWait, and otherwise the call stops at once.
func TestBreakerOpenWait(t *testing.T) {
	tests := []struct {
		name     string
		spec     retry.Breaker
		timeout  time.Duration // of the second call's context; 0 for none
		reason   retry.Reason  // zero: success
		elapsed  time.Duration
		attempts int // of the second call
	}{
		{name: "fits: waits the exact remaining open time", spec: retry.Breaker{MinRequests: 1, FailureRatio: 1, OpenTimeout: 10 * time.Second, MaxWait: time.Minute}, timeout: time.Minute, elapsed: 10 * time.Second, attempts: 1},
		{name: "past the default MaxWait: stops at once", spec: retry.Breaker{MinRequests: 1, FailureRatio: 1, OpenTimeout: 10 * time.Second}, reason: retry.ReasonBreakerOpen},
		{name: "past the deadline: stops at once", spec: retry.Breaker{MinRequests: 1, FailureRatio: 1, OpenTimeout: 10 * time.Second}, timeout: 5 * time.Second, reason: retry.ReasonBreakerOpen},
		{name: "deadline at the reopening instant: stops at once", spec: retry.Breaker{MinRequests: 1, FailureRatio: 1, OpenTimeout: 10 * time.Second}, timeout: 10 * time.Second, reason: retry.ReasonBreakerOpen},
		{name: "past MaxWait: stops at once", spec: retry.Breaker{MinRequests: 1, FailureRatio: 1, OpenTimeout: 10 * time.Second, MaxWait: 3 * time.Second}, reason: retry.ReasonBreakerOpen},
		{name: "negative MaxWait never waits", spec: retry.Breaker{MinRequests: 1, FailureRatio: 1, OpenTimeout: time.Second, MaxWait: -1}, reason: retry.ReasonBreakerOpen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}), retry.WithBreaker(tt.spec))
				_ = r.Run(t.Context(), func(context.Context) error { return errTransient }) // opens it
				ctx := t.Context()
				if tt.timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.timeout)
					defer cancel()
				}
				start := time.Now()
				calls := 0
				err := r.Run(ctx, func(context.Context) error { calls++; return nil })
				if elapsed := time.Since(start); elapsed < tt.elapsed || elapsed > tt.elapsed+10 {
					t.Errorf("elapsed %v, want %v", elapsed, tt.elapsed)
				}
				if calls != tt.attempts {
					t.Errorf("fn ran %d times, want %d", calls, tt.attempts)
				}
				if tt.reason == "" {
					if err != nil {
						t.Fatalf("err = %v, want success", err)
					}
					return
				}
				var re *retry.Error
				if !errors.As(err, &re) || re.Reason != tt.reason || re.Attempts != 0 {
					t.Fatalf("err = %v, want %v after 0 attempts", err, tt.reason)
				}
				if retry.TypeOf(err) != "breaker.open" {
					t.Errorf("TypeOf = %q, want breaker.open", retry.TypeOf(err))
				}
				if s := r.Stats(); s.BreakerDenied != 1 {
					t.Errorf("BreakerDenied = %d, want 1", s.BreakerDenied)
				}
			})
		})
	}
}

// TestBreakerKeepsLastError: a call stopped by an open breaker after real
// attempts keeps the last attempt's error.
func TestBreakerKeepsLastError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := retry.New(
			retry.WithPolicy(retry.Policy{MaxAttempts: 5, InitialInterval: time.Millisecond, Jitter: retry.Jitter{Kind: retry.JitterNone}}),
			retry.WithBreaker(retry.Breaker{MinRequests: 1, FailureRatio: 1, OpenTimeout: time.Hour}))
		err := r.Run(t.Context(), func(context.Context) error { return errTransient })
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonBreakerOpen || re.Attempts != 1 || !errors.Is(err, errTransient) {
			t.Fatalf("err = %v, want breaker_open after 1 attempt with the last error", err)
		}
		if retry.TypeOf(err) != "breaker.open" {
			t.Errorf("TypeOf = %q", retry.TypeOf(err))
		}
	})
}

// TestBreakerExcludesCallerErrors: the caller's own errors never trip it.
func TestBreakerExcludesCallerErrors(t *testing.T) {
	tests := []struct {
		name string
		err  func(cancel context.CancelFunc) error
	}{
		{name: "4xx", err: func(context.CancelFunc) error { return &retry.StatusError{StatusCode: 404} }},
		{name: "validation", err: func(context.CancelFunc) error { return typed{"validation.payload_invalid"} }},
		{name: "permanent", err: func(context.CancelFunc) error { return retry.Permanent(errTransient) }},
		{name: "discard", err: func(context.CancelFunc) error { return retry.Discard(errTransient) }},
		{name: "context canceled by the caller", err: func(cancel context.CancelFunc) error { cancel(); return context.Canceled }},
		{name: "non-retryable type", err: func(context.CancelFunc) error { return typed{"auth.forbidden"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1, NonRetryableErrors: []string{"auth.*", "validation.*"}}),
					retry.WithBreaker(tripOnFirst))
				for range 5 {
					ctx, cancel := context.WithCancel(t.Context())
					_ = r.Run(ctx, func(context.Context) error { return tt.err(cancel) })
					cancel()
				}
				if got := stateOf(r, ""); got != retry.BreakerClosed {
					t.Fatalf("state %v after caller errors, want closed", got)
				}
				_ = r.Run(t.Context(), func(context.Context) error { return errTransient })
				if got := stateOf(r, ""); got != retry.BreakerOpen {
					t.Fatalf("state %v after a real failure, want open", got)
				}
			})
		})
	}
}

// TestBreakerPerKey: one key's failures do not open another key's breaker,
// and the number of keys is bounded.
func TestBreakerPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spec := tripOnFirst
		spec.PerKey = true
		spec.MaxWait = -1
		r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}), retry.WithBreaker(spec))
		_ = retry.Run(t.Context(), func(context.Context) error { return errTransient }, r, retry.WithKey("a"))
		calls := 0
		err := retry.Run(t.Context(), func(context.Context) error { calls++; return nil }, r, retry.WithKey("b"))
		if err != nil || calls != 1 {
			t.Fatalf("key b: err %v, calls %d", err, calls)
		}
		err = retry.Run(t.Context(), func(context.Context) error { calls++; return nil }, r, retry.WithKey("a"))
		if retry.TypeOf(err) != "breaker.open" {
			t.Fatalf("key a: err %v, want its breaker open", err)
		}
		if s := stateOf(r, "a"); s != retry.BreakerOpen {
			t.Errorf("a is %v", s)
		}
		for i := range 3000 {
			time.Sleep(time.Second) // let LRU stamps differ
			_ = retry.Run(t.Context(), func(context.Context) error { return nil }, r, retry.WithKey(fmt.Sprint("k", i)))
		}
		if n := len(r.Stats().Breakers); n > 1024 {
			t.Errorf("%d breakers kept, want at most 1024", n)
		}
	})
}

// TestBreakerHookMayUseRetrier: state changes are delivered outside
// gobreaker's lock, so a hook can read the Retrier's state.
func TestBreakerHookMayUseRetrier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r *retry.Retrier
		var states []string
		r = retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}), retry.WithBreaker(withOnChange(tripOnFirst, func(_, _, _ string) { states = append(states, stateOf(r, "")) })))
		_ = r.Run(t.Context(), func(context.Context) error { return errTransient })
		if len(states) != 1 || states[0] != retry.BreakerOpen {
			t.Fatalf("hook saw %v", states)
		}
	})
}

// TestBreakerPanic: a panic in fn counts as a failure and is re-panicked.
func TestBreakerPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}), retry.WithBreaker(tripOnFirst))
		func() {
			defer func() {
				if p := recover(); p != "boom" {
					t.Errorf("recovered %v, want boom", p)
				}
			}()
			_ = r.Run(t.Context(), func(context.Context) error { panic("boom") })
		}()
		if got := stateOf(r, ""); got != retry.BreakerOpen {
			t.Fatalf("state %v after a panic, want open", got)
		}
	})
}

func TestBreakerBadSettings(t *testing.T) {
	for _, b := range []retry.Breaker{{FailureRatio: 1.5}, {FailureRatio: -0.1}, {Window: -time.Second}, {OpenTimeout: -1}} {
		err := retry.New(retry.WithBreaker(b)).Err()
		if err == nil || !strings.Contains(err.Error(), "WithBreaker") {
			t.Errorf("%+v: err = %v", b, err)
		}
	}
}

// TestBreakerRefusalKeepsToken checks that an attempt the limiter let
// through but the breaker refused keeps its token for when the breaker lets
// it run: the call waits for the breaker only, not for a second token.
func TestBreakerRefusalKeepsToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := retry.New(
			retry.WithRateLimit(retry.RateLimit{Limit: 1, Burst: 1}),
			retry.WithBreaker(retry.Breaker{MinRequests: 1, FailureRatio: 1, OpenTimeout: 5 * time.Second, MaxWait: time.Minute}),
			retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
			retry.WithBudget(retry.Budget{Off: true}),
		)
		if err := r.Run(t.Context(), func(context.Context) error { return errTransient }); err == nil {
			t.Fatal("the first call succeeded")
		}
		time.Sleep(time.Second) // one token again; the breaker stays open until 5 s
		start := time.Now()
		if err := r.Run(t.Context(), func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		s := r.Stats()
		if waited := time.Since(start); waited < 4*time.Second || waited > 4*time.Second+time.Millisecond || s.LimiterWaits != 0 || s.Attempts != 2 || s.BreakerWaits != 1 {
			t.Fatalf("waited %v with %d limiter waits, %d breaker waits, %d attempts; want 4s, 0, 1, 2", waited, s.LimiterWaits, s.BreakerWaits, s.Attempts)
		}
	})
}

// TestHungDependencyTripsBreaker: attempts cut off by the caller's deadline
// count as failures for the breaker; the caller's own cancellation does not.
func TestHungDependencyTripsBreaker(t *testing.T) {
	tests := []struct {
		name string
		ctx  func(parent context.Context) (context.Context, context.CancelFunc)
		want string
	}{
		{name: "deadline", want: retry.BreakerOpen, ctx: func(p context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(p, 20*time.Millisecond)
		}},
		{name: "deadline with a cause", want: retry.BreakerOpen, ctx: func(p context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeoutCause(p, 20*time.Millisecond, errors.New("request budget spent"))
		}},
		{name: "explicit cancel", want: retry.BreakerClosed, ctx: func(p context.Context) (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(p)
			time.AfterFunc(20*time.Millisecond, cancel)
			return ctx, cancel
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := retry.New(retry.WithBreaker(retry.Breaker{MinRequests: 20, MaxWait: -1}),
					retry.WithPolicy(retry.Policy{MaxAttempts: 3}))
				for range 20 {
					ctx, cancel := tt.ctx(t.Context())
					_ = r.Run(ctx, func(ctx context.Context) error {
						<-ctx.Done() // a dependency that never answers
						return ctx.Err()
					})
					cancel()
				}
				if got := r.Stats().Breakers[""]; got != tt.want {
					t.Errorf("breaker %v after 20 hung calls, want %v", got, tt.want)
				}
			})
		})
	}
}

// TestBreakerDefaultWaitIsShort: with the default Breaker, a call that meets
// an open breaker and has no deadline is held 1 s at most, however long the
// breaker stays open; near the end of the open spell it waits for the probe.
func TestBreakerDefaultWaitIsShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := retry.New(retry.WithBreaker(retry.Breaker{}), retry.WithPolicy(retry.Policy{MaxAttempts: 1}))
		for range 20 {
			_ = r.Run(t.Context(), func(context.Context) error { return errTransient })
		}
		if s := r.Stats().Breakers[""]; s != retry.BreakerOpen {
			t.Fatalf("breaker %v after 20 failures, want open", s)
		}
		for _, after := range []time.Duration{0, 10 * time.Second, 18 * time.Second} { // 30, 20, 2 s left
			time.Sleep(after)
			start := time.Now()
			err := r.Run(t.Context(), func(context.Context) error { return nil })
			if elapsed := time.Since(start); elapsed > time.Second {
				t.Errorf("held %v by an open breaker, want at most 1s", elapsed)
			}
			var re *retry.Error
			if !errors.As(err, &re) || re.Reason != retry.ReasonBreakerOpen {
				t.Fatalf("err = %v, want breaker_open", err)
			}
		}
		time.Sleep(1500 * time.Millisecond) // 0.5 s left: the short wait is taken
		start := time.Now()
		if err := r.Run(t.Context(), func(context.Context) error { return nil }); err != nil {
			t.Fatalf("err = %v, want the probe to run after a short wait", err)
		}
		if elapsed := time.Since(start); elapsed < 400*time.Millisecond || elapsed > 600*time.Millisecond {
			t.Errorf("waited %v for the probe, want about 0.5s", elapsed)
		}
	})
}

// withOnChange returns b with the hook f.
func withOnChange(b retry.Breaker, f func(key, from, to string)) retry.Breaker {
	b.OnChange = f
	return b
}

// TestNamedStrings: the constants name the strings that Breaker.OnChange,
// Stats.Breakers, a BreakerStore, TypeOf and the events give, which other
// processes (a fleet's store, dashboards, policy JSON patterns) read as
// strings, so they must not change.
func TestNamedStrings(t *testing.T) {
	tests := []struct{ name, got, want string }{
		{name: "BreakerClosed", got: retry.BreakerClosed, want: "closed"},
		{name: "BreakerHalfOpen", got: retry.BreakerHalfOpen, want: "half_open"},
		{name: "BreakerOpen", got: retry.BreakerOpen, want: "open"},
		{name: "TypeAttemptTimeout", got: retry.TypeAttemptTimeout, want: "timeout.attempt"},
		{name: "TypeHedgeStarted", got: retry.TypeHedgeStarted, want: "hedge.started"},
		{name: "TypeHedgeWon", got: retry.TypeHedgeWon, want: "hedge.won"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

// TestBreakerOnChangeInOrder: with many goroutines changing one breaker's
// state, OnChange is called one call at a time, in the order of the
// changes: each call's from is the previous call's to. (Changes recorded
// after the breaker's lock was released, and delivered by whichever
// goroutine flushed, came out of order and overlapped.)
func TestBreakerOnChangeInOrder(t *testing.T) {
	var mu sync.Mutex
	var seq [][2]string
	var running, overlaps atomic.Int32
	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}), retry.WithBudget(retry.Budget{Off: true}),
		retry.WithBreaker(retry.Breaker{MinRequests: 1, OpenTimeout: 50 * time.Microsecond, Probes: 2, MaxWait: -1,
			OnChange: func(_, from, to string) {
				if running.Add(1) > 1 {
					overlaps.Add(1)
				}
				mu.Lock()
				seq = append(seq, [2]string{from, to})
				mu.Unlock()
				running.Add(-1)
			}}))
	var wg sync.WaitGroup
	for g := range 100 {
		wg.Go(func() {
			for i := range 200 {
				fail := (g*7+i*13)%2 == 0
				_ = r.Run(context.Background(), func(context.Context) error {
					if fail {
						return errors.New("down")
					}
					return nil
				})
			}
		})
	}
	wg.Wait()
	_ = r.Run(context.Background(), func(context.Context) error { return nil }) // delivers what is pending
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d OnChange calls overlapped another", n)
	}
	if len(seq) < 10 {
		t.Fatalf("only %d changes: the test does not exercise the breaker", len(seq))
	}
	prev := retry.BreakerClosed
	for i, ch := range seq {
		if ch[0] != prev {
			t.Fatalf("change %d of %d: %s>%s after a change to %s", i, len(seq), ch[0], ch[1], prev)
		}
		prev = ch[1]
	}
}
