package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"
	"github.com/steadyhq/retry"
)

// Limiter is a rate limit shared by every process using the same Redis and
// prefix, for retry.RateLimit.Shared: a GCRA bucket in Redis (as
// redis_rate's, github.com/go-redis/redis_rate, at key PREFIX{limit:KEY})
// from which each process leases tokens in batches and spends them
// locally, so that Redis sees one request per batch rather than one per
// attempt.
//
// A lease is sized to the process's recent demand over its term, its
// reservations per second times the term, at most the burst; while tokens
// are plentiful the reservations are counted over at least a
// SyncInterval, so that the calls that queue behind a key's first lease
// do not make a lease of the whole burst. Tokens are scarce when, at the
// process's last lease, the fleet had been granted half its limit or more
// over the share window (below), or the bucket held less than half its
// burst. While they are not, a lease's term is
// Options.Heartbeat (2 s by default), and a lease is at least a floor of 4
// tokens, so that each process asks Redis about once a Heartbeat a key,
// and a key with little traffic not once a call. While they are, the term
// is SyncInterval and there is no floor, so that the leases follow the
// demand. Redis grants the whole tokens the bucket holds, up to that.
// While tokens are plentiful, the call that finds a lease with an eighth
// of its tokens or of its term left renews it ahead, on a goroutine of its
// own: the tokens granted join those left, for a new term, so that calls
// seldom wait on Redis. A renewal ahead is on no call's path: it may take
// the larger of Timeout and SyncInterval, and the calls go on spending the
// lease meanwhile, a call that finds it spent waiting for the renewal no
// longer than Timeout after the renewal began. One that fails (counted in
// LimiterStats.Errors) while the lease still has tokens leaves the key on
// the fleet's bucket: the calls spend those tokens, and the next renewal
// is asked an interval later; a lease spent before then rests the key, as
// below, until that time. Tokens not spent within the term are given back
// to the fleet's bucket: with the next lease of the key, or, for a key
// that fell quiet, within an interval of the term's end, the lapsed leases
// of a Limiter given back in one round trip. So a process cannot save
// tokens up and spend them later as a burst beyond the fleet's limit, and
// the fleet loses none to a lease sized larger than what was spent (only
// those of a process that dies, or of a give-back Redis fails). When the
// bucket is empty, Redis
// names the time of its next token; the process's calls wait for it,
// within their deadline, and one of them asks again. One request per
// process and key is in flight at a time; the others wait for its answer,
// at most Options.Timeout.
//
// Each lease also tells the process its share of the limit: over the last
// ten sync intervals (the share window), the tokens it was granted, less
// those of them it gave back (tokens given back of a grant that left the
// window count neither way), plus an equal part of what the fleet left
// unused, among the processes that leased in that window; at least half
// of an equal part. Tokens count when granted: the last lease's, not yet
// spent, are in the share, which is above what the process used by less
// than that lease over the window's tokens (a lease is up to a burst while
// tokens are plentiful).
//
// A reservation waits for Redis's answer, to its own request or to the one
// in flight, at most Options.Timeout, and its own request at most half of
// what is left of the caller's deadline (the other half is the
// fallback's); Redis answering without a token for it (others took them)
// starts the wait again, as a rate-limited wait within the caller's
// deadline: its waits end 5 ms before the deadline, and a call whose time
// runs out so (the fleet's other callers keep taking the tokens) is
// refused, Reason rate_limited and counted in LimiterStats.Denied, not
// ended by its deadline. One that finds no leased token and cannot give
// Redis a tenth of Timeout (a hedge that may not wait, a deadline about to
// pass) does not ask, and is refused while Redis answers, as a wait that
// cannot fit is.
//
// When Redis fails, or is slower than that bound, the attempt takes a
// token from a local token bucket instead
// (golang.org/x/time/rate), counted in Stats.Fallbacks, its wait within
// what is left. That bucket paces the process at its share of the limit
// and of the burst, as of its last lease: the fleet keeps its shape. With
// steady demand the fleet's rate in fallback stays within the limit (each
// process keeps what it used and its part of the headroom); whatever the
// demand, within 1.5 times the limit plus the local bursts, the floor of
// half an equal part being the excess. A process that never leased has no
// share and paces at the whole limit. After a failed round trip (but a
// renewal ahead's while the lease has tokens, above), the Limiter runs on
// the local bucket for one SyncInterval without asking Redis, and no
// attempt waits on a request in flight; then one request
// asks, and the others stay local until it answers. No attempt waits
// longer than Options.Timeout for a Redis that does not answer. Each key
// (with perKey) rests apart: a key that fails (a Cluster master down, a key
// of the wrong type) leaves the others on the fleet's buckets.
//
// A Limiter needs no Close; a round trip that the client does not cut at
// Timeout finishes on a goroutine of its own. It is safe for concurrent
// use. Build it with NewLimiter.
type Limiter struct {
	client   goredis.UniversalClient
	limit    redis_rate.Limit
	perSec   float64 // the limit, in attempts per second
	perKey   bool
	opts     Options
	id       string // this process's name in the fleet's list of lessees
	fallback *localLimiter
	health   *health
	global   lease
	keys     sync.Map     // key → *lease, with perKey
	nkeys    atomic.Int64 // entries of keys, bounded by maxLeaseKeys

	allowed, leases, waits, denied, fallbacks atomic.Int64
	givenBack                                 atomic.Int64
	share                                     atomic.Uint64 // math.Float64bits of the last share

	lapseMu sync.Mutex
	lapsing map[*lease]bool // leases with tokens left, to give back when they lapse
	timer   bool            // a timer will give them back
}

var _ retry.Limiter = (*Limiter)(nil)

// NewLimiter returns a Limiter on client of limit attempts per second with
// bursts of burst, across the fleet; limit must be in [1e-9, 1e9] and
// burst/limit at most 1e9 seconds. perKey
// keeps one limit per key (WithKey, or the Transport's request key, by
// default the host).
func NewLimiter(client goredis.UniversalClient, limit float64, burst int, perKey bool, opts Options) (*Limiter, error) {
	if isNilClient(client) {
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
	lim := &Limiter{client: client, limit: l, perSec: limit, perKey: perKey, opts: opts, fallback: local,
		id: processID(), health: newHealth("limiter", opts)}
	lim.global.health = lim.health.key()
	lim.lapsing = map[*lease]bool{}
	lim.share.Store(math.Float64bits(1))
	return lim, nil
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
	Errors    int64 // round trips that failed: Redis down, slow or refusing
	// OnFleet is false while a key's round trips fail (its last one
	// failed, within the last two intervals and a Timeout): its attempts
	// are paced by the local bucket. A renewal ahead that fails while the
	// lease has tokens left does not count, its calls spending them.
	OnFleet bool
	// Share is the part of the limit (0 to 1) the local bucket paces
	// this process at while Redis fails, from the last lease (of the last
	// key leased, with perKey); 1 before the first.
	Share float64
	// GivenBack counts the tokens of leases whose term ended unspent,
	// given back to the fleet's buckets.
	GivenBack int64
}

// Stats returns the limiter's counters; a nil *Limiter's are zero.
func (l *Limiter) Stats() LimiterStats {
	if l == nil {
		return LimiterStats{}
	}
	return LimiterStats{Allowed: l.allowed.Load(), Leases: l.leases.Load(), Waits: l.waits.Load(), Denied: l.denied.Load(),
		Fallbacks: l.fallbacks.Load(), Errors: l.health.errors.Load(), OnFleet: l.health.onFleet(),
		Share: math.Float64frombits(l.share.Load()), GivenBack: l.givenBack.Load()}
}

// FleetStatus reports whether l runs on the fleet's state (as
// LimiterStats.OnFleet), when a round trip to Redis last succeeded (zero
// before one) and how many failed (LimiterStats.Errors): what the live
// page of github.com/steadyhq/retry/retryz shows of it. A nil *Limiter's
// are zero.
func (l *Limiter) FleetStatus() (onFleet bool, lastSync time.Time, errors int64) {
	if l == nil {
		return false, time.Time{}, 0
	}
	return l.health.status()
}

// Reserve implements retry.Limiter. It spends a leased token, or leases
// more, or waits itself, on real time, for the bucket's next token, and
// returns a zero wait; with Redis failing or too slow it returns the local
// bucket's reservation. A nil *Limiter refuses.
func (l *Limiter) Reserve(ctx context.Context, key string, now time.Time, maxWait time.Duration) (time.Duration, func(time.Time), bool) {
	if l == nil {
		return 0, nil, false // a nil *Limiter refuses
	}
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
	// sleep waits d, or until ch closes (woken), or until ctx ends (!ok).
	sleep := func(d time.Duration, ch <-chan struct{}) (woken, ok bool) {
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-timer.C:
			return false, true
		case <-ch:
			if !timer.Stop() {
				<-timer.C
			}
			return true, true
		case <-ctx.Done():
			return false, false
		}
	}
	local := func() (time.Duration, func(time.Time), bool) {
		l.fallbacks.Add(1)
		since := time.Since(start)
		return l.fallback.Reserve(ctx, key, now.Add(since), max(maxWait-since, 0))
	}
	for again := false; ; again = true {
		if ctx.Err() != nil || passed(ctx) {
			return 0, nil, false
		}
		t := start // a call that spends a leased token reads the clock once
		if again {
			t = time.Now()
		}
		left := maxWait - t.Sub(start)
		if dl, ok := ctx.Deadline(); ok {
			// Waits end a margin before the deadline, so that a call
			// whose time runs out waiting for a token is refused, not
			// ended by its deadline.
			left = min(left, dl.Sub(t)-deadlineMargin)
		}
		ls.mu.Lock()
		if !counted {
			ls.asked++
			counted = true
		}
		if ls.tokens > 0 && t.Before(ls.lapses) {
			ls.tokens--
			// A lease with an eighth of its tokens or of its term left is
			// renewed ahead, off the call's path, so that calls seldom
			// wait on Redis; not while tokens are scarce.
			// After one that failed, the next is asked an interval later.
			renew := !ls.busy && ls.fetching == nil && !ls.health.down.Load() && !t.Before(ls.renewAt) &&
				(8*ls.tokens < ls.size || t.After(ls.lapses.Add(-ls.term/8)))
			var f *fetch
			var n int
			if renew {
				n = max(ls.batch(t, l.term(ls), l.opts.SyncInterval, l.limit.Burst, l.floor(ls), true)-ls.tokens, 1)
				f = &fetch{done: make(chan struct{}), slow: t.Add(l.opts.Timeout)}
				ls.fetching = f
			}
			ls.mu.Unlock()
			if renew {
				go l.renew(ls, key, n, f)
			}
			return 0, nil, true
		}
		if f := ls.fetching; f != nil {
			ls.mu.Unlock()
			if ls.health.down.Load() {
				return local() // the request in flight is asking a failing Redis
			}
			if left <= 0 {
				l.denied.Add(1)
				return 0, nil, false
			}
			// Wait for its answer, at most Timeout, and for a renewal
			// ahead at most until it is slower than Timeout: Redis
			// answering (with tokens, or none left for this call) starts
			// the wait again.
			wait, slow := min(left, l.opts.Timeout), false
			if !f.slow.IsZero() && f.slow.Sub(t) < wait {
				wait, slow = max(f.slow.Sub(t), 0), true
			}
			woken, ok := sleep(wait, f.done)
			switch {
			case !ok:
				return 0, nil, false
			case !woken && !slow && left < l.opts.Timeout:
				l.denied.Add(1) // the caller's time ran out first
				return 0, nil, false
			case !woken, f.failed:
				return local() // Redis is slower than Timeout, or failed
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
			if _, ok := sleep(wait, nil); !ok {
				return 0, nil, false
			}
			continue
		}
		// Leave half of what is left to the fallback. A request that can
		// give Redis less than a tenth of Timeout (a hedge that may not
		// wait, a deadline about to pass) cannot tell a slow Redis from a
		// healthy one: it does not ask, and with Redis answering others
		// it is refused, as a wait that cannot fit is.
		timeout := min(l.opts.Timeout, left/2)
		if timeout < l.opts.Timeout/10 {
			ls.mu.Unlock()
			if ls.health.down.Load() {
				return local()
			}
			l.denied.Add(1)
			return 0, nil, false
		}
		if t.Before(ls.renewAt) {
			// The lease was spent within an interval of a renewal ahead
			// that failed: the key rests until then, as after any failure.
			ls.health.rest(ls.renewAt)
		}
		if ls.health.skip(t) {
			ls.mu.Unlock()
			return local()
		}
		term := l.term(ls)
		n := ls.batch(t, term, l.opts.SyncInterval, l.limit.Burst, l.floor(ls), !ls.busy)
		back := ls.tokens // lapsed: given back with this request
		parts := ls.giveBack(t, l.window(), back)
		ls.tokens = 0
		f := &fetch{done: make(chan struct{})}
		ls.fetching = f
		ls.mu.Unlock()

		name := l.opts.key("limit", key)
		res, err := roundTrip(ctx, timeout, func(ctx context.Context) (taken, error) { return l.take(ctx, name, n, back, parts) })
		got := time.Now()
		// The key's health first: the waiters woken below read it.
		if err == nil {
			ls.health.ok()
		} else {
			ls.health.failed(ctx, err, timeout < l.opts.Timeout, "limiter "+name)
		}
		ls.mu.Lock()
		ls.fetching = nil
		// Failed for the waiters only if Redis did: a fetch its own caller
		// canceled, or cut by its short deadline, leaves them to ask.
		f.failed = err != nil && ls.health.down.Load()
		close(f.done)
		if err == nil {
			l.told(ls, key, res, got, back)
		}
		if err == nil && res.Allowed > 0 {
			ls.tokens = res.Allowed - 1 // this call's
			ls.lapses, ls.term, ls.size = got.Add(term), term, res.Allowed
			left := ls.tokens
			ls.mu.Unlock()
			if left > 0 {
				l.lapse(ls)
			}
			l.leases.Add(1)
			l.allowed.Add(int64(res.Allowed))
			return 0, nil, true
		}
		if err == nil {
			ls.empty = got.Add(max(res.RetryAfter, time.Microsecond))
			ls.mu.Unlock()
			continue
		}
		ls.mu.Unlock()
		if ctx.Err() != nil || passed(ctx) {
			return 0, nil, false
		}
		return local() // Redis failed, or is slower than half of what is left
	}
}

// passed reports whether ctx's deadline has passed, which a context derived
// from it may notice first.
// deadlineMargin is how long before the caller's deadline the Limiter's
// own waits end: a wait that would end later is refused (rate_limited)
// instead, so that a timer firing a little late does not lose the race to
// the deadline.
const deadlineMargin = 5 * time.Millisecond

func passed(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// processID names this Limiter among the fleet's lessees: the host, the
// process and a random part, so that two Limiters of one process count as
// two lessees, as they lease apart.
func processID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%016x", host, os.Getpid(), rand.Uint64())
}
