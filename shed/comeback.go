package shed

import (
	"math"
	"sync"
	"time"
)

// The span over which the drain rate is measured: marks at least
// markEvery apart; the rate spans the oldest mark at most rateSpan old,
// if it is at least rateMinSpan old.
const (
	markEvery   = 100 * time.Millisecond
	rateSpan    = time.Second
	rateMinSpan = 250 * time.Millisecond
	numMarks    = 16 // > rateSpan/markEvery, so a full span is kept
)

// mark is the counters as read at one instant.
type mark struct {
	at         time.Time
	done, shed int64
}

// meter measures the drain rate from the counters at the instants the
// Shedder reads the clock anyway (a timed request's end, a refusal), so
// that the admitted path reads no clock for it. It is safe for concurrent
// use.
type meter struct {
	mu    sync.Mutex
	marks [numMarks]mark
	n     int // marks taken; the newest is marks[(n-1)%numMarks]
}

// record notes the counters at now, unless the newest mark is younger
// than markEvery. A mark after now (a clock set back) does not count: it
// would stop the marks until the clock caught up.
func (m *meter) record(now time.Time, done, shed int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n > 0 {
		if age := now.Sub(m.marks[(m.n-1)%numMarks].at); age >= 0 && age < markEvery {
			return
		}
	}
	m.marks[m.n%numMarks] = mark{at: now, done: done, shed: shed}
	m.n++
}

// rate returns the completions per second and the refusals for overload
// since the oldest mark at most rateSpan old, at least rateMinSpan old;
// zeros when there is none. Marks after now are left out.
func (m *meter) rate(now time.Time, done, shed int64) (perSecond float64, shedIn int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := max(m.n-numMarks, 0); i < m.n; i++ { // oldest first
		k := m.marks[i%numMarks]
		age := now.Sub(k.at)
		if age > rateSpan || age < 0 { // too old, or after now
			continue
		}
		if age < rateMinSpan {
			return 0, 0
		}
		return float64(done-k.done) / age.Seconds(), shed - k.shed
	}
	return 0, 0
}

// comeBack returns the come-back delay of an overloaded server (see
// Refusal.RetryAfter): backlog requests to serve (queued and recently
// shed) at rate per second, or limit/baseline when rate is 0; u is the
// random draw in [0, 1).
func comeBack(backlog int64, rate float64, limit int, baseline, most time.Duration, u float64) time.Duration {
	if rate <= 0 && baseline > 0 {
		rate = float64(limit) / baseline.Seconds()
	}
	need := time.Second
	if rate > 0 {
		need = time.Duration(math.Min(float64(backlog)/rate*1e9, float64(most)))
	}
	w := min(max(need, time.Second), most/2)
	return min(time.Duration(float64(w)*(1+u)), most)
}

// seconds returns d in whole seconds, rounded up, within [1, most] with
// most rounded down: a quota's reset, in its RateLimit field's t and a
// 429's Retry-After.
func seconds(d, most time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return clampSeconds(s, most)
}

// nearestSeconds returns d in whole seconds, rounded to the nearest (half
// up), within [1, most] with most rounded down: an overload's come-back
// delay in a Retry-After field. Rounding up would map the spread [w, 2w)
// of a w of 1 s onto one value, 2, and clients refused together would
// come back together.
func nearestSeconds(d, most time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second >= time.Second/2 {
		s++
	}
	return clampSeconds(s, most)
}

// clampSeconds returns s within [1, most] with most rounded down.
func clampSeconds(s int64, most time.Duration) int64 {
	return min(max(s, 1), max(int64(most/time.Second), 1))
}
