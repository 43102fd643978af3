package retry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry"
)

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

// TestHungDependencyTripsBreaker: attempts cut off by the caller's deadline
// count as failures for the breaker; the caller's own cancellation does not.
func TestHungDependencyTripsBreaker(t *testing.T) {
	tests := []struct {
		name string
		ctx  func(parent context.Context) (context.Context, context.CancelFunc)
		want string
	}{
		{name: "deadline", want: "open", ctx: func(p context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(p, 20*time.Millisecond)
		}},
		{name: "deadline with a cause", want: "open", ctx: func(p context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeoutCause(p, 20*time.Millisecond, errors.New("request budget spent"))
		}},
		{name: "explicit cancel", want: "closed", ctx: func(p context.Context) (context.Context, context.CancelFunc) {
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

// TestBudgetZeroFields: a Budget's zero fields take their defaults one by
// one; a negative Ratio or Reserve means none.
func TestBudgetZeroFields(t *testing.T) {
	tests := []struct {
		name    string
		budget  retry.Budget
		retries bool // whether a quiet Retrier grants two retries
	}{
		{name: "Window only", budget: retry.Budget{Window: 30 * time.Second}, retries: true},
		{name: "Ratio only", budget: retry.Budget{Ratio: 0.5}, retries: true},
		{name: "Reserve only", budget: retry.Budget{Reserve: 1}, retries: true},
		{name: "no reserve, no ratio", budget: retry.Budget{Ratio: -1, Reserve: -1}, retries: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				calls := 0
				err := retry.Run(t.Context(), script(&calls, errTransient, errTransient),
					retry.WithBudget(tt.budget), retry.WithPolicy(retry.Policy{MaxAttempts: 3, Backoff: retry.Immediate}))
				if tt.retries && err != nil {
					t.Fatalf("err = %v, want success after two retries", err)
				}
				var re *retry.Error
				if !tt.retries && (!errors.As(err, &re) || re.Reason != retry.ReasonBudget) {
					t.Fatalf("err = %v, want a budget stop", err)
				}
			})
		})
	}
	t.Run("negative Window is refused", func(t *testing.T) {
		err := retry.Run(t.Context(), func(context.Context) error { return nil },
			retry.WithBudget(retry.Budget{Window: -time.Second}))
		if err == nil || !strings.Contains(err.Error(), "Window") {
			t.Fatalf("err = %v, want an error naming Window", err)
		}
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

// TestStatsCountsRefusedCalls: a call stopped before its first attempt is a
// call, though not an attempt.
func TestStatsCountsRefusedCalls(t *testing.T) {
	tests := []struct {
		name string
		opts []retry.Option
		ctx  func(context.Context) context.Context
	}{
		{name: "context done before the call", ctx: func(p context.Context) context.Context {
			ctx, cancel := context.WithCancel(p)
			cancel()
			return ctx
		}},
		{name: "open breaker", opts: []retry.Option{retry.WithBreaker(retry.Breaker{MinRequests: 1, FailureRatio: 1, MaxWait: -1})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := retry.New(append(tt.opts, retry.WithPolicy(retry.Policy{MaxAttempts: 1}))...)
			_ = r.Run(t.Context(), func(context.Context) error { return errTransient }) // one real call
			ctx := t.Context()
			if tt.ctx != nil {
				ctx = tt.ctx(ctx)
			}
			err := r.Run(ctx, func(context.Context) error { return nil })
			var re *retry.Error
			if !errors.As(err, &re) || re.Attempts != 0 {
				t.Fatalf("err = %v, want a stop before any attempt", err)
			}
			if s := r.Stats(); s.Calls != 2 || s.Attempts != 1 {
				t.Errorf("Calls = %d, Attempts = %d, want 2 and 1", s.Calls, s.Attempts)
			}
		})
	}
}

// TestRetryableVerdictKeepsPolicy: the RETRY verdict overrides the built-in
// classification but not the policy's non_retryable_errors (OJS: RETRY means
// the normal policy applies).
func TestRetryableVerdictKeepsPolicy(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		policy   retry.Policy
		attempts int
		reason   retry.Reason
	}{
		{name: "a built-in non-retryable status made transient", err: retry.Retryable(&retry.StatusError{StatusCode: 409}),
			policy: retry.Policy{MaxAttempts: 3, Backoff: retry.Immediate}, attempts: 3, reason: retry.ReasonExhausted},
		{name: "a type the policy lists", err: retry.Retryable(typed{"payment.declined"}),
			policy: retry.Policy{MaxAttempts: 3, Backoff: retry.Immediate, NonRetryableErrors: []string{"payment.*"}}, attempts: 1, reason: retry.ReasonNonRetryable},
		{name: "an exact type the policy lists", err: retry.Retryable(typed{"auth.expired"}),
			policy: retry.Policy{MaxAttempts: 3, Backoff: retry.Immediate, NonRetryableErrors: []string{"auth.expired"}}, attempts: 1, reason: retry.ReasonNonRetryable},
		{name: "a type the policy does not list", err: retry.Retryable(typed{"auth.expired"}),
			policy: retry.Policy{MaxAttempts: 3, Backoff: retry.Immediate, NonRetryableErrors: []string{"payment.*"}}, attempts: 3, reason: retry.ReasonExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			err := retry.Run(t.Context(), func(context.Context) error { calls++; return tt.err }, retry.WithPolicy(tt.policy))
			var re *retry.Error
			if !errors.As(err, &re) || re.Reason != tt.reason || calls != tt.attempts {
				t.Fatalf("err = %v after %d calls, want %v after %d", err, calls, tt.reason, tt.attempts)
			}
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
		if s := r.Stats().Breakers[""]; s != "open" {
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
