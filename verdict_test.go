package retry_test

import (
	"context"
	"errors"
	"testing"

	"github.com/steadyhq/retry"
)

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
