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
// prefix: over the sliding Window, the fleet's retries may reach Ratio times
// its first attempts, plus Tokens, with the defaults of
// retry.Budget (0.15 and 0.5 a second over 10 s). retry.Budget.Shared takes
// it. Unlike a Retrier's own budget, which earns from the calls that
// succeed, it earns from first attempts, since a retry.SharedBudget is told
// of first attempts and not of their outcomes: under a full outage the
// fleet's load stays within about 1.15 times its first attempts plus 0.5
// retries a second.
//
// The counts live in Redis as one counter per slice of the window (a tenth
// of it) under a TTL a little longer than the window, read and updated
// atomically by one Lua script. First attempts are counted in this process,
// on striped counters that cost the success path one uncontended atomic
// add, and sent to Redis with the next retry's request for a token: the
// fleet's counts lag by the time between this process's failures, which
// only makes the budget stricter. Counts older than the window when they
// are sent are scaled down to the window's share of the time they cover:
// since they were last sent or, for the first counts, since the Budget (or,
// with PerKey, the key's counter) was built, read on the wall clock. With a
// Retrier clock (retry.WithClock) behind the wall clock, the first counts
// are sent in full.
//
// The counters of one budget (of one key, with PerKey) share the hash tag
// PREFIX{budget:KEY}, so that they sit in one slot of a Redis Cluster.
//
// When Redis fails or is slower than Options.Timeout, Budget fails open: the
// retry is allowed and counted in Stats.FailOpen, and the unsent counts are
// kept for the next request. That is the stated choice: an outage of Redis
// must not turn into an outage of every dependency; the breaker and the
// limiter stay in force meanwhile. After a failure the retries of the next
// SyncInterval fail open without asking Redis; then one asks, and the
// budget is back on the fleet's counts as soon as Redis answers. Counts
// Redis lost (a restart with empty data, a flush) start again from zero:
// for one window the budget grants from its Tokens and the first
// attempts sent since.
//
// A Budget is safe for concurrent use. Build it with NewBudget.
type Budget struct {
	client goredis.UniversalClient
	spec   retry.Budget
	opts   Options
	slice  time.Duration
	global *firsts
	keys   sync.Map // key → *firsts, with Budget.PerKey

	health                    *health
	granted, denied, failOpen atomic.Int64
	balance                   atomic.Int64 // math.Float64bits of the last balance Redis gave
}

// NewBudget returns a Budget on client following spec (zero fields as in
// retry.Budget: the zero Budget takes the defaults). spec.Off is not
// allowed: leave Budget.Shared unset instead.
func NewBudget(client goredis.UniversalClient, spec retry.Budget, opts Options) (*Budget, error) {
	bad := func(field string, v any, rule string) error {
		return fmt.Errorf("redis: NewBudget: Budget.%s = %v: %s", field, v, rule)
	}
	switch {
	case isNilClient(client):
		return nil, errors.New("redis: NewBudget: client is nil")
	case spec.Off:
		return nil, bad("Off", true, "a shared budget cannot be off; do not set one")
	case !(spec.Ratio == -1 || spec.Ratio >= 0 && spec.Ratio <= 1000):
		return nil, bad("Ratio", spec.Ratio, "must be in [0, 1000], or -1 for none")
	case !(spec.Tokens == -1 || spec.Tokens >= 0 && spec.Tokens <= 1e9):
		return nil, bad("Tokens", spec.Tokens, "must be in [0, 1e9], or -1 for none")
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
		global: newFirsts(health),
		health: health,
	}, nil
}

// stripes is the number of cells of a firsts counter, a power of two.
const stripes = 16

// firsts counts the first attempts of one key in this process, and what of
// them Redis has been sent.
type firsts struct {
	cells [stripes]struct {
		n atomic.Int64
		_ [56]byte // a cache line each
	}
	mu     sync.Mutex
	sent   int64
	last   time.Time  // when counts were last sent; at first, when f was made
	health *keyHealth // of this budget's counters in Redis
}

// newFirsts returns a counter whose counts date from now, on the wall
// clock: the first Retry scales them by the time since, as it does counts
// sent before.
func newFirsts(h *health) *firsts { return &firsts{last: time.Now(), health: h.key()} }

func (f *firsts) load() int64 {
	var n int64
	for i := range f.cells {
		n += f.cells[i].n.Load()
	}
	return n
}

func (b *Budget) firsts(key string) *firsts {
	if !b.spec.PerKey {
		return b.global
	}
	if f, ok := b.keys.Load(key); ok {
		return f.(*firsts)
	}
	f, _ := b.keys.LoadOrStore(key, newFirsts(b.health))
	return f.(*firsts)
}

// First implements retry.SharedBudget: one uncontended atomic add; a nil
// *Budget counts nothing.
func (b *Budget) First(key string) {
	if b == nil {
		return
	}
	b.firsts(key).cells[rand.Uint32()&(stripes-1)].n.Add(1)
}

// take adds up to slice counts, the calls since the last sending plus the
// window's retries, and grants a retry when the window allows it.
var take = goredis.NewScript(`
local n = tonumber(ARGV[1])
local delta = tonumber(ARGV[2])
local ratio = tonumber(ARGV[3])
local reserve = tonumber(ARGV[4])
local ttl = tonumber(ARGV[5])
if delta > 0 then
	redis.call('INCRBY', KEYS[1], delta)
	redis.call('PEXPIRE', KEYS[1], ttl)
end
local vals = redis.call('MGET', unpack(KEYS))
local calls, retries = 0, 0
for i = 1, n do calls = calls + (tonumber(vals[i]) or 0) end
for i = n + 1, 2 * n do retries = retries + (tonumber(vals[i]) or 0) end
local avail = ratio * calls + reserve
if retries + 1 > avail then
	return {0, tostring(avail - retries)}
end
redis.call('INCR', KEYS[n + 1])
redis.call('PEXPIRE', KEYS[n + 1], ttl)
return {1, tostring(avail - retries - 1)}`)

// Retry implements retry.SharedBudget: it sends this process's first
// attempts since the last call and asks Redis for a retry token. A nil
// *Budget allows no retry.
func (b *Budget) Retry(ctx context.Context, key string, now time.Time) bool {
	if b == nil {
		return false // a nil *Budget allows no retry
	}
	if !b.spec.PerKey {
		key = ""
	}
	f := b.firsts(key)
	if f.health.skip(time.Now()) {
		b.failOpen.Add(1)
		return true
	}
	f.mu.Lock()
	total := f.load()
	delta := total - f.sent
	sent := delta
	if since := now.Sub(f.last); since > b.spec.Window {
		// Counts from before the window: send the window's share.
		sent = int64(float64(delta) * float64(b.spec.Window) / float64(since))
	}
	f.sent, f.last = total, now
	f.mu.Unlock()

	s := now.UnixNano() / int64(b.slice)
	keys := make([]string, 2*budgetSlices)
	base := b.opts.key("budget", key) + ":"
	for i := range budgetSlices {
		id := strconv.FormatInt(s-int64(i), 10)
		keys[i] = base + "c:" + id
		keys[budgetSlices+i] = base + "r:" + id
	}
	ttl := (b.spec.Window + 2*b.slice).Milliseconds()
	timeout := b.opts.Timeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl)/2) // leave the attempt its time
	}
	res, err := roundTrip(ctx, max(timeout, 0), func(ctx context.Context) ([]any, error) {
		return take.Run(ctx, b.client, keys, budgetSlices, sent, b.spec.Ratio, b.spec.Tokens, ttl).Slice()
	})
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("script returned %v", res)
	}
	if err != nil {
		f.mu.Lock()
		f.sent -= delta // send them with the next request
		f.mu.Unlock()
		b.failOpen.Add(1)
		f.health.failed(ctx, err, timeout < b.opts.Timeout, "budget "+base)
		return true
	}
	f.health.ok()
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

// BudgetStats counts a Budget's outcomes.
type BudgetStats struct {
	Granted  int64 // retries Redis granted
	Denied   int64 // retries Redis refused
	FailOpen int64 // retries allowed because Redis failed
	Errors   int64 // round trips that failed: Redis down, slow or refusing
	// OnFleet is false while a key's round trips fail (its last one
	// failed, within the last two intervals and a Timeout): its retries
	// are allowed without the fleet's counts.
	OnFleet bool
	// Balance is the retries the fleet's window had left after the last
	// answer from Redis.
	Balance float64
}

// Stats returns the budget's counters; a nil *Budget's are zero.
func (b *Budget) Stats() BudgetStats {
	if b == nil {
		return BudgetStats{}
	}
	return BudgetStats{
		Granted:  b.granted.Load(),
		Denied:   b.denied.Load(),
		FailOpen: b.failOpen.Load(),
		Errors:   b.health.errors.Load(),
		OnFleet:  b.health.onFleet(),
		Balance:  floatFrom(uint64(b.balance.Load())),
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
