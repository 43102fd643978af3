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
