package redis

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// lease is one process's tokens of one key's bucket.
type lease struct {
	key      string
	mu       sync.Mutex
	tokens   int           // leased and not yet spent
	lapses   time.Time     // when they lapse
	empty    time.Time     // the bucket is empty until then
	asked    int           // reservations since the last lease
	since    time.Time     // start of that count
	rate     float64       // reservations per second, smoothed
	fetching *fetch        // the request in flight, if any
	renewAt  time.Time     // no renewal ahead before then: the last one failed
	granted  []grant       // this process's leases within the share window
	term     time.Duration // of the last lease
	size     int           // tokens of the last lease, and those left then
	lessees  int           // processes that leased within the share window, as the last lease told
	busy     bool          // tokens are scarce, as the last lease told
	health   *keyHealth    // of this key's bucket in Redis
}

// fetch is a lease request in flight: done closes when it ends, and
// failed, set before, says that Redis failed it (the key is down). A
// renewal ahead, bounded by renewBound rather than Timeout, is slow from
// Timeout after it started: a call that needs its tokens waits for it
// until then at most, and then takes the local bucket.
type fetch struct {
	done   chan struct{}
	failed bool
	slow   time.Time // zero for a request on a call's path
}

// grant is the tokens one lease granted, less those given back since, and
// when: at on this process's clock, slice the tenth of the share window
// on Redis's (takeScript's slice number).
type grant struct {
	at    time.Time
	n     int
	slice int64
}

// giveBack takes n tokens of the lease, left unspent, back from the grants
// they came from, the newest first (the calls spend the oldest), and
// returns the tokens taken from each slice of the share window; tokens of
// grants before the window leave no count, as their grants left it. ls.mu
// is held.
func (ls *lease) giveBack(now time.Time, window time.Duration, n int) []grant {
	var parts []grant
	from := now.Add(-window)
	for i := len(ls.granted) - 1; i >= 0 && n > 0; i-- {
		g := &ls.granted[i]
		if !g.at.After(from) {
			break
		}
		k := min(n, g.n)
		if k == 0 {
			continue
		}
		g.n -= k
		n -= k
		if last := len(parts) - 1; last >= 0 && parts[last].slice == g.slice {
			parts[last].n += k
		} else {
			parts = append(parts, grant{n: k, slice: g.slice})
		}
	}
	return parts
}

// shareSlices is the number of terms of the share window.
const shareSlices = 10

// lease returns the lease of key: the Limiter's one, or key's own with
// perKey, made on first use.
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
	ls, loaded := l.keys.LoadOrStore(key, &lease{key: key, health: l.health.key()})
	if !loaded {
		l.nkeys.Add(1)
	}
	return ls.(*lease)
}

// maxLeaseKeys bounds the per-key leases a Limiter keeps.
const maxLeaseKeys = 1024

// batch is the size of the next lease: the demand over one term, at least
// floor, at most the burst. The demand is the reservations a second since
// the last lease, smoothed over the leases; while tokens are plentiful
// (plenty), the larger of that and the smoothed rate before it, so that a
// lease after a quiet spell or a burst is not sized too small (tokens not
// spent go back to the bucket; a lease too small costs a round trip), and
// counted over at least least (one SyncInterval): the calls that queue
// behind a key's first lease, or spend a small one, within a round trip
// are not a rate of thousands a second, whose lease of a Heartbeat would
// take the fleet's whole burst and leave the other processes scarce.
func (ls *lease) batch(now time.Time, term, least time.Duration, burst, floor int, plenty bool) int {
	rate := ls.rate
	if el := now.Sub(ls.since).Seconds(); !ls.since.IsZero() && el > 0 {
		if plenty {
			el = max(el, least.Seconds())
		}
		r := float64(ls.asked) / el
		if ls.rate == 0 {
			ls.rate = r
		} else {
			ls.rate = (ls.rate + r) / 2
		}
		rate = max(rate, r)
	}
	ls.asked, ls.since = 0, now
	if !plenty {
		rate = ls.rate
	}
	n := int(math.Ceil(rate * term.Seconds()))
	return min(max(n, floor, 1), max(burst, 1))
}

// takeScript is GCRA (as redis_rate's) granting whole tokens: up to
// ARGV[3] of those the bucket KEYS[1] holds, with an emission interval of
// ARGV[1] seconds and a burst of ARGV[2], on Redis's clock, after taking
// back ARGV[6] tokens a lease left unspent. It also keeps the lessees of
// the share window of ARGV[5] ms: KEYS[2], a sorted set of process names
// (ARGV[4]) by the time of their last lease, and KEYS[3], the tokens
// granted, less those given back, in each tenth of the window (a slice,
// numbered by Redis's clock in ms / its length). The tokens given back
// leave the count of the slices that granted them, ARGV[7], ARGV[8], ...
// being pairs of a slice and its tokens; a slice no longer counted keeps
// nothing to take them from. It returns {granted, seconds until the next
// token when none, lessees, tokens granted in the window, 1 if the bucket
// held at least half its burst before this grant, the slice of this
// grant}; with ARGV[3] = 0 it only gives back, and returns {0, '0', 0, 0,
// 0, slice}. redis_rate's AllowAtMost would charge a fraction of a
// token it does not grant. A bucket time that is not a finite number, or
// further ahead than a full bucket's, is an error: it was not written by a
// Limiter of this limit.
var takeScript = goredis.NewScript(`
local emission = tonumber(ARGV[1])
local burst_offset = emission * tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local win = tonumber(ARGV[5])
local back = tonumber(ARGV[6]) or 0
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now = (tonumber(t[1]) - 1483228800) + tonumber(t[2]) / 1000000
local raw = redis.call('GET', KEYS[1])
local tat = now
if raw then
	tat = tonumber(raw)
	if not tat or tat ~= tat or tat > now + burst_offset + 0.001 or tat < 0 then
		error({err = 'retry: limiter bucket out of range: ' .. KEYS[1] .. ' = ' .. tostring(raw)})
	end
end
if back > 0 then tat = tat - back * emission end
tat = math.max(tat, now)
local g, wait, full = 0, '0', 0
if n > 0 then
	local diff = now - (tat - burst_offset)
	-- now, counted in seconds since 2017, has a resolution of about 6e-8 s:
	-- a token whose time has just come must not be lost to it.
	local avail = math.floor(diff / emission + 1e-6 + 2.5e-7 / emission)
	if 2 * avail >= tonumber(ARGV[2]) then full = 1 end
	if avail < 1 then
		wait = string.format('%.9f', emission - diff)
	else
		g = math.min(avail, n)
		tat = tat + g * emission
	end
end
if g > 0 or back > 0 then
	if tat > now then
		redis.call('SET', KEYS[1], string.format('%.17g', tat), 'PX', math.ceil((tat - now) * 1000) + 1)
	else
		redis.call('DEL', KEYS[1])
	end
end
local slice = math.max(math.floor(win / 10), 1)
local e = math.floor(ms / slice)
local i = e % 10
local v = redis.call('HMGET', KEYS[3], 'e0', 'n0', 'e1', 'n1', 'e2', 'n2', 'e3', 'n3', 'e4', 'n4', 'e5', 'n5', 'e6', 'n6', 'e7', 'n7', 'e8', 'n8', 'e9', 'n9')
for k = 7, #ARGV - 1, 2 do
	local be, bn = tonumber(ARGV[k]), tonumber(ARGV[k + 1])
	if be and bn and be > e - 10 and be <= e then
		local j = be % 10
		if tonumber(v[2 * j + 1]) == be then
			redis.call('HINCRBY', KEYS[3], 'n' .. j, -bn)
			v[2 * j + 2] = (tonumber(v[2 * j + 2]) or 0) - bn
		end
	end
end
if n == 0 then
	return {0, '0', 0, 0, 0, e}
end
redis.call('ZADD', KEYS[2], ms, ARGV[4])
local procs = redis.call('ZCOUNT', KEYS[2], '(' .. (ms - win), '+inf')
-- Processes that leased before the window are dropped by one lease in
-- sixteen (by its time), and all with the set when no lease comes for a
-- window.
if ms % 16 == 0 then redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ms - win) end
redis.call('PEXPIRE', KEYS[2], win)
local total = 0
for j = 0, 9 do
	local ej = tonumber(v[2 * j + 1])
	local nj = tonumber(v[2 * j + 2]) or 0
	if nj ~= nj or nj == math.huge or nj == -math.huge then
		error({err = 'retry: limiter share out of range: ' .. KEYS[3] .. ' n' .. j .. ' = ' .. tostring(v[2 * j + 2])})
	end
	if j == i and ej ~= e then nj = 0 end -- this slice starts again
	if ej and ej > e - 10 then total = total + nj end
	if j == i then total = total + g end
end
if tonumber(v[2 * i + 1]) ~= e then
	redis.call('HSET', KEYS[3], 'e' .. i, e, 'n' .. i, g)
elseif g ~= 0 then
	redis.call('HINCRBY', KEYS[3], 'n' .. i, g)
end
redis.call('PEXPIRE', KEYS[3], 2 * win)
return {g, wait, procs, math.max(total, 0), full, e}`)

// taken is what takeScript granted and told.
type taken struct {
	Allowed    int
	RetryAfter time.Duration
	Lessees    int   // processes that leased within the share window
	Fleet      int   // tokens the fleet was granted within the window
	Full       bool  // the bucket held at least half its burst before the grant
	Slice      int64 // the slice of the share window of the grant, on Redis's clock
}

// take leases up to n tokens from the bucket of key, after giving back
// back tokens of a lease that lapsed, parts of them by the slice that
// granted them (lease.giveBack).
func (l *Limiter) take(ctx context.Context, name string, n, back int, parts []grant) (taken, error) {
	v, err := takeScript.Run(ctx, l.client, []string{name, name + ":lessees", name + ":granted"}, l.takeArgs(n, back, parts)...).Slice()
	if err != nil {
		return taken{}, err
	}
	return l.parseTaken(v)
}

// takeArgs are takeScript's arguments.
func (l *Limiter) takeArgs(n, back int, parts []grant) []any {
	args := []any{strconv.FormatFloat(l.emission(), 'g', -1, 64), l.limit.Burst, n, l.id, l.window().Milliseconds(), back}
	for _, p := range parts {
		args = append(args, p.slice, p.n)
	}
	return args
}

// emission is the limit's emission interval, in seconds.
func (l *Limiter) emission() float64 { return float64(l.limit.Period) / float64(l.limit.Rate) / 1e9 }

// parseTaken checks a reply of takeScript: whole numbers of tokens and
// processes, and a wait for the next token no longer than the emission
// interval.
func (l *Limiter) parseTaken(v []any) (taken, error) {
	bad := fmt.Errorf("unexpected reply %.200v", v)
	if len(v) != 6 {
		return taken{}, bad
	}
	g, ok1 := v[0].(int64)
	ra, ok2 := v[1].(string)
	procs, ok3 := v[2].(int64)
	fleet, ok4 := v[3].(int64)
	full, ok5 := v[4].(int64)
	slice, ok6 := v[5].(int64)
	secs, perr := strconv.ParseFloat(ra, 64)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || perr != nil || g < 0 || g > int64(l.limit.Burst) || !(secs >= 0 && secs <= l.emission()*1.001+0.002) || procs < 0 || fleet < 0 {
		return taken{}, bad
	}
	return taken{Allowed: int(g), RetryAfter: time.Duration(secs * 1e9), Lessees: int(procs), Fleet: int(fleet), Full: full == 1, Slice: slice}, nil
}

// window is the share window: ten lease terms.
func (l *Limiter) window() time.Duration { return shareSlices * l.opts.SyncInterval }

// shareOf is this process's share of the limit after a lease that told
// res: its own grants in the window, less the tokens given back of them
// (lease.giveBack), plus an equal part of the fleet's unused tokens, at
// least half an equal part, at most the whole limit. ls.mu is held.
func (l *Limiter) shareOf(ls *lease, now time.Time, res taken) float64 {
	from := now.Add(-l.window())
	kept := ls.granted[:0]
	own := 0
	for _, g := range ls.granted {
		if g.at.After(from) {
			kept = append(kept, g)
			own += g.n
		}
	}
	if res.Allowed > 0 {
		kept = append(kept, grant{at: now, n: res.Allowed, slice: res.Slice})
		own += res.Allowed
	}
	ls.granted = kept
	procs := float64(max(res.Lessees, 1))
	whole := l.perSec * l.window().Seconds() // the limit's tokens in the window
	unused := max(whole-float64(res.Fleet), 0)
	share := (float64(own) + unused/procs) / whole
	return min(max(share, 0.5/procs), 1)
}
