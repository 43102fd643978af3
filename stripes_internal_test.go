package retry

import (
	"context"
	"sync"
	"testing"
)

// TestStripes: adds from many goroutines at once are all in the sum.
func TestStripes(t *testing.T) {
	s := newStripes(0)
	if len(s.s) < 16 || len(s.s)&(len(s.s)-1) != 0 {
		t.Fatalf("%d stripes, want a power of two, at least 16", len(s.s))
	}
	const goroutines, adds = 8, 1000
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range adds {
				if n := s.add(); n < 1 {
					t.Errorf("add returned %d, want its stripe's count", n)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := s.sum(); got != goroutines*adds {
		t.Errorf("sum %d, want %d", got, goroutines*adds)
	}
}

// TestBudgetWinsStriped: the successes that earn the retry budget its
// tokens are counted in stripes, the Retrier's own budget's and a key's,
// so that calls on every core write no shared cache line; all of them
// reach the count the budget reads.
func TestBudgetWinsStriped(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
		key  string
	}{
		{name: "the Retrier's own budget"},
		{name: "a budget per key", opts: []Option{WithBudget(Budget{PerKey: true}), WithKey("dep")}, key: "dep"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(tt.opts...)
			const goroutines, calls = 8, 200
			var wg sync.WaitGroup
			for range goroutines {
				wg.Go(func() {
					for range calls {
						_ = r.Run(context.Background(), func(context.Context) error { return nil })
					}
				})
			}
			wg.Wait()
			b := r.cfg.budget.get(tt.key)
			if len(b.wins.s) < 16 {
				t.Fatalf("%d stripes, want at least 16", len(b.wins.s))
			}
			if got := b.won(); got != goroutines*calls {
				t.Errorf("won %d, want %d", got, goroutines*calls)
			}
		})
	}
}

// TestStripesDrain: adds that run while the count is drained are in one
// drain or in what is left, never lost nor counted twice.
func TestStripesDrain(t *testing.T) {
	s := newStripes(0)
	const goroutines, adds = 8, 5000
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range adds {
				s.add()
			}
		})
	}
	var drained int64
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		drained += s.drain()
	}
	if got := drained + s.sum(); got != goroutines*adds {
		t.Errorf("drained %d and %d left, want %d in all", drained, s.sum(), goroutines*adds)
	}
}

// TestThrottleAcceptsStriped: a throttle's accepts are counted in stripes,
// the Retrier's one throttle's and a key's, so that successful calls on
// every core write no shared cache line; all of them reach the window,
// and a window with no excess of requests is calm however many there are.
func TestThrottleAcceptsStriped(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
		key  string
	}{
		{name: "one throttle", opts: []Option{WithThrottle(Throttle{})}},
		{name: "a throttle per key", opts: []Option{WithThrottle(Throttle{PerKey: true}), WithKey("dep")}, key: "dep"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(tt.opts...)
			const goroutines, calls = 8, 200
			var wg sync.WaitGroup
			for range goroutines {
				wg.Go(func() {
					for range calls {
						_ = r.Run(context.Background(), func(context.Context) error { return nil })
					}
				})
			}
			wg.Wait()
			th := r.cfg.throttle.get(tt.key)
			if len(th.fresh.s) < 16 {
				t.Fatalf("%d stripes, want at least 16", len(th.fresh.s))
			}
			if !th.calm() {
				t.Errorf("not calm after %d successes and no failure", goroutines*calls)
			}
			th.mu.Lock()
			th.advance(&r.cfg)
			req, acc := th.req, th.acc
			th.mu.Unlock()
			// The first attempt read the clock (the window had never
			// started) and its accept came after: every accept is in.
			if req != goroutines*calls || acc != goroutines*calls {
				t.Errorf("window holds %d requests and %d accepts, want %d of each", req, acc, goroutines*calls)
			}
		})
	}
}
