package retry

import (
	"cmp"
	"context"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Throttle is adaptive client-side throttling, the rule of the Google SRE
// book's chapter "Handling Overload", for WithThrottle. Over the last
// Window the client counts the attempts it sent (requests) and those the
// dependency accepted (accepts), and sheds each new attempt locally,
// before it leaves the process, with probability
//
//	max(0, (requests − K·accepts) / (requests + 1))
//
// An attempt is refused when it fails as a circuit breaker counts failures
// (5xx, 408, 429, timeouts, connection errors); any other outcome, a
// success or the caller's own error (another 4xx, Permanent, a
// non-retryable type, the caller's cancellation), is accepted. While the
// dependency accepts at least one attempt in K, nothing is shed; as it
// refuses more, the client sheds more, so the load on a dependency in
// trouble falls with the share it can serve.
//
// Every kind of attempt is drawn for: a first attempt or a hedge as it is
// about to run, a retry as soon as it is decided, before its wait. A shed
// first attempt ends the call with an *Error of Attempts 0, Reason
// ReasonThrottled and type "throttle.adaptive"; a shed retry ends it with
// the same Reason, its Err the last failure (the Transport returns the
// response in hand); a shed hedge is not started. Stats.Throttled counts the shed attempts and Stats.Throttle
// gives the probability now. The draws come from WithRandom's source and
// the window runs on WithClock's clock, so a simulation is repeatable.
//
// Unlike the retry budget (Budget), which caps retries at a share of first
// attempts and never sheds a first attempt, Throttle sheds first attempts
// too, and follows what the dependency accepts rather than what the
// client sends: it does nothing while the dependency copes.
//
// The attempts the throttle sheds are not requests, as Envoy's admission
// control does not count them either: counted, as the book counts them,
// they kept the probability up after the dependency recovered (K = 2 over
// 2 minutes took 13 minutes to return to zero after a 3-minute outage, and
// K = 1 never did). A refusal counts for a Window at most, so the
// probability is back to zero at most a Window after the dependency is
// healthy again, sooner the higher K, whatever K: 1 to 28 s after a
// 3-minute outage at 100 calls a second (TestThrottleRecovers). The cost:
// when the client makes N calls a Window and the dependency accepts A of
// them, the client sends about √(N·(K·A+1)) a Window, not K·A: through a
// full outage about √N still reach the dependency (32 of 1,000), and
// through an overload more than K·A (about 450 of 1,000 where it accepts
// 100, K = 2, against 200; TestThrottleOutage). A cap on the probability (Envoy's
// max_rejection_probability) was tried and left out: it only adds
// attempts to a dependency that is down (at a cap of 0.8, 4,009 instead
// of 1,191 through a 3-minute outage at 100 calls a second), and they
// hold the probability up longer once it is back (4 s instead of 1 s);
// on the simulator's metastable failure it brought recovery 0 to 2 s
// sooner (9 to 12 s after the trigger instead of 10 to 12 s, for fleets
// of 1 to 1,000 clients).
//
// Throttling is off unless WithThrottle is given. Zero fields take the
// defaults given beside them, field by field: the zero Throttle is K = 2
// over 10 seconds, one throttle for every key. Throttle is a plain value;
// the state WithThrottle builds from it is shared by every call of the
// Retrier or Transport and is safe for concurrent use.
type Throttle struct {
	// K is how many requests the client sends per accepted one before it
	// sheds any: default 2, at least 1. Nearer 1 sheds sooner (at 1, as
	// many as the dependency refuses); higher lets more through to a
	// struggling dependency.
	K float64
	// Window is the time over which requests and accepts are counted:
	// default 10 seconds, at most 30. An outcome leaves the count between
	// 11/12 of a Window and a Window after it was learned.
	Window time.Duration
	// PerKey keeps one throttle per key (WithKey, or the Transport's
	// request key, by default the host), so that one failing dependency
	// does not shed the attempts to others; at most 1024 keys are kept,
	// the one used least recently dropped (keys last used between the same
	// two additions of keys count as used together).
	PerKey bool
}

// defaultThrottle is the Throttle that zero fields take theirs from.
var defaultThrottle = Throttle{K: 2, Window: 10 * time.Second}

// maxThrottleWindow is the longest Window: a failure counts for a Window
// at most, so the probability is back to zero at most this long after the
// dependency is.
const maxThrottleWindow = 30 * time.Second

// typeThrottled is the type of a call's error when adaptive throttling shed
// its attempt.
const typeThrottled = "throttle.adaptive"

// WithThrottle turns on adaptive client-side throttling (see Throttle),
// in place of any before it. An invalid t makes every call return an error
// naming the field.
func WithThrottle(t Throttle) Option {
	return optionFunc(func(c *config) {
		switch {
		case t.K != 0 && !(t.K >= 1): // NaN too
			c.invalid("WithThrottle", "K", t.K, "must be >= 1")
			return
		case math.IsInf(t.K, 1):
			c.invalid("WithThrottle", "K", t.K, "must be finite")
			return
		case t.Window < 0:
			c.invalid("WithThrottle", "Window", t.Window, "must be >= 0")
			return
		case t.Window > maxThrottleWindow:
			c.invalid("WithThrottle", "Window", t.Window, "must be <= "+maxThrottleWindow.String())
			return
		}
		c.throttle = newThrottles(t)
	})
}

// throttles is the adaptive-throttling gate: one throttle, or one per key.
type throttles struct {
	one  *throttle
	keys *keyed[*throttle]
	mk   func() *throttle // makes a key's throttle
	shed atomic.Int64     // attempts shed, for Stats
}

func newThrottles(t Throttle) *throttles {
	t.K = cmp.Or(t.K, defaultThrottle.K)
	t.Window = cmp.Or(t.Window, defaultThrottle.Window)
	stripes := 0 // one throttle: as many stripes as newStripes gives
	if t.PerKey {
		stripes = 16 // a thousand keys: kept small
	}
	mk := func() *throttle {
		return &throttle{k: t.K, slice: max(t.Window/throttleSlices, 1), fresh: newStripes(stripes)}
	}
	if t.PerKey {
		return &throttles{keys: newKeyed[*throttle](maxKeys), mk: mk}
	}
	return &throttles{one: mk()}
}

// acts: a retry is drawn for as it is decided, so that a driver still holds
// the last response when the retry is shed; a first attempt and a hedge as
// they are about to run. Every attempt that runs is learned from.
func (ts *throttles) acts() (admits, enters uint8) { return onRetry, onAll }

// admit draws for a retry.
func (ts *throttles) admit(_ context.Context, a *ask, g *grant) {
	g.no = ts.draw(ts.get(a.key), a)
}

// enter draws for a first attempt or a hedge, and lets the attempt's
// outcome be learned.
func (ts *throttles) enter(_ context.Context, a *ask, g *grant) {
	t := ts.get(a.key)
	if a.kind != kindRetry {
		if g.no = ts.draw(t, a); g.no != nil {
			return
		}
	}
	g.learner = t
}

// draw sheds the attempt with the throttle's probability, or returns nil.
// While the dependency accepts enough it reads neither the clock nor the
// random source.
func (ts *throttles) draw(t *throttle, a *ask) *refusal {
	if t.calm() {
		return nil
	}
	p := t.probability(a.cfg)
	if p <= 0 || a.cfg.random() >= p {
		return nil
	}
	ts.shed.Add(1)
	return &refusal{reason: ReasonThrottled, typ: typeThrottled, err: throttleError{p: p}}
}

// get returns the throttle of key: the one, or key's own.
func (ts *throttles) get(key string) *throttle {
	if ts.keys != nil {
		return ts.keys.get(key, time.Time{}, ts.mk)
	}
	return ts.one
}

// stats reports the attempts shed and each throttle's probability now, on
// c's clock.
func (ts *throttles) stats(c *config, s *Stats) {
	s.Throttled = ts.shed.Load()
	s.Throttle = make(map[string]float64)
	if ts.one != nil {
		s.Throttle[""] = ts.one.now(c)
		return
	}
	ts.keys.each(func(key string, t *throttle) { s.Throttle[key] = t.now(c) })
}

// throttleSlices is the number of slices of a throttle's window.
const throttleSlices = 12

// throttle counts one dependency's requests and accepts over a sliding
// window of throttleSlices slices.
//
// Accepts are counted in fresh, one atomic add on the calling goroutine's
// stripe, without the clock; the window takes them in (advance) only when
// the clock is read: on a failure, a shed, or an attempt that may be shed,
// and spreads them over the time since the reading before. So the window
// is up to date as of the last failure, and since then it has only gained
// accepts: excess, and fresh when excess is above zero, tell a
// probability of zero without the clock (calm). A healthy dependency's
// calls, on any number of cores, write no memory they share and read only
// excess, which changes on failures.
type throttle struct {
	k     float64
	slice time.Duration

	fresh   stripes       // accepts since the last reading of the clock
	excess  atomic.Uint64 // requests − k·accepts at that reading, as float64 bits
	started atomic.Bool   // the clock has been read once

	mu     sync.Mutex
	ring   [throttleSlices]throttleSlice
	origin time.Time // the first reading; slice 0 starts there
	seen   int64     // the slice of the last reading
	req    int64     // requests in the window at the last reading
	acc    int64     // accepts in the window at the last reading
}

// throttleSlice is one slice of the window: its number and its counts.
type throttleSlice struct {
	n        int64
	req, acc int64
}

// calm reports, without the clock, that the probability is zero: the
// window at its last reading, with the accepts learned since, has
// requests <= k·accepts. Outcomes that left the window since are ignored
// until the next reading, which the next failure makes. The accepts since
// (each adds k to the accepts' side and one to the requests') are summed
// only when the window's excess alone does not tell: with no more requests
// than k·accepts at the last reading, they can only add to the accepts.
func (t *throttle) calm() bool {
	if !t.started.Load() {
		return false
	}
	excess := math.Float64frombits(t.excess.Load())
	return excess <= 0 || excess <= (t.k-1)*float64(t.fresh.sum())
}

// learn counts the outcome of an attempt the throttle let through (see
// pass.learn): a failure is a request the dependency refused; anything
// else is a request it accepted, except an attempt that never ran
// (errNotRun: a gate after this one refused it, or the caller's context
// ended in that gate's wait), which counts neither way. Counted as a
// refusal, the concurrency limit's refusals would raise the probability
// against a dependency that accepts everything it is sent, and each
// attempt shed would raise it further.
func (t *throttle) learn(cfg *config, _ int64, outcome, _ error) {
	if outcome == errNotRun {
		return
	}
	if outcome != errBreakerFailure {
		t.fresh.add()
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance(cfg)
	t.request()
}

// probability moves the window to cfg's clock and returns the probability
// of shedding an attempt now.
func (t *throttle) probability(cfg *config) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance(cfg)
	return t.p()
}

// now returns the probability now, on c's clock.
func (t *throttle) now(c *config) float64 {
	if !t.started.Load() {
		return 0 // nothing learned yet
	}
	return t.probability(c)
}

// p is the SRE rule on the window's counts. t.mu is held.
func (t *throttle) p() float64 {
	return max(0, (float64(t.req)-t.k*float64(t.acc))/float64(t.req+1))
}

// request counts a request that got no accept, refused or shed, in the
// slice of the last reading. t.mu is held.
func (t *throttle) request() {
	t.at(t.seen).req++
	t.req++
	t.store()
}

// store publishes the window's excess of requests over k·accepts for calm.
// t.mu is held.
func (t *throttle) store() {
	t.excess.Store(math.Float64bits(float64(t.req) - t.k*float64(t.acc)))
}

// advance moves the window to cfg's clock: slices that left it are
// dropped, and the accepts learned since the last reading are spread evenly
// over the slices from that reading to this one, as if they had come at a
// steady rate, so that a long quiet run of successes keeps only its last
// Window's worth. t.mu is held.
func (t *throttle) advance(cfg *config) {
	now := cfg.mono()
	if !t.started.Load() {
		t.origin = now
	}
	s := int64(now.Sub(t.origin) / t.slice)
	from := t.seen
	if !t.started.Load() || from > s { // the first reading, or the clock went back
		from = s
	}
	t.seen = s
	f, n := t.fresh.drain(), float64(s-from+1)
	upTo := func(j int64) int64 { // the accepts in slices from to j
		if j < from {
			return 0
		}
		return f - int64(float64(f)*float64(s-j)/n)
	}
	for j := max(from, s-throttleSlices+1); j <= s; j++ {
		share := upTo(j) - upTo(j-1)
		b := t.at(j)
		b.req += share
		b.acc += share
	}
	t.req, t.acc = 0, 0
	for _, b := range t.ring {
		if b.n > s-throttleSlices && b.n <= s {
			t.req += b.req
			t.acc += b.acc
		}
	}
	t.store()
	t.started.Store(true)
}

// at returns slice j of the ring, emptied first if it held an older one.
// t.mu is held.
func (t *throttle) at(j int64) *throttleSlice {
	b := &t.ring[(j%throttleSlices+throttleSlices)%throttleSlices]
	if b.n != j {
		*b = throttleSlice{n: j}
	}
	return b
}

// throttleError is the error of a call whose first attempt adaptive
// throttling shed.
type throttleError struct{ p float64 }

func (e throttleError) Error() string {
	return "retry: adaptive throttling shed the attempt (p = " + strconv.FormatFloat(e.p, 'f', 2, 64) + ")"
}

func (throttleError) ErrorType() string { return typeThrottled }
