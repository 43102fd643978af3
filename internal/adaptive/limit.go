// Package adaptive is the adaptive concurrency limit that the client's
// concurrency gate (retry.Concurrency) and the server's shedding (package
// shed) share: one algorithm, one implementation.
//
// The limit follows the latency against a baseline, the latency the
// dependency shows when nothing queues: the lowest mean of two windows in
// a row. Each window (two baselines, at least 100 ms, longer until its
// mean is known within 5%) scales the limit by baseline over latency
// (within [1/4, 2]), adds half the square root of the limit for a small
// queue, and moves the limit there: down, 30% of the way or 1 - baseline
// over latency of it, whichever is more; up, half the way; below the limit at which a queue was last seen, that
// allowance doubles each window. A window in which half the samples were
// dropped cuts the limit by a tenth. While less than half the limit is in
// use it stays put. The baseline rises only when the windows have halved
// the limit and the latency fell by less than a quarter, and never above
// MaxLatency.
package adaptive

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Config holds a limit's bounds, all resolved (no zero means a default
// here): the limit at the start, its floor and ceiling, and the ceiling
// on the baseline.
type Config struct {
	Initial, Min, Max int
	MaxLatency        time.Duration
}

// Sampling: one acquisition in a stride is timed, at random, the stride a
// power of two up to maxStride, so that a window times about
// sampledPerWindow.
const (
	maxStride        = 64
	sampledPerWindow = 1024
)

// Limit is one dependency's limit: the permits in use, the limit, and the
// algorithm that moves it. It is safe for concurrent use.
type Limit struct {
	// inflight changes on every acquisition; the fields read on every
	// acquisition sit on another cache line, so that goroutines on other
	// cores do not reread them after each change.
	inflight atomic.Int64
	_        [56]byte
	limit    atomic.Int64
	mask     atomic.Uint64 // stride-1
	base     atomic.Int64  // the algorithm's baseline

	mu      sync.Mutex
	algo    algo
	samples uint64 // timed permits given back since the last window closed
}

// New returns a limit of c.
func New(c Config) *Limit {
	p := &Limit{algo: newAlgo(c)}
	p.limit.Store(int64(p.algo.current()))
	return p
}

// Acquire takes a permit if one is free. timed says the holder should
// time what it does with it and give it back through Done; otherwise,
// through Release. While few permits are taken every one is timed; with
// many, one in a stride, drawn at random (a shared counter would be one
// more write to shared memory on every acquisition).
func (p *Limit) Acquire() (timed, ok bool) {
	if p.inflight.Add(1) > p.limit.Load() {
		p.inflight.Add(-1)
		return false, false
	}
	m := p.mask.Load()
	return m == 0 || rand.Uint64()&m == 0, true
}

// Release gives a permit back without a sample. A permit given back twice
// is caught only when none is held: the count never goes below zero.
func (p *Limit) Release() { p.giveBack() }

// giveBack lowers the permits in use, never below zero, and returns them.
func (p *Limit) giveBack() int64 {
	n := p.inflight.Add(-1)
	if n < 0 {
		p.inflight.Add(1)
		return 0
	}
	return n
}

// Done gives a timed permit back and feeds the algorithm its latency rtt,
// dropped when what it did failed in a way that says the dependency is
// overloaded, ending at now.
func (p *Limit) Done(rtt time.Duration, dropped bool, now time.Time) {
	n := p.giveBack()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.samples++
	if !p.algo.sample(rtt, int(n)+1, dropped, now) {
		return
	}
	p.limit.Store(int64(p.algo.current()))
	p.base.Store(int64(p.algo.base))
	// The permits taken in the window, about samples times the stride.
	entered := p.samples * (p.mask.Load() + 1)
	stride := min(max(entered/sampledPerWindow, 1), maxStride)
	p.mask.Store(1<<(bits.Len64(stride)-1) - 1)
	p.samples = 0
}

// Limit returns the limit.
func (p *Limit) Limit() int { return int(p.limit.Load()) }

// InFlight returns the permits in use.
func (p *Limit) InFlight() int { return int(p.inflight.Load()) }

// Baseline returns the latency the dependency shows when nothing queues,
// as last measured; zero before the first windows.
func (p *Limit) Baseline() time.Duration { return time.Duration(p.base.Load()) }

// The constants of the algorithm; see the package doc.
const (
	windowMin     = 100 * time.Millisecond // the shortest window
	windowSamples = 10                     // latencies a window needs
	windowError   = 0.05                   // the sampling error of its mean a window waits for
	tolerance     = 0.03                   // latency over the baseline taken as noise
	smoothDown    = 0.3                    // the share of the way down to its target the limit moves a window
	smoothUp      = 0.5                    // likewise, up
	minGradient   = 0.25                   // the most a window scales the limit down
	dropBackoff   = 0.9                    // the limit's scale after a window of failures
	riseWindows   = 3                      // windows lowering the limit before the baseline may rise
	riseShare     = 0.75                   // the share of a run's highest latency a baseline rise keeps
)

// algo is the latency-gradient algorithm on the times it is given. It is
// not safe for concurrent use: Limit serializes the calls.
type algo struct {
	min, max   float64
	maxLatency time.Duration
	limit      float64
	base       time.Duration // the baseline; zero until the first window
	prev       time.Duration // the mean latency of the last window
	clear      int           // windows in a row that saw no queue
	knee       float64       // the limit when a window last saw a queue

	// The window being filled: its start, its latencies' count, sum and
	// sum of squares (in seconds), its failures, and the most attempts in
	// flight a sample saw.
	start     time.Time
	n, drops  int
	sum, sum2 float64
	peak      int
	run       int           // windows in a row that lowered the limit
	runFrom   float64       // the limit before the first of them
	runPeak   time.Duration // the highest latency since
}

// newAlgo returns the algorithm of c.
func newAlgo(c Config) algo {
	return algo{min: float64(c.Min), max: float64(c.Max), maxLatency: c.MaxLatency, limit: float64(c.Initial), knee: math.Inf(1)}
}

// current returns the limit, rounded.
func (l *algo) current() int { return int(math.Round(l.limit)) }

// sample records an attempt that ended at now after rtt, with inflight
// attempts in flight (itself included), dropped when it failed. It reports
// whether a window closed, so that the limit may have changed.
func (l *algo) sample(rtt time.Duration, inflight int, dropped bool, now time.Time) bool {
	if l.n == 0 {
		l.start = now
	}
	x := max(rtt, time.Nanosecond).Seconds() // zero stands for no baseline
	l.n++
	l.sum += x
	l.sum2 += x * x
	if dropped {
		l.drops++
	}
	l.peak = max(l.peak, inflight)
	n := float64(l.n)
	mean := l.sum / n
	// The sampling error of the mean, relative to it.
	rel := math.Sqrt(max(l.sum2/n-mean*mean, 0)/n) / max(mean, 1e-9)
	// A window spans two baselines (the first, two of its own means, so
	// that its slow attempts have ended too).
	span := max(windowMin, 2*l.base)
	if l.base == 0 {
		span = max(windowMin, time.Duration(2*mean*1e9))
	}
	age := now.Sub(l.start)
	if age < span || l.n < windowSamples || (rel > windowError && age < 10*span) {
		return false
	}
	l.update(max(time.Duration(math.Round(mean*1e9)), time.Nanosecond))
	l.n, l.sum, l.sum2, l.drops, l.peak = 0, 0, 0, 0, 0
	return true
}

// update closes a window of mean latency rtt.
func (l *algo) update(rtt time.Duration) {
	if 2*l.drops >= l.n { // mostly failures: their latency says nothing of health
		l.limit = max(l.limit*dropBackoff, l.min)
		l.run = 0
		return
	}
	// The baseline falls to a latency seen two windows in a row, so that
	// one lucky window does not set it, nor the first, in which the
	// attempts that end first are the quick ones.
	prev := l.prev
	l.prev = rtt
	if prev == 0 {
		return
	}
	if low := max(rtt, prev); l.base == 0 || low < l.base {
		l.base = min(low, l.maxLatency)
	}
	if float64(2*l.peak) < l.limit { // the limit is not what holds the attempts back
		l.run = 0
		return
	}
	// The gradient, not cut at 1, so that the windows' noise averages out
	// instead of pulling the limit down.
	g := min(max(float64(l.base)*(1+tolerance)/float64(rtt), minGradient), 1/minGradient)
	// The allowance for a queue; below the knee it doubles for each window
	// in a row that saw no queue (TCP's slow start up to its threshold).
	allowance := max(1, math.Sqrt(l.limit)/2)
	if g < 1 {
		l.clear, l.knee = 0, l.limit
	} else {
		if l.limit < l.knee {
			allowance = max(allowance, min(math.Ldexp(allowance, min(l.clear, 30)), l.limit/2, l.knee-l.limit))
		}
		l.clear++
	}
	target := l.limit*g + allowance
	step := smoothUp
	if target < l.limit {
		// A latency far above the baseline is a queue, not noise: the
		// limit moves as far down as the gradient says, at least
		// smoothDown of the way.
		step = max(smoothDown, 1-g)
		l.lowered(rtt)
	} else {
		l.run = 0
	}
	l.limit = min(max(l.limit+step*(target-l.limit), l.min), l.max)
}

// lowered notes a window that lowers the limit. When a run of them has
// halved the limit and the latency has fallen by less than a quarter with
// it, the latency is the dependency's own, not a queue: it becomes the
// baseline, up to MaxLatency.
func (l *algo) lowered(rtt time.Duration) {
	if l.run == 0 {
		l.runFrom, l.runPeak = l.limit, rtt
	}
	l.run++
	l.runPeak = max(l.runPeak, rtt)
	if l.run >= riseWindows && l.limit <= max(l.runFrom/2, l.min) && float64(rtt) >= riseShare*float64(l.runPeak) {
		l.base = min(rtt, l.maxLatency)
		l.run = 0
	}
}
