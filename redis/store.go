package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/steadyhq/retry"
)

var _ retry.BreakerStore = (*Store)(nil)

// Store keeps circuit breakers that a fleet shares in Redis: set it as
// retry.Breaker.Store and every process using the same Redis and prefix
// shares one breaker (one per key with Breaker.PerKey). It implements
// retry.BreakerStore: each process decides its attempts from the fleet's
// state as last read and sends its counts about once per
// Options.SyncInterval, in the round trip that reads the state back.
//
// Each breaker is one Redis hash, PREFIX{breaker:NAME} (the braces keep it
// in one slot of a Redis Cluster), read and written by one Lua script: a ring
// of ten slices of Breaker.Window holding success and failure counts, the
// state, its generation, the opened-until time and the half-open claims.
// The script trips the breaker on the fleet's sum over the window, opens
// it until one instant on Redis's clock (TIME), turns it half-open past
// that instant, grants at most Breaker.Probes claims, and closes it on
// Probes successes or reopens it on a failure. Claims not answered within
// another OpenTimeout lapse and the probes start again, so a process that
// dies while probing cannot hold the breaker half-open. The hash lives for
// Options.StateTTL, or twice the window or the open time when longer.
//
// Each round trip is bounded by Options.Timeout and its context. When
// Redis fails or is slower, Sync returns the error, counted in Stats and
// logged to Options.Logger, and the Retrier's own breaker decides
// (retry.Stats.BreakerFallbacks, and false in retry.Stats.BreakersOnFleet)
// until Redis answers again. When Redis loses a breaker's state (a
// restart with empty data, FLUSHALL, the key expired), it starts again
// closed, and every process takes that state at its next sync. A breaker's
// generations start at Redis's time in microseconds when its state is
// made, so that they grow across such a loss: a late reply from before it
// cannot pass for a newer state. A process that has never synced sends
// generation 0, and its counts count in the current generation. A Store needs no Close; a round trip that the client does not cut
// at Timeout finishes on a goroutine of its own.
//
// A Store is safe for concurrent use. Build it with NewStore.
type Store struct {
	client          goredis.UniversalClient
	opts            Options
	health          *health
	keys            sync.Map // breaker name → *keyHealth
	syncs           atomic.Int64
	claims, granted atomic.Int64
}

// NewStore returns a Store on client.
func NewStore(client goredis.UniversalClient, opts Options) (*Store, error) {
	if isNilClient(client) {
		return nil, errors.New("redis: NewStore: client is nil")
	}
	opts, err := opts.withDefaults("NewStore")
	if err != nil {
		return nil, err
	}
	return &Store{client: client, opts: opts, health: newHealth("breaker store", opts)}, nil
}

// StoreStats counts a Store's round trips.
type StoreStats struct {
	Syncs   int64 // round trips asked for
	Errors  int64 // round trips that failed: Redis down, slow or refusing
	Claims  int64 // probe claims asked for
	Granted int64 // probe claims granted
	// OnFleet is false while a breaker's round trips fail (its last one
	// failed, within the last two intervals and a Timeout); each
	// breaker's own state is in retry.Stats.BreakersOnFleet.
	OnFleet bool
}

// errNilStore is the error of Sync on a nil *Store.
var errNilStore = errors.New("redis: nil *Store (check the error of NewStore)")

// Stats returns the store's counters; a nil *Store's are zero.
func (s *Store) Stats() StoreStats {
	if s == nil {
		return StoreStats{}
	}
	return StoreStats{Syncs: s.syncs.Load(), Errors: s.health.errors.Load(), Claims: s.claims.Load(), Granted: s.granted.Load(), OnFleet: s.health.onFleet()}
}

// FleetStatus reports whether s runs on the fleet's state (as
// StoreStats.OnFleet), when a round trip to Redis last succeeded (zero
// before one) and how many failed (StoreStats.Errors): what the live page
// of github.com/steadyhq/retry/retryz shows of it. A nil *Store's are
// zero.
func (s *Store) FleetStatus() (onFleet bool, lastSync time.Time, errors int64) {
	if s == nil {
		return false, time.Time{}, 0
	}
	return s.health.status()
}

// keyHealth returns what the Store knows of Redis for the breaker name.
func (s *Store) keyHealth(name string) *keyHealth {
	if k, ok := s.keys.Load(name); ok {
		return k.(*keyHealth)
	}
	k, _ := s.keys.LoadOrStore(name, s.health.key())
	return k.(*keyHealth)
}

// SyncInterval returns Options.SyncInterval; zero for a nil *Store.
func (s *Store) SyncInterval() time.Duration {
	if s == nil {
		return 0
	}
	return s.opts.SyncInterval
}

// key is the hash of the breaker name.
func (s *Store) key(name string) string { return s.opts.key("breaker", name) }

// syncScript is the fleet's breaker; see Store. KEYS[1] is its hash;
// ARGV: generation, successes, failures, claim (0 or 1), probe successes,
// probe failures, probe releases, failure ratio, min requests, window ms,
// open ms, probes, TTL ms. It returns {state (0 closed, 1 half-open, 2
// open), generation, ms left open, claim granted (0 or 1)}.
var syncScript = goredis.NewScript(`
local k = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HMGET', k, 'st', 'gen', 'until', 'claimed', 'ok')
local st = tonumber(h[1]) or 0
local gen = tonumber(h[2])
local g = tonumber(ARGV[1]) or -1
if not gen then
	-- A new breaker, or one whose state Redis lost: its generations start
	-- at the time in microseconds (exact below 2^53), past those of any
	-- state lost before, which changes far less often than once a
	-- microsecond.
	gen = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
-- A process that has never synced (generation 0) counts in the current
-- generation.
if g == 0 then g = gen end
local untl = tonumber(h[3]) or 0
local claimed = tonumber(h[4]) or 0
local ok = tonumber(h[5]) or 0
local ratio = tonumber(ARGV[8]) or 1
local minreq = tonumber(ARGV[9]) or 1
local slice = math.max(math.floor((tonumber(ARGV[10]) or 10000) / 10), 1)
local openms = tonumber(ARGV[11]) or 30000
local probes = tonumber(ARGV[12]) or 1
local N = 10
local ring = {}
for i = 0, N - 1 do
	ring[#ring + 1] = 'e' .. i
	ring[#ring + 1] = 's' .. i
	ring[#ring + 1] = 'f' .. i
end
local function clear() redis.call('HDEL', k, unpack(ring)) end
local function open()
	st = 2; gen = gen + 1; untl = now + openms; claimed = 0; ok = 0
	clear()
end
if st == 2 and now >= untl then
	st = 1; gen = gen + 1; claimed = 0; ok = 0
end
if st == 1 and now >= untl + openms then
	gen = gen + 1; claimed = 0; ok = 0; untl = now
end
if g == gen then
	if st == 0 then
		local sc = tonumber(ARGV[2]) or 0
		local fc = tonumber(ARGV[3]) or 0
		if sc + fc > 0 then
			local e = math.floor(now / slice)
			local i = e % N
			if tonumber(redis.call('HGET', k, 'e' .. i)) ~= e then
				redis.call('HSET', k, 'e' .. i, e, 's' .. i, sc, 'f' .. i, fc)
			else
				redis.call('HINCRBY', k, 's' .. i, sc)
				redis.call('HINCRBY', k, 'f' .. i, fc)
			end
			local v = redis.call('HMGET', k, unpack(ring))
			local n, f = 0, 0
			for j = 0, N - 1 do
				local ej = tonumber(v[3 * j + 1])
				if ej and ej > e - N then
					n = n + (tonumber(v[3 * j + 2]) or 0) + (tonumber(v[3 * j + 3]) or 0)
					f = f + (tonumber(v[3 * j + 3]) or 0)
				end
			end
			if n > 0 and n >= minreq and f >= ratio * n then open() end
		end
	elseif st == 1 then
		if (tonumber(ARGV[6]) or 0) > 0 then
			open()
		else
			claimed = math.max(claimed - (tonumber(ARGV[7]) or 0), 0)
			ok = ok + (tonumber(ARGV[5]) or 0)
			if ok >= probes then
				st = 0; gen = gen + 1; claimed = 0; ok = 0
				clear()
			end
		end
	end
end
local granted = 0
if ARGV[4] == '1' and st == 1 and claimed < probes then
	claimed = claimed + 1; granted = 1
end
redis.call('HSET', k, 'st', st, 'gen', gen, 'until', untl, 'claimed', claimed, 'ok', ok)
redis.call('PEXPIRE', k, ARGV[13])
local left = 0
if st == 2 then left = untl - now end
return {st, gen, left, granted}`)

// Sync implements retry.BreakerStore in one round trip (the script; see
// Store), bounded by Options.Timeout and ctx. A nil *Store returns an
// error.
func (s *Store) Sync(ctx context.Context, name string, b retry.Breaker, in retry.BreakerSync) (retry.BreakerFleet, error) {
	if s == nil {
		return retry.BreakerFleet{}, errNilStore
	}
	s.syncs.Add(1)
	if in.Claim {
		s.claims.Add(1)
	}
	switch {
	case b.Window <= 0:
		return retry.BreakerFleet{}, fmt.Errorf("redis: Store.Sync: Window = %v: must be > 0 (the Retrier passes its breaker's settings with their defaults set)", b.Window)
	case b.OpenTimeout <= 0:
		return retry.BreakerFleet{}, fmt.Errorf("redis: Store.Sync: OpenTimeout = %v: must be > 0", b.OpenTimeout)
	case b.Probes == 0 || b.MinRequests == 0:
		return retry.BreakerFleet{}, fmt.Errorf("redis: Store.Sync: Probes = %d, MinRequests = %d: must be > 0", b.Probes, b.MinRequests)
	}
	claim := 0
	if in.Claim {
		claim = 1
	}
	ttl := max(s.opts.StateTTL, 2*b.Window, 2*b.OpenTimeout)
	key := s.key(name)
	kh := s.keyHealth(name)
	if kh.skip(time.Now()) {
		return retry.BreakerFleet{}, fmt.Errorf("redis: breaker %s: %w", key, errResting)
	}
	res, err := roundTrip(ctx, s.opts.Timeout, func(ctx context.Context) ([]int64, error) {
		return syncScript.Run(ctx, s.client, []string{key},
			strconv.FormatUint(in.Generation, 10), in.Successes, in.Failures, claim,
			in.ProbeSuccesses, in.ProbeFailures, in.ProbeReleases,
			strconv.FormatFloat(b.FailureRatio, 'g', -1, 64), b.MinRequests,
			max(b.Window.Milliseconds(), 1), max(b.OpenTimeout.Milliseconds(), 1), b.Probes,
			max(ttl.Milliseconds(), 1)).Int64Slice()
	})
	if err == nil && (len(res) != 4 || res[0] < 0 || res[0] > 2 || res[1] < 0) {
		err = fmt.Errorf("unexpected reply %v", res)
	}
	if err != nil {
		kh.failed(ctx, err, false, "breaker "+key)
		return retry.BreakerFleet{}, fmt.Errorf("redis: breaker %s: %w", key, err)
	}
	kh.ok()
	out := retry.BreakerFleet{
		State:      []string{retry.BreakerClosed, retry.BreakerHalfOpen, retry.BreakerOpen}[res[0]],
		Generation: uint64(res[1]),
		OpenFor:    time.Duration(max(res[2], 0)) * time.Millisecond,
		Claimed:    res[3] == 1,
	}
	if out.Claimed {
		s.granted.Add(1)
	}
	return out, nil
}
