package retry_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/steadyhq/retry"
)

// Typed nils of the components an option takes: what a constructor that
// failed returns when its error is dropped.
type (
	nilStore   struct{}
	nilLimiter struct{}
	nilBudget  struct{}
	nilClock   struct{}
	nilDecider struct{}
)

func (*nilStore) Sync(context.Context, retry.Breaker, []retry.BreakerSync) ([]retry.BreakerFleet, error) {
	panic("called on a nil store")
}
func (*nilStore) SyncInterval() time.Duration { panic("called on a nil store") }
func (*nilLimiter) Reserve(context.Context, string, time.Time, time.Duration) (time.Duration, func(time.Time), bool) {
	panic("called on a nil limiter")
}
func (*nilBudget) Won(string, int) { panic("called on a nil budget") }
func (*nilBudget) Retry(context.Context, string, bool, time.Time) bool {
	panic("called on a nil budget")
}
func (*nilClock) Now() time.Time                             { panic("called on a nil clock") }
func (*nilClock) Sleep(context.Context, time.Duration) error { panic("called on a nil clock") }
func (*nilDecider) ShouldRetry(int, error) bool              { panic("called on a nil decider") }
func (*nilDecider) Delay(int) time.Duration                  { panic("called on a nil decider") }

// TestTypedNil: a component that is a typed nil makes the Retrier invalid
// with an error naming the option, the field and the type; New does not
// panic, and neither does a call, which returns that error.
func TestTypedNil(t *testing.T) {
	tests := []struct {
		name string
		opt  retry.Option
		want string
	}{
		{name: "Breaker.Store", opt: retry.WithBreaker(retry.Breaker{Store: (*nilStore)(nil)}), want: "WithBreaker: Store = nil: is a nil *retry_test.nilStore"},
		{name: "RateLimit.Shared", opt: retry.WithRateLimit(retry.RateLimit{Shared: (*nilLimiter)(nil)}), want: "WithRateLimit: Shared = nil: is a nil *retry_test.nilLimiter"},
		{name: "Budget.Shared", opt: retry.WithBudget(retry.Budget{Shared: (*nilBudget)(nil)}), want: "WithBudget: Shared = nil: is a nil *retry_test.nilBudget"},
		{name: "WithClock", opt: retry.WithClock((*nilClock)(nil)), want: "WithClock: clock = nil: is a nil *retry_test.nilClock"},
		{name: "WithDecider", opt: retry.WithDecider((*nilDecider)(nil)), want: "WithDecider: decider = nil: is a nil *retry_test.nilDecider"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := retry.New(tt.opt)
			if err := r.Err(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Err() = %v, want one containing %q", err, tt.want)
			}
			ran := false
			err := r.Run(t.Context(), func(context.Context) error { ran = true; return nil })
			if err == nil || ran {
				t.Fatalf("Run: %v, fn ran %v; want the configuration error and no attempt", err, ran)
			}
			// Untyped nils are the unset field: valid.
		})
	}
	for _, opt := range []retry.Option{
		retry.WithBreaker(retry.Breaker{Store: nil}),
		retry.WithRateLimit(retry.RateLimit{Limit: 10, Shared: nil}),
		retry.WithBudget(retry.Budget{Shared: nil}),
		retry.WithClock(nil),
		retry.WithDecider(nil),
	} {
		if err := retry.New(opt).Err(); err != nil {
			t.Errorf("an unset component: %v", err)
		}
	}
}
