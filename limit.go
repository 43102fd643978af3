package retry

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Limiter paces the attempts of a Retrier or Transport, first ones and
// retries alike; RateLimit.Shared sets one. WithRateLimit builds one on
// golang.org/x/time/rate by itself; github.com/steadyhq/retry/redis has one
// shared by a fleet.
//
// Implementations must be safe for concurrent use.
type Limiter interface {
	// Reserve takes a token for one attempt on key (WithKey, or the
	// Transport's request key) at now, the Retrier's clock reading. It
	// returns the wait before the attempt may run, which the engine sleeps
	// on the Retrier's clock, and cancel, which gives the token back if the
	// call stops during that wait (nil when there is nothing to give back).
	// When the wait would pass maxWait (what is left of the caller's
	// deadline and MaxElapsed) it takes nothing and returns ok == false, and
	// the call stops with Reason rate_limited. A Limiter may also wait
	// itself, within maxWait and ctx, and return a zero wait.
	Reserve(ctx context.Context, key string, now time.Time, maxWait time.Duration) (wait time.Duration, cancel func(now time.Time), ok bool)
}

// RateLimit is a token bucket on golang.org/x/time/rate for WithRateLimit:
// Limit tokens per second, up to Burst at once, one token an attempt.
// Either Limit (with Burst and PerKey) describes the buckets to build, or
// Limiter is one the caller built and shares with other code, or Shared is
// any Limiter.
type RateLimit struct {
	// Limit is the rate of attempts per second, rate.Inf for no limit
	// (rate.Every(d) gives one per d). It must be > 0 unless Limiter is
	// set.
	Limit rate.Limit
	// Burst is the most attempts let through at once; zero means 1.
	Burst int
	// PerKey keeps one bucket per key (WithKey, or the Transport's request
	// key, by default the host), so that one busy dependency does not
	// spend the others' tokens. At most 1024 keys are kept; the one used
	// least recently is dropped to make room (keys last used between the
	// same two additions of keys count as used together).
	PerKey bool
	// Limiter, when set, is the bucket itself, shared with whatever else
	// takes tokens from it; Limit, Burst and PerKey must then be zero. The
	// Retrier takes its tokens at the Retrier's clock readings (WithClock),
	// which other users of the Limiter must share.
	Limiter *rate.Limiter
	// Shared, when set, is any Limiter, such as one shared by a fleet
	// (github.com/steadyhq/retry/redis has one on Redis); the other fields
	// must then be zero.
	Shared Limiter
}

// WithRateLimit paces attempts, first ones and retries alike, with the token
// bucket of rl, shared by every call of the Retrier or Transport. A wait for
// a token is not an attempt: it is slept on the Retrier's clock. A wait that
// cannot fit the caller's deadline or MaxElapsed is not slept: the call
// stops at once with Reason rate_limited and type ratelimit.local, and its
// token is returned to the bucket, as is the token of a call canceled
// while it waits. An invalid rl makes every call return an error naming
// the field.
func WithRateLimit(rl RateLimit) Option {
	return optionFunc(func(c *config) {
		l, field, value, rule := newRateLimiter(rl)
		if l == nil {
			c.invalid("WithRateLimit", field, value, rule)
			return
		}
		c.limiter = &limiter{l: l}
		if rl, ok := l.(*rateLimiter); ok {
			c.limiter.ahead = rl.ahead
		}
	})
}

// newRateLimiter builds the Limiter of rl, or names the field that is
// wrong, its value and the rule it breaks.
func newRateLimiter(rl RateLimit) (l Limiter, field string, value any, rule string) {
	if rl.Shared != nil {
		switch {
		case isNil(rl.Shared):
			return nil, "Shared", "nil", typedNil(rl.Shared)
		case rl.Limiter != nil:
			return nil, "Limiter", "non-nil", "must be nil when Shared is set"
		case rl.PerKey:
			return nil, "PerKey", rl.PerKey, "must be false when Shared is set: Shared keeps its own keys"
		case rl.Limit != 0:
			return nil, "Limit", rl.Limit, "must be zero when Shared is set: Shared has its own"
		case rl.Burst != 0:
			return nil, "Burst", rl.Burst, "must be zero when Shared is set: Shared has its own"
		}
		return rl.Shared, "", nil, ""
	}
	if rl.Limiter != nil {
		switch {
		case rl.PerKey:
			return nil, "PerKey", rl.PerKey, "must be false when Limiter is set: a *rate.Limiter is one bucket"
		case rl.Limit != 0:
			return nil, "Limit", rl.Limit, "must be zero when Limiter is set: the Limiter has its own"
		case rl.Burst != 0:
			return nil, "Burst", rl.Burst, "must be zero when Limiter is set: the Limiter has its own"
		}
		return &rateLimiter{one: rl.Limiter}, "", nil, ""
	}
	switch {
	case !(rl.Limit > 0): // NaN too
		return nil, "Limit", rl.Limit, "must be > 0 attempts per second (rate.Inf for no limit)"
	case rl.Burst < 0:
		return nil, "Burst", rl.Burst, "must be >= 0 (0 means 1)"
	}
	b := &rateLimiter{limit: rl.Limit, burst: max(rl.Burst, 1)}
	if rl.PerKey {
		b.keys = newKeyed[*rate.Limiter](maxKeys)
	} else {
		b.one = rate.NewLimiter(b.limit, b.burst)
		if n := stripeCount(0); b.burst/8 >= n { // room for a token a stripe
			b.ahead = &ahead{lim: b.one, s: make([]aheadStripe, n), most: int64(b.burst / 8)}
		}
	}
	return b, "", nil, ""
}

// rateLimiter is the Limiter of WithRateLimit: one *rate.Limiter, or one per
// key made on first use.
type rateLimiter struct {
	one   *rate.Limiter
	keys  *keyed[*rate.Limiter]
	limit rate.Limit
	burst int
	// ahead hands out the tokens of one, which no other code takes
	// from; nil for a Limiter given in RateLimit.Limiter, which other
	// code may share, for buckets kept per key, and for a burst under
	// eight tokens a stripe.
	ahead *ahead
}

// Reserve implements Limiter. A token that is there at once is taken with
// AllowN, which allocates nothing; otherwise a Reservation holds the token
// for the wait, or is canceled at once when the wait would pass maxWait.
// The tokens that ahead handed out are taken from the bucket first, and
// what it holds afterwards is lent to ahead again.
func (l *rateLimiter) Reserve(_ context.Context, key string, now time.Time, maxWait time.Duration) (time.Duration, func(time.Time), bool) {
	lim := l.one
	if l.keys != nil {
		lim = l.keys.get(key, now, func() *rate.Limiter { return rate.NewLimiter(l.limit, l.burst) })
	}
	if a := l.ahead; a != nil {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.settle(now)
		defer a.lend(now)
	}
	if lim.AllowN(now, 1) {
		return 0, nil, true
	}
	r := lim.ReserveN(now, 1)
	if !r.OK() { // a Burst of zero on the caller's own Limiter
		return 0, nil, false
	}
	wait := r.DelayFrom(now)
	if wait > maxWait {
		r.CancelAt(now)
		return 0, nil, false
	}
	return wait, r.CancelAt, true
}

// tokens returns the tokens of each bucket at now, by key ("" for one).
func (l *rateLimiter) tokens(now time.Time) map[string]float64 {
	if l.keys == nil {
		if a := l.ahead; a != nil {
			return map[string]float64{"": a.tokensAt(now)}
		}
		return map[string]float64{"": l.one.TokensAt(now)}
	}
	m := make(map[string]float64)
	l.keys.each(func(key string, lim *rate.Limiter) { m[key] = lim.TokensAt(now) })
	return m
}

// ahead hands out the tokens of a bucket that no other code takes from
// without reading the clock or taking the bucket's lock, one atomic add
// an attempt. A bucket only gains tokens as time passes, so one that held
// n whole tokens when it was last read holds at least n, less those taken
// since, at any later time: ahead lends those n to its stripes (one per
// goroutine's stack, see stripes), and an attempt takes one from its
// stripe. The tokens taken so are taken from the bucket in one AllowN
// when it is next read, as an attempt finds its stripe empty (Reserve);
// taking them late can only leave the bucket fewer tokens than taking
// them one by one would have, had it filled up meanwhile, never more: at
// most the tokens lent, which are kept to an eighth of its burst.
type ahead struct {
	mu   sync.Mutex // held while the bucket is read and the stripes lent
	lim  *rate.Limiter
	s    []aheadStripe
	most int64 // the most tokens lent at once
}

// aheadStripe is one stripe's tokens, alone on its cache line.
type aheadStripe struct {
	_    [64]byte
	n    atomic.Int64 // tokens left; below zero once an attempt found none
	lent int64        // tokens lent at the last reading; under ahead.mu
	_    [48]byte
}

// take takes a lent token for an attempt, and reports whether there was
// one. With first, as on a Clock of the caller's (a simulation), every
// goroutine takes from the first stripe, so that when it runs dry, and
// with it what the bucket holds, does not depend on which goroutine took
// which stripe and repeats from run to run.
func (a *ahead) take(first bool) bool {
	i := stackHint() & uintptr(len(a.s)-1) // len(a.s) is a power of two
	if first {
		i = 0
	}
	return a.s[i].n.Add(-1) >= 0
}

// settle takes from the bucket, at now, the tokens the stripes handed out
// since they were lent, and leaves them none. a.mu is held.
func (a *ahead) settle(now time.Time) {
	var taken int64
	for i := range a.s {
		s := &a.s[i]
		if s.lent == 0 {
			continue
		}
		taken += s.lent - max(s.n.Swap(0), 0)
		s.lent = 0
	}
	if taken > 0 {
		a.lim.AllowN(now, int(taken)) // they are there: see ahead
	}
}

// lend lends the stripes the whole tokens the bucket holds at now. a.mu
// is held, and the stripes hold none.
func (a *ahead) lend(now time.Time) {
	tokens := a.lim.TokensAt(now)
	if !(tokens >= 1) { // NaN for rate.Inf
		return
	}
	n := min(int64(min(tokens, 1<<50)), a.most)
	per, rest := n/int64(len(a.s)), n%int64(len(a.s))
	for i := range a.s {
		s := &a.s[i]
		s.lent = per
		if int64(i) < rest {
			s.lent++
		}
		s.n.Store(s.lent)
	}
}

// tokensAt returns the tokens of the bucket at now, less those the
// stripes handed out and the bucket has not yet been told of.
func (a *ahead) tokensAt(now time.Time) float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var taken int64
	for i := range a.s {
		if s := &a.s[i]; s.lent > 0 {
			taken += s.lent - max(s.n.Load(), 0)
		}
	}
	return a.lim.TokensAt(now) - float64(taken)
}

// limiter is the rate limit of a Retrier and its counters.
type limiter struct {
	l      Limiter
	ahead  *ahead       // the tokens that l, a rateLimiter, hands out ahead
	waits  atomic.Int64 // attempts that waited for a token
	denied atomic.Int64 // calls stopped because the wait could not fit
}

// acts: every attempt takes a token as it is admitted.
func (l *limiter) acts() (admits, enters uint8) { return onAll, 0 }

// admit takes a token for the attempt, raising its wait to the token's
// time; a hedge takes only a token that is there now. When the wait
// cannot fit the time left it refuses, and the call stops with Reason
// rate_limited. undo gives the token back if the attempt never runs.
func (l *limiter) admit(ctx context.Context, a *ask, g *grant) {
	if l.ahead != nil && l.ahead.take(a.cfg.clock != nil) {
		return // a token that is there now: no clock, no lock
	}
	room := max(a.room(ctx), 0)
	w, undo, ok := l.l.Reserve(ctx, a.key, a.cfg.mono(), room)
	switch {
	case ok:
		if w > a.wait {
			l.waits.Add(1)
		}
		g.wait, g.undo = w, undo
		return
	case ctx.Err() != nil:
		g.no = &refusal{reason: ReasonCanceled}
		return
	case a.kind != kindHedge:
		l.denied.Add(1)
	}
	g.no = &refusal{reason: ReasonRateLimited, typ: typeRateLimited, err: rateLimitError{}}
}

// enter is never asked: the token was taken in admit.
func (l *limiter) enter(context.Context, *ask, *grant) {}

// rateLimitError is the failure of a call whose rate-limit wait cannot fit.
type rateLimitError struct{}

func (rateLimitError) Error() string { return "retry: rate limit wait would pass the deadline" }

func (rateLimitError) ErrorType() string { return typeRateLimited }
