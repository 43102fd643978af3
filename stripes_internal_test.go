package retry

import (
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
