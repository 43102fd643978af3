package retry

import (
	"sync"
	"sync/atomic"
	"time"
)

// circuit is the state machine of one circuit breaker (see Breaker), on
// the times it is given: the Retrier's clock, so that a simulator's
// virtual clock runs the breaker too. It has the two-step form of
// gobreaker's TwoStepCircuitBreaker, whose rules it keeps: allow before an
// attempt returns the generation the attempt belongs to, and done after
// it counts the outcome only if the state has not changed since.
//
// Closed, it counts successes and failures over Window, in ten slices,
// and trips when at least MinRequests were counted and FailureRatio of
// them failed. While it is closed, allow and the count of a success take
// neither the lock nor the clock (see closedRun): the successes are added
// to the slices when the circuit next reads the clock, at a failure or an
// outcome left out, spread evenly over the time since it read it before. Open, it refuses until OpenTimeout has passed. Half-open,
// it lets Probes attempts through: one failure opens it again, Probes
// successes close it, and an outcome it leaves out frees the probe for
// another attempt. Every change of state starts a new generation with
// clear counts.
type circuit struct {
	mu    sync.Mutex
	state circuitState
	gen   uint64
	until time.Time // open: when it turns half-open
	ring  [circuitSlices]circuitSlice
	sent  uint32 // half-open: probes let through and not left out
	ok    uint32 // half-open: probes that succeeded
	// run is the current generation while the circuit is closed, nil
	// while it is open or half-open, or not yet read under mu; it is set
	// under mu and read without it.
	run atomic.Pointer[closedRun]
	// read is when the successes of run were last added to the ring,
	// and their count then.
	readAt time.Time
	read   int64
	// onChange, when set, is told of each change of state under mu, so
	// that the changes are recorded in the order they happen.
	onChange func(change)
	// stripes bounds the stripes of run's count (see newStripes).
	stripes int
}

// circuitState is a circuit's state; its name is the Breaker state's.
type circuitState uint8

const (
	circuitClosed circuitState = iota
	circuitHalfOpen
	circuitOpen
)

// String returns BreakerClosed, BreakerHalfOpen or BreakerOpen.
func (s circuitState) String() string {
	switch s {
	case circuitOpen:
		return BreakerOpen
	case circuitHalfOpen:
		return BreakerHalfOpen
	}
	return BreakerClosed
}

// circuitSlices is the number of slices of a circuit's window.
const circuitSlices = 10

// circuitSlice is one slice of the window: its number (plus one; zero is
// unused) and the outcomes counted in it.
type circuitSlice struct {
	n          int64
	ok, failed uint32
}

// change is a circuit's change of state at a time, reported to
// Breaker.OnChange and Stats.BreakerChanges; the zero change is none.
type change struct {
	from, to circuitState
	at       time.Time
}

func (c change) happened() bool { return c.from != c.to }

// closedRun is a generation of a closed circuit, as calls see it without
// the circuit's lock: they go through, and count their successes in wins,
// which the circuit adds to its ring when it next reads the clock. A
// success counted just as the generation ends is counted in the old one,
// which no one reads again: it arrived before the change, as far as the
// circuit knows.
type closedRun struct {
	gen  uint64
	wins stripes
}

// closed returns the generation of a closed circuit, or false when it
// is not closed or has not been read under its lock since it was made.
func (c *circuit) closed() (gen uint64, ok bool) {
	if r := c.run.Load(); r != nil {
		return r.gen, true
	}
	return 0, false
}

// succeeded counts the success of an attempt of generation gen of a
// closed circuit without the lock or the clock, and reports whether it
// did; when it did not, the circuit is not closed in that generation and
// the outcome is for done. A stripe's count is never read alone, only
// their sum at the next failure: which goroutine adds to which stripe
// does not change what the circuit decides, so that a simulation repeats.
func (c *circuit) succeeded(gen uint64) bool {
	r := c.run.Load()
	if r == nil || r.gen != gen {
		return false
	}
	r.wins.add()
	return true
}

// allow asks the circuit at now to let an attempt through. It returns the
// attempt's generation when it does; otherwise wait is how long the
// circuit stays open from now, or zero when it is half-open with its
// probes in flight. A closed circuit lets an attempt through at any time:
// callers ask closed first, which needs no reading of the clock.
func (c *circuit) allow(now time.Time, spec *Breaker) (gen uint64, ok bool, wait time.Duration, ch change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch = c.advance(now)
	c.publish(now)
	switch c.state {
	case circuitOpen:
		return c.gen, false, c.until.Sub(now), ch
	case circuitHalfOpen:
		if c.sent >= spec.Probes {
			return c.gen, false, 0, ch
		}
		c.sent++
	}
	return c.gen, true, 0, ch
}

// done counts the outcome of an attempt of generation gen at now: nil for
// a success, errBreakerExcluded for one left out, any other for a failure.
func (c *circuit) done(gen uint64, outcome error, now time.Time, spec *Breaker) change {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.advance(now)
	if gen != c.gen || ch.happened() {
		return ch
	}
	switch c.state {
	case circuitClosed:
		c.publish(now)
		c.fold(now, spec)
		if outcome == errBreakerExcluded {
			return ch
		}
		s := c.slice(now, spec)
		if outcome == nil {
			s.ok++
			return ch
		}
		s.failed++
		if ok, failed := c.counts(now, spec); ok+failed >= int64(spec.MinRequests) && float64(failed) >= spec.FailureRatio*float64(ok+failed) {
			return c.set(circuitOpen, now, spec)
		}
	case circuitHalfOpen:
		switch outcome {
		case errBreakerExcluded:
			c.sent--
		case nil:
			if c.ok++; c.ok >= spec.Probes {
				return c.set(circuitClosed, now, spec)
			}
		default:
			return c.set(circuitOpen, now, spec)
		}
	}
	return ch
}

// current returns the state at now, turning an open circuit whose time
// is up half-open.
func (c *circuit) current(now time.Time) (circuitState, change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.advance(now)
	return c.state, ch
}

// openFor returns how long the circuit stays open from now; zero when it
// is not open.
func (c *circuit) openFor(now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != circuitOpen || !now.Before(c.until) {
		return 0
	}
	return c.until.Sub(now)
}

// advance turns an open circuit half-open once its time is up. c.mu is
// held.
func (c *circuit) advance(now time.Time) change {
	if c.state == circuitOpen && !now.Before(c.until) {
		return c.set(circuitHalfOpen, c.until, nil) // half-open from the instant the open time is up
	}
	return change{}
}

// set moves the circuit to state s at now, in a new generation with clear
// counts. c.mu is held.
func (c *circuit) set(s circuitState, now time.Time, spec *Breaker) change {
	ch := change{from: c.state, to: s, at: now}
	if c.onChange != nil {
		c.onChange(ch)
	}
	c.state = s
	c.gen++
	c.ring = [circuitSlices]circuitSlice{}
	c.sent, c.ok = 0, 0
	c.run.Store(nil)
	if s == circuitOpen {
		c.until = now.Add(spec.OpenTimeout)
	}
	c.publish(now)
	return ch
}

// publish makes the generation of a closed circuit the one that calls
// see without the lock, from now, if it is not yet. c.mu is held.
func (c *circuit) publish(now time.Time) {
	if c.state != circuitClosed || c.run.Load() != nil {
		return
	}
	c.run.Store(&closedRun{gen: c.gen, wins: newStripes(c.stripes)})
	c.readAt, c.read = now, 0
}

// fold adds to the ring the successes counted without the lock since the
// last reading: spread evenly over the time from that reading to now, in
// the slices of that time that the window still covers (all in now's
// slice when no time has passed). c.mu is held, and the circuit is closed.
func (c *circuit) fold(now time.Time, spec *Breaker) {
	total := c.run.Load().wins.sum()
	n, from := total-c.read, c.readAt.UnixNano()
	c.read, c.readAt = total, now
	to := now.UnixNano()
	if n <= 0 {
		return
	}
	if to <= from {
		c.sliceAt(c.sliceOf(now, spec)).add(n)
		return
	}
	// Walk back from now's slice; each gets the successes of the time
	// from its start (or from) to now, rounded, less those given after it.
	width := c.width(spec)
	k, given := c.sliceOf(now, spec), int64(0)
	for range circuitSlices { // the window's slices, now's first
		lo := max(k*width, from)
		upTo := int64(float64(n)*float64(to-lo)/float64(to-from) + 0.5)
		c.sliceAt(k).add(upTo - given)
		given = upTo
		if lo <= from {
			return
		}
		k--
	}
}

// add counts n successes in the slice, saturating.
func (s *circuitSlice) add(n int64) {
	s.ok = uint32(min(int64(s.ok)+n, 1<<32-1))
}

// slice returns the slice of the window that now falls in, cleared when
// it held an older slice's counts. c.mu is held.
func (c *circuit) slice(now time.Time, spec *Breaker) *circuitSlice {
	return c.sliceAt(c.sliceOf(now, spec))
}

// sliceAt returns slice n of the window, cleared when it held an older
// slice's counts. c.mu is held.
func (c *circuit) sliceAt(n int64) *circuitSlice {
	s := &c.ring[(n%circuitSlices+circuitSlices)%circuitSlices] // n < 0 for a clock before 1970
	if s.n != n+1 {
		*s = circuitSlice{n: n + 1}
	}
	return s
}

// counts returns the successes and failures of the window that ends at
// now. c.mu is held.
func (c *circuit) counts(now time.Time, spec *Breaker) (ok, failed int64) {
	n := c.sliceOf(now, spec)
	for _, s := range c.ring {
		if s.n > n+1-circuitSlices && s.n <= n+1 {
			ok += int64(s.ok)
			failed += int64(s.failed)
		}
	}
	return ok, failed
}

// sliceOf numbers the slice of the window that now falls in.
func (c *circuit) sliceOf(now time.Time, spec *Breaker) int64 {
	return now.UnixNano() / c.width(spec)
}

// width is the length of a slice of the window, in nanoseconds.
func (c *circuit) width(spec *Breaker) int64 {
	return max(int64(spec.Window)/circuitSlices, 1)
}
