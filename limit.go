package retry

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// WithRateLimit paces attempts, first ones and retries alike, to limit per
// second with bursts of burst, through a token bucket (golang.org/x/time/rate)
// shared by every call of the Retrier or Transport. A wait for a token is not
// an attempt. When the wait cannot fit the caller's deadline the call stops at
// once, without sleeping, with Reason rate_limited and type ratelimit.local.
func WithRateLimit(limit float64, burst int) Option {
	return optionFunc(func(c *config) {
		if !validRate(c, "WithRateLimit", limit, burst) {
			return
		}
		c.limiter = &limiter{limit: rate.Limit(limit), burst: burst, global: rate.NewLimiter(rate.Limit(limit), burst)}
	})
}

// WithKeyedRateLimit is WithRateLimit with one token bucket per key (WithKey,
// or the Transport's request key, by default the host). At most maxKeys
// buckets are kept; the one idle longest is dropped to make room.
func WithKeyedRateLimit(limit float64, burst int) Option {
	return optionFunc(func(c *config) {
		if !validRate(c, "WithKeyedRateLimit", limit, burst) {
			return
		}
		c.limiter = &limiter{limit: rate.Limit(limit), burst: burst, keys: newKeyed[*rate.Limiter](maxKeys)}
	})
}

func validRate(c *config, name string, limit float64, burst int) bool {
	switch {
	case !(limit > 0) || limit > 1e9:
		c.invalid(name, limit, "limit must be a number of attempts per second in (0, 1e9]")
	case burst < 1:
		c.invalid(name, burst, "burst must be >= 1")
	default:
		return true
	}
	return false
}

// limiter is the rate limit of a Retrier: one bucket, or one per key.
type limiter struct {
	limit  rate.Limit
	burst  int
	global *rate.Limiter
	keys   *keyed[*rate.Limiter]
	waits  atomic.Int64 // attempts that waited for a token
	denied atomic.Int64 // calls stopped because the wait could not fit
}

func (l *limiter) bucket(key string, now time.Time) *rate.Limiter {
	if l.global != nil {
		return l.global
	}
	return l.keys.get(key, now, func() *rate.Limiter { return rate.NewLimiter(l.limit, l.burst) })
}

// wait takes a token for one attempt, sleeping until it is due. It reports
// false, having returned the token, when the wait cannot fit ctx's deadline
// or the call's MaxElapsed;
// a context ended during the wait gives its error.
func (l *limiter) wait(ctx context.Context, c *call, key string) (bool, error) {
	now := c.cfg.mono()
	b := l.bucket(key, now)
	if b.AllowN(now, 1) {
		return true, nil
	}
	r := b.ReserveN(now, 1)
	if !r.OK() {
		l.denied.Add(1)
		return false, nil
	}
	d := r.DelayFrom(now)
	if !c.fits(ctx, now, d) {
		r.CancelAt(now)
		l.denied.Add(1)
		return false, nil
	}
	l.waits.Add(1)
	if err := c.sleep(ctx, d); err != nil {
		r.CancelAt(c.cfg.mono())
		return false, err
	}
	return true, nil
}

// Budget limits retries to a share of first attempts, so that an outage does
// not multiply the load on a struggling dependency (in the manner of
// Finagle's RetryBudget and the per-client retry ratio of the SRE book).
// Over a sliding Window, retries may reach Ratio times the first attempts,
// plus Reserve retries per second so that a quiet client can still retry.
// A retry the budget denies ends the call with Reason budget.
//
// The zero Budget means the defaults: DefaultBudget.
type Budget struct {
	Ratio   float64       // retries per first attempt; default 0.15
	Reserve float64       // retries per second always allowed; default 2
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
		case b.Ratio < 0 || b.Ratio != b.Ratio || b.Ratio > 1000:
			c.invalid("WithBudget", b.Ratio, "Ratio must be in [0, 1000]")
			return
		case b.Reserve < 0 || b.Reserve != b.Reserve || b.Reserve > 1e9:
			c.invalid("WithBudget", b.Reserve, "Reserve must be in [0, 1e9]")
			return
		case b.Window < 0:
			c.invalid("WithBudget", b.Window, "Window must be >= 0")
			return
		}
		c.budgetSpec, c.budgetSet = b, true
	})
}

// budgetBuckets is the number of slices of a budget's window.
const budgetBuckets = 10

// budget is a sliding-window retry budget. First attempts are counted by
// the Retrier's striped call counter on the success path; the budget reads
// that counter and advances its window only when a retry asks for a token.
type budget struct {
	spec   Budget
	calls  *stripedCounter
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

func newBudget(b Budget, calls *stripedCounter, now time.Time) *budget {
	if b.Ratio == 0 && b.Reserve == 0 && b.Window == 0 {
		b = DefaultBudget
	}
	if b.Window == 0 {
		b.Window = DefaultBudget.Window
	}
	return &budget{
		spec:     b,
		calls:    calls,
		slice:    max(b.Window/budgetBuckets, time.Millisecond),
		seen:     now,
		seenCall: calls.load(),
	}
}

// allow takes a retry token at now, if the window has one.
func (b *budget) allow(now time.Time) bool {
	calls := b.calls.load()
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
	calls := b.calls.load()
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
