package retry

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Limiter paces the attempts of a Retrier or Transport, first ones and
// retries alike; WithLimiter sets one. WithRateLimit and WithKeyedRateLimit
// use the in-process token bucket that NewRateLimiter returns;
// github.com/steadyhq/retry/redis has one shared by a fleet.
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

// WithLimiter paces attempts with l; a nil l removes the limiter. A wait for
// a token is not an attempt. When the wait cannot fit the caller's deadline
// the call stops at once, without sleeping, with Reason rate_limited and type
// ratelimit.local.
func WithLimiter(l Limiter) Option {
	return optionFunc(func(c *config) {
		c.limiter = nil
		if l != nil {
			c.limiter = &limiter{l: l}
		}
	})
}

// WithRateLimit paces attempts, first ones and retries alike, to limit per
// second with bursts of burst, through a token bucket shared by every call
// of the Retrier or Transport; see WithLimiter. limit is at most 1e9, and
// burst/limit, the time to refill a whole burst, at most 1e9 seconds. The
// interval between tokens is rounded up to a quarter nanosecond: the bucket
// never runs faster than limit, and at a million per second or fewer it is
// slower by at most 0.025%.
func WithRateLimit(limit float64, burst int) Option {
	return optionFunc(func(c *config) {
		if err := validRate(limit, burst); err != nil {
			c.invalid("WithRateLimit", err.value, err.rule)
			return
		}
		c.limiter = &limiter{l: newTokenBucket(limit, burst, false)}
	})
}

// WithKeyedRateLimit is WithRateLimit with one token bucket per key (WithKey,
// or the Transport's request key, by default the host). At most maxKeys
// buckets are kept; the one idle longest is dropped to make room.
func WithKeyedRateLimit(limit float64, burst int) Option {
	return optionFunc(func(c *config) {
		if err := validRate(limit, burst); err != nil {
			c.invalid("WithKeyedRateLimit", err.value, err.rule)
			return
		}
		c.limiter = &limiter{l: newTokenBucket(limit, burst, true)}
	})
}

// NewRateLimiter returns the in-process token bucket of WithRateLimit, or
// of WithKeyedRateLimit when perKey is set, as a Limiter: limit tokens per
// second, bursts of burst.
func NewRateLimiter(limit float64, burst int, perKey bool) (Limiter, error) {
	if err := validRate(limit, burst); err != nil {
		return nil, fmt.Errorf("retry: NewRateLimiter: value %v: %s", err.value, err.rule)
	}
	return newTokenBucket(limit, burst, perKey), nil
}

type rateError struct {
	value any
	rule  string
}

func validRate(limit float64, burst int) *rateError {
	switch {
	case !(limit > 0) || limit > 1e9:
		return &rateError{limit, "limit must be a number of attempts per second in (0, 1e9]"}
	case burst < 1:
		return &rateError{burst, "burst must be >= 1"}
	case float64(burst)/limit > maxRefill:
		return &rateError{burst, "burst / limit, the time to refill a whole burst, must be at most 1e9 seconds"}
	}
	return nil
}

// maxRefill bounds burst/limit, in seconds (about 31.7 years), so that a
// bucket's ticks hold its whole burst. Within it, a product burst·step that
// rounding takes past maxTicks is clamped: the bucket's burst is then a
// little smaller, never larger.
const maxRefill = 1e9

// tokenBucket is the in-process Limiter: one bucket, or one per key.
type tokenBucket struct {
	limit  float64
	burst  int
	global atomic.Pointer[gcra] // made on first use, from that reading of the clock
	keys   *keyed[*gcra]
}

func newTokenBucket(limit float64, burst int, perKey bool) *tokenBucket {
	b := &tokenBucket{limit: limit, burst: burst}
	if perKey {
		b.keys = newKeyed[*gcra](maxKeys)
	}
	return b
}

func (b *tokenBucket) bucket(key string, now time.Time) *gcra {
	if b.keys != nil {
		return b.keys.get(key, now, func() *gcra { return newGCRA(b.limit, b.burst, now) })
	}
	if g := b.global.Load(); g != nil {
		return g
	}
	b.global.CompareAndSwap(nil, newGCRA(b.limit, b.burst, now))
	return b.global.Load()
}

// Reserve implements Limiter.
func (b *tokenBucket) Reserve(_ context.Context, key string, now time.Time, maxWait time.Duration) (time.Duration, func(time.Time), bool) {
	g := b.bucket(key, now)
	wait, next, ok := g.reserve(g.ticks(now), maxWait)
	if !ok || wait == 0 {
		return 0, nil, ok
	}
	return wait, func(now time.Time) { g.cancel(next, now) }, true
}

// Resolutions of a gcra, in ticks per nanosecond. The interval between
// tokens is rounded up to a tick, so that a bucket is never faster than its
// limit: with fine ticks, at a million tokens per second or fewer, it is
// slower by at most 0.025%. A bucket whose burst takes more than
// fineRefill seconds to refill counts in whole nanoseconds, so that its
// tat, a burst and a step ahead of the clock, still fits: either way a
// bucket works for 20 years from its first use.
const (
	fineTicks  = 4
	fineRefill = 2e8
)

// gcra is a token bucket kept as one word, the theoretical arrival time of
// the generic cell rate algorithm (ITU-T I.371): the bucket is full at tat
// and lacks one token per step before it. A token is taken with one
// compare-and-swap, without a lock, and the bucket admits exactly what a
// token bucket of the same limit and burst admits: never more than
// burst + limit·w attempts in any span w.
type gcra struct {
	epoch time.Time // tick 0: the clock reading the bucket was made at
	res   int64     // ticks per nanosecond: fineTicks, or 1 for a long refill
	step  int64     // ticks per token: 1/limit seconds, rounded up
	tol   int64     // burst·step: how far tat may run ahead of now
	tat   atomic.Int64
}

// newGCRA returns a full bucket; limit and burst must pass validRate.
func newGCRA(limit float64, burst int, now time.Time) *gcra {
	g := &gcra{epoch: now, res: fineTicks, step: maxTicks}
	if float64(burst)/limit > fineRefill {
		g.res = 1
	}
	step := math.Ceil(1e9 * float64(g.res) / limit)
	if step < maxTicks {
		g.step = max(int64(step), 1)
	}
	g.tol = satMul(g.step, int64(burst))
	g.tat.Store(-maxTicks) // full
	return g
}

// maxTicks bounds every tick value, so that the sum or difference of two
// never overflows.
const maxTicks = math.MaxInt64 / 2

// ticks converts a clock reading to the bucket's ticks.
func (g *gcra) ticks(now time.Time) int64 {
	return satMul(int64(now.Sub(g.epoch)), g.res)
}

// reserve takes a token at now (in ticks) and returns the wait before it is
// due and the tat it set, or reports false and takes nothing when that wait
// would pass maxWait. A token due beyond the ticks' range (decades away, or
// a bucket in use for longer than that) is refused too.
func (g *gcra) reserve(now int64, maxWait time.Duration) (wait time.Duration, next int64, ok bool) {
	for {
		tat := g.tat.Load()
		from := max(tat, now)
		if from > maxTicks-g.step {
			return 0, 0, false
		}
		next := from + g.step
		due := next - g.tol // the token is due when the bucket, less it, is not over-full
		wait := time.Duration(0)
		if due > now {
			wait = time.Duration((due - now + g.res - 1) / g.res)
			if wait > maxWait {
				return 0, 0, false
			}
		}
		if g.tat.CompareAndSwap(tat, next) {
			return wait, next, true
		}
	}
}

// cancel gives back the token of a reservation that set tat to next and will
// not be used, at the clock reading now, unless a later reservation has been
// made since: that one was scheduled after this one, and a token given back
// under it would let an attempt run ahead of it. The bucket then holds at
// most what it would hold had the reservation never been made.
func (g *gcra) cancel(next int64, now time.Time) {
	if back := max(next-g.step, g.ticks(now)); back < next {
		g.tat.CompareAndSwap(next, back)
	}
}

// satMul returns a·b for b > 0, saturated to ±maxTicks.
func satMul(a, b int64) int64 {
	switch {
	case a > maxTicks/b:
		return maxTicks
	case a < -maxTicks/b:
		return -maxTicks
	}
	return a * b
}

// limiter is the rate limit of a Retrier and its counters.
type limiter struct {
	l      Limiter
	waits  atomic.Int64 // attempts that waited for a token
	denied atomic.Int64 // calls stopped because the wait could not fit
}

// wait takes a token for one attempt, sleeping until it is due. It reports
// false when the wait cannot fit ctx's deadline or the call's MaxElapsed;
// a context ended during the wait gives its error.
func (l *limiter) wait(ctx context.Context, c *call, key string) (bool, error) {
	now := c.cfg.mono()
	d, cancel, ok := l.l.Reserve(ctx, key, now, c.room(ctx, now))
	if !ok {
		if ctx.Err() != nil {
			return false, c.canceled(ctx)
		}
		l.denied.Add(1)
		return false, nil
	}
	if d <= 0 {
		return true, nil
	}
	l.waits.Add(1)
	if err := c.sleep(ctx, d); err != nil {
		if cancel != nil {
			cancel(c.cfg.mono())
		}
		return false, err
	}
	return true, nil
}

// room returns the longest wait from now that fits ctx's deadline and the
// call's MaxElapsed (see call.fits), at least zero.
func (c *call) room(ctx context.Context, now time.Time) time.Duration {
	room := time.Duration(maxDuration)
	if m := c.cfg.maxElapsed; m > 0 {
		room = min(room, m-now.Sub(c.start))
	}
	if dl, ok := ctx.Deadline(); ok {
		room = min(room, maxDuration/2-1, dl.Sub(now)-1)
	}
	return max(room, 0)
}

// Budget limits retries to a share of first attempts, so that an outage does
// not multiply the load on a struggling dependency (in the manner of
// Finagle's RetryBudget and the per-client retry ratio of the SRE book).
// Over a sliding Window, retries may reach Ratio times the first attempts,
// plus Reserve retries per second so that a quiet client can still retry.
// A retry the budget denies ends the call with Reason budget.
//
// Zero fields take the defaults of DefaultBudget, field by field, so
// Budget{Ratio: 0.5} keeps the default Reserve and Window; a negative Ratio
// or Reserve means none. The zero Budget is DefaultBudget.
type Budget struct {
	Ratio   float64       // retries per first attempt; default 0.15, negative for none
	Reserve float64       // retries per second always allowed; default 2, negative for none
	Window  time.Duration // the sliding window; default 10 s
	// PerKey keeps one budget per key (WithKey, or the Transport's request
	// key, by default the host), so that one failing dependency cannot
	// spend the retries of the others; at most 1024 keys are kept, the
	// idlest dropped.
	PerKey bool
	// Off disables the budget.
	Off bool
}

// DefaultBudget is the budget every Retrier has unless told otherwise: with
// every attempt failing it bounds the load to about 1.15 times the first
// attempts, and it never denies a retry under 10% independent failures.
var DefaultBudget = Budget{Ratio: 0.15, Reserve: 2, Window: 10 * time.Second}

// WithBudget sets the retry budget; Budget{Off: true} disables it.
func WithBudget(b Budget) Option {
	return optionFunc(func(c *config) {
		switch {
		case b.Off:
		case b.Ratio != b.Ratio || b.Ratio > 1000:
			c.invalid("WithBudget", b.Ratio, "Ratio must be at most 1000 (negative for none)")
			return
		case b.Reserve != b.Reserve || b.Reserve > 1e9:
			c.invalid("WithBudget", b.Reserve, "Reserve must be at most 1e9 (negative for none)")
			return
		case b.Window < 0:
			c.invalid("WithBudget", b.Window, "Window must be >= 0")
			return
		}
		c.budgetSpec, c.budgetSet, c.sharedBudget = b, true, nil
	})
}

// SharedBudget is a retry budget kept outside the Retrier, such as one
// shared by a fleet of processes (github.com/steadyhq/retry/redis has one on
// Redis). WithSharedBudget sets it in place of the Retrier's own Budget.
//
// Implementations must be safe for concurrent use.
type SharedBudget interface {
	// First counts a first attempt on key (WithKey, or the Transport's
	// request key). It runs on the success path of every call, so it must
	// be cheap: no clock, no I/O, no contended cache line; count locally
	// and settle the counts in Retry.
	First(key string)
	// Retry takes a retry token for key at now, the Retrier's clock
	// reading, or reports false, which ends the call with Reason budget.
	// It runs after a failure, once the wait before the retry is known to
	// fit; ctx is the caller's, and Retry must not outlast its deadline.
	Retry(ctx context.Context, key string, now time.Time) bool
}

// WithSharedBudget replaces the Retrier's retry budget with b; a later
// WithBudget replaces b. Stats report the budget's balance as -1 and its
// denials as zero: b keeps its own counters.
func WithSharedBudget(b SharedBudget) Option {
	return optionFunc(func(c *config) { c.sharedBudget = b })
}

// allowRetry takes a retry token from the call's budget, if it has one.
func (c *call) allowRetry(ctx context.Context, now time.Time) bool {
	if c.cfg.budget == nil && c.cfg.keyBudgets == nil && c.cfg.sharedBudget == nil {
		return true
	}
	if sb := c.cfg.sharedBudget; sb != nil {
		return sb.Retry(ctx, c.key, now)
	}
	b := c.budget(now)
	return b == nil || b.allow(now)
}

// budgetBuckets is the number of slices of a budget's window.
const budgetBuckets = 10

// budget is a sliding-window retry budget. First attempts are counted by
// the Retrier's striped call counter on the success path; the budget reads
// that counter and advances its window only when a retry asks for a token.
type budget struct {
	spec   Budget
	calls  *atomic.Int64
	slice  time.Duration
	mu     sync.Mutex
	ring   [budgetBuckets]budgetBucket
	denied atomic.Int64
	// seen and seenCall are when the budget last read the call counter, and
	// what it read: the calls since then happened after seen, so a new
	// slice counts them when seen is within the window.
	seen     time.Time
	seenCall int64
}

// budgetBucket is one slice of the window: when it began, the call counter
// then, and the retries granted in it.
type budgetBucket struct {
	start   int64 // slice number; 0 is unused
	calls   int64
	retries int64
}

// WithDefaults returns b with its zero fields set to DefaultBudget's, one
// by one, and a negative Ratio or Reserve set to zero: none.
func (b Budget) WithDefaults() Budget {
	d := DefaultBudget
	switch {
	case b.Ratio == 0:
		b.Ratio = d.Ratio
	case b.Ratio < 0:
		b.Ratio = 0
	}
	switch {
	case b.Reserve == 0:
		b.Reserve = d.Reserve
	case b.Reserve < 0:
		b.Reserve = 0
	}
	if b.Window == 0 {
		b.Window = d.Window
	}
	return b
}

func newBudget(b Budget, calls *atomic.Int64, now time.Time) *budget {
	b = b.WithDefaults()
	return &budget{
		spec:     b,
		calls:    calls,
		slice:    max(b.Window/budgetBuckets, time.Millisecond),
		seen:     now,
		seenCall: calls.Load(),
	}
}

// allow takes a retry token at now, if the window has one.
func (b *budget) allow(now time.Time) bool {
	calls := b.calls.Load()
	b.mu.Lock()
	defer b.mu.Unlock()
	granted, avail := b.balance(now, calls)
	if float64(granted)+1 > avail {
		b.denied.Add(1)
		return false
	}
	b.ring[b.index(now)].retries++
	return true
}

// balance advances the window to now and returns the retries granted in it
// and the retries it allows. b.mu is held.
func (b *budget) balance(now time.Time, calls int64) (granted int64, avail float64) {
	s := now.UnixNano()/int64(b.slice) + 1
	cur := &b.ring[b.index(now)]
	if cur.start != s {
		base := calls
		if since := now.Sub(b.seen); since >= 0 && since <= b.spec.Window {
			base = b.seenCall
		}
		*cur = budgetBucket{start: s, calls: base}
	}
	b.seen, b.seenCall = now, calls
	oldest := calls
	for i := range b.ring {
		bk := &b.ring[i]
		if bk.start == 0 || bk.start <= s-budgetBuckets {
			continue
		}
		granted += bk.retries
		oldest = min(oldest, bk.calls)
	}
	return granted, b.spec.Ratio*float64(calls-oldest) + b.spec.Reserve*b.spec.Window.Seconds()
}

func (b *budget) index(now time.Time) int {
	return int((now.UnixNano() / int64(b.slice)) % budgetBuckets)
}

// available returns the retries the budget would grant now.
func (b *budget) available(now time.Time) float64 {
	calls := b.calls.Load()
	b.mu.Lock()
	defer b.mu.Unlock()
	granted, avail := b.balance(now, calls)
	return max(avail-float64(granted), 0)
}

// maxKeys bounds the per-key breakers and rate limiters of a Retrier.
const maxKeys = 1024

// keyed is a bounded map from keys to per-key values. Reads of established
// keys are lock-free and allocate nothing: they go to a map that is replaced,
// never changed. Keys added since it was built wait in a small map under a
// mutex and are merged into a new read map in batches, so that a stream of
// new keys costs a constant amortized share of a copy each, not a copy of
// the whole map. When full, the keys used least recently are dropped.
type keyed[V any] struct {
	m       atomic.Pointer[map[string]*keyedEntry[V]] // read-only once stored
	mu      sync.Mutex
	pending map[string]*keyedEntry[V] // added since m was built; under mu
	misses  int                       // reads that took mu since m was built
	max     int
}

type keyedEntry[V any] struct {
	v    V
	used atomic.Int64 // unix nanoseconds of the last use, at a coarse grain
}

// touch records a use at a coarse grain, to keep the line mostly shared.
func (e *keyedEntry[V]) touch(now time.Time) {
	if t := now.UnixNano(); t-e.used.Load() > int64(time.Second) {
		e.used.Store(t)
	}
}

func newKeyed[V any](max int) *keyed[V] { return &keyed[V]{max: max} }

func (k *keyed[V]) get(key string, now time.Time, mk func() V) V {
	if m := k.m.Load(); m != nil {
		if e, ok := (*m)[key]; ok {
			e.touch(now)
			return e.v
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	old := k.m.Load()
	if old != nil {
		if e, ok := (*old)[key]; ok {
			return e.v
		}
	}
	e, ok := k.pending[key]
	if ok {
		e.touch(now)
	} else {
		e = &keyedEntry[V]{v: mk()}
		e.used.Store(now.UnixNano())
		if k.pending == nil {
			k.pending = make(map[string]*keyedEntry[V])
		}
		k.pending[key] = e
	}
	// Merge once the reads that took the lock would have paid for a copy:
	// at once while the map is small, every sixteenth of its size after.
	k.misses++
	if k.misses >= max(1, k.size(old)/16) {
		k.merge(old)
	}
	return e.v
}

// merge builds the next read map from the current one and the pending keys,
// dropping the idlest keys when there are too many; k.mu is held. It leaves
// room for a sixteenth of the cap (at least one key), so that the pending
// keys, never more than that, keep the total within it.
func (k *keyed[V]) merge(old *map[string]*keyedEntry[V]) {
	m := make(map[string]*keyedEntry[V], k.size(old)+len(k.pending))
	if old != nil {
		for key, e := range *old {
			m[key] = e
		}
	}
	for key, e := range k.pending {
		m[key] = e
	}
	if limit := k.max - max(1, k.max/16); len(m) > limit {
		evictIdlest(m, len(m)-limit)
	}
	k.m.Store(&m)
	clear(k.pending)
	k.misses = 0
}

func (k *keyed[V]) size(m *map[string]*keyedEntry[V]) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// len returns the number of keys kept.
func (k *keyed[V]) len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.size(k.m.Load()) + len(k.pending)
}

// evictIdlest drops the n entries used least recently.
func evictIdlest[V any](m map[string]*keyedEntry[V], n int) {
	type use struct {
		key string
		t   int64
	}
	uses := make([]use, 0, len(m))
	for key, e := range m {
		uses = append(uses, use{key, e.used.Load()})
	}
	slices.SortFunc(uses, func(a, b use) int { return cmp.Compare(a.t, b.t) })
	for _, u := range uses[:min(n, len(uses))] {
		delete(m, u.key)
	}
}

func (k *keyed[V]) each(f func(key string, v V)) {
	k.mu.Lock()
	m := k.m.Load()
	pending := make([]*keyedEntry[V], 0, len(k.pending))
	keys := make([]string, 0, len(k.pending))
	for key, e := range k.pending {
		keys = append(keys, key)
		pending = append(pending, e)
	}
	k.mu.Unlock()
	if m != nil {
		for key, e := range *m {
			f(key, e.v)
		}
	}
	for i, e := range pending {
		f(keys[i], e.v)
	}
}
