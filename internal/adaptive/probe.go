package adaptive

import (
	"math"
	"time"
)

// probe is a limit lowered for a moment to see the latency without a
// queue: it waits until the attempts in flight fall to its limit
// (drained), then times the attempts that start after.
type probe struct {
	on      bool
	rise    bool          // its latency replaces the baseline, even a higher one
	from    float64       // the limit before it
	rtt     time.Duration // the mean latency at that limit
	began   time.Time     // its first sample; zero before
	drained time.Time     // zero before
	longest time.Duration // the longest latency of a success it timed
	timed   []timing      // the attempts started since drained, up to maxTimed
}

// timing is an attempt a probe timed: when it started, after the probe
// drained, its latency, and whether it failed.
type timing struct {
	start, rtt time.Duration
	drop       bool
}

// maxTimed bounds the attempts a probe keeps.
const maxTimed = 2048

// latency returns the mean latency of the attempts p timed, age after it
// drained, its sampling error relative to it, and how many attempts
// succeeded and failed slowly among them.
//
// The first attempts to end are the quick ones, and their mean alone
// would be too low. When latencies vary little (their standard deviation
// under half their mean), the attempts start in waves, each as one of the
// wave before ends, and the mean is that of the attempts that started by
// age less one and a half times the longest latency: all that started
// with them have ended. When they vary much the waves blur, attempts
// start at a steady rate, and an attempt of latency r has ended if it
// started in the age - r before now: each counts in inverse proportion to
// that (the Horvitz-Thompson estimator), those longer than four fifths of
// age, which would count for too much, left out.
func (p *probe) latency(age time.Duration) (mean time.Duration, rel float64, n, drops int) {
	var all window
	for _, t := range p.timed {
		if t.drop {
			drops++
		} else {
			all.add(t.rtt.Seconds())
		}
	}
	if all.lat < 2 {
		return all.mean(), 0, all.lat, drops
	}
	var w window
	var weights, weighted float64
	waves := all.rel()*math.Sqrt(float64(all.lat)) < 0.5
	cut := age - p.longest*3/2
	for _, t := range p.timed {
		switch {
		case t.drop:
		case waves && t.start <= cut:
			w.add(t.rtt.Seconds())
		case !waves && t.rtt <= age*4/5:
			w.add(t.rtt.Seconds())
			weights += 1 / (age - t.rtt).Seconds()
			weighted += t.rtt.Seconds() / (age - t.rtt).Seconds()
		}
	}
	switch {
	case w.lat == 0:
		return 0, 0, 0, drops
	case waves:
		return w.mean(), w.rel(), w.lat, drops
	}
	return max(time.Duration(weighted/weights*1e9), time.Nanosecond), w.rel(), w.lat, drops
}

// startProbe lowers the limit, whose last window's mean latency was rtt,
// to see the latency under it; rise lets a latency higher than the
// baseline replace it.
func (l *algo) startProbe(rise bool, rtt time.Duration) {
	l.probe = probe{on: true, rise: rise, from: l.limit, rtt: rtt}
	l.steady = 0
	l.limit = l.probeLimit(l.limit)
	l.run = 0
}

// probeLimit returns the limit of a probe from limit: a quarter of it, at
// least 2 (or the limit, if lower) and Min.
func (l *algo) probeLimit(limit float64) float64 {
	return max(math.Floor(limit/probeShare), min(2, math.Floor(limit)), l.min, 1)
}

// probeSample records a sample while a probe is on, and ends the probe
// once it has timed enough attempts that started after it drained, for
// long enough, or gives it up.
func (l *algo) probeSample(rtt time.Duration, inflight int, failed bool, now time.Time) bool {
	p := &l.probe
	if p.began.IsZero() || now.Before(p.began) || (!p.drained.IsZero() && now.Before(p.drained)) { // the first sample, or the clock went back
		p.began, p.drained, p.longest, p.timed = now, time.Time{}, 0, p.timed[:0]
	}
	switch start := now.Add(-rtt); {
	case p.drained.IsZero():
		if inflight <= l.current() {
			p.drained = now
		}
	case start.Before(p.drained): // started before: it may have queued
	case failed && l.base > 0 && float64(rtt) < fastFailure*float64(l.base): // a quick failure says nothing
	case len(p.timed) < maxTimed:
		p.timed = append(p.timed, timing{start: start.Sub(p.drained), rtt: rtt, drop: failed})
		if !failed {
			p.longest = max(p.longest, rtt)
		}
	}
	if now.Sub(p.began) > max(time.Second, p.rtt*time.Duration(2*l.probeMeans+2*windowSamples/l.current())) { // too long: give up
		l.endProbe(now, false)
		return true
	}
	if p.drained.IsZero() || len(p.timed) < windowSamples {
		return false
	}
	age := now.Sub(p.drained)
	mean, rel, n, drops := p.latency(age)
	switch {
	case n < windowSamples && drops < windowSamples:
		return false
	case drops >= n: // mostly slow failures: no latency to learn
		l.endProbe(now, false)
	case age < 2*mean:
		return false
	case rel > l.probeError(age, mean) && age < time.Duration(l.probeMeans)*mean && len(p.timed) < maxTimed:
		return false
	default:
		l.endProbe(now, true)
	}
	return true
}

// endProbe ends the probe at now, and restores the limit; when measured,
// the probe's latency becomes the baseline when it differs from it beyond
// its sampling error (see the package doc), and a
// baseline well under the latency before the probe sets the limit by
// Little's law: the throughput then times the baseline, with the
// allowance.
func (l *algo) endProbe(now time.Time, measured bool) {
	p := l.probe
	l.probe = probe{}
	l.limit = p.from
	l.prev, l.w, l.run, l.queued, l.testing, l.uncrowded = 0, window{}, 0, false, false, false
	if !measured {
		return
	}
	mean, rel, _, _ := p.latency(now.Sub(p.drained))
	queued := !p.rise && float64(mean)*(1+2*rel) < (1-probeLower)*float64(l.base)
	switch {
	case p.rise: // the latency held up as the limit fell; if it holds up under the probe, it is the dependency's own
		l.base, l.sure = max(l.base, mean), true
	case queued:
		// Lower by a tenth even at the top of the probe's sampling error
		// (two standard errors: a probe times few attempts when the limit
		// is small, and a baseline set low by chance holds the limit
		// under what the dependency serves).
		// The baseline was a queue's, and the probe may have met one too,
		// if its limit was still above what the dependency serves: look
		// again, under the limit that follows.
		l.base, l.sure, l.testing = mean, false, true
	case math.Abs(float64(mean)-float64(l.base)) <= 2*rel*float64(mean):
		// Within the probe's sampling error of the baseline: the baseline
		// holds, no queue's.
		l.sure = true
	case mean < l.base || int(l.probeLimit(p.from)) <= l.basePeak:
		// Under the baseline beyond the probe's sampling error; or above
		// it, and the probe had no more attempts in flight than the
		// baseline was measured with, so met no longer a queue: the
		// baseline was measured low (a probe that met a run of quick
		// attempts), and would hold the limit under what the dependency
		// serves. The probe's mean replaces it, up or down.
		l.base, l.sure = mean, true
	default: // above, with more in flight than the baseline had: a queue's, perhaps
		l.sure = true
	}
	l.base, l.basePeak = min(l.base, l.maxLatency), int(l.probeLimit(p.from))
	if g := float64(l.base) / float64(p.rtt); g < 1-probeLower && !p.rise {
		l.limit = min(max(l.limit*g+allowance(l.limit*g), l.min), l.max)
		l.knee = l.limit
		// With Config.KeepUncrowdedProbe, a probe that found the baseline
		// a queue's under a limit more than a quarter below the
		// Little's-law limit it sets (the throughput before it times its
		// mean: what the dependency serves at once) met no queue itself;
		// the next window tells whether it measured low (see update).
		l.uncrowded = queued && l.keepProbe && 5*l.probeLimit(p.from) < 4*p.from*g
	}
}

// probeError is the sampling error of its mean a probe waits for, age into
// it: probeError; in a probe longer than ten means, half that for its
// first ten, so that a latency that varies much is known more closely,
// while one that varies little, timed at a small limit, does not hold the
// limit low for the whole probe.
func (l *algo) probeError(age, mean time.Duration) float64 {
	if l.probeMeans > 10 && age < 10*mean {
		return probeError / 2
	}
	return probeError
}
