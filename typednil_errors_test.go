package retry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/steadyhq/retry"
)

// TestTypedNilErrors: a function that returns one of the package's error
// types as a typed nil (var se *retry.StatusError; return se) has failed,
// as any non-nil error has: the call retries it as a plain error and
// says what it was, never panics; Permanent still stops it.
func TestTypedNilErrors(t *testing.T) {
	var (
		re *retry.Error
		se *retry.StatusError
		pe *retry.PolicyError
	)
	tests := []struct {
		name   string
		err    error
		reason retry.Reason
		says   string
	}{
		{name: "*Error", err: re, reason: retry.ReasonExhausted, says: "retry: nil *Error"},
		{name: "*StatusError", err: se, reason: retry.ReasonExhausted, says: "retry: nil *StatusError"},
		{name: "*PolicyError", err: pe, reason: retry.ReasonExhausted, says: "retry: nil *PolicyError"},
		{name: "wrapped", err: fmt.Errorf("call: %w", se), reason: retry.ReasonExhausted, says: "call: retry: nil *StatusError"},
		{name: "joined", err: errors.Join(errors.New("x"), re), reason: retry.ReasonExhausted, says: "x\nretry: nil *Error"},
		{name: "permanent", err: retry.Permanent(se), reason: retry.ReasonNonRetryable, says: "retry: nil *StatusError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if typ := retry.TypeOf(tt.err); typ != "error" {
				t.Errorf("TypeOf = %q, want error", typ)
			}
			calls := 0
			err := retry.Run(context.Background(), func(context.Context) error { calls++; return tt.err },
				retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Microsecond}))
			var e *retry.Error
			if !errors.As(err, &e) || e == nil || e.Reason != tt.reason || !strings.HasSuffix(err.Error(), tt.says) {
				t.Fatalf("err = %v, want %v ending in %q", err, tt.reason, tt.says)
			}
			if want := map[retry.Reason]int{retry.ReasonExhausted: 2, retry.ReasonNonRetryable: 1}[tt.reason]; calls != want {
				t.Errorf("%d attempts, want %d", calls, want)
			}
		})
	}
}
