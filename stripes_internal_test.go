package retry

import (
	"context"
	"fmt"
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

// TestCountsStriped: what every successful call counts, on every core at
// once, is counted in stripes, so that those calls write no shared cache
// line: the successes that earn the retry budget its tokens (the
// Retrier's own budget's and a key's) and the accepts adaptive throttling
// learns (one throttle's and a key's). All of them reach the count that is
// read: the budget's, and the throttle's window, which a run of successes
// alone leaves calm.
func TestCountsStriped(t *testing.T) {
	const goroutines, calls = 8, 200
	tests := []struct {
		name string
		opts []Option
		// check returns the stripes of the count and what failed of
		// the count read, "" when nothing did.
		check func(r *Retrier) (*stripes, string)
	}{
		{name: "the Retrier's own budget", check: budgetWins("", goroutines*calls)},
		{name: "a budget per key", opts: []Option{WithBudget(Budget{PerKey: true}), WithKey("dep")}, check: budgetWins("dep", goroutines*calls)},
		{name: "one throttle", opts: []Option{WithThrottle(Throttle{})}, check: throttleAccepts("", goroutines*calls)},
		{name: "a throttle per key", opts: []Option{WithThrottle(Throttle{PerKey: true}), WithKey("dep")}, check: throttleAccepts("dep", goroutines*calls)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(tt.opts...)
			var wg sync.WaitGroup
			for range goroutines {
				wg.Go(func() {
					for range calls {
						_ = r.Run(context.Background(), func(context.Context) error { return nil })
					}
				})
			}
			wg.Wait()
			s, fail := tt.check(r)
			if len(s.s) < 16 {
				t.Errorf("%d stripes, want at least 16", len(s.s))
			}
			if fail != "" {
				t.Error(fail)
			}
		})
	}
}

// budgetWins checks the successes counted by key's budget: all n calls.
func budgetWins(key string, n int64) func(r *Retrier) (*stripes, string) {
	return func(r *Retrier) (*stripes, string) {
		b := r.cfg.budget.get(key)
		if got, want := b.won(), n; got != want {
			return &b.wins, fmt.Sprintf("won %d, want %d", got, want)
		}
		return &b.wins, ""
	}
}

// throttleAccepts checks the accepts key's throttle learned: all n of
// them in its window, which they leave calm. (The first attempt read the
// clock, as the window had never started, and its accept came after.)
func throttleAccepts(key string, n int64) func(r *Retrier) (*stripes, string) {
	return func(r *Retrier) (*stripes, string) {
		th := r.cfg.throttle.get(key)
		if !th.calm() {
			return &th.fresh, fmt.Sprintf("not calm after %d successes and no failure", n)
		}
		th.mu.Lock()
		th.advance(&r.cfg)
		req, acc := th.req, th.acc
		th.mu.Unlock()
		if req != n || acc != n {
			return &th.fresh, fmt.Sprintf("window holds %d requests and %d accepts, want %d of each", req, acc, n)
		}
		return &th.fresh, ""
	}
}
