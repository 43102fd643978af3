// Package adaptive is the adaptive concurrency limit that the client's
// concurrency gate (retry.Concurrency) and the server's shedding (package
// shed) share: one algorithm, one implementation.
//
// The limit follows the latency against a baseline, the latency the
// dependency shows when nothing queues. Latencies are read in windows: two
// baselines long, at least 100 ms and 10 attempts, longer until their mean
// is known within 5% (up to ten times as long). A window whose mean is
// above the baseline by more than its noise (two standard errors, at least
// 3%) saw a queue. Each window moves the limit towards its Little's-law
// value, the limit scaled by baseline over latency (the baseline taken
// 1.5% high, as a latency within it is no queue's; within [1/4, 4]),
// plus a third of its square root for a small queue: down, at least 30% of
// the way and further the further the latency is above the baseline; up,
// half the way (Config.SmoothUp; 0.4 as retry.Concurrency sets it), and
// only when the window reached the limit, so that a limit nobody uses does
// not grow. A move within the window's noise is made in part. Up moves
// larger than down ones let a latency that varies much push the limit
// above its rest point: with exponential service times, 0.4 rather than
// 0.5 took the limit out of ±20% of capacity in 35 runs in 1,000 rather
// than 66, in the seeded model of the root package's tests. Below the knee
// (where windows last saw a queue two in a row, or where failures began to
// cut the limit, kept while windows of failures come and go until the
// limit is back there or a queue moves the knee) a second window in a row
// that reached the limit and saw no queue doubles it, as TCP's slow start;
// before any knee, it grows by a quarter.
//
// The baseline falls to the lowest mean seen two windows in a row. It may
// be a queue's: a limit that starts above what the dependency serves,
// under load that fills it, sees only queued latencies. Until it is known
// to be no queue's, a window that reaches the limit without a queue grows
// it by a quarter: a latency that holds with a quarter more attempts in
// flight than the baseline was measured with is no queue's (a queue's
// latency grows with them). A queue that comes with the quarter more may
// be one the baseline shares: once the latency has stopped growing, a
// probe lowers the limit to a quarter of itself (at least 2), waits until
// the attempts in flight have drained to it, and times the attempts that
// start after until their mean is known within 2%, or for ten means; with
// Config.ProbeMeans 30, as retry.Concurrency sets it, within 1% for ten
// means, then 2%, for 30 means at most (a latency that varies much is known
// within about 2.5% at a quarter of a hundred attempts in flight; within 4%
// after ten means, it held the limit out of ±20% of capacity in 1 run in
// 8). A shedder keeps the shorter probe: its probe holds every client's
// requests at a quarter of its limit, and with 30 means its goodput
// through a halving of capacity fell by about 2%. A
// probe well under the baseline (by a tenth, beyond two standard errors)
// replaces it, sets the limit by Little's law (the throughput before the
// probe times the new baseline, with the allowance), and the check goes
// on; otherwise the baseline is known. It stays when the probe's mean is
// within two of its standard errors of it; beyond them, the probe's mean
// replaces it, under it, or above it when the probe had no more attempts
// in flight than the baseline was measured with (so met no longer a
// queue): a baseline kept as the lower of every measure would keep a
// probe's mean low by chance, and a baseline low by a tenth holds the
// limit far under what the dependency serves. With
// Config.KeepUncrowdedProbe, as retry.Concurrency sets it, the check ends
// after a probe well under the baseline when the probe's limit was more
// than a quarter below the Little's-law limit it set (it met no queue
// itself) and the next window that reaches that limit sees a latency over
// the new baseline within the allowance's queue (its share of the limit)
// and the window's noise; a latency above that says the probe measured
// low, and the check goes on. The second probe held the limit at a
// quarter again for about 3 s, and its mean, timed at the smaller limit,
// was known less closely: with exponential service times it took the
// limit past 10 s to settle, or set the baseline a few percent high (over
// 1,000 seeded runs finding capacity passes 970 rather than 965, with 10
// workers 971 rather than 967). A queue that comes
// otherwise, the windows' gradient cuts; when it stays (its latency no
// longer falling for two windows, with fewer attempts in flight than the
// baseline was measured with), the baseline was measured as a queue
// filled, and a probe looks under it. With Config.KeepFreeBaseline, as
// retry.Concurrency sets it, a baseline measured in two windows in a row
// that held no attempt back (none found the limit reached), their
// latencies within each other's noise, is known to be no queue's: the
// attempts in flight were the load's own, and a queue filling would have
// raised the second; a queue that comes later is the dependency's (its
// capacity fell), and a probe under it would hold the limit at a quarter
// while it lasts. When a run of windows has halved
// the limit and the latency fell by less than a quarter, a probe measures
// the latency again and the baseline may rise to it (the dependency
// became slower), never above MaxLatency.
//
// A failure that came back in under half the baseline says nothing of
// load and is left out. A window of mostly slower failures (timeouts)
// cuts the limit by a tenth, while at least half the limit is in use;
// only successes' latencies make the mean. With Config.HungNotLoad, as
// retry.Concurrency sets it, a window of mostly slow failures cuts the
// limit only when its successes' latency is above the baseline beyond its
// noise, or it has none (a timeout that comes while the successes stay at
// the baseline is not load); a failure slower than twice the baseline hung
// apart from the dependency's queue, and the gradient scales only the
// successes' share of the attempts in flight (by Little's law, their time
// over theirs and the hung failures', the hung share at most 90%) and
// keeps the rest; a window that sees no queue takes as its allowance that
// of the successes' share over that share (the hung attempts grow with
// the rate), at most a quarter of the limit; the baseline falls only to
// windows of at least ten successes (fewer, its sampling error set it a
// few percent low); windows with hung failures do not count towards a run
// that raises the baseline; and a queue seen while the attempts in flight
// drain from more than twice the limit does not move the knee. With 100
// workers of 100 ms and 20% or 30% of the attempts hanging for 1 s, in 19
// of 20 seeded runs each the limit settles within ±20% of the Little's-law
// limit of the workers and the hung attempts (350, 529), against 18 and 7
// without. A latency below zero, or a
// window whose latencies Little's law cannot reconcile with the attempts
// in flight, was measured across a jump of the clock and is ignored.
package adaptive

import (
	"math/bits"
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
	// ProbeMeans is the longest a probe times attempts, in their means;
	// 0 is 10. A probe longer than ten means waits for its mean within 1%
	// for its first ten, within 2% after.
	ProbeMeans int
	// SmoothUp is the share of the way up to its target a window moves
	// the limit (outside the doubling below the knee); 0 is 0.5.
	SmoothUp float64
	// KeepFreeBaseline takes a baseline measured in two windows in a row
	// that held no attempt back, their latencies within each other's
	// noise, as no queue's: no probe looks under it when a queue comes,
	// which would hold the limit at a quarter while the dependency is
	// overloaded.
	KeepFreeBaseline bool
	// KeepUncrowdedProbe takes the latency of a probe that found the
	// baseline a queue's, under a limit more than a quarter below the
	// Little's-law limit it sets, as no queue's, unless the next window
	// that reaches that limit sees a latency above the baseline by more
	// than the allowance's queue and its noise (the probe measured low):
	// no second probe looks under it, which would hold the limit at a
	// quarter again.
	KeepUncrowdedProbe bool
	// HungNotLoad lets a window of more slow failures than successes cut
	// the limit only when its successes' latency says load, and takes a
	// failure slower than twice the baseline as an attempt that hung apart
	// from the dependency's queue, whose share of the attempts in flight
	// the gradient leaves as it is (see the package doc), so that a share
	// of attempts that time out independently of load does not hold the
	// limit under what the dependency serves.
	HungNotLoad bool
}

// Sampling: one acquisition in a stride is timed, the stride a power of
// two up to maxStride, so that a window times about sampledPerWindow.
const (
	maxStride        = 64
	sampledPerWindow = 1024
)

// Limit is one dependency's limit: the permits in use, the limit, and the
// algorithm that moves it. It is safe for concurrent use.
type Limit struct {
	// count changes on every acquisition; the fields read on every
	// acquisition sit on another cache line, so that goroutines on other
	// cores do not reread them after each change.
	count count
	_     [56]byte
	limit atomic.Int64
	mask  atomic.Uint64 // stride-1
	base  atomic.Int64  // the algorithm's baseline

	mu      sync.Mutex
	algo    algo
	samples uint64 // timed permits given back since the last window closed
	entered uint64 // the permits taken meanwhile, about: each sample's stride, summed

	// wanted is set when an attempt found the limit reached, and taken
	// into the window by the next Done: written on refusals only, it sits
	// apart from the fields read on every acquisition.
	_      [64]byte
	wanted atomic.Bool
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
// many, one in a stride (see count.timed).
func (p *Limit) Acquire() (timed, ok bool) {
	c := p.count.take()
	if c.inflight() > p.limit.Load() {
		p.refuse()
		return false, false
	}
	return c.timed(p.mask.Load() + 1), true
}

// refuse gives back the permit an acquisition took over the limit, and
// notes that the limit was reached.
func (p *Limit) refuse() {
	p.count.giveBack()
	p.Want()
}

// Want notes that an attempt found the limit, or a share of it, reached:
// the limit holds attempts back, and may grow while the latency allows.
func (p *Limit) Want() {
	if !p.wanted.Load() {
		p.wanted.Store(true)
	}
}

// Release gives a permit back without a sample. A permit given back twice
// is caught only when none is held: the count never goes below zero.
func (p *Limit) Release() { p.giveBack() }

// giveBack lowers the permits in use, never below zero, and returns them.
func (p *Limit) giveBack() int64 {
	n := p.count.giveBack().inflight()
	if n < 0 {
		p.count.undoGiveBack()
		return 0
	}
	return n
}

// Done gives a timed permit back and feeds the algorithm its latency rtt,
// failed when what it did failed in a way that may say the dependency is
// overloaded (a timeout, a 5xx), ending at now.
func (p *Limit) Done(rtt time.Duration, failed bool, now time.Time) {
	n := p.giveBack()
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.mask.Load()
	p.samples++
	p.entered += m + 1
	if p.wanted.Load() && p.wanted.Swap(false) {
		p.algo.want()
	}
	if !p.algo.sample(rtt, int(n)+1, failed, now) {
		// A window lasts at least 100 ms, and a limit starts by timing
		// every attempt: each sampledPerWindow samples of a window that
		// has not closed double the stride, so that a busy limit times
		// few attempts from its first window on, not only from its
		// second (a million calls a second would otherwise each read the
		// clock twice and take this lock for the first 100 ms to 1 s).
		if p.samples%sampledPerWindow == 0 && m < maxStride-1 && !p.algo.probing() {
			p.mask.Store(m<<1 | 1)
		}
		return
	}
	p.limit.Store(int64(p.algo.current()))
	p.base.Store(int64(p.algo.base))
	entered := p.entered
	p.samples, p.entered = 0, 0
	if p.algo.probing() { // a probe times every attempt
		p.mask.Store(0)
		return
	}
	stride := min(max(entered/sampledPerWindow, 1), maxStride)
	p.mask.Store(1<<(bits.Len64(stride)-1) - 1)
}

// Limit returns the limit.
func (p *Limit) Limit() int { return int(p.limit.Load()) }

// InFlight returns the permits in use, never below zero: a permit given
// back when none is held lowers the count for a moment, until giveBack
// undoes it.
func (p *Limit) InFlight() int { return int(max(0, p.count.load().inflight())) }

// Baseline returns the latency the dependency shows when nothing queues,
// as last measured; zero before the first windows.
func (p *Limit) Baseline() time.Duration { return time.Duration(p.base.Load()) }

// count is the permits in use, in the low 32 bits (signed: more than 2^31
// at once would be as many goroutines, each with a stack), and, above
// them, the acquisitions so far, wrapping: one atomic add takes a permit
// and numbers it, so that which acquisitions are timed is decided without
// a random draw or a second write to shared memory.
type count struct{ v atomic.Uint64 }

// countValue is a reading of a count.
type countValue uint64

// take counts an acquisition and its permit, and returns the count after.
func (c *count) take() countValue { return countValue(c.v.Add(1<<32 | 1)) }

// giveBack lowers the permits by one and returns the count after; the
// acquisitions stay counted.
func (c *count) giveBack() countValue { return countValue(c.v.Add(^uint64(0))) }

// undoGiveBack raises the permits by one, after a giveBack too many.
func (c *count) undoGiveBack() { c.v.Add(1) }

// load reads the count.
func (c *count) load() countValue { return countValue(c.v.Load()) }

// inflight is the permits in use.
func (v countValue) inflight() int64 { return int64(int32(uint32(v))) }

// timed says whether the acquisition numbered v is one of those timed
// with a stride of stride (a power of two): its number times 2^32 over
// the golden ratio (Fibonacci hashing), whose top bits take every value
// equally often and with no short period, must fall in the first
// 1/stride of the 32-bit range. So one acquisition in stride is timed,
// within a few, and a caller whose attempts alternate in a pattern (a
// quick one, then a slow one) has each kind timed as often as the other,
// as with a random draw.
func (v countValue) timed(stride uint64) bool {
	h := uint32(v>>32) * 0x9e3779b9
	return uint64(h)*stride < 1<<32
}
