package retry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// typed is an error that names its own type.
type typed struct{ typ string }

func (e typed) Error() string     { return "typed " + e.typ }
func (e typed) ErrorType() string { return e.typ }

// script returns a function failing with errs in order, then succeeding; it
// counts its calls.
func script(calls *int, errs ...error) func(context.Context) error {
	return func(context.Context) error {
		*calls++
		if *calls <= len(errs) {
			return errs[*calls-1]
		}
		return nil
	}
}

func repeat(err error, n int) []error {
	out := make([]error, n)
	for i := range out {
		out[i] = err
	}
	return out
}

// fixed is a random source for deterministic jitter.
func fixed(u float64) retry.Option { return retry.WithRandom(func() float64 { return u }) }

var (
	errTransient = errors.New("transient")
	noJitter     = retry.Policy{InitialInterval: time.Millisecond, Jitter: retry.Jitter{Kind: retry.JitterNone}}
)

// recorder collects events.
type recorder struct {
	failures, retries, alerts, records []retry.Event
	sinkErr                            error
}

func (r *recorder) options() []retry.Option {
	return []retry.Option{
		retry.OnFailure(func(e retry.Event) { r.failures = append(r.failures, e) }),
		retry.OnRetry(func(e retry.Event) { r.retries = append(r.retries, e) }),
		retry.WithDeadLetter(retry.DeadLetters{
			Sink: func(_ context.Context, e retry.Event) error {
				r.records = append(r.records, e)
				return r.sinkErr
			},
			Alert: func(e retry.Event) { r.alerts = append(r.alerts, e) },
		}),
	}
}

// decider is a Decider built from functions.
type decider struct {
	should func(int, error) bool
	delay  func(int) time.Duration
}

func (d decider) ShouldRetry(n int, err error) bool {
	if d.should == nil {
		return true
	}
	return d.should(n, err)
}

func (d decider) Delay(n int) time.Duration {
	if d.delay == nil {
		return 0
	}
	return d.delay(n)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestContext covers steps 1 and 6.1 and the cancellation of waits.
func TestContext(t *testing.T) {
	t.Run("done before the first attempt: fn never runs", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		calls := 0
		err := retry.Run(ctx, script(&calls))
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonCanceled || re.Attempts != 0 {
			t.Fatalf("err = %v, want canceled after 0 attempts", err)
		}
		if calls != 0 || !errors.Is(err, context.Canceled) {
			t.Fatalf("calls = %d, err = %v", calls, err)
		}
	})
	t.Run("canceled during an attempt: not retried", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var rec recorder
		calls := 0
		err := retry.Run(ctx, func(context.Context) error {
			calls++
			cancel()
			return errTransient
		}, append(rec.options(), retry.WithPolicy(retry.Policy{OnExhaustion: retry.ExhaustDeadLetter}))...)
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonCanceled || calls != 1 {
			t.Fatalf("err = %v after %d calls, want canceled after 1", err, calls)
		}
		if !errors.Is(err, errTransient) || !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v: want both the last error and the context's", err)
		}
		if len(rec.records) != 0 {
			t.Fatalf("a canceled call reached the dead-letter sink")
		}
	})
	t.Run("canceled during a wait: returns at once with both errors", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cause := errors.New("shutting down")
			ctx, cancel := context.WithCancelCause(t.Context())
			time.AfterFunc(3*time.Second, func() { cancel(cause) })
			start := time.Now()
			calls := 0
			err := retry.Run(ctx, script(&calls, repeat(errTransient, 10)...),
				retry.WithPolicy(retry.Policy{InitialInterval: time.Hour, MaxAttempts: 5, Jitter: retry.Jitter{Kind: retry.JitterNone}}))
			if elapsed := time.Since(start); elapsed != 3*time.Second {
				t.Errorf("returned after %v, want 3s (at the cancel)", elapsed)
			}
			var re *retry.Error
			if !errors.As(err, &re) || re.Reason != retry.ReasonCanceled || re.Attempts != 1 {
				t.Fatalf("err = %v, want canceled after 1 attempt", err)
			}
			if !errors.Is(err, errTransient) || !errors.Is(err, cause) {
				t.Fatalf("err = %v: want both the last error and the cause reachable", err)
			}
		})
	})
	t.Run("a wait that cannot fit the deadline is not slept", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			start := time.Now()
			calls := 0
			// Waits of 4 s then 8 s: the second would end at 12 s, past the deadline.
			err := retry.Run(ctx, script(&calls, repeat(errTransient, 10)...),
				retry.WithPolicy(retry.Policy{InitialInterval: 4 * time.Second, MaxAttempts: 10, Jitter: retry.Jitter{Kind: retry.JitterNone}}))
			if elapsed := time.Since(start); elapsed != 4*time.Second {
				t.Errorf("returned after %v, want 4s: the last wait must not be slept", elapsed)
			}
			var re *retry.Error
			if !errors.As(err, &re) || re.Reason != retry.ReasonDeadline || calls != 2 {
				t.Fatalf("err = %v after %d calls, want deadline after 2", err, calls)
			}
			if !errors.Is(err, errTransient) {
				t.Fatalf("err = %v: the last error must be kept", err)
			}
		})
	})
	t.Run("MaxElapsed bounds the waits", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			calls := 0
			err := retry.Run(t.Context(), script(&calls, repeat(errTransient, 10)...),
				retry.WithPolicy(retry.Policy{InitialInterval: time.Second, MaxAttempts: 10, Jitter: retry.Jitter{Kind: retry.JitterNone}}),
				retry.WithMaxElapsed(5*time.Second))
			// Waits 1 + 2 = 3 s; the next (4 s) would end at 7 s.
			if elapsed := time.Since(start); elapsed != 3*time.Second {
				t.Errorf("returned after %v, want 3s", elapsed)
			}
			var re *retry.Error
			if !errors.As(err, &re) || re.Reason != retry.ReasonDeadline || calls != 3 {
				t.Fatalf("err = %v after %d calls, want deadline after 3", err, calls)
			}
		})
	})
}

// TestDelays covers step 6.7: where the wait comes from and how long it is.
func TestDelays(t *testing.T) {
	tests := []struct {
		name   string
		policy retry.Policy
		errs   []error
		opts   []retry.Option
		want   []time.Duration
	}{
		{name: "policy backoff without jitter", policy: retry.Policy{MaxAttempts: 4, Jitter: retry.Jitter{Kind: retry.JitterNone}},
			errs: repeat(errTransient, 3), want: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}},
		{name: "policy backoff with jitter from the injected source", policy: retry.Policy{MaxAttempts: 3},
			errs: repeat(errTransient, 2), opts: []retry.Option{fixed(0)}, want: []time.Duration{500 * time.Millisecond, time.Second}},
		{name: "decider delay replaces the policy's", policy: retry.Policy{MaxAttempts: 3, Jitter: retry.Jitter{Kind: retry.JitterNone}}, errs: repeat(errTransient, 2),
			opts: []retry.Option{retry.WithDecider(decider{delay: func(n int) time.Duration { return time.Duration(n) * 7 * time.Second }})},
			want: []time.Duration{7 * time.Second, 14 * time.Second}},
		{name: "zero decider delay falls back to the policy", policy: retry.Policy{MaxAttempts: 3, Jitter: retry.Jitter{Kind: retry.JitterNone}}, errs: repeat(errTransient, 2),
			opts: []retry.Option{retry.WithDecider(decider{})}, want: []time.Duration{time.Second, 2 * time.Second}},
		{name: "server hint replaces the backoff, exactly without jitter", policy: retry.Policy{MaxAttempts: 3, Jitter: retry.Jitter{Kind: retry.JitterNone}},
			errs: []error{retry.After(errTransient, 30*time.Second), errTransient}, want: []time.Duration{30 * time.Second, 2 * time.Second}},
		{name: "server hint spread upward by at most 10%", policy: retry.Policy{MaxAttempts: 2},
			errs: []error{retry.After(errTransient, 5*time.Second)}, opts: []retry.Option{fixed(0.5)}, want: []time.Duration{5*time.Second + 250*time.Millisecond}},
		{name: "server hint spread at most one second", policy: retry.Policy{MaxAttempts: 2},
			errs: []error{retry.After(errTransient, 100*time.Second)}, opts: []retry.Option{fixed(0.5)}, want: []time.Duration{100*time.Second + 500*time.Millisecond}},
		{name: "a status error's Retry-After is a hint", policy: retry.Policy{MaxAttempts: 2, Jitter: retry.Jitter{Kind: retry.JitterNone}},
			errs: []error{&retry.StatusError{StatusCode: 429, RetryAfter: 12 * time.Second}}, want: []time.Duration{12 * time.Second}},
		{name: "decider delay beats a server hint", policy: retry.Policy{MaxAttempts: 2, Jitter: retry.Jitter{Kind: retry.JitterNone}},
			errs: []error{retry.After(errTransient, time.Minute)},
			opts: []retry.Option{retry.WithDecider(decider{delay: func(int) time.Duration { return time.Second }})}, want: []time.Duration{time.Second}},
		{name: "immediate strategy takes no wait", policy: retry.Policy{MaxAttempts: 3, Backoff: retry.Immediate},
			errs: repeat(errTransient, 2), want: []time.Duration{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var got, slept []time.Duration
				last := time.Now()
				calls := 0
				fn := script(&calls, tt.errs...)
				opts := append([]retry.Option{
					retry.WithPolicy(tt.policy),
					retry.OnRetry(func(e retry.Event) { got = append(got, e.Delay) }),
				}, tt.opts...)
				_ = retry.Run(t.Context(), func(ctx context.Context) error {
					if calls > 0 {
						slept = append(slept, time.Since(last))
					}
					last = time.Now()
					return fn(ctx)
				}, opts...)
				if fmt.Sprint(got) != fmt.Sprint(tt.want) {
					t.Errorf("OnRetry delays = %v, want %v", got, tt.want)
				}
				if fmt.Sprint(slept) != fmt.Sprint(tt.want) {
					t.Errorf("slept %v, want %v", slept, tt.want)
				}
			})
		})
	}
}

// TestAttemptTimeout covers the per-attempt timeout.
func TestAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var types []string
		calls := 0
		v, err := retry.Do(t.Context(), func(ctx context.Context) (string, error) {
			calls++
			if calls == 1 {
				<-ctx.Done() // hangs until the attempt's timeout
				return "", ctx.Err()
			}
			return "ok", nil
		}, retry.WithAttemptTimeout(time.Second), retry.OnFailure(func(e retry.Event) { types = append(types, e.Type) }))
		if err != nil || v != "ok" || calls != 2 {
			t.Fatalf("v=%q err=%v calls=%d", v, err, calls)
		}
		if len(types) != 1 || types[0] != retry.TypeAttemptTimeout {
			t.Fatalf("types = %v, want [timeout.attempt]", types)
		}
	})
	// When the last attempt times out, the call's type says so, not the
	// caller's deadline.
	synctest.Test(t, func(t *testing.T) {
		err := retry.Run(t.Context(), func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		}, retry.WithAttemptTimeout(time.Second), retry.WithPolicy(retry.Policy{MaxAttempts: 2, Jitter: retry.Jitter{Kind: retry.JitterNone}}))
		var e *retry.Error
		if !errors.As(err, &e) || e.Reason != retry.ReasonExhausted || e.Attempts != 2 {
			t.Fatalf("err = %v, want exhausted after 2 attempts", err)
		}
		if got := retry.TypeOf(err); got != retry.TypeAttemptTimeout {
			t.Fatalf("TypeOf = %q, want %q", got, retry.TypeAttemptTimeout)
		}
	})
}

// TestAttemptFrom checks the attempt number inside fn, nested calls included.
func TestAttemptFrom(t *testing.T) {
	var outer, inner []int
	p := retry.WithPolicy(retry.Policy{InitialInterval: time.Millisecond, Jitter: retry.Jitter{Kind: retry.JitterNone}})
	_ = retry.Run(t.Context(), func(ctx context.Context) error {
		outer = append(outer, retry.AttemptFrom(ctx))
		n := 0
		_ = retry.Run(ctx, func(ctx context.Context) error {
			inner = append(inner, retry.AttemptFrom(ctx))
			n++
			if n < 2 {
				return errTransient
			}
			return nil
		}, p)
		if len(outer) < 2 {
			return errTransient
		}
		return nil
	}, p)
	if fmt.Sprint(outer) != "[1 2]" || fmt.Sprint(inner) != "[1 2 1 2]" {
		t.Fatalf("outer %v inner %v, want [1 2] and [1 2 1 2]", outer, inner)
	}
}

// TestAttemptContextsKept checks that an attempt's context kept after its
// call still carries its own number and parent while other calls, on other
// goroutines too, take contexts for their retries.
func TestAttemptContextsKept(t *testing.T) {
	type key struct{}
	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 4, Backoff: retry.Immediate}), retry.WithBudget(retry.Budget{Off: true}))
	type kept struct {
		ctx     context.Context
		call    int
		attempt int
	}
	const goroutines, calls = 4, 50
	results := make([][]kept, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				id := g*calls + i
				parent := context.WithValue(t.Context(), key{}, id)
				_ = r.Run(parent, func(ctx context.Context) error {
					n := retry.AttemptFrom(ctx)
					results[g] = append(results[g], kept{ctx, id, n})
					if n < 3 {
						return errTransient
					}
					return nil
				})
			}
		})
	}
	wg.Wait()
	for g := range results {
		if len(results[g]) != 3*calls {
			t.Fatalf("goroutine %d kept %d contexts, want %d", g, len(results[g]), 3*calls)
		}
		for i, k := range results[g] {
			if want := i%3 + 1; k.attempt != want {
				t.Fatalf("call %d: attempt %d inside fn, want %d", k.call, k.attempt, want)
			}
			if got := retry.AttemptFrom(k.ctx); got != k.attempt {
				t.Fatalf("call %d: kept context says attempt %d, want %d", k.call, got, k.attempt)
			}
			if got := k.ctx.Value(key{}); got != k.call {
				t.Fatalf("call %d attempt %d: kept context's parent value %v", k.call, k.attempt, got)
			}
		}
	}
}

// TestPanic: a panic in fn is recorded as a failure and re-panicked.
func TestPanic(t *testing.T) {
	tests := []struct {
		name string
		opts []retry.Option
		open bool // the breaker must have recorded the panic as a failure
	}{
		{name: "success path"},
		{name: "breaker", opts: []retry.Option{retry.WithBreaker(retry.Breaker{MinRequests: 1, FailureRatio: 1})}, open: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := retry.New(tt.opts...)
			func() {
				defer func() {
					if p := recover(); p != "boom" {
						t.Fatalf("recovered %v, want boom", p)
					}
				}()
				_ = r.Run(t.Context(), func(context.Context) error { panic("boom") })
			}()
			s := r.Stats()
			if s.Calls != 1 || s.Attempts != 1 || s.Failed != 0 {
				t.Errorf("stats = %+v: a panic counts as a call and an attempt only", s)
			}
			if tt.open && s.Breakers[""] != retry.BreakerOpen {
				t.Errorf("breaker %v, want open: the panic is a failure", s.Breakers[""])
			}
		})
	}
}

// TestBadInput: bad configuration and nil functions are errors, not panics.
func TestBadInput(t *testing.T) {
	tests := []struct {
		name string
		run  func() error
		want string
	}{
		{name: "nil fn to Run", run: func() error { return retry.Run(t.Context(), nil) }, want: "fn is nil"},
		{name: "nil fn to Do", run: func() error {
			_, err := retry.Do[int](t.Context(), nil)
			return err
		}, want: "fn is nil"},
		{name: "nil fn to a Retrier", run: func() error { return retry.New().Run(t.Context(), nil) }, want: "fn is nil"},
		{name: "invalid policy", run: func() error {
			return retry.Run(t.Context(), ok, retry.WithPolicy(retry.Policy{MaxAttempts: -1}))
		}, want: "max_attempts"},
		{name: "invalid policy in a Retrier", run: func() error {
			return retry.New(retry.WithPolicy(retry.Policy{BackoffCoefficient: 0.5})).Run(t.Context(), ok)
		}, want: "backoff_coefficient"},
		{name: "negative attempt timeout", run: func() error { return retry.Run(t.Context(), ok, retry.WithAttemptTimeout(-1)) }, want: "WithAttemptTimeout"},
		{name: "negative max elapsed", run: func() error { return retry.Run(t.Context(), ok, retry.WithMaxElapsed(-time.Second)) }, want: "WithMaxElapsed"},
		{name: "zero max server delay", run: func() error { return retry.Run(t.Context(), ok, retry.WithMaxServerDelay(0)) }, want: "WithMaxServerDelay"},
		{name: "nil option", run: func() error { return retry.Run(t.Context(), ok, nil) }},
		{name: "nil Retrier option", run: func() error { var r *retry.Retrier; return retry.Run(t.Context(), ok, r) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want mention of %q", err, tt.want)
			}
		})
	}
}

// TestRetrierIsAnOption: a derived call shares the Retrier's state and does
// not change the Retrier.
func TestRetrierIsAnOption(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var base, extra int
		r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond}),
			retry.OnFailure(func(retry.Event) { base++ }))
		fail := func(context.Context) error { return errTransient }
		_ = retry.Run(t.Context(), fail, r, retry.OnFailure(func(retry.Event) { extra++ }))
		_ = r.Run(t.Context(), fail)
		if base != 4 || extra != 2 {
			t.Fatalf("base hook %d, per-call hook %d; want 4 and 2", base, extra)
		}
		if s := r.Stats(); s.Calls != 2 || s.Attempts != 4 {
			t.Fatalf("stats %+v: the derived call must share r's state", s)
		}
		// The derived view's policy applies to that call only.
		calls := 0
		_ = retry.Run(t.Context(), func(context.Context) error { calls++; return errTransient }, r,
			retry.WithPolicy(retry.Policy{MaxAttempts: 4, InitialInterval: time.Millisecond}))
		if calls != 4 || r.Policy().MaxAttempts != 2 {
			t.Fatalf("derived call ran %d attempts; r.MaxAttempts = %d", calls, r.Policy().MaxAttempts)
		}
	})
}

// TestAttemptsIterator drives the range-over-func form.
func TestAttemptsIterator(t *testing.T) {
	p := retry.WithPolicy(retry.Policy{MaxAttempts: 4, InitialInterval: time.Second, Jitter: retry.Jitter{Kind: retry.JitterNone}})
	tests := []struct {
		name    string
		body    func(attempt int, err *error) (brk bool)
		reason  retry.Reason // zero: success, or the body's own error on break
		want    error
		seen    string
		elapsed time.Duration
	}{
		{name: "succeeds on the third attempt", body: func(n int, err *error) bool {
			if n < 3 {
				*err = errTransient
			}
			return false
		}, seen: "[1 2 3]", elapsed: 3 * time.Second},
		{name: "exhausts", body: func(_ int, err *error) bool { *err = errTransient; return false },
			reason: retry.ReasonExhausted, want: errTransient, seen: "[1 2 3 4]", elapsed: 7 * time.Second},
		{name: "break leaves the body's error", body: func(_ int, err *error) bool { *err = errTransient; return true },
			reason: "", want: errTransient, seen: "[1]"},
		{name: "a permanent error stops", body: func(_ int, err *error) bool { *err = retry.Permanent(errTransient); return false },
			reason: retry.ReasonNonRetryable, want: errTransient, seen: "[1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var err error
				var seen []int
				start := time.Now()
				for attempt := range retry.New(p).Attempts(t.Context(), &err) {
					seen = append(seen, attempt)
					if tt.body(attempt, &err) {
						break
					}
				}
				if got := fmt.Sprint(seen); got != tt.seen || time.Since(start) != tt.elapsed {
					t.Fatalf("seen %v after %v, want %v after %v", got, time.Since(start), tt.seen, tt.elapsed)
				}
				var re *retry.Error
				switch {
				case tt.want == nil && err != nil:
					t.Fatalf("err = %v, want nil", err)
				case tt.want != nil && !errors.Is(err, tt.want):
					t.Fatalf("err = %v, want %v", err, tt.want)
				case tt.reason != "" && (!errors.As(err, &re) || re.Reason != tt.reason):
					t.Fatalf("err = %v, want reason %v", err, tt.reason)
				}
			})
		})
	}
	t.Run("nil error pointer is an empty sequence", func(t *testing.T) {
		for range retry.New().Attempts(t.Context(), nil) {
			t.Fatal("yielded")
		}
	})
}

// TestRefusals: a breaker or limiter refusal is not a failed attempt. Before
// any attempt it is only the returned error; after one, the call ends like
// exhaustion, routed by on_exhaustion, without a second OnFailure.
func TestRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		open := retry.Breaker{MinRequests: 1, FailureRatio: 1, OpenTimeout: time.Hour}
		r := retry.New(append(rec.options(),
			retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond, OnExhaustion: retry.ExhaustDeadLetter}),
			retry.WithBreaker(open))...)
		err := r.Run(t.Context(), func(context.Context) error { return errTransient })
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonBreakerOpen || re.Attempts != 1 {
			t.Fatalf("err = %v", err)
		}
		if len(rec.failures) != 1 || len(rec.records) != 1 || rec.records[0].Reason != retry.ReasonBreakerOpen || !errors.Is(rec.records[0].Err, errTransient) {
			t.Fatalf("failures %d, records %+v: want one of each, the record with the last error", len(rec.failures), rec.records)
		}
		// Refused before any attempt: no event, no record, not a failed call.
		err = r.Run(t.Context(), ok)
		if !errors.As(err, &re) || re.Reason != retry.ReasonBreakerOpen || re.Attempts != 0 {
			t.Fatalf("err = %v", err)
		}
		if len(rec.failures) != 1 || len(rec.records) != 1 {
			t.Errorf("a refusal before any attempt fired %d failures and %d records", len(rec.failures)-1, len(rec.records)-1)
		}
		// Both are calls: the refused one ran no attempt.
		if s := r.Stats(); s.FailedPermanently != 1 || s.Calls != 2 || s.Attempts != 1 || s.BreakerDenied != 2 {
			t.Errorf("stats %+v", s)
		}
	})
}

// TestEdgeInputs: odd but legal input neither panics nor misbehaves.
func TestEdgeInputs(t *testing.T) {
	t.Run("nil breaker hook", func(t *testing.T) {
		r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
			retry.WithBreaker(retry.Breaker{MinRequests: 1, FailureRatio: 1, OnChange: nil}))
		_ = r.Run(t.Context(), func(context.Context) error { return errTransient })
	})
	t.Run("zero Retrier is the default one", func(t *testing.T) {
		var r retry.Retrier
		if err := r.Run(t.Context(), ok); err != nil {
			t.Fatal(err)
		}
		if err := retry.Run(t.Context(), ok, &r); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a huge server delay saturates instead of wrapping", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
			defer cancel()
			calls := 0
			err := retry.Run(ctx, func(context.Context) error {
				calls++
				return retry.After(errTransient, 1<<63-1-time.Millisecond)
			}, retry.WithMaxServerDelay(1<<63-1))
			var re *retry.Error
			if !errors.As(err, &re) || re.Reason != retry.ReasonDeadline || calls != 1 {
				t.Fatalf("err = %v after %d calls, want deadline after 1", err, calls)
			}
		})
	})
	t.Run("MaxElapsed bounds breaker waits", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
				retry.WithBreaker(retry.Breaker{MinRequests: 1, FailureRatio: 1, OpenTimeout: 20 * time.Second}))
			_ = r.Run(t.Context(), func(context.Context) error { return errTransient })
			start := time.Now()
			err := retry.Run(t.Context(), ok, r, retry.WithMaxElapsed(time.Second))
			var re *retry.Error
			if !errors.As(err, &re) || re.Reason != retry.ReasonBreakerOpen || time.Since(start) != 0 {
				t.Fatalf("err = %v after %v, want breaker_open at once", err, time.Since(start))
			}
		})
	})
	t.Run("a panicking hook does not lose the dead-letter record", func(t *testing.T) {
		records := 0
		r := retry.New(
			retry.WithDeadLetter(retry.DeadLetters{Sink: func(context.Context, retry.Event) error { records++; return nil }}),
			retry.OnFailure(func(retry.Event) { panic("hook") }))
		func() {
			defer func() { _ = recover() }()
			_ = r.Run(t.Context(), func(context.Context) error { return retry.DeadLetter(errTransient) })
		}()
		if records != 1 {
			t.Fatalf("records = %d, want 1", records)
		}
	})
	t.Run("a jitter factor without a kind is proportional", func(t *testing.T) {
		p := retry.Policy{Jitter: retry.Jitter{Factor: 0.1}}
		if got := p.Sample(1, 0, 0); got != 900*time.Millisecond {
			t.Fatalf("Sample = %v, want 900ms", got)
		}
	})
	t.Run("max_attempts beyond 32 bits is invalid", func(t *testing.T) {
		if err := (retry.Policy{MaxAttempts: 1 << 40}).Validate(); err == nil {
			t.Fatal("want an error")
		}
	})
	t.Run("a null policy in a config struct changes nothing", func(t *testing.T) {
		var cfg struct {
			Retry retry.Policy `json:"retry"`
		}
		cfg.Retry.MaxAttempts = 7
		if err := json.Unmarshal([]byte(`{"retry": null}`), &cfg); err != nil || cfg.Retry.MaxAttempts != 7 {
			t.Fatalf("err %v, policy %+v", err, cfg.Retry)
		}
		if err := json.Unmarshal([]byte(`{"retry": {"max_attempts": 2}}`), &cfg); err != nil || cfg.Retry.MaxAttempts != 2 || cfg.Retry.InitialInterval != time.Second {
			t.Fatalf("err %v, policy %+v", err, cfg.Retry)
		}
	})
}

// TestContextCauses: a call stopped by the caller's context matches the
// context's error and its cause, whichever way the context ended; a call
// stopped because its next wait could not fit the deadline matches
// context.DeadlineExceeded.
func TestContextCauses(t *testing.T) {
	cause := errors.New("shutting down")
	tests := []struct {
		name   string
		ctx    func(parent context.Context) (context.Context, func())
		during bool          // end the context during the first wait, not before the call
		hang   bool          // attempts after the first wait for the context to end
		want   []error       // errors.Is must hold for each
		reason retry.Reason  // of the *retry.Error
		wait   time.Duration // the policy's first wait
	}{
		{
			name:   "WithCancel, before the call",
			ctx:    func(p context.Context) (context.Context, func()) { c, f := context.WithCancel(p); return c, f },
			want:   []error{context.Canceled},
			reason: retry.ReasonCanceled,
			wait:   time.Second,
		},
		{
			name: "WithCancelCause, before the call",
			ctx: func(p context.Context) (context.Context, func()) {
				c, f := context.WithCancelCause(p)
				return c, func() { f(cause) }
			},
			want:   []error{context.Canceled, cause},
			reason: retry.ReasonCanceled,
			wait:   time.Second,
		},
		{
			name: "WithCancelCause, during a wait",
			ctx: func(p context.Context) (context.Context, func()) {
				c, f := context.WithCancelCause(p)
				return c, func() { f(cause) }
			},
			during: true,
			want:   []error{context.Canceled, cause, errTransient},
			reason: retry.ReasonCanceled,
			wait:   time.Second,
		},
		{
			name: "WithTimeoutCause, expired during an attempt",
			ctx: func(p context.Context) (context.Context, func()) {
				c, f := context.WithTimeoutCause(p, 1500*time.Millisecond, cause)
				return c, func() { f() }
			},
			hang:   true,
			want:   []error{context.DeadlineExceeded, cause, errTransient},
			reason: retry.ReasonCanceled,
			wait:   time.Second,
		},
		{
			name: "errgroup-style cancel with a cause, during a wait",
			ctx: func(p context.Context) (context.Context, func()) {
				c, f := context.WithCancelCause(p)
				return c, func() { f(fmt.Errorf("worker 3: %w", cause)) }
			},
			during: true,
			want:   []error{context.Canceled, cause},
			reason: retry.ReasonCanceled,
			wait:   time.Second,
		},
		{
			name: "a wait that cannot fit the deadline",
			ctx: func(p context.Context) (context.Context, func()) {
				c, f := context.WithTimeout(p, 500*time.Millisecond)
				return c, func() { f() }
			},
			want:   []error{context.DeadlineExceeded, errTransient},
			reason: retry.ReasonDeadline,
			wait:   time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, end := tt.ctx(t.Context())
				defer end()
				if tt.during {
					time.AfterFunc(100*time.Millisecond, end)
				} else if tt.reason == retry.ReasonCanceled && tt.want[0] == context.Canceled {
					end()
				}
				err := retry.Run(ctx, func(ctx context.Context) error {
					if tt.hang && retry.AttemptFrom(ctx) > 1 {
						<-ctx.Done()
						return errTransient // a dependency that does not return ctx.Err()
					}
					return errTransient
				}, retry.WithPolicy(retry.Policy{MaxAttempts: 5, InitialInterval: tt.wait, Jitter: retry.Jitter{Kind: retry.JitterNone}}))
				var re *retry.Error
				if !errors.As(err, &re) || re.Reason != tt.reason {
					t.Fatalf("err = %v, want a *retry.Error with reason %v", err, tt.reason)
				}
				for _, w := range tt.want {
					if !errors.Is(err, w) {
						t.Errorf("errors.Is(%v, %v) = false", err, w)
					}
				}
			})
		})
	}
}

// TestInnerTimeoutRetried: a deadline that expires inside fn while the
// caller's context is alive is a transient timeout of its own type.
func TestInnerTimeoutRetried(t *testing.T) {
	tests := []struct {
		name string
		err  func(ctx context.Context) error
	}{
		{name: "wrapped sentinel", err: func(context.Context) error { return fmt.Errorf("query: %w", context.DeadlineExceeded) }},
		{name: "a per-query context", err: func(ctx context.Context) error {
			qctx, cancel := context.WithTimeout(ctx, time.Millisecond)
			defer cancel()
			<-qctx.Done()
			return fmt.Errorf("select: %w", qctx.Err())
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var types []string
				calls := 0
				err := retry.Run(t.Context(), func(ctx context.Context) error {
					if calls++; calls == 1 {
						return tt.err(ctx)
					}
					return nil
				}, retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond}),
					retry.OnFailure(func(ev retry.Event) { types = append(types, ev.Type) }))
				if err != nil || calls != 2 {
					t.Fatalf("err = %v after %d calls, want success on the second", err, calls)
				}
				if len(types) != 1 || types[0] != "timeout.deadline_exceeded" {
					t.Errorf("failure types = %q, want [%q]", types, "timeout.deadline_exceeded")
				}
			})
		})
	}
	t.Run("the caller's own deadline still stops the call", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			calls := 0
			err := retry.Run(ctx, func(ctx context.Context) error {
				calls++
				<-ctx.Done()
				return ctx.Err()
			}, retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond}))
			var re *retry.Error
			if !errors.As(err, &re) || re.Reason != retry.ReasonCanceled || calls != 1 {
				t.Fatalf("err = %v after %d calls, want canceled after 1", err, calls)
			}
		})
	})
}

// TestNilContext: a nil context is an error that says so, never a panic,
// and fn is not called.
func TestNilContext(t *testing.T) {
	var nilCtx context.Context
	called := false
	fn := func(context.Context) error { called = true; return nil }
	r := retry.New()
	tests := []struct {
		name string
		run  func() error
	}{
		{name: "Run", run: func() error { return retry.Run(nilCtx, fn) }},
		{name: "Run with options", run: func() error { return retry.Run(nilCtx, fn, retry.WithKey("k")) }},
		{name: "Do", run: func() error {
			_, err := retry.Do(nilCtx, func(context.Context) (int, error) { called = true; return 1, nil })
			return err
		}},
		{name: "Retrier.Run", run: func() error { return r.Run(nilCtx, fn) }},
		{name: "Retrier.Attempts", run: func() error {
			var err error
			for range r.Attempts(nilCtx, &err) {
				called = true
			}
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			called = false
			err := tt.run()
			if err == nil || !strings.Contains(err.Error(), "nil Context") {
				t.Fatalf("err = %v, want an error about the nil Context", err)
			}
			if called {
				t.Fatal("fn ran with a nil context")
			}
		})
	}
}

// TestAttemptTimeoutPassedDeadline: a failure returned once the attempt's
// own deadline has passed is the attempt timing out, even when it comes
// back before the context's timer fires (a dependency given the deadline
// may give up first).
func TestAttemptTimeoutPassedDeadline(t *testing.T) {
	const d = 5 * time.Millisecond
	for i := range 20 {
		var types []string
		_ = retry.Run(t.Context(), func(ctx context.Context) error {
			dl, _ := ctx.Deadline()
			for time.Now().Before(dl) {
				time.Sleep(100 * time.Microsecond)
			}
			return fmt.Errorf("remote gave up: %w", context.DeadlineExceeded) // without waiting for ctx
		}, retry.WithPolicy(retry.Policy{MaxAttempts: 2, Backoff: retry.Immediate}), retry.WithAttemptTimeout(d),
			retry.WithBudget(retry.Budget{Off: true}),
			retry.OnFailure(func(ev retry.Event) { types = append(types, ev.Type) }))
		if len(types) != 2 || types[0] != retry.TypeAttemptTimeout || types[1] != retry.TypeAttemptTimeout {
			t.Fatalf("run %d: failure types %v, want two timeout.attempt", i, types)
		}
	}
}
