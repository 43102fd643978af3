package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/steadyhq/retry"
)

// budgetSlices is the number of slices of a budget's window.
const budgetSlices = 10

// Budget is a retry budget shared by every process using the same Redis and
// prefix: the rule of retry.Budget, with its fields and defaults, for the
// fleet as one client. retry.Budget.Shared takes it. The fleet keeps one
// bucket of tokens in Redis: a retry (or a hedge) takes one; each call
// that succeeds, in any process, earns Ratio and gives back what its
// retries took; the bucket starts full and holds the larger of Tokens and
// Ratio for each call of the fleet that succeeded in the last Window; a
// retry after a timeout may spend what those successes earned and
// TimeoutTokens of the stock. Nothing else refills it, so a full outage
// spends the fleet's bucket once, whatever the number of processes: the
// load stays within 1 + Ratio·Window/outage of the requests at any fleet
// size, where a budget in each process spends one bucket each.
//
// The balance and one counter of successes per slice of the window (a
// tenth of it) live in Redis, read and updated atomically by one Lua
// script. The calls that succeed are counted in this process, on striped
// counters that cost the success path one uncontended atomic add, and sent
// to Redis with the next retry's request for a token: the fleet's counts
// lag by the time between this process's failures, which only makes the
// budget stricter. Successes older than the window when they are sent
// count in the window by its share of the time they cover: since they were
// last sent or, for the first ones, since the Budget (or, with PerKey, the
// key's counter) was built, read on the wall clock; with a Retrier clock
// (retry.WithClock) behind the wall clock, the first ones count in full.
// They earn in full.
//
// The keys of one budget (of one key, with PerKey) share the hash tag
// PREFIX{budget:KEY}, so that they sit in one slot of a Redis Cluster.
// A process keeps the successes of at most 1,024 keys unsent; past that,
// it drops them all and starts again, which only makes the budget
// stricter. A counter in Redis that is not a whole number from 0 to 2^53,
// or a balance that is not a finite number within ±2^53 (written by
// another program), fails the round trip: the process falls back on its
// own bucket, counted, as with Redis down.
//
// When Redis fails or is slower than Options.Timeout, the process falls
// back on a bucket of its own by the same rule (its Tokens, TimeoutTokens
// and Ratio, counted in Stats.Fallbacks) and keeps its unsent counts for
// the next request: an outage of Redis neither lets every retry through
// nor stops them. After a failure the retries of the next SyncInterval stay
// local without asking Redis; then one asks, and the budget is back on the
// fleet's bucket as soon as Redis answers. A bucket Redis lost (a restart
// with empty data, a flush, an expiry after 10 windows unused) starts
// again full.
//
// A Budget is safe for concurrent use. Build it with NewBudget.
type Budget struct {
	client goredis.UniversalClient
	spec   retry.Budget
	opts   Options
	slice  time.Duration
	global *tally
	keys   sync.Map     // key → *tally, with Budget.PerKey
	nkeys  atomic.Int64 // entries of keys, bounded by maxLeaseKeys

	health                     *health
	granted, denied, fallbacks atomic.Int64
	balance                    atomic.Int64 // math.Float64bits of the last balance Redis gave
}

// NewBudget returns a Budget on client following spec (zero fields as in
// retry.Budget: the zero Budget takes the defaults). spec.Off is not
// allowed: leave Budget.Shared unset instead.
func NewBudget(client goredis.UniversalClient, spec retry.Budget, opts Options) (*Budget, error) {
	bad := func(field string, v any, rule string) error {
		return fmt.Errorf("redis: NewBudget: Budget.%s = %v: %s", field, v, rule)
	}
	none := func(v, most float64) bool { return v == -1 || v >= 0 && v <= most }
	switch {
	case isNilClient(client):
		return nil, errors.New("redis: NewBudget: client is nil")
	case spec.Off:
		return nil, bad("Off", true, "a shared budget cannot be off; do not set one")
	case !none(spec.Tokens, 1e9):
		return nil, bad("Tokens", spec.Tokens, "must be in [0, 1e9], or -1 for none")
	case !none(spec.TimeoutTokens, 1e9):
		return nil, bad("TimeoutTokens", spec.TimeoutTokens, "must be in [0, 1e9], or -1 for none")
	case !none(spec.Ratio, 1000):
		return nil, bad("Ratio", spec.Ratio, "must be in [0, 1000], or -1 for none")
	case spec.Window < 0:
		return nil, bad("Window", spec.Window, "must be >= 0")
	}
	spec = spec.WithDefaults()
	opts, err := opts.withDefaults("NewBudget")
	if err != nil {
		return nil, err
	}
	health := newHealth("budget", opts)
	return &Budget{
		client: client,
		spec:   spec,
		opts:   opts,
		slice:  max(spec.Window/budgetSlices, time.Millisecond),
		global: newTally(health, spec),
		health: health,
	}, nil
}

// stripes is the number of cells of a tally, a power of two.
const stripes = 16

// tally counts the calls of one key that succeeded in this process and the
// tokens they gave back, what of them Redis has been sent, and keeps the
// process's own bucket for when Redis fails.
type tally struct {
	cells [stripes]struct {
		won, back atomic.Int64
		_         [48]byte // a cache line each
	}
	mu                sync.Mutex
	sentWon, sentBack int64
	last              time.Time  // when counts were last sent; at first, when t was made
	health            *keyHealth // of this budget's keys in Redis
	local             localBudget
}

// newTally returns a tally whose counts date from now, on the wall clock:
// the first Retry scales them by the time since, as it does counts sent
// before.
func newTally(h *health, spec retry.Budget) *tally {
	return &tally{last: time.Now(), health: h.key(), local: localBudget{spec: spec, tokens: spec.Tokens}}
}

func (t *tally) load() (won, back int64) {
	for i := range t.cells {
		won += t.cells[i].won.Load()
		back += t.cells[i].back.Load()
	}
	return won, back
}

func (b *Budget) tally(key string) *tally {
	if !b.spec.PerKey {
		return b.global
	}
	if t, ok := b.keys.Load(key); ok {
		return t.(*tally)
	}
	if b.nkeys.Load() >= maxLeaseKeys {
		// Past the bound, the tallies start again: the successes not yet
		// sent are lost, which only makes the budget stricter.
		b.keys.Clear()
		b.nkeys.Store(0)
	}
	t, loaded := b.keys.LoadOrStore(key, newTally(b.health, b.spec))
	if !loaded {
		b.nkeys.Add(1)
	}
	return t.(*tally)
}

// Won implements retry.SharedBudget: one or two uncontended atomic adds; a
// nil *Budget counts nothing.
func (b *Budget) Won(key string, refund int) {
	if b == nil {
		return
	}
	if !b.spec.PerKey {
		key = ""
	}
	c := &b.tally(key).cells[rand.Uint32()&(stripes-1)]
	c.won.Add(1)
	if refund > 0 {
		c.back.Add(int64(refund))
	}
}

// take counts the successes sent into the current slice (KEYS[2]), brings
// the balance (KEYS[1]) up to them and to the tokens given back, and takes
// a token for a retry when the rule allows it: the bucket holds the larger
// of the stock and what the window's successes earned, and starts full; a
// retry after a timeout may not take it below what they did not earn of
// the stock, less the stock's share for timeouts. A value in Redis that is
// not a number in range (written by another program) fails the round trip.
var take = goredis.NewScript(`
local n = tonumber(ARGV[1])
local inWindow, won, back = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local ratio, stock, forTimeouts = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local slow, ttl, keep = ARGV[8] == '1', tonumber(ARGV[9]), tonumber(ARGV[10])
if inWindow > 0 then
	redis.call('INCRBY', KEYS[2], inWindow)
	redis.call('PEXPIRE', KEYS[2], ttl)
end
local vals = redis.call('MGET', unpack(KEYS, 2, n + 1))
local count = 0
for i = 1, n do
	local v = tonumber(vals[i] or 0)
	if not v or v ~= v or v < 0 or v > 2^53 then
		error({err = 'retry: budget counter out of range: ' .. KEYS[i + 1] .. ' = ' .. tostring(vals[i])})
	end
	count = count + v
end
local earned = ratio * count
local size = math.max(stock, earned)
local raw = redis.call('GET', KEYS[1])
local bal = size
if raw then
	bal = tonumber(raw)
	if not bal or bal ~= bal or bal > 2^53 or bal < -2^53 then
		error({err = 'retry: budget balance out of range: ' .. KEYS[1] .. ' = ' .. tostring(raw)})
	end
	bal = math.min(bal + ratio * won + back, size)
end
local floor = 0
if slow then floor = math.max(size - earned - forTimeouts, 0) end
local ok = 0
if bal - 1 >= floor then
	bal = bal - 1
	ok = 1
end
redis.call('SET', KEYS[1], tostring(bal), 'PX', keep)
return {ok, tostring(bal)}`)

// Retry implements retry.SharedBudget: it sends this process's successes
// and given-back tokens since the last call and asks Redis for a retry
// token, slow after a timeout; while Redis fails, its own bucket decides. A
// nil *Budget allows no retry.
func (b *Budget) Retry(ctx context.Context, key string, slow bool, now time.Time) bool {
	if b == nil {
		return false // a nil *Budget allows no retry
	}
	if !b.spec.PerKey {
		key = ""
	}
	t := b.tally(key)
	if t.health.skip(time.Now()) {
		return b.fallBack(t, slow)
	}
	t.mu.Lock()
	won, back := t.load()
	newWon, newBack := won-t.sentWon, back-t.sentBack
	inWindow := newWon
	if since := now.Sub(t.last); since > b.spec.Window {
		// Successes from before the window: the window's share counts in it.
		inWindow = int64(float64(newWon) * float64(b.spec.Window) / float64(since))
	}
	t.sentWon, t.sentBack, t.last = won, back, now
	t.mu.Unlock()

	s := now.UnixNano() / int64(b.slice)
	keys := make([]string, 1+budgetSlices)
	base := b.opts.key("budget", key) + ":"
	keys[0] = base + "t"
	for i := range budgetSlices {
		keys[1+i] = base + "w:" + strconv.FormatInt(s-int64(i), 10)
	}
	ttl := (b.spec.Window + 2*b.slice).Milliseconds()
	keep := max(10*b.spec.Window, time.Minute).Milliseconds()
	slowArg := 0
	if slow {
		slowArg = 1
	}
	timeout := b.opts.Timeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl)/2) // leave the attempt its time
	}
	res, err := roundTrip(ctx, max(timeout, 0), func(ctx context.Context) ([]any, error) {
		return take.Run(ctx, b.client, keys, budgetSlices, inWindow, newWon, newBack,
			b.spec.Ratio, b.spec.Tokens, b.spec.TimeoutTokens, slowArg, ttl, keep).Slice()
	})
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("script returned %v", res)
	}
	if err != nil {
		t.mu.Lock()
		t.sentWon, t.sentBack = t.sentWon-newWon, t.sentBack-newBack // send them with the next request
		t.mu.Unlock()
		t.health.failed(ctx, err, timeout < b.opts.Timeout, "budget "+base)
		return b.fallBack(t, slow)
	}
	t.health.ok()
	if bal, err := strconv.ParseFloat(fmt.Sprint(res[1]), 64); err == nil {
		b.balance.Store(int64(floatBits(bal)))
	}
	if n, _ := res[0].(int64); n == 1 {
		b.granted.Add(1)
		return true
	}
	b.denied.Add(1)
	return false
}

// fallBack decides a retry on t's own bucket while Redis fails.
func (b *Budget) fallBack(t *tally, slow bool) bool {
	b.fallbacks.Add(1)
	won, back := t.load()
	return t.local.take(won, back, slow)
}

// BudgetStats counts a Budget's outcomes.
type BudgetStats struct {
	Granted int64 // retries Redis granted
	Denied  int64 // retries Redis refused
	// Fallbacks counts the retries this process's own bucket decided
	// because Redis failed.
	Fallbacks int64
	Errors    int64 // round trips that failed: Redis down, slow or refusing
	// OnFleet is false while a key's round trips fail (its last one
	// failed, within the last two intervals and a Timeout): its retries
	// are decided without the fleet's bucket.
	OnFleet bool
	// Balance is the tokens the fleet's bucket held after the last answer
	// from Redis.
	Balance float64
}

// Stats returns the budget's counters; a nil *Budget's are zero.
func (b *Budget) Stats() BudgetStats {
	if b == nil {
		return BudgetStats{}
	}
	return BudgetStats{
		Granted:   b.granted.Load(),
		Denied:    b.denied.Load(),
		Fallbacks: b.fallbacks.Load(),
		Errors:    b.health.errors.Load(),
		OnFleet:   b.health.onFleet(),
		Balance:   floatFrom(uint64(b.balance.Load())),
	}
}

// FleetStatus reports whether b runs on the fleet's state (as
// BudgetStats.OnFleet), when a round trip to Redis last succeeded (zero
// before one) and how many failed (BudgetStats.Errors): what the live
// page of github.com/steadyhq/retry/retryz shows of it. A nil *Budget's
// are zero.
func (b *Budget) FleetStatus() (onFleet bool, lastSync time.Time, errors int64) {
	if b == nil {
		return false, time.Time{}, 0
	}
	return b.health.status()
}

func floatBits(f float64) uint64 { return math.Float64bits(f) }
func floatFrom(u uint64) float64 { return math.Float64frombits(u) }
