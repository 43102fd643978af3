package retry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
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

// TestDecisionOrder pins step 6 of the engine: for each case, the reason the
// call stops, how many attempts ran, and whether the record reached the sink.
func TestDecisionOrder(t *testing.T) {
	deadLetter := noJitter
	deadLetter.OnExhaustion = retry.ExhaustDeadLetter
	withPatterns := func(p retry.Policy, patterns ...string) retry.Policy {
		p.NonRetryableErrors = patterns
		return p
	}
	tests := []struct {
		name     string
		policy   retry.Policy
		errs     []error
		opts     []retry.Option
		reason   retry.Reason // zero: success
		attempts int
		records  int
		retries  int
	}{
		{"success at once", noJitter, nil, nil, "", 1, 0, 0},
		{"success after two failures", noJitter, repeat(errTransient, 2), nil, "", 3, 0, 2},
		// 6.2 explicit verdicts
		{"discard stops at once", deadLetter, []error{retry.Discard(errTransient)}, nil, retry.ReasonDiscarded, 1, 0, 0},
		{"fail stops at once", deadLetter, []error{retry.Fail(errTransient)}, nil, retry.ReasonFailed, 1, 0, 0},
		{"dead letter always reaches the sink", noJitter, []error{retry.DeadLetter(errTransient)}, nil, retry.ReasonDeadLettered, 1, 1, 0},
		{"verdict beats non_retryable_errors", withPatterns(deadLetter, "payment.*"),
			[]error{retry.Discard(typed{"payment.card_stolen"})}, nil, retry.ReasonDiscarded, 1, 0, 0},
		{"non_retryable_errors beat retryable (OJS: RETRY means the normal policy applies)", withPatterns(noJitter, "payment.*"),
			[]error{retry.Retryable(typed{"payment.timeout"})}, nil, retry.ReasonNonRetryable, 1, 0, 0},
		{"retryable beats permanent", noJitter, []error{retry.Retryable(retry.Permanent(errTransient))}, nil, "", 2, 0, 1},
		{"retryable beats a built-in non-retryable type", noJitter, []error{retry.Retryable(context.Canceled)}, nil, "", 2, 0, 1},
		{"the decider vetoes retryable too", noJitter, []error{retry.Retryable(errTransient)},
			[]retry.Option{retry.WithDecider(decider{should: func(int, error) bool { return false }})}, retry.ReasonNonRetryable, 1, 0, 0},
		{"retryable still bounded by max attempts", retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond},
			repeat(retry.Retryable(errTransient), 5), nil, retry.ReasonExhausted, 2, 0, 1},
		{"outermost verdict wins", deadLetter, []error{retry.Fail(retry.DeadLetter(errTransient))}, nil, retry.ReasonFailed, 1, 0, 0},
		{"explicit verdict beats an outer permanent", noJitter, []error{retry.Permanent(retry.Discard(errTransient))}, nil, retry.ReasonDiscarded, 1, 0, 0},
		// 6.3 Permanent follows on_exhaustion
		{"permanent with on_exhaustion discard", noJitter, []error{retry.Permanent(errTransient)}, nil, retry.ReasonNonRetryable, 1, 0, 0},
		{"permanent with on_exhaustion dead_letter", deadLetter, []error{retry.Permanent(errTransient)}, nil, retry.ReasonNonRetryable, 1, 1, 0},
		{"permanent wrapped by fmt", noJitter, []error{fmt.Errorf("charge: %w", retry.Permanent(errTransient))}, nil, retry.ReasonNonRetryable, 1, 0, 0},
		// 6.4 non-retryable types
		{"exact pattern", withPatterns(noJitter, "validation.payload_invalid"),
			[]error{typed{"validation.payload_invalid"}}, nil, retry.ReasonNonRetryable, 1, 0, 0},
		{"prefix pattern", withPatterns(deadLetter, "auth.*"), []error{typed{"auth.token_expired"}}, nil, retry.ReasonNonRetryable, 1, 1, 0},
		{"prefix pattern does not match its bare prefix", withPatterns(noJitter, "auth.*"), []error{typed{"auth"}}, nil, "", 2, 0, 1},
		{"prefix pattern is anchored", withPatterns(noJitter, "auth.*"), []error{typed{"external.auth.failure"}}, nil, "", 2, 0, 1},
		{"built-in: 404 is not retried", noJitter, []error{&retry.StatusError{StatusCode: 404}}, nil, retry.ReasonNonRetryable, 1, 0, 0},
		{"built-in: 503 is retried", noJitter, []error{&retry.StatusError{StatusCode: 503}}, nil, "", 2, 0, 1},
		{"built-in: a cancellation from fn is not retried", noJitter, []error{fmt.Errorf("db: %w", context.Canceled)}, nil, retry.ReasonNonRetryable, 1, 0, 0},
		{"built-in: a deadline inside fn, the caller's context alive, is retried", noJitter, []error{fmt.Errorf("db: %w", context.DeadlineExceeded)}, nil, "", 2, 0, 1},
		// 6.5 exhaustion
		{"exhausted with on_exhaustion discard", noJitter, repeat(errTransient, 5), nil, retry.ReasonExhausted, 3, 0, 2},
		{"exhausted with on_exhaustion dead_letter", deadLetter, repeat(errTransient, 5), nil, retry.ReasonExhausted, 3, 1, 2},
		{"one attempt means no retry", retry.Policy{MaxAttempts: 1}, repeat(errTransient, 5), nil, retry.ReasonExhausted, 1, 0, 0},
		// 6.6 the Decider
		{"decider vetoes after the policy allowed", deadLetter, repeat(errTransient, 5),
			[]retry.Option{retry.WithDecider(decider{should: func(n int, _ error) bool { return n < 2 }})}, retry.ReasonNonRetryable, 2, 1, 1},
		{"exhaustion is checked before the decider", retry.Policy{MaxAttempts: 1}, repeat(errTransient, 5),
			[]retry.Option{retry.WithDecider(decider{should: func(int, error) bool { panic("consulted") }})}, retry.ReasonExhausted, 1, 0, 0},
		{"non-retryable is checked before the decider", withPatterns(noJitter, "auth.*"), []error{typed{"auth.x"}},
			[]retry.Option{retry.WithDecider(decider{should: func(int, error) bool { panic("consulted") }})}, retry.ReasonNonRetryable, 1, 0, 0},
		// 6.7 a server hint over MaxServerDelay stops the call
		{"server delay over the maximum", noJitter, []error{retry.After(errTransient, time.Hour)},
			[]retry.Option{retry.WithMaxServerDelay(time.Minute)}, retry.ReasonDeadline, 1, 0, 0},
		{"deadline stop follows on_exhaustion", deadLetter, []error{retry.After(errTransient, time.Hour)},
			[]retry.Option{retry.WithMaxServerDelay(time.Minute)}, retry.ReasonDeadline, 1, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var rec recorder
				calls := 0
				opts := append([]retry.Option{retry.WithPolicy(tt.policy)}, rec.options()...)
				opts = append(opts, tt.opts...)
				err := retry.Run(t.Context(), script(&calls, tt.errs...), opts...)
				if calls != tt.attempts {
					t.Errorf("attempts = %d, want %d", calls, tt.attempts)
				}
				if tt.reason == "" {
					if err != nil {
						t.Fatalf("err = %v, want success", err)
					}
				} else {
					var re *retry.Error
					if !errors.As(err, &re) {
						t.Fatalf("err = %v (%T), want *retry.Error", err, err)
					}
					if re.Reason != tt.reason {
						t.Errorf("reason = %v, want %v", re.Reason, tt.reason)
					}
					if re.Attempts != tt.attempts {
						t.Errorf("Error.Attempts = %d, want %d", re.Attempts, tt.attempts)
					}
					if len(tt.errs) > 0 && !errors.Is(err, tt.errs[min(calls, len(tt.errs))-1]) {
						t.Errorf("the last attempt's error is not reachable from %v", err)
					}
					if last := rec.failures[len(rec.failures)-1]; last.Reason != tt.reason {
						t.Errorf("last OnFailure reason = %v, want %v", last.Reason, tt.reason)
					}
				}
				if len(rec.records) != tt.records {
					t.Errorf("dead-letter records = %d, want %d", len(rec.records), tt.records)
				}
				if len(rec.alerts) != tt.records {
					t.Errorf("dead-letter alerts = %d, want %d", len(rec.alerts), tt.records)
				}
				if len(rec.retries) != tt.retries {
					t.Errorf("OnRetry fired %d times, want %d", len(rec.retries), tt.retries)
				}
				if len(rec.failures) != calls-boolInt(err == nil) {
					t.Errorf("OnFailure fired %d times for %d failed attempts", len(rec.failures), calls-boolInt(err == nil))
				}
			})
		})
	}
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
		{"policy backoff without jitter", retry.Policy{MaxAttempts: 4, Jitter: retry.Jitter{Kind: retry.JitterNone}},
			repeat(errTransient, 3), nil, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}},
		{"policy backoff with jitter from the injected source", retry.Policy{MaxAttempts: 3},
			repeat(errTransient, 2), []retry.Option{fixed(0)}, []time.Duration{500 * time.Millisecond, time.Second}},
		{"decider delay replaces the policy's", retry.Policy{MaxAttempts: 3, Jitter: retry.Jitter{Kind: retry.JitterNone}}, repeat(errTransient, 2),
			[]retry.Option{retry.WithDecider(decider{delay: func(n int) time.Duration { return time.Duration(n) * 7 * time.Second }})},
			[]time.Duration{7 * time.Second, 14 * time.Second}},
		{"zero decider delay falls back to the policy", retry.Policy{MaxAttempts: 3, Jitter: retry.Jitter{Kind: retry.JitterNone}}, repeat(errTransient, 2),
			[]retry.Option{retry.WithDecider(decider{})}, []time.Duration{time.Second, 2 * time.Second}},
		{"server hint replaces the backoff, exactly without jitter", retry.Policy{MaxAttempts: 3, Jitter: retry.Jitter{Kind: retry.JitterNone}},
			[]error{retry.After(errTransient, 30*time.Second), errTransient}, nil, []time.Duration{30 * time.Second, 2 * time.Second}},
		{"server hint spread upward by at most 10%", retry.Policy{MaxAttempts: 2},
			[]error{retry.After(errTransient, 5*time.Second)}, []retry.Option{fixed(0.5)}, []time.Duration{5*time.Second + 250*time.Millisecond}},
		{"server hint spread at most one second", retry.Policy{MaxAttempts: 2},
			[]error{retry.After(errTransient, 100*time.Second)}, []retry.Option{fixed(0.5)}, []time.Duration{100*time.Second + 500*time.Millisecond}},
		{"a status error's Retry-After is a hint", retry.Policy{MaxAttempts: 2, Jitter: retry.Jitter{Kind: retry.JitterNone}},
			[]error{&retry.StatusError{StatusCode: 429, RetryAfter: 12 * time.Second}}, nil, []time.Duration{12 * time.Second}},
		{"decider delay beats a server hint", retry.Policy{MaxAttempts: 2, Jitter: retry.Jitter{Kind: retry.JitterNone}},
			[]error{retry.After(errTransient, time.Minute)},
			[]retry.Option{retry.WithDecider(decider{delay: func(int) time.Duration { return time.Second }})}, []time.Duration{time.Second}},
		{"immediate strategy takes no wait", retry.Policy{MaxAttempts: 3, Backoff: retry.Immediate},
			repeat(errTransient, 2), nil, []time.Duration{0, 0}},
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

// TestEvents checks what the hooks receive.
func TestEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		calls := 0
		start := time.Now()
		err := retry.Run(t.Context(),
			script(&calls, fmt.Errorf("GET https://bob:hunter2@api.example.com/v1: %w", errTransient), errTransient, errTransient),
			append(rec.options(),
				retry.WithPolicy(retry.Policy{MaxAttempts: 3, Jitter: retry.Jitter{Kind: retry.JitterNone}, OnExhaustion: retry.ExhaustDeadLetter}),
				retry.WithKey("billing"))...)
		if err == nil {
			t.Fatal("want failure")
		}
		if len(rec.failures) != 3 || len(rec.retries) != 2 {
			t.Fatalf("failures %d, retries %d; want 3 and 2", len(rec.failures), len(rec.retries))
		}
		for i, e := range rec.failures {
			if e.Attempt != i+1 || e.Key != "billing" || e.Type != "error" || !errors.Is(e.Err, errTransient) {
				t.Errorf("failure %d = %+v", i, e)
			}
		}
		if m := rec.failures[0].Message; strings.Contains(m, "hunter2") {
			t.Errorf("message not sanitized: %q", m)
		}
		if r := rec.retries[1]; r.Delay != 2*time.Second || r.Reason != "" {
			t.Errorf("second retry = %+v", r)
		}
		if len(rec.records) != 1 {
			t.Fatalf("records = %d", len(rec.records))
		}
		rc := rec.records[0]
		if rc.Reason != retry.ReasonExhausted || rc.Attempt != 3 || !rc.First.Equal(start) || !rc.Time.Equal(start.Add(3*time.Second)) {
			t.Errorf("record = %+v, want exhausted after 3, first at start, last 3 s later", rc)
		}
	})
}

// TestDeadLetterSink covers sink failure, absence and alert deduplication.
func TestDeadLetterSink(t *testing.T) {
	dl := retry.WithPolicy(retry.Policy{MaxAttempts: 1, OnExhaustion: retry.ExhaustDeadLetter})
	t.Run("a failing sink is counted and joined", func(t *testing.T) {
		sinkErr := errors.New("queue full")
		r := retry.New(dl, retry.WithDeadLetter(retry.DeadLetters{Sink: func(context.Context, retry.Event) error { return sinkErr }}))
		err := r.Run(t.Context(), func(context.Context) error { return errTransient })
		if !errors.Is(err, sinkErr) || !errors.Is(err, errTransient) {
			t.Fatalf("err = %v: want the sink's error and the last error", err)
		}
		if s := r.Stats(); s.DeadLetterFailed != 1 || s.DeadLettered != 0 {
			t.Fatalf("stats = %+v", s)
		}
	})
	t.Run("no sink configured is never silent", func(t *testing.T) {
		r := retry.New(dl)
		err := r.Run(t.Context(), func(context.Context) error { return errTransient })
		if err == nil || !strings.Contains(err.Error(), "retry: no dead-letter sink configured") || !errors.Is(err, errTransient) || r.Stats().DeadLetterFailed != 1 {
			t.Fatalf("err = %v, stats %+v", err, r.Stats())
		}
	})
	t.Run("a panicking sink is an error, not a crash", func(t *testing.T) {
		r := retry.New(dl, retry.WithDeadLetter(retry.DeadLetters{Sink: func(context.Context, retry.Event) error { panic("boom") }}))
		err := r.Run(t.Context(), func(context.Context) error { return errTransient })
		if err == nil || !strings.Contains(err.Error(), "panic: boom") || r.Stats().DeadLetterFailed != 1 {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("the sink's context survives the caller's cancellation", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var sinkCtxErr error = errors.New("sink not called")
		r := retry.New(dl, retry.WithDeadLetter(retry.DeadLetters{Sink: func(sctx context.Context, _ retry.Event) error {
			cancel() // the caller gives up while the record is being written
			sinkCtxErr = sctx.Err()
			return nil
		}}))
		_ = r.Run(ctx, func(context.Context) error { return retry.DeadLetter(errTransient) })
		if sinkCtxErr != nil {
			t.Fatalf("sink context err = %v, want live", sinkCtxErr)
		}
	})
	t.Run("repeated alerts are suppressed within the window, records are not", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var rec recorder
			r := retry.New(append(rec.options(), dl, retry.WithKey("job-7"))...)
			fail := func(context.Context) error { return errTransient }
			for range 3 {
				_ = r.Run(t.Context(), fail)
			}
			_ = retry.Run(t.Context(), fail, r, retry.WithKey("job-8")) // another key alerts
			time.Sleep(time.Hour)
			_ = r.Run(t.Context(), fail) // the window has passed
			if len(rec.records) != 5 || len(rec.alerts) != 3 {
				t.Fatalf("records %d, alerts %d; want 5 and 3", len(rec.records), len(rec.alerts))
			}
			if s := r.Stats(); s.AlertsSuppressed != 2 || s.DeadLettered != 5 {
				t.Fatalf("stats %+v", s)
			}
		})
	})
}

// TestStats checks the counters of a shared Retrier.
func TestStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond}))
		calls := 0
		_ = r.Run(t.Context(), script(&calls, errTransient)) // 2 attempts, 1 retry
		_ = r.Run(t.Context(), func(context.Context) error { return errTransient })
		_ = r.Run(t.Context(), func(context.Context) error { return nil })
		got := r.Stats()
		// The default budget: 15% of 3 first attempts plus 2/s over 10 s,
		// less the 3 retries granted.
		if math.Abs(got.BudgetBalance-(0.15*3+20-3)) > 1e-9 {
			t.Errorf("budget balance %v, want 17.45", got.BudgetBalance)
		}
		got.BudgetBalance = 0
		want := retry.Stats{Calls: 3, Attempts: 6, Failed: 4, Retried: 3, FailedPermanently: 1}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("stats = %+v, want %+v", got, want)
		}
	})
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
		if len(types) != 1 || types[0] != "timeout.attempt" {
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
		if got := retry.TypeOf(err); got != "timeout.attempt" {
			t.Fatalf("TypeOf = %q, want %q", got, "timeout.attempt")
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

// TestStatsSeenByHooksAndDuringWaits checks that a call's counts reach Stats
// as they happen: before every hook it fires, during its waits and during
// its attempts, not only at its end.
func TestStatsSeenByHooksAndDuringWaits(t *testing.T) {
	type seen struct {
		hook             string
		failed, retried  int64
		attempts, permas int64
	}
	var got []seen
	var r *retry.Retrier
	record := func(hook string) func(retry.Event) {
		return func(retry.Event) {
			s := r.Stats()
			got = append(got, seen{hook, s.Failed, s.Retried, s.Attempts, s.FailedPermanently})
		}
	}
	r = retry.New(
		retry.WithPolicy(retry.Policy{MaxAttempts: 3, Backoff: retry.Immediate}),
		retry.WithBudget(retry.Budget{Off: true}),
		retry.OnRetry(record("retry")),
		retry.OnGiveUp(record("giveup")),
	)
	_ = r.Run(t.Context(), func(context.Context) error { return errTransient })
	want := []seen{
		{"retry", 1, 1, 1, 0},
		{"retry", 2, 2, 2, 0},
		{"giveup", 3, 2, 3, 1},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Stats seen by hooks:\n got %v\nwant %v", got, want)
	}

	synctest.Test(t, func(t *testing.T) {
		r := retry.New(
			retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Second, Jitter: retry.Jitter{Kind: retry.JitterNone}}),
			retry.WithBudget(retry.Budget{Off: true}),
		)
		done := make(chan error)
		go func() {
			n := 0
			done <- r.Run(t.Context(), func(context.Context) error {
				if n++; n == 1 {
					return errTransient
				}
				return nil
			})
		}()
		synctest.Wait() // the call waits before its retry
		if s := r.Stats(); s.Failed != 1 || s.Retried != 1 || s.Attempts != 1 {
			t.Fatalf("during the wait: Failed %d Retried %d Attempts %d, want 1 1 1", s.Failed, s.Retried, s.Attempts)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if s := r.Stats(); s.Failed != 1 || s.Retried != 1 || s.Attempts != 2 {
			t.Fatalf("after the call: Failed %d Retried %d Attempts %d, want 1 1 2", s.Failed, s.Retried, s.Attempts)
		}
	})

	// A retry that runs at once is counted while it runs.
	r = retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 2, Backoff: retry.Immediate}), retry.WithBudget(retry.Budget{Off: true}))
	running, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		done <- r.Run(t.Context(), func(ctx context.Context) error {
			if retry.AttemptFrom(ctx) == 1 {
				return errTransient
			}
			close(running)
			<-release
			return nil
		})
	}()
	<-running
	if s := r.Stats(); s.Failed != 1 || s.Retried != 1 || s.Attempts != 2 {
		t.Errorf("during the retry: Failed %d Retried %d Attempts %d, want 1 1 2", s.Failed, s.Retried, s.Attempts)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
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
		{"success path", nil, false},
		{"breaker", []retry.Option{retry.WithBreaker(retry.Breaker{MinRequests: 1, FailureRatio: 1})}, true},
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
			if tt.open && s.Breakers[""] != "open" {
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
		{"nil fn to Run", func() error { return retry.Run(t.Context(), nil) }, "fn is nil"},
		{"nil fn to Do", func() error {
			_, err := retry.Do[int](t.Context(), nil)
			return err
		}, "fn is nil"},
		{"nil fn to a Retrier", func() error { return retry.New().Run(t.Context(), nil) }, "fn is nil"},
		{"invalid policy", func() error {
			return retry.Run(t.Context(), ok, retry.WithPolicy(retry.Policy{MaxAttempts: -1}))
		}, "max_attempts"},
		{"invalid policy in a Retrier", func() error {
			return retry.New(retry.WithPolicy(retry.Policy{BackoffCoefficient: 0.5})).Run(t.Context(), ok)
		}, "backoff_coefficient"},
		{"negative attempt timeout", func() error { return retry.Run(t.Context(), ok, retry.WithAttemptTimeout(-1)) }, "WithAttemptTimeout"},
		{"negative max elapsed", func() error { return retry.Run(t.Context(), ok, retry.WithMaxElapsed(-time.Second)) }, "WithMaxElapsed"},
		{"zero max server delay", func() error { return retry.Run(t.Context(), ok, retry.WithMaxServerDelay(0)) }, "WithMaxServerDelay"},
		{"nil option", func() error { return retry.Run(t.Context(), ok, nil) }, ""},
		{"nil Retrier option", func() error { var r *retry.Retrier; return retry.Run(t.Context(), ok, r) }, ""},
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
		{"succeeds on the third attempt", func(n int, err *error) bool {
			if n < 3 {
				*err = errTransient
			}
			return false
		}, "", nil, "[1 2 3]", 3 * time.Second},
		{"exhausts", func(_ int, err *error) bool { *err = errTransient; return false },
			retry.ReasonExhausted, errTransient, "[1 2 3 4]", 7 * time.Second},
		{"break leaves the body's error", func(_ int, err *error) bool { *err = errTransient; return true },
			"", errTransient, "[1]", 0},
		{"a permanent error stops", func(_ int, err *error) bool { *err = retry.Permanent(errTransient); return false },
			retry.ReasonNonRetryable, errTransient, "[1]", 0},
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
		r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}), retry.OnBreakerChange(nil),
			retry.WithBreaker(retry.Breaker{MinRequests: 1, FailureRatio: 1}))
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
