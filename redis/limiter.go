package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"
	"github.com/steadyhq/retry"
)

// Limiter is a rate limit shared by every process using the same Redis and
// prefix: a GCRA limiter (github.com/go-redis/redis_rate) that
// retry.RateLimit.Shared takes. A refused attempt waits for the time Redis
// names, within the caller's deadline, and asks again.
//
// When Redis fails, or is slower than Options.Timeout or than half of what
// is left of the caller's deadline (the other half is the fallback's), the
// attempt takes a token from a local token bucket at the same limit and
// burst instead (golang.org/x/time/rate), counted in Stats.Fallbacks, its
// wait within what is left. Each process then keeps the whole limit for
// itself until Redis answers again. That is the stated choice: pacing goes
// on, a little looser, rather than stopping or running unpaced.
//
// A Limiter is safe for concurrent use. Build it with NewLimiter.
type Limiter struct {
	rl       *redis_rate.Limiter
	limit    redis_rate.Limit
	perKey   bool
	opts     Options
	fallback retry.Limiter

	allowed, waits, denied, fallbacks atomic.Int64
}

// NewLimiter returns a Limiter on client of limit attempts per second with
// bursts of burst, across the fleet; limit must be in [1e-9, 1e9] and
// burst/limit at most 1e9 seconds. perKey
// keeps one limit per key (WithKey, or the Transport's request key, by
// default the host).
func NewLimiter(client goredis.UniversalClient, limit float64, burst int, perKey bool, opts Options) (*Limiter, error) {
	if client == nil {
		return nil, errors.New("redis: NewLimiter: client is nil")
	}
	local, err := newLocalLimiter(limit, burst, perKey)
	if err != nil {
		return nil, fmt.Errorf("redis: NewLimiter: %w", err)
	}
	if opts, err = opts.withDefaults("NewLimiter"); err != nil {
		return nil, err
	}
	l, err := gcraLimit(limit, burst)
	if err != nil {
		return nil, err
	}
	return &Limiter{rl: redis_rate.NewLimiter(client), limit: l, perKey: perKey, opts: opts, fallback: local}, nil
}

// minLimit is the smallest limit NewLimiter takes: one attempt per
// emission interval of at most 2^63 ns (292 years), with a margin.
const minLimit = 1e-9

// gcraLimit expresses limit attempts per second as redis_rate's whole Rate
// per Period, with the same emission interval (Period/Rate): a whole limit
// per second; another limit of at least 1 as a whole number of attempts per
// 1000 s (within 0.05%); a limit under 1 as one attempt per interval, to the
// nanosecond, so that no limit rounds to a Rate of 0.
func gcraLimit(limit float64, burst int) (redis_rate.Limit, error) {
	switch {
	case limit == math.Trunc(limit):
		return redis_rate.Limit{Rate: int(limit), Burst: burst, Period: time.Second}, nil
	case limit >= 1:
		return redis_rate.Limit{Rate: int(math.Round(limit * 1000)), Burst: burst, Period: 1000 * time.Second}, nil
	case limit < minLimit:
		return redis_rate.Limit{}, fmt.Errorf("redis: NewLimiter: limit = %v: must be >= 1e-9 attempts per second (one in about 32 years)", limit)
	}
	return redis_rate.Limit{Rate: 1, Burst: burst, Period: time.Duration(math.Round(float64(time.Second) / limit))}, nil
}

// LimiterStats counts a Limiter's outcomes.
type LimiterStats struct {
	Allowed   int64 // tokens Redis granted
	Waits     int64 // refusals waited out for the time Redis named
	Denied    int64 // reservations refused because the wait could not fit
	Fallbacks int64 // reservations made on the local bucket, Redis failing or too slow
}

// Stats returns the limiter's counters.
func (l *Limiter) Stats() LimiterStats {
	return LimiterStats{Allowed: l.allowed.Load(), Waits: l.waits.Load(), Denied: l.denied.Load(), Fallbacks: l.fallbacks.Load()}
}

// Reserve implements retry.Limiter. It waits itself, on real time, for the
// time Redis names and returns a zero wait; with Redis failing it returns
// the local bucket's reservation.
func (l *Limiter) Reserve(ctx context.Context, key string, now time.Time, maxWait time.Duration) (time.Duration, func(time.Time), bool) {
	if !l.perKey {
		key = ""
	}
	rkey := l.opts.Prefix + "limit:" + key
	start := time.Now()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		// Leave half of what is left to the fallback.
		timeout := min(l.opts.Timeout, (maxWait-time.Since(start))/2)
		octx, cancel := context.WithTimeout(ctx, timeout)
		res, err := l.rl.Allow(octx, rkey, l.limit)
		cancel()
		if ctx.Err() != nil || passed(ctx) {
			return 0, nil, false
		}
		left := maxWait - time.Since(start)
		if err != nil {
			// Redis failed, or was cut short to leave the fallback its
			// time: the local bucket paces the attempt, within what is
			// left of maxWait.
			l.fallbacks.Add(1)
			return l.fallback.Reserve(ctx, key, now.Add(time.Since(start)), max(left, 0))
		}
		if res.Allowed > 0 {
			l.allowed.Add(1)
			return 0, nil, true
		}
		if res.RetryAfter > left {
			l.denied.Add(1)
			return 0, nil, false
		}
		l.waits.Add(1)
		if timer == nil {
			timer = time.NewTimer(res.RetryAfter)
		} else {
			timer.Reset(res.RetryAfter)
		}
		select {
		case <-timer.C:
		case <-ctx.Done():
			return 0, nil, false
		}
	}
}

// passed reports whether ctx's deadline has passed, which a context derived
// from it may notice first.
func passed(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}
