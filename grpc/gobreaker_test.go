package grpc_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
	"github.com/steadyhq/retry"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestBreakerRefusalIsGobreakers: through the interceptors, a breaker's
// refusal matches gobreaker.ErrOpenState, the built-in breaker's as
// gobreaker's own: before any attempt (UNAVAILABLE) and after one (the
// last attempt's status). gobreaker's breakers are asked per target and
// told each attempt's status error.
func TestBreakerRefusalIsGobreakers(t *testing.T) {
	var cb *gobreaker.TwoStepCircuitBreaker[any]
	var keys []string
	goBreaker := func() retry.Option {
		cb = gobreaker.NewTwoStepCircuitBreaker[any](gobreaker.Settings{
			Timeout:     time.Hour,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
		})
		keys = nil
		return retry.WithGoBreaker(func(key string) *gobreaker.TwoStepCircuitBreaker[any] {
			keys = append(keys, key)
			return cb
		}, retry.Breaker{OpenTimeout: time.Hour})
	}
	builtIn := retry.WithBreaker(retry.Breaker{MinRequests: 1, FailureRatio: 1, OpenTimeout: time.Hour})
	tests := []struct {
		name     string
		breaker  func() retry.Option
		attempts int // the policy's
		ran      int // attempts of the call refused
	}{
		{name: "built-in, before any attempt", breaker: func() retry.Option { return builtIn }, attempts: 1, ran: 0},
		{name: "built-in, after an attempt", breaker: func() retry.Option { return builtIn }, attempts: 3, ran: 1},
		{name: "gobreaker, before any attempt", breaker: goBreaker, attempts: 1, ran: 0},
		{name: "gobreaker, after an attempt", breaker: goBreaker, attempts: 3, ran: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The first attempt's UNAVAILABLE opens the breaker. With one
			// attempt a call, a second call is refused before its first
			// (UNAVAILABLE naming the refusal); with three, the first
			// call's retry is refused (the last attempt's UNAVAILABLE).
			s := &server{check: failing(codes.Unavailable, 1<<30)}
			r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: tt.attempts, InitialInterval: time.Millisecond}), tt.breaker())
			c, cc := start(t, s, r)
			_, err := c.Check(context.Background(), check)
			if tt.ran == 0 {
				_, err = c.Check(context.Background(), check)
			}
			var re *retry.Error
			if !errors.As(err, &re) || re.Attempts != tt.ran || status.Code(err) != codes.Unavailable || retry.TypeOf(err) != "breaker.open" {
				t.Fatalf("err = %v (%v, type %q); want UNAVAILABLE after %d attempts, type breaker.open", err, status.Code(err), retry.TypeOf(err), tt.ran)
			}
			if !errors.Is(err, gobreaker.ErrOpenState) {
				t.Errorf("errors.Is(%v, gobreaker.ErrOpenState) is false", err)
			}
			if s.count() != 1 {
				t.Errorf("the server saw %d attempts, want 1", s.count())
			}
			if cb != nil && len(keys) > 0 && keys[0] != cc.Target() {
				t.Errorf("gobreaker's breaker was asked for %q, want the target %q", keys, cc.Target())
			}
		})
	}
}
