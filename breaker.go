package retry

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Breaker configures a circuit breaker in front of the attempts of a
// Retrier or Transport: the state machine of sony/gobreaker's two-step
// breaker, with its rolling window and open period on the Retrier's Clock.
// Zero fields take the defaults given beside each field, which suit an
// HTTP dependency.
//
// The breaker trips when, within Window, at least MinRequests attempts
// counted and FailureRatio of them failed. It then stays open for
// OpenTimeout, lets Probes attempts through half-open, and closes when they
// succeed. An attempt counts when its outcome arrives (gobreaker counts a
// request as it starts, so that attempts in flight count toward
// MinRequests there): a failure in the slice of the window it arrives in,
// and a success of a closed breaker, which is counted without a lock or a
// reading of the clock, at the next failure, spread evenly over the time
// since the failure before (the retry budget's rule). The breaker is half-open from the
// instant OpenTimeout has passed (gobreaker: just after). While it is
// open, attempts are neither run nor counted: the call
// waits for the breaker to let a probe through (Ratchet's "rescheduled
// without consuming attempts") when that fits the caller's deadline and
// MaxWait, and otherwise stops at once with Reason breaker_open. The
// error of a call it stopped matches gobreaker's sentinels, as gobreaker's
// own refusal would: errors.Is(err, gobreaker.ErrOpenState) holds for
// every refusal, and errors.Is(err, gobreaker.ErrTooManyRequests) too
// for one made half-open, its probes in flight. WithGoBreaker puts
// gobreaker's own breakers in its place.
//
// Caller errors never trip a breaker: the caller's own cancellation, 4xx
// statuses other than 408 and 429, Permanent errors, the Discard, DeadLetter
// and Fail verdicts, and non-retryable types are left out of the counts.
type Breaker struct {
	FailureRatio float64       // failures per counted attempt that trip it; default 0.5
	MinRequests  uint32        // counted attempts in Window before it may trip; default 20
	Window       time.Duration // the rolling window of counts; default 10 s
	OpenTimeout  time.Duration // how long it stays open; default 30 s
	Probes       uint32        // attempts let through half-open; default 1
	// MaxWait bounds how long one call waits, in all, for an open breaker;
	// default 1 s, so that an inline caller is never held long: a call that
	// meets a breaker with more of its open time left stops at once with
	// Reason breaker_open. A longer MaxWait reschedules calls to the end of
	// the open time, always within the caller's deadline. A negative
	// MaxWait never waits.
	MaxWait time.Duration
	// PerKey keeps one breaker per key (WithKey, or the Transport's request
	// key, by default the host); at most 1024 are kept, the idlest dropped.
	PerKey bool
	// Store, when set, shares the breaker with every process using the
	// same store (github.com/steadyhq/retry/redis has one on Redis), named
	// by its key with PerKey and "" otherwise: the fleet trips it on its
	// summed counts, opens it until the same instant for all, and lets
	// Probes attempts through half-open fleet-wide; see BreakerStore. Each
	// attempt is decided in this process, from the fleet's state read at
	// the last sync. When the store fails or is too slow, this process's
	// own breaker decides, counted in Stats.BreakerFallbacks; it is told
	// the outcome of every attempt, so that it starts from this process's
	// recent history, and the fleet's state is used again as soon as the
	// store answers.
	Store BreakerStore
	// StoreWait bounds how long a call waits for Store, within the
	// caller's deadline: to claim a half-open probe, or to read the
	// fleet's state after a quiet spell; default 50 ms. Past it, the
	// call is decided by the local breaker.
	StoreWait time.Duration
	// OnChange, when set, is called on every change of a breaker's state,
	// with the breaker's key (empty for a single breaker) and the states
	// it left and entered: BreakerClosed, BreakerHalfOpen or BreakerOpen
	// ("closed", "half_open" or "open"). Calls come one at a time, in the
	// order of the changes, so each one's from is the previous one's to
	// for the same key. It runs on the goroutine of an attempt as the
	// attempt passes the breaker, the one that saw the change or, while
	// that one is delivering earlier changes, another; never under a
	// lock that attempts wait on, so it may use the Retrier.
	OnChange func(key, from, to string) `json:"-"`
}

// defaultBreaker holds the defaults of Breaker's zero fields.
var defaultBreaker = Breaker{
	FailureRatio: 0.5,
	MinRequests:  20,
	Window:       10 * time.Second,
	OpenTimeout:  30 * time.Second,
	Probes:       1,
	MaxWait:      time.Second,
	StoreWait:    50 * time.Millisecond,
}

// breakerChange is a breaker's change of state, for Breaker.OnChange.
type breakerChange struct{ key, from, to string }

// WithBreaker puts a circuit breaker in front of the attempts; see Breaker.
func WithBreaker(b Breaker) Option {
	return optionFunc(func(c *config) {
		if err := b.validate(); err != nil {
			c.optErrs = append(c.optErrs, err)
			return
		}
		c.breakers, c.goBreakers = newBreakers(b.withDefaults()), nil
	})
}

func (b Breaker) validate() error {
	bad := func(field string, v any, rule string) error {
		return optionError("WithBreaker", field, v, rule)
	}
	switch {
	case b.FailureRatio < 0 || b.FailureRatio > 1 || b.FailureRatio != b.FailureRatio:
		return bad("FailureRatio", b.FailureRatio, "must be in [0, 1]")
	case b.Window < 0:
		return bad("Window", b.Window, "must be >= 0")
	case b.OpenTimeout < 0:
		return bad("OpenTimeout", b.OpenTimeout, "must be >= 0")
	case b.StoreWait < 0:
		return bad("StoreWait", b.StoreWait, "must be >= 0")
	case b.Store != nil && isNil(b.Store):
		return bad("Store", "nil", typedNil(b.Store))
	}
	return nil
}

func (b Breaker) withDefaults() Breaker {
	d := defaultBreaker
	b.FailureRatio = cmp.Or(b.FailureRatio, d.FailureRatio)
	b.MinRequests = cmp.Or(b.MinRequests, d.MinRequests)
	b.Window = cmp.Or(b.Window, d.Window)
	b.OpenTimeout = cmp.Or(b.OpenTimeout, d.OpenTimeout)
	b.Probes = cmp.Or(b.Probes, d.Probes)
	b.MaxWait = cmp.Or(b.MaxWait, d.MaxWait)
	b.StoreWait = cmp.Or(b.StoreWait, d.StoreWait)
	return b
}

// breakers is the breaker, or the breakers per key, of a Retrier.
type breakers struct {
	spec    Breaker
	single  *breaker
	keys    *keyed[*breaker]
	pending atomic.Int32 // state changes not yet delivered
	mu      sync.Mutex
	changes []breakerChange
	deliver sync.Mutex // held by the goroutine delivering changes (flush)
	holds
	// fallbacks counts attempts guarded by the local breaker because the
	// store failed.
	fallbacks atomic.Int64
	// recent keeps the last changes of state, for Stats.BreakerChanges.
	recent recent[stateChange]
	fleet  *fleetSync // with a Store: the syncs of every breaker
}

// breaker is one circuit breaker; with Breaker.Store, also the shared
// breaker, which the local one stands in for when the store fails.
type breaker struct {
	c      circuit
	bs     *breakers
	key    string
	shared *sharedBreaker
	// standIn counts the calls running through c because the store
	// failed; with a shared breaker, only c's changes during such calls
	// are reported, not those the outcomes it is told bring about.
	standIn atomic.Int32
}

// Outcomes reported to the gates that learn them (see pass.learn).
var (
	errBreakerFailure  = errors.New("failure")
	errBreakerExcluded = errors.New("excluded")
)

func (bs *breakers) newBreaker(key string) *breaker {
	b := &breaker{bs: bs, key: key}
	b.c.onChange = b.changed
	if bs.keys != nil {
		b.c.stripes = 16 // one of up to 1024
	}
	if bs.spec.Store != nil {
		b.shared = newSharedBreaker(bs.fleet, key)
	}
	return b
}

func (bs *breakers) get(key string, now time.Time) *breaker {
	if bs.single != nil {
		return bs.single
	}
	return bs.keyed(key, now)
}

// keyed returns the breaker of key, made on first use.
func (bs *breakers) keyed(key string, now time.Time) *breaker {
	return bs.keys.get(key, now, func() *breaker { return bs.newBreaker(key) })
}

// allow asks the local circuit at now to let one attempt through,
// returning the attempt's generation; when it refuses, wait is how long
// until it may let a probe through, and busy says it is half-open with
// its probes in flight.
func (b *breaker) allow(now time.Time) (gen uint64, ok bool, wait time.Duration, busy bool) {
	gen, ok, wait, _ = b.c.allow(now, &b.bs.spec)
	if !ok && wait <= 0 {
		wait, busy = b.bs.spec.recheck(), true
	}
	return gen, ok, wait, busy
}

// learn counts the outcome of an attempt the local circuit let through in
// generation tag: the success of a closed circuit without reading the
// clock.
func (b *breaker) learn(cfg *config, tag int64, outcome, _ error) {
	if outcome == nil && b.c.succeeded(uint64(tag)) {
		return
	}
	b.count(cfg, tag, outcome)
}

// count counts an outcome under the circuit's lock.
func (b *breaker) count(cfg *config, tag int64, outcome error) {
	if outcome == errNotRun {
		outcome = errBreakerExcluded // frees a half-open probe; counts neither way
	}
	b.c.done(uint64(tag), outcome, cfg.mono(), &b.bs.spec)
}

// allowShared is allow for a breaker shared through a Breaker.Store: the
// fleet's state decides, and the process's own circuit, which learns every
// outcome too, stands in for it while the store cannot be read in time.
// It returns the attempt's learner, or nil with the wait of a refusal.
func (b *breaker) allowShared(ctx context.Context, cfg *config) (l learner, wait time.Duration, busy bool) {
	probe, counted, wait, ok := b.shared.allow(ctx)
	// A call whose context ended was not decided. Written only on a
	// change: every call of every goroutine passes here.
	if local := !ok; b.shared.local.Load() != local && !ended(ctx) {
		b.shared.local.Store(local)
	}
	switch {
	case ok && counted:
		return (*sharedCount)(b), 0, false
	case ok && probe != nil:
		return doneFunc(func(outcome error) {
			if outcome == errNotRun {
				outcome = errBreakerExcluded
			}
			probe(outcome)
			b.standInLearns(cfg, outcome)
		}), 0, false
	case ok:
		return nil, wait, b.shared.view.Load().state != BreakerOpen
	}
	b.bs.fallbacks.Add(1)
	b.standIn.Add(1)
	gen, ok, wait, busy := b.allow(cfg.mono())
	if !ok {
		b.standIn.Add(-1)
		return nil, wait, busy
	}
	return doneFunc(func(outcome error) {
		b.learn(cfg, int64(gen), outcome, nil)
		b.standIn.Add(-1)
	}), 0, false
}

// sharedCount is the learner of an attempt a shared breaker let through
// in the closed state: the fleet counts its outcome, and so does the
// stand-in. It takes no allocation.
type sharedCount breaker

func (s *sharedCount) learn(cfg *config, _ int64, outcome, _ error) {
	b := (*breaker)(s)
	if outcome == errNotRun {
		outcome = errBreakerExcluded
	}
	b.shared.count(outcome)
	b.standInLearns(cfg, outcome)
}

// standInLearns tells the process's own circuit the outcome of an attempt
// the fleet's state let through; an open or busy stand-in counts nothing.
// The success of a closed stand-in is counted as the local breaker counts
// its own, without the lock or the clock.
func (b *breaker) standInLearns(cfg *config, outcome error) {
	if gen, ok := b.c.closed(); ok && outcome == nil && b.c.succeeded(gen) {
		return
	}
	now := cfg.mono()
	if gen, ok, _, _ := b.c.allow(now, &b.bs.spec); ok {
		b.c.done(gen, outcome, now, &b.bs.spec)
	}
}

// acts: the breaker admits retries, which may wait for its open time, and
// every attempt enters it.
func (bs *breakers) acts() (admits, enters uint8) { return onRetry, onAll }

// admit raises a retry's wait to the end of an open breaker's open time,
// when that fits MaxWait and the time left; otherwise it refuses, so that
// the call stops with the outcome of the last attempt still in hand.
func (bs *breakers) admit(ctx context.Context, a *ask, g *grant) {
	if a.kind != kindRetry {
		return
	}
	now := a.cfg.mono()
	left := bs.get(a.key, now).openFor(now)
	if left > a.wait {
		*g = bs.hold(ctx, bs.spec.MaxWait, a, left, left-a.wait, &breakerError{wait: left})
	}
}

// enter asks the breaker to let the attempt through (the first of the
// two steps; learn, or the shared breaker's done, is the second). An open
// breaker is waited for, without consuming an attempt, when the wait fits
// MaxWait and the time left; otherwise, or for a hedge, which starts now
// or not at all, it refuses.
func (bs *breakers) enter(ctx context.Context, a *ask, g *grant) {
	b := bs.get(a.key, time.Time{})
	if b.shared == nil {
		if gen, ok := b.c.closed(); ok { // the common case: no lock, no clock
			g.learner, g.tag = b, int64(gen)
			return
		}
	}
	var wait time.Duration
	var busy bool
	if b.shared != nil {
		g.learner, wait, busy = b.allowShared(ctx, a.cfg)
	} else if gen, ok, w, bz := b.allow(a.cfg.mono()); ok {
		g.learner, g.tag = b, int64(gen)
	} else {
		wait, busy = w, bz
	}
	bs.flush() // a change made as the attempt was let through
	if g.learner == nil {
		*g = bs.refuse(ctx, a, wait, refusalOf(wait, busy), bs.spec.MaxWait)
	}
}

// recheck is how long a call waits before it looks again at a half-open
// breaker whose probes are in flight.
func (b *Breaker) recheck() time.Duration {
	return min(max(b.OpenTimeout/10, 10*time.Millisecond), time.Second)
}
