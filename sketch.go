package retry

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Sizes of a latency sketch.
const (
	sketchSize  = 128 // latencies kept: the most recent ones
	sketchMin   = 20  // latencies needed before the percentile is trusted
	sketchEvery = 8   // the percentile is computed again every sketchEvery latencies
)

// sketch keeps the recent attempt latencies of one key, in a fixed ring, and
// a percentile of them, computed again every few latencies so that reading
// it costs one atomic load. It is safe for concurrent use.
type sketch struct {
	mu   sync.Mutex
	ring [sketchSize]time.Duration
	n    int          // latencies recorded in all
	pct  atomic.Int64 // the percentile, 0 while fewer than sketchMin were recorded
}

// add records latency d and recomputes the p-th percentile (0 < p < 100)
// when it is due.
func (s *sketch) add(d time.Duration, p float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ring[s.n%sketchSize] = d
	s.n++
	if s.n < sketchMin || s.n%sketchEvery != 0 {
		return
	}
	var sorted [sketchSize]time.Duration
	m := min(s.n, sketchSize)
	copy(sorted[:], s.ring[:m])
	slices.Sort(sorted[:m])
	s.pct.Store(int64(percentile(sorted[:m], p)))
}

// percentile returns the p-th percentile of sorted, the value of rank
// ceil(p% of n+1): a new latency from the same distribution exceeds it with
// a probability of at most 100-p percent on average (4.7% for the 95th of
// 128), where the nearest rank of n would give more (5.4%).
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p/100*float64(len(sorted)+1))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// delay returns the percentile kept within [floor, ceiling], or ceiling
// while the sketch has too few latencies.
func (s *sketch) delay(floor, ceiling time.Duration) time.Duration {
	d := time.Duration(s.pct.Load())
	if d == 0 {
		return ceiling
	}
	return min(max(d, floor), ceiling)
}
