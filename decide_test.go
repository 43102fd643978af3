package retry_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry"
)

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
		{name: "success at once", policy: noJitter, attempts: 1},
		{name: "success after two failures", policy: noJitter, errs: repeat(errTransient, 2), attempts: 3, retries: 2},
		// 6.2 explicit verdicts
		{name: "discard stops at once", policy: deadLetter, errs: []error{retry.Discard(errTransient)}, reason: retry.ReasonDiscarded, attempts: 1},
		{name: "fail stops at once", policy: deadLetter, errs: []error{retry.Fail(errTransient)}, reason: retry.ReasonFailed, attempts: 1},
		{name: "dead letter always reaches the sink", policy: noJitter, errs: []error{retry.DeadLetter(errTransient)}, reason: retry.ReasonDeadLettered, attempts: 1, records: 1},
		{name: "verdict beats non_retryable_errors", policy: withPatterns(deadLetter, "payment.*"),
			errs: []error{retry.Discard(typed{"payment.card_stolen"})}, reason: retry.ReasonDiscarded, attempts: 1},
		{name: "non_retryable_errors beat retryable (OJS: RETRY means the normal policy applies)", policy: withPatterns(noJitter, "payment.*"),
			errs: []error{retry.Retryable(typed{"payment.timeout"})}, reason: retry.ReasonNonRetryable, attempts: 1},
		{name: "retryable beats permanent", policy: noJitter, errs: []error{retry.Retryable(retry.Permanent(errTransient))}, attempts: 2, retries: 1},
		{name: "retryable beats a built-in non-retryable type", policy: noJitter, errs: []error{retry.Retryable(context.Canceled)}, attempts: 2, retries: 1},
		{name: "the decider vetoes retryable too", policy: noJitter, errs: []error{retry.Retryable(errTransient)},
			opts: []retry.Option{retry.WithDecider(decider{should: func(int, error) bool { return false }})}, reason: retry.ReasonNonRetryable, attempts: 1},
		{name: "retryable still bounded by max attempts", policy: retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond},
			errs: repeat(retry.Retryable(errTransient), 5), reason: retry.ReasonExhausted, attempts: 2, retries: 1},
		{name: "outermost verdict wins", policy: deadLetter, errs: []error{retry.Fail(retry.DeadLetter(errTransient))}, reason: retry.ReasonFailed, attempts: 1},
		{name: "explicit verdict beats an outer permanent", policy: noJitter, errs: []error{retry.Permanent(retry.Discard(errTransient))}, reason: retry.ReasonDiscarded, attempts: 1},
		// 6.3 Permanent follows on_exhaustion
		{name: "permanent with on_exhaustion discard", policy: noJitter, errs: []error{retry.Permanent(errTransient)}, reason: retry.ReasonNonRetryable, attempts: 1},
		{name: "permanent with on_exhaustion dead_letter", policy: deadLetter, errs: []error{retry.Permanent(errTransient)}, reason: retry.ReasonNonRetryable, attempts: 1, records: 1},
		{name: "permanent wrapped by fmt", policy: noJitter, errs: []error{fmt.Errorf("charge: %w", retry.Permanent(errTransient))}, reason: retry.ReasonNonRetryable, attempts: 1},
		// 6.4 non-retryable types
		{name: "exact pattern", policy: withPatterns(noJitter, "validation.payload_invalid"),
			errs: []error{typed{"validation.payload_invalid"}}, reason: retry.ReasonNonRetryable, attempts: 1},
		{name: "prefix pattern", policy: withPatterns(deadLetter, "auth.*"), errs: []error{typed{"auth.token_expired"}}, reason: retry.ReasonNonRetryable, attempts: 1, records: 1},
		{name: "prefix pattern does not match its bare prefix", policy: withPatterns(noJitter, "auth.*"), errs: []error{typed{"auth"}}, attempts: 2, retries: 1},
		{name: "prefix pattern is anchored", policy: withPatterns(noJitter, "auth.*"), errs: []error{typed{"external.auth.failure"}}, attempts: 2, retries: 1},
		{name: "built-in: 404 is not retried", policy: noJitter, errs: []error{&retry.StatusError{StatusCode: 404}}, reason: retry.ReasonNonRetryable, attempts: 1},
		{name: "built-in: 503 is retried", policy: noJitter, errs: []error{&retry.StatusError{StatusCode: 503}}, attempts: 2, retries: 1},
		{name: "built-in: a cancellation from fn is not retried", policy: noJitter, errs: []error{fmt.Errorf("db: %w", context.Canceled)}, reason: retry.ReasonNonRetryable, attempts: 1},
		{name: "built-in: a deadline inside fn, the caller's context alive, is retried", policy: noJitter, errs: []error{fmt.Errorf("db: %w", context.DeadlineExceeded)}, attempts: 2, retries: 1},
		// 6.5 exhaustion
		{name: "exhausted with on_exhaustion discard", policy: noJitter, errs: repeat(errTransient, 5), reason: retry.ReasonExhausted, attempts: 3, retries: 2},
		{name: "exhausted with on_exhaustion dead_letter", policy: deadLetter, errs: repeat(errTransient, 5), reason: retry.ReasonExhausted, attempts: 3, records: 1, retries: 2},
		{name: "one attempt means no retry", policy: retry.Policy{MaxAttempts: 1}, errs: repeat(errTransient, 5), reason: retry.ReasonExhausted, attempts: 1},
		// 6.6 the Decider
		{name: "decider vetoes after the policy allowed", policy: deadLetter, errs: repeat(errTransient, 5),
			opts: []retry.Option{retry.WithDecider(decider{should: func(n int, _ error) bool { return n < 2 }})}, reason: retry.ReasonNonRetryable, attempts: 2, records: 1, retries: 1},
		{name: "exhaustion is checked before the decider", policy: retry.Policy{MaxAttempts: 1}, errs: repeat(errTransient, 5),
			opts: []retry.Option{retry.WithDecider(decider{should: func(int, error) bool { panic("consulted") }})}, reason: retry.ReasonExhausted, attempts: 1},
		{name: "non-retryable is checked before the decider", policy: withPatterns(noJitter, "auth.*"), errs: []error{typed{"auth.x"}},
			opts: []retry.Option{retry.WithDecider(decider{should: func(int, error) bool { panic("consulted") }})}, reason: retry.ReasonNonRetryable, attempts: 1},
		// 6.7 a server hint over MaxServerDelay stops the call
		{name: "server delay over the maximum", policy: noJitter, errs: []error{retry.After(errTransient, time.Hour)},
			opts: []retry.Option{retry.WithMaxServerDelay(time.Minute)}, reason: retry.ReasonDeadline, attempts: 1},
		{name: "deadline stop follows on_exhaustion", policy: deadLetter, errs: []error{retry.After(errTransient, time.Hour)},
			opts: []retry.Option{retry.WithMaxServerDelay(time.Minute)}, reason: retry.ReasonDeadline, attempts: 1, records: 1},
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

// TestDeadlineStopIs: a call stopped because its next wait could not fit
// the caller's deadline or MaxElapsed matches context.DeadlineExceeded; one
// stopped, with the same Reason, because the server asked for a delay over
// MaxServerDelay does not, for nothing timed out.
func TestDeadlineStopIs(t *testing.T) {
	tests := []struct {
		name    string
		opts    []retry.Option
		err     error
		timeout time.Duration
		is      bool
	}{
		{name: "the backoff cannot fit the deadline", opts: []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Hour})},
			err: errors.New("down"), timeout: time.Minute, is: true},
		{name: "the backoff cannot fit MaxElapsed", opts: []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Hour}), retry.WithMaxElapsed(time.Minute)},
			err: errors.New("down"), is: true},
		{name: "a server delay cannot fit the deadline", err: retry.After(errors.New("down"), 2*time.Minute), timeout: time.Minute, is: true},
		{name: "a server delay over MaxServerDelay", opts: []retry.Option{retry.WithMaxServerDelay(time.Second)},
			err: retry.After(errors.New("down"), time.Minute), timeout: time.Hour, is: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			err := retry.New(tt.opts...).Run(ctx, func(context.Context) error { return tt.err })
			var re *retry.Error
			if !errors.As(err, &re) || re.Reason != retry.ReasonDeadline {
				t.Fatalf("err = %v, want ReasonDeadline", err)
			}
			if got := errors.Is(err, context.DeadlineExceeded); got != tt.is {
				t.Errorf("errors.Is(err, context.DeadlineExceeded) = %v, want %v", got, tt.is)
			}
		})
	}
}
