package retry

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// stripes is a count that calls on every core add to at once: the calls
// that succeed on a Retrier without a budget of its own, the successes of a
// closed circuit breaker, the accepts adaptive throttling learns. One
// atomic counter would be a cache line that every call writes and every
// core shares, which moves from core to core on each call; here each
// goroutine adds to one stripe of its own, on a cache line of its own,
// chosen by the address of its stack, and a reader sums the stripes. A
// goroutine keeps its stripe as long as its stack does not move; two
// goroutines share one with a chance of one in len(s.s).
//
// The zero stripes count nothing: build them with newStripes.
type stripes struct {
	s    []stripe
	mask uintptr
}

// stripe is one stripe of a count, alone on its cache line (64 bytes on
// amd64 and arm64, 128 on some: the padding keeps neighbours apart on
// both).
type stripe struct {
	_ [64]byte
	n atomic.Int64
	_ [56]byte
}

// newStripes returns a count of four stripes per core, at least 16 and
// at most limit (1024 when limit is 0): a count kept per key is kept
// small, as there may be a thousand keys.
func newStripes(limit int) stripes {
	n := stripeCount(limit)
	return stripes{s: make([]stripe, n), mask: uintptr(n - 1)}
}

// stripeCount is the number of stripes of newStripes(limit): a power of
// two.
func stripeCount(limit int) int {
	if limit <= 0 {
		limit = 1024
	}
	n := 16
	for n < 4*runtime.GOMAXPROCS(0) && n < limit {
		n *= 2
	}
	return n
}

// add adds one to the calling goroutine's stripe and returns that
// stripe's count (not the sum).
func (s *stripes) add() int64 {
	return s.s[stackHint()&s.mask].n.Add(1)
}

// sum returns the count: the sum of the stripes. Adds that run meanwhile
// may or may not be in it.
func (s *stripes) sum() int64 {
	var n int64
	for i := range s.s {
		n += s.s[i].n.Load()
	}
	return n
}

// drain returns the count and sets it to zero: an add that runs meanwhile
// is in the count returned or in the one left, never in both nor lost.
func (s *stripes) drain() int64 {
	var n int64
	for i := range s.s {
		n += s.s[i].n.Swap(0)
	}
	return n
}

// stackHint returns a number that differs between goroutines and seldom
// changes within one: the address of the caller's stack, by the 8 KiB (the
// smallest a goroutine's stack is), mixed so that neighbouring stacks fall
// far apart. It is never used as a pointer.
func stackHint() uintptr {
	var b byte
	return uintptr(unsafe.Pointer(&b)) >> 13 * 0x9E3779B97F4A7C15 >> 40
}
