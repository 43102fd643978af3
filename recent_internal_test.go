package retry

import (
	"context"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// TestRecentOffTheSuccessPath: the locks of what Stats keeps of recent
// breaker changes and denials are not taken by a call that succeeds
// through every gate: with both held, such calls still complete. (A call
// that took one would wait until the test lets go, and fail the test.)
func TestRecentOffTheSuccessPath(t *testing.T) {
	r := New(WithBreaker(Breaker{PerKey: true}), WithBudget(Budget{PerKey: true}),
		WithRateLimit(RateLimit{Limit: rate.Inf, PerKey: true}), WithThrottle(Throttle{PerKey: true}),
		WithConcurrency(Concurrency{PerKey: true}), WithKey("dep"))
	// One change and one denial first, so that the success path has had
	// the chance to touch the rings' cache lines too.
	_ = r.Run(context.Background(), func(context.Context) error { return nil })
	cfg := r.config()
	cfg.breakers.recent.add(BreakerChange{Key: "dep", From: BreakerClosed, To: BreakerOpen})
	cfg.state.denials.add(Event{Key: "dep"})

	cfg.breakers.recent.mu.Lock()
	cfg.state.denials.mu.Lock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 1000 {
			if err := r.Run(context.Background(), func(context.Context) error { return nil }); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // generous: the calls take about a millisecond in all
		t.Error("successful calls blocked on a lock of Stats' recent changes or denials")
	}
	cfg.state.denials.mu.Unlock()
	cfg.breakers.recent.mu.Unlock()
	<-done
}
