package retry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/steadyhq/retry/internal/debugstats"

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
	cfg.breakers.recent.add(stateChange{Key: "dep", From: BreakerClosed, To: BreakerOpen})
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

// TestTransportStats: a Transport's Stats (which package retryz reads) are
// its own, or those of the Retrier it shares; the zero Transport counts
// its requests, and a nil one has none.
func TestTransportStats(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	get := func(rt http.RoundTripper) {
		t.Helper()
		resp, err := (&http.Client{Transport: rt}).Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	r := New()
	shared := NewTransport(nil, r)
	own := NewTransport(nil)
	var zero Transport
	get(shared)
	get(own)
	get(own)
	get(&zero)
	stats := func(t *Transport) Stats { return debugstats.TransportStats(t).(Stats) }
	if got := r.Stats().Calls; got != 1 || stats(shared).Calls != 1 {
		t.Errorf("Retrier and its Transport: %d and %d calls, want 1 and 1", got, stats(shared).Calls)
	}
	if got := stats(own).Calls; got != 2 {
		t.Errorf("own Transport: %d calls, want 2", got)
	}
	if got := stats(&zero).Calls; got != 1 {
		t.Errorf("zero Transport: %d calls, want 1", got)
	}
	if got := stats(nil); !reflect.DeepEqual(got, Stats{BudgetBalance: -1}) {
		t.Errorf("nil Transport: %+v, want zero with BudgetBalance -1", got)
	}
}
