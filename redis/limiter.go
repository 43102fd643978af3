package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"
	"github.com/steadyhq/retry"
)

// Limiter is a rate limit shared by every process using the same Redis and
// prefix, for retry.RateLimit.Shared: a GCRA bucket in Redis
// (redis_rate's, github.com/go-redis/redis_rate, at key PREFIX limit:{KEY})
// from which each
// process leases tokens in batches and spends them locally, so that Redis
// sees one request per batch rather than one per attempt.
//
// A batch is sized to the process's recent demand: its reservations per
// second over the last lease, times the lease's term (Options.SyncInterval),
// at least 1 and at most the burst; Redis grants the whole tokens the bucket
// holds, up to that. Tokens not spent within the term lapse, so that
// a process cannot save them up and spend them later as a burst beyond the
// fleet's limit. When the bucket is empty, Redis names the time of its next
// token; the process's calls wait for it, within their deadline, and one of
// them asks again. One request per process and key is in flight at a time;
// the others wait for its answer.
//
// When Redis fails, or is slower than Options.Timeout or than half of what
// is left of the caller's deadline (the other half is the fallback's), the
// attempt takes a token from a local token bucket at the same limit and
// burst instead (golang.org/x/time/rate), counted in Stats.Fallbacks, its
// wait within what is left. Each process then keeps the whole limit for
// itself until Redis answers again. That is the stated choice: pacing goes
// on, a little looser, rather than stopping or running unpaced.
//
// A Limiter starts no goroutine and needs no Close; it is safe for
// concurrent use. Build it with NewLimiter.
type Limiter struct {
	client   goredis.UniversalClient
	limit    redis_rate.Limit
	perKey   bool
	opts     Options
	fallback retry.Limiter
	global   lease
	keys     sync.Map     // key → *lease, with perKey
	nkeys    atomic.Int64 // entries of keys, bounded by maxLeaseKeys

	allowed, leases, waits, denied, fallbacks atomic.Int64
}

// lease is one process's tokens of one key's bucket.
type lease struct {
	mu       sync.Mutex
	tokens   int           // leased and not yet spent
	lapses   time.Time     // when they lapse
	empty    time.Time     // the bucket is empty until then
	asked    int           // reservations since the last lease
	since    time.Time     // start of that count
	rate     float64       // reservations per second, smoothed
	fetching chan struct{} // closed when the request in flight answers
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
	return &Limiter{client: client, limit: l, perKey: perKey, opts: opts, fallback: local}, nil
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
	Leases    int64 // requests to Redis that granted tokens
	Waits     int64 // waits for an empty bucket's next token
	Denied    int64 // reservations refused because the wait could not fit
	Fallbacks int64 // reservations made on the local bucket, Redis failing or too slow
}

// Stats returns the limiter's counters.
func (l *Limiter) Stats() LimiterStats {
	return LimiterStats{Allowed: l.allowed.Load(), Leases: l.leases.Load(), Waits: l.waits.Load(), Denied: l.denied.Load(), Fallbacks: l.fallbacks.Load()}
}

func (l *Limiter) lease(key string) *lease {
	if !l.perKey {
		return &l.global
	}
	if ls, ok := l.keys.Load(key); ok {
		return ls.(*lease)
	}
	if l.nkeys.Load() >= maxLeaseKeys {
		// Past the bound, the leases start again: a dropped lease's
		// unspent tokens lapse, as they would after one interval.
		l.keys.Clear()
		l.nkeys.Store(0)
	}
	ls, loaded := l.keys.LoadOrStore(key, &lease{})
	if !loaded {
		l.nkeys.Add(1)
	}
	return ls.(*lease)
}

// maxLeaseKeys bounds the per-key leases a Limiter keeps.
const maxLeaseKeys = 1024

// batch is the size of the next lease: the demand over one term.
func (ls *lease) batch(now time.Time, term time.Duration, burst int) int {
	if el := now.Sub(ls.since).Seconds(); !ls.since.IsZero() && el > 0 {
		r := float64(ls.asked) / el
		if ls.rate == 0 {
			ls.rate = r
		} else {
			ls.rate = (ls.rate + r) / 2
		}
	}
	ls.asked, ls.since = 0, now
	n := int(math.Ceil(ls.rate * term.Seconds()))
	return min(max(n, 1), max(burst, 1))
}

// takeScript is GCRA (as redis_rate's) granting whole tokens: up to
// ARGV[3] of those the bucket KEYS[1] holds, with an emission interval of
// ARGV[1] seconds and a burst of ARGV[2], on Redis's clock. It returns
// {granted, seconds until the next token when none}. redis_rate's
// AllowAtMost would charge a fraction of a token it does not grant.
var takeScript = goredis.NewScript(`
local emission = tonumber(ARGV[1])
local burst_offset = emission * tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = (tonumber(t[1]) - 1483228800) + tonumber(t[2]) / 1000000
local tat = tonumber(redis.call('GET', KEYS[1]) or '') or now
tat = math.max(tat, now)
local diff = now - (tat - burst_offset)
local avail = math.floor(diff / emission + 1e-6)
if avail < 1 then
	return {0, string.format('%.9f', emission - diff)}
end
local g = math.min(avail, n)
local new_tat = tat + g * emission
redis.call('SET', KEYS[1], string.format('%.17g', new_tat), 'PX', math.ceil((new_tat - now) * 1000) + 1)
return {g, '0'}`)

// taken is what takeScript granted.
type taken struct {
	Allowed    int
	RetryAfter time.Duration
}

// take leases up to n tokens from the bucket key.
func (l *Limiter) take(ctx context.Context, key string, n int) (taken, error) {
	emission := float64(l.limit.Period) / float64(l.limit.Rate) / 1e9
	v, err := takeScript.Run(ctx, l.client, []string{key}, strconv.FormatFloat(emission, 'g', -1, 64), l.limit.Burst, n).Slice()
	if err != nil {
		return taken{}, err
	}
	if len(v) != 2 {
		return taken{}, fmt.Errorf("redis: limiter %s: unexpected reply %v", key, v)
	}
	g, ok1 := v[0].(int64)
	ra, ok2 := v[1].(string)
	secs, perr := strconv.ParseFloat(ra, 64)
	if !ok1 || !ok2 || perr != nil || g < 0 || secs != secs {
		return taken{}, fmt.Errorf("redis: limiter %s: unexpected reply %v", key, v)
	}
	return taken{Allowed: int(g), RetryAfter: time.Duration(min(secs, 1e9) * 1e9)}, nil
}

// Reserve implements retry.Limiter. It spends a leased token, or leases
// more, or waits itself, on real time, for the bucket's next token, and
// returns a zero wait; with Redis failing it returns the local bucket's
// reservation.
func (l *Limiter) Reserve(ctx context.Context, key string, now time.Time, maxWait time.Duration) (time.Duration, func(time.Time), bool) {
	if !l.perKey {
		key = ""
	}
	ls := l.lease(key)
	start := time.Now()
	counted := false
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	sleep := func(d time.Duration, ch <-chan struct{}) bool {
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-timer.C:
		case <-ch:
			if !timer.Stop() {
				<-timer.C
			}
		case <-ctx.Done():
			return false
		}
		return true
	}
	for {
		if ctx.Err() != nil || passed(ctx) {
			return 0, nil, false
		}
		t := time.Now()
		left := maxWait - t.Sub(start)
		ls.mu.Lock()
		if !counted {
			ls.asked++
			counted = true
		}
		if ls.tokens > 0 && t.Before(ls.lapses) {
			ls.tokens--
			ls.mu.Unlock()
			return 0, nil, true
		}
		if f := ls.fetching; f != nil {
			ls.mu.Unlock()
			if left <= 0 || !sleep(left, f) {
				l.denied.Add(1)
				return 0, nil, false
			}
			continue
		}
		if wait := ls.empty.Sub(t); wait > 0 {
			ls.mu.Unlock()
			if wait > left {
				l.denied.Add(1)
				return 0, nil, false
			}
			l.waits.Add(1)
			if !sleep(wait, nil) {
				return 0, nil, false
			}
			continue
		}
		n := ls.batch(t, l.opts.SyncInterval, l.limit.Burst)
		f := make(chan struct{})
		ls.fetching = f
		ls.mu.Unlock()

		// Leave half of what is left to the fallback.
		octx, cancel := context.WithTimeout(ctx, min(l.opts.Timeout, left/2))
		res, err := l.take(octx, l.opts.Prefix+"limit:{"+key+"}", n)
		cancel()
		got := time.Now()
		ls.mu.Lock()
		ls.fetching = nil
		close(f)
		if err == nil && res.Allowed > 0 {
			ls.tokens = res.Allowed - 1 // this call's
			ls.lapses = got.Add(l.opts.SyncInterval)
			ls.mu.Unlock()
			l.leases.Add(1)
			l.allowed.Add(int64(res.Allowed))
			return 0, nil, true
		}
		if err == nil {
			ls.empty = got.Add(max(res.RetryAfter, time.Microsecond))
		}
		ls.mu.Unlock()
		if ctx.Err() != nil || passed(ctx) {
			return 0, nil, false
		}
		if err != nil {
			// Redis failed, or was cut short to leave the fallback its
			// time: the local bucket paces the attempt, within what is
			// left of maxWait.
			l.fallbacks.Add(1)
			left = maxWait - time.Since(start)
			return l.fallback.Reserve(ctx, key, now.Add(time.Since(start)), max(left, 0))
		}
	}
}

// passed reports whether ctx's deadline has passed, which a context derived
// from it may notice first.
func passed(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}
