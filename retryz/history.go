package retryz

import "math"

// histLen is the seconds of activity kept for each source: five minutes.
const histLen = 300

// maxSeries is the most counters a source's history follows.
const maxSeries = 4

// history is a source's activity per second over the last histLen seconds,
// built from readings of its cumulative counters. The counters' values at
// each whole second are interpolated between the readings around it, so
// that a second's activity does not depend on when the readings fell, and
// a gap between two readings holds the average over it. Its memory is
// fixed, however long it runs.
type history struct {
	lastNS int64 // unix ns of the last reading; 0 before the first
	last   [maxSeries]int64
	// The counters at each whole unix second (a boundary) that readings
	// have passed, the last histLen+1 of them; at[i] is the boundary slot
	// i holds.
	at     [histLen + 1]int64
	counts [histLen + 1][maxSeries]float64
	top    int64 // the last boundary passed; 0 before one
}

// record takes a reading of the counters at unix time ns.
func (h *history) record(ns int64, counters [maxSeries]int64) {
	switch {
	case h.lastNS == 0 || ns < h.lastNS: // the first, or the clock went back
		*h = history{lastNS: ns, last: counters}
		return
	case ns == h.lastNS:
		h.last = counters
		return
	}
	const sec = int64(1e9)
	from, to := h.lastNS/sec+1, ns/sec // the boundaries in (lastNS, ns]
	from = max(from, to-histLen)
	for b := from; b <= to; b++ {
		f := float64(b*sec-h.lastNS) / float64(ns-h.lastNS)
		i := b % (histLen + 1)
		h.at[i] = b
		for j := range maxSeries {
			h.counts[i][j] = float64(h.last[j]) + f*float64(counters[j]-h.last[j])
		}
		h.top = b
	}
	h.lastNS, h.last = ns, counters
}

// series returns the activity of each whole second up to the last
// boundary passed, oldest first, one slice per counter, and the unix
// second the first value is of; none before two boundaries were passed.
func (h *history) series() (start int64, out [maxSeries][]int64) {
	if h.top == 0 {
		return 0, out
	}
	// The oldest second both of whose boundaries are kept.
	first := h.top
	for first > h.top-histLen && h.kept(first-1) {
		first--
	}
	if first == h.top {
		return 0, out
	}
	for j := range out {
		out[j] = make([]int64, 0, h.top-first)
	}
	for b := first + 1; b <= h.top; b++ {
		prev, cur := &h.counts[(b-1)%(histLen+1)], &h.counts[b%(histLen+1)]
		for j := range out {
			out[j] = append(out[j], max(int64(math.Round(cur[j]-prev[j])), 0))
		}
	}
	return first, out
}

// kept reports whether the counters at boundary b are kept.
func (h *history) kept(b int64) bool { return b > 0 && h.at[b%(histLen+1)] == b }
