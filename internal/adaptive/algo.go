package adaptive

import (
	"math"
	"time"
)

// The constants of the algorithm; see the package doc.
const (
	windowMin     = 100 * time.Millisecond // the shortest window
	windowSamples = 10                     // latencies a window needs
	windowError   = 0.05                   // the sampling error of its mean a window waits for
	tolerance     = 0.03                   // latency over the baseline taken as noise
	gradTolerance = 0.015                  // latency over the baseline the gradient leaves the limit at
	smoothDown    = 0.3                    // the least share of the way down to its target the limit moves a window
	smoothUp      = 0.5                    // the share of the way up, unless Config.SmoothUp says
	minGradient   = 0.25                   // the most a window scales the limit down
	maxHung       = 0.9                    // the most of the attempts in flight taken as hung
	dropBackoff   = 0.9                    // the limit's scale after a window of slow failures
	fastFailure   = 0.5                    // a failure quicker than this share of the baseline says nothing of load
	probeShare    = 4                      // a probe divides the limit by this (to no less than 2)
	probeError    = 0.02                   // the sampling error of its mean a probe waits for (half that before ten of its means, in a probe longer than ten)
	probeMeans    = 10                     // the longest a probe times attempts, in its means, unless Config.ProbeMeans says
	probeLower    = 0.1                    // a probe that finds a latency under the baseline by this share probes again
	riseWindows   = 3                      // windows lowering the limit before a probe may raise the baseline
	riseShare     = 0.75                   // the share of their highest latency the latency kept
	steadyWindows = 2                      // windows of a queue that no longer shrinks before a probe looks under the baseline
)

// algo is the latency-gradient algorithm on the times it is given. It is
// not safe for concurrent use: Limit serializes the calls.
type algo struct {
	min, max   float64
	maxLatency time.Duration
	limit      float64
	base       time.Duration // the baseline; zero until the first windows
	basePeak   int           // the most attempts in flight when it was measured
	sure       bool          // the baseline is known to be no queue's
	testing    bool          // the limit grew a quarter to see whether it is
	prev       time.Duration // the mean latency of the last window; zero after a probe
	knee       float64       // under it the limit doubles: where windows last saw a queue, or before failures cut it
	queued     bool          // the last window saw a queue
	drained    bool          // with Config.HungNotLoad, the last window that moved the limit had more than twice the limit after it in flight
	steady     int           // windows in a row, before the baseline is known, whose queue the gradient no longer shrinks
	clear      bool          // the last window reached the limit and saw no queue
	failing    bool          // the last window was mostly slow failures
	failedFrom float64       // the limit where the last run of failing windows began
	w          window        // the window being filled
	run        int           // windows in a row that lowered the limit
	runFrom    float64       // the limit before the first of them
	runPeak    time.Duration // the highest latency since
	probe      probe
	prevFree   bool    // the last window held no attempt back
	prevFew    bool    // the last window timed fewer than windowSamples successes
	keepFree   bool    // Config.KeepFreeBaseline
	keepProbe  bool    // Config.KeepUncrowdedProbe
	hungApart  bool    // Config.HungNotLoad
	uncrowded  bool    // the last probe found the baseline a queue's and met none itself: the next window that reaches the limit tells whether it measured low
	probeMeans int     // the longest a probe times attempts, in its means
	smoothUp   float64 // the share of the way up to its target a window moves the limit
}

// window is a run of samples: its start, its samples, the successes among
// them and the slow failures (drops), the sum and sum of squares of the
// successes' latencies (in seconds), the most attempts in flight a sample
// saw, and whether an attempt found the limit reached.
type window struct {
	start     time.Time
	n         int
	lat       int
	drops     int
	sum, sum2 float64
	hung      float64 // the seconds of the slow failures that hung: more than twice the baseline
	peak      int
	wanted    bool
}

// add counts a latency of x seconds.
func (w *window) add(x float64) {
	w.lat++
	w.sum += x
	w.sum2 += x * x
}

// mean returns the mean latency, at least a nanosecond.
func (w *window) mean() time.Duration {
	return max(time.Duration(math.Round(w.sum/float64(w.lat)*1e9)), time.Nanosecond)
}

// noise returns the factor over a latency within which w's mean says
// nothing of a queue: two of its sampling errors, or the tolerance.
func (w *window) noise() float64 { return 1 + max(tolerance, 2*w.rel()) }

// rel returns the sampling error of the mean, relative to it; zero with
// fewer than two latencies.
func (w *window) rel() float64 {
	if w.lat < 2 {
		return 0
	}
	n := float64(w.lat)
	m := w.sum / n
	return math.Sqrt(max(w.sum2/n-m*m, 0)/n) / max(m, 1e-9)
}

// newAlgo returns the algorithm of c.
func newAlgo(c Config) algo {
	means := c.ProbeMeans
	if means <= 0 {
		means = probeMeans
	}
	up := c.SmoothUp
	if up <= 0 {
		up = smoothUp
	}
	return algo{min: float64(c.Min), max: float64(c.Max), maxLatency: c.MaxLatency, limit: float64(c.Initial), knee: math.Inf(1), probeMeans: means, smoothUp: up, keepFree: c.KeepFreeBaseline, keepProbe: c.KeepUncrowdedProbe, hungApart: c.HungNotLoad}
}

// current returns the limit, rounded.
func (l *algo) current() int { return int(math.Round(l.limit)) }

// want notes that an attempt found the limit, or a share of it, reached,
// outside a probe (whose limit is lowered on purpose).
func (l *algo) want() {
	if !l.probe.on {
		l.w.wanted = true
	}
}

// probing reports whether a probe is on.
func (l *algo) probing() bool { return l.probe.on }

// sample records an attempt that ended at now after rtt, with inflight
// attempts in flight (itself included), failed when it failed. It reports
// whether the limit or the baseline may have changed.
func (l *algo) sample(rtt time.Duration, inflight int, failed bool, now time.Time) bool {
	if rtt < 0 { // the clock went back while the attempt ran
		return false
	}
	rtt = max(rtt, time.Nanosecond) // zero stands for no baseline
	if l.probe.on {
		return l.probeSample(rtt, inflight, failed, now)
	}
	w := &l.w
	if w.n == 0 || now.Before(w.start) { // a new window, or the clock went back
		*w = window{start: now, wanted: w.wanted}
	}
	w.n++
	w.peak = max(w.peak, inflight)
	l.count(w, rtt, failed)
	// A window spans two baselines (the first, two of its own means, so
	// that its slow attempts have ended too).
	span := max(windowMin, 2*l.base)
	if l.base == 0 && w.lat > 0 {
		span = max(windowMin, 2*w.mean())
	}
	age := now.Sub(w.start)
	if age < span || w.n < windowSamples || (w.rel() > windowError && age < 10*span) {
		return false
	}
	l.update(age)
	l.w = window{}
	return true
}

// count adds an attempt to w: a success, with its latency; a failure, as
// a drop, unless it came back in less than half the baseline (a dependency
// that refuses at once is not loaded by what it refuses). A failure's
// latency, a timeout's or a refusal's, says nothing of how long the
// dependency takes to serve.
func (l *algo) count(w *window, rtt time.Duration, failed bool) {
	switch {
	case !failed:
		w.add(rtt.Seconds())
	case l.base == 0 || float64(rtt) >= fastFailure*float64(l.base):
		w.drops++
		if l.base > 0 && rtt > 2*l.base {
			w.hung += rtt.Seconds()
		}
	}
}

// update closes the window l.w, age long.
func (l *algo) update(age time.Duration) {
	w := l.w
	if w.lat+w.drops == 0 { // quick failures only: nothing learned of the load
		l.run = 0
		return
	}
	inUse := 2*float64(w.peak) >= l.limit
	if w.drops >= w.lat && !l.hungAtBase(w) { // mostly slow failures
		l.queued = false
		if inUse {
			if !l.failing {
				// Failures that begin again before the limit is back
				// where the last began keep that knee: windows of
				// failures between windows of none would otherwise
				// move it down with the limit.
				if l.limit >= l.failedFrom {
					l.failedFrom = l.limit
				}
				l.knee = l.failedFrom
			}
			l.failing = true
			l.limit = max(l.limit*dropBackoff, l.min)
		}
		l.run = 0
		return
	}
	l.failing = false
	rtt := w.mean()
	// By Little's law the attempts in flight are at least the rate of the
	// window's samples times their latency: latencies far beyond that were
	// measured across a jump of the clock, not at the dependency.
	if float64(w.n)/max(age.Seconds(), 1e-9)*rtt.Seconds() > 2*float64(max(w.peak, 1)) {
		l.run = 0
		return
	}
	// The baseline falls to a latency seen two windows in a row, so that
	// one lucky window does not set it, nor the first, in which the
	// attempts that end first are the quick ones.
	// A queue is a latency above the baseline by more than the window's
	// noise: two of its standard errors, or the tolerance.
	noise := w.noise()
	prev, prevFree, prevFew := l.prev, l.prevFree, l.prevFew
	// With Config.HungNotLoad, a window of fewer than windowSamples
	// successes (a window closes at that many samples, failures counted)
	// does not lower the baseline: its sampling error would set it a few
	// percent low, and every window at the latency a queue's.
	free, few := w.peak < l.current() && !w.wanted, l.hungApart && w.lat < windowSamples
	l.prev, l.prevFree, l.prevFew = rtt, free, few
	if prev == 0 {
		return
	}
	if low := time.Duration(float64(max(rtt, prev)) * (1 + w.rel())); l.base == 0 || (low < l.base && !few && !prevFew) {
		l.base, l.basePeak = min(low, l.maxLatency), w.peak
		// Measured in two windows that held no attempt back, their
		// latencies within each other's noise, it is no queue's: the
		// attempts in flight were the load's own, not a limit's, and a
		// queue filling would have raised the second.
		if l.keepFree && free && prevFree && float64(rtt) <= float64(prev)*noise && float64(prev) <= float64(rtt)*noise {
			l.sure = true
		}
	}
	queue := float64(rtt) > float64(l.base)*noise
	reached := w.peak >= l.current() || w.wanted
	if reached && l.uncrowded {
		// After a probe that found the baseline a queue's and met none
		// itself (see endProbe), the limit is the Little's-law limit
		// with the allowance, whose queue raises the latency over the
		// baseline by the allowance's share of the rest of the limit. A
		// latency within that, and the window's noise, says the probe
		// measured the latency as it is: the baseline is known, and no
		// second probe holds the limit at a quarter again. A latency
		// above it says the probe measured low (it met a run of quick
		// attempts), and holds the limit under what the dependency
		// serves: the check goes on, and a second probe corrects it.
		l.uncrowded = false
		if a := allowance(l.limit); float64(rtt) <= float64(l.base)*l.limit/max(l.limit-a, 1)*noise {
			l.sure, l.testing = true, false
		}
	}
	if reached && !l.sure {
		// The baseline may be a queue's. A latency that stays at it with
		// a quarter more attempts in flight than it was measured at is
		// no queue's (a queue's latency grows with them): try that
		// first. A queue that came with the quarter more may be one the
		// baseline shares: look under it, once the latency has stopped
		// growing (as a queue fills, it grows from window to window).
		// Any other queue the gradient below cuts, as it would anyway.
		switch {
		case !queue && 4*w.peak >= 5*l.basePeak:
			l.sure, l.testing = true, false
		case !queue:
			l.limit, l.testing = min(max(l.limit*5/4, l.limit+1), l.max), true
			return
		case !l.testing:
			// The gradient below cuts this queue. When the latency has
			// stopped falling with it for two windows in a row, with
			// fewer attempts in flight than the baseline was measured
			// with, that baseline was no latency the dependency holds
			// (measured as a queue filled, its latency behind the
			// attempts in flight): look under it.
			if l.steady++; float64(rtt)*noise < float64(prev) || w.peak >= l.basePeak {
				l.steady = 0
			}
			if l.steady >= steadyWindows {
				l.startProbe(false, rtt)
				return
			}
		case float64(rtt) > float64(prev)*noise:
			return
		default:
			l.startProbe(false, rtt)
			return
		}
	}
	if !inUse { // the limit is not what holds the attempts back
		l.run = 0
		return
	}
	// The gradient, not cut at 1, so that the windows' noise averages out
	// instead of pulling the limit down.
	g := min(max(float64(l.base)*(1+gradTolerance)/float64(rtt), minGradient), 1/minGradient)
	target, step := l.limit*g+allowance(l.limit), l.smoothUp
	// With Config.HungNotLoad, the attempts that hung are no queue's: by
	// Little's law they stay in flight as long as the rate holds, and the
	// gradient scales only the rest. Growing, the limit takes the
	// allowance of the successes' share over that share, as the hung
	// attempts grow with the rate; a queue's allowance is the successes'.
	h := l.hungShare(w)
	if h > 0 {
		a := allowance(l.limit * (1 - h))
		if !queue {
			a = min(a/(1-h), l.limit/4)
		}
		target = l.limit*(h+(1-h)*g) + a
	}
	// The knee moves to a queue seen two windows in a row, so that one
	// window's noise, likelier the fewer attempts it times, does not end
	// the doubling; failures that begin after it start from where they
	// begin, as the dependency's capacity may have changed.
	// With Config.HungNotLoad, a queue seen while the attempts in flight
	// drain from more than twice the limit is the higher limit's, and does
	// not move the knee to this one.
	if queue && l.queued && !l.drained {
		l.knee, l.failedFrom = l.limit, 0
	}
	if !queue && l.limit < l.knee && l.clear {
		// Below the knee, a second window in a row that reached the
		// limit and saw no queue doubles it, as TCP's slow start; before
		// any knee, in ground not known, it grows by a quarter, so that
		// it passes what the dependency serves by a quarter at most.
		target, step = min(2*l.limit, l.knee), 1
		if math.IsInf(l.knee, 1) {
			target = l.limit * 5 / 4
		}
	}
	if !reached { // a limit not reached is not grown
		target = min(target, l.limit)
	}
	l.queued, l.clear = queue, reached && !queue
	if target < l.limit {
		// A latency far above the baseline is a queue, not noise: the
		// limit moves as far down as the gradient says, at least
		// smoothDown of the way.
		step = max(smoothDown, 1-g)
		if h > 0 { // hung attempts ending hold the latency up: no run
			l.run = 0
		} else if l.lowered(rtt) {
			l.startProbe(true, rtt)
			return
		}
	} else {
		l.run = 0
	}
	// A move within the window's noise (two standard errors of its mean)
	// is made in part, in proportion, so that the noise of latencies that
	// vary much does not swing the limit.
	if move := math.Abs(target-l.limit) / l.limit; step < 1 && move < 2*w.rel() {
		step *= move / (2 * w.rel())
	}
	l.limit = min(max(l.limit+step*(target-l.limit), l.min), l.max)
	l.drained = l.hungApart && float64(w.peak) > 2*l.limit
}

// hungAtBase reports whether, with Config.HungNotLoad, w's successes came
// back within its noise of the baseline: its slow failures then say
// nothing of load, however many.
func (l *algo) hungAtBase(w window) bool {
	return l.hungApart && w.lat > 0 && l.base > 0 && float64(w.mean()) <= float64(l.base)*w.noise()
}

// hungShare returns, with Config.HungNotLoad, the share of w's attempts in
// flight that hung (failures slower than twice the baseline), by Little's
// law their time over all the time of its successes and theirs, at most
// maxHung; zero without.
func (l *algo) hungShare(w window) float64 {
	if !l.hungApart || w.hung == 0 {
		return 0
	}
	return min(w.hung/(w.hung+w.sum), maxHung)
}

// allowance is the queue a limit allows beyond the dependency's
// Little's-law limit: a third of its square root.
func allowance(limit float64) float64 { return math.Sqrt(limit) / 3 }

// lowered notes a window that lowers the limit, and reports whether a run
// of them has halved the limit (or brought it to Min) while the latency
// fell by less than a quarter: a queue's latency falls with the limit, so
// this latency is the dependency's own, or the baseline is too low, and a
// probe tells which.
func (l *algo) lowered(rtt time.Duration) bool {
	if l.run == 0 {
		l.runFrom, l.runPeak = l.limit, rtt
	}
	l.run++
	l.runPeak = max(l.runPeak, rtt)
	if l.run >= riseWindows && l.limit <= max(l.runFrom/2, l.min) && float64(rtt) >= riseShare*float64(l.runPeak) {
		l.run = 0
		return true
	}
	return false
}
