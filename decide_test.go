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
