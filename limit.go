package retry

import (
	"context"
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
	// least recently is dropped to make room.
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
}

// Reserve implements Limiter. A token that is there at once is taken with
// AllowN, which allocates nothing; otherwise a Reservation holds the token
// for the wait, or is canceled at once when the wait would pass maxWait.
func (l *rateLimiter) Reserve(_ context.Context, key string, now time.Time, maxWait time.Duration) (time.Duration, func(time.Time), bool) {
	lim := l.one
	if l.keys != nil {
		lim = l.keys.get(key, now, func() *rate.Limiter { return rate.NewLimiter(l.limit, l.burst) })
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
		return map[string]float64{"": l.one.TokensAt(now)}
	}
	m := make(map[string]float64)
	l.keys.each(func(key string, lim *rate.Limiter) { m[key] = lim.TokensAt(now) })
	return m
}

// limiter is the rate limit of a Retrier and its counters.
type limiter struct {
	l      Limiter
	waits  atomic.Int64 // attempts that waited for a token
	denied atomic.Int64 // calls stopped because the wait could not fit
}

// acts: every attempt takes a token as it is admitted.
func (l *limiter) acts() (admits, enters uint8) { return onAll, 0 }

// admit takes a token for the attempt, raising its wait to the token's
// time; a hedge takes only a token that is there now. When the wait
// cannot fit the time left it refuses, and the call stops with Reason
// rate_limited. undo gives the token back if the attempt never runs.
func (l *limiter) admit(ctx context.Context, a ask) grant {
	room := max(a.room, 0)
	if a.kind == kindHedge {
		room = 0
	}
	w, undo, ok := l.l.Reserve(ctx, a.key, a.cfg.mono(), room)
	switch {
	case ok:
		if w > a.wait {
			l.waits.Add(1)
		}
		return grant{wait: w, undo: undo}
	case ctx.Err() != nil:
		return grant{no: &refusal{reason: ReasonCanceled}}
	case a.kind != kindHedge:
		l.denied.Add(1)
	}
	return grant{no: &refusal{reason: ReasonRateLimited, typ: typeRateLimited, err: rateLimitError{}}}
}

// enter is never asked: the token was taken in admit.
func (l *limiter) enter(context.Context, ask) grant { return grant{} }

// rateLimitError is the failure of a call whose rate-limit wait cannot fit.
type rateLimitError struct{}

func (rateLimitError) Error() string { return "retry: rate limit wait would pass the deadline" }

func (rateLimitError) ErrorType() string { return typeRateLimited }
