package retry

import (
	"cmp"
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Budget limits retries to a share of first attempts, so that an outage does
// not multiply the load on a struggling dependency (in the manner of
// Finagle's RetryBudget and the per-client retry ratio of the SRE book).
// Over a sliding Window, retries may reach Ratio times the first attempts,
// plus Reserve retries per second so that a quiet client can still retry.
// A retry the budget denies ends the call with Reason budget.
//
// Zero fields take the defaults given beside them, field by field, so
// Budget{Ratio: 0.5} keeps the default Reserve and Window; a negative Ratio
// or Reserve means none. With every attempt failing, the zero Budget bounds
// the load to about 1.15 times the first attempts, and it never denies a
// retry under 10% independent failures.
type Budget struct {
	Ratio   float64       // retries per first attempt; default 0.15, negative for none
	Reserve float64       // retries per second always allowed; default 2, negative for none
	Window  time.Duration // the sliding window; default 10 s
	// PerKey keeps one budget per key (WithKey, or the Transport's request
	// key, by default the host), so that one failing dependency cannot
	// spend the retries of the others; at most 1024 keys are kept, the
	// idlest dropped.
	PerKey bool
	// Off disables the budget; it overrides Shared.
	Off bool
	// Shared, when set, keeps the budget outside the Retrier, such as one
	// shared by a fleet (github.com/steadyhq/retry/redis has one on Redis),
	// by its own rule: Ratio, Reserve, Window and PerKey are then not used.
	// Stats report its balance as -1 and its denials as zero: Shared keeps
	// its own counters.
	Shared SharedBudget
}

// defaultBudget is the budget every Retrier has unless told otherwise.
var defaultBudget = Budget{Ratio: 0.15, Reserve: 2, Window: 10 * time.Second}

// WithBudget sets the retry budget, in place of the one before it;
// Budget{Off: true} disables it. An invalid b makes every call return an
// error naming the field.
func WithBudget(b Budget) Option {
	return optionFunc(func(c *config) {
		switch {
		case b.Shared != nil && isNil(b.Shared):
			c.invalid("WithBudget", "Shared", "nil", typedNil(b.Shared))
			return
		case b.Off, b.Shared != nil:
		case b.Ratio != b.Ratio || b.Ratio > 1000:
			c.invalid("WithBudget", "Ratio", b.Ratio, "must be at most 1000 (negative for none)")
			return
		case b.Reserve != b.Reserve || b.Reserve > 1e9:
			c.invalid("WithBudget", "Reserve", b.Reserve, "must be at most 1e9 (negative for none)")
			return
		case b.Window < 0:
			c.invalid("WithBudget", "Window", b.Window, "must be >= 0")
			return
		}
		c.budgetSpec = &b
	})
}

// newBudgets resolves the Budget of a configuration into its gate: nil
// when the budget is off; calls is the Retrier's counter of first attempts.
func newBudgets(b Budget, calls *atomic.Int64, clock Clock) *budgets {
	now := func() time.Time {
		if clock != nil {
			return clock.Now()
		}
		return time.Now()
	}
	switch {
	case b.Off:
		return nil
	case b.Shared != nil:
		return &budgets{shared: b.Shared}
	case b.PerKey:
		return &budgets{keys: newKeyed[*budget](maxKeys), newKey: func() *budget {
			return newBudget(b, new(atomic.Int64), now())
		}}
	}
	return &budgets{one: newBudget(b, calls, now())}
}

// SharedBudget is a retry budget kept outside the Retrier, such as one
// shared by a fleet of processes (github.com/steadyhq/retry/redis has one on
// Redis); Budget.Shared sets it in place of the Retrier's own budget.
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

// budgets is the retry-budget gate of a Retrier: its own budget, one per
// key, or a SharedBudget. It never delays an attempt: a retry or a hedge
// takes a token, or the call stops with Reason budget.
type budgets struct {
	one    *budget
	keys   *keyed[*budget]
	newKey func() *budget // makes a key's budget
	shared SharedBudget
}

// acts: retries and hedges take a token; first attempts are counted by
// a budget per key or a SharedBudget as they enter, and by the Retrier's
// call counter for its own budget.
func (bs *budgets) acts() (admits, enters uint8) {
	if bs.one != nil {
		return onRetry | onHedge, 0
	}
	return onRetry | onHedge, onFirst
}

// admit takes a token for a retry or a hedge; a first attempt needs none.
func (bs *budgets) admit(ctx context.Context, a ask) grant {
	now := a.cfg.now()
	var ok bool
	if bs.shared != nil {
		ok = bs.shared.Retry(ctx, a.key, now)
	} else {
		ok = bs.get(a.key, now).allow(now)
	}
	if !ok {
		return grant{no: &refusal{reason: ReasonBudget, typ: typeBudgetExhausted}}
	}
	return grant{}
}

// enter counts a first attempt where the Retrier's call counter does not:
// for a budget per key, or a SharedBudget.
func (bs *budgets) enter(_ context.Context, a ask) grant {
	if bs.shared != nil {
		bs.shared.First(a.key)
	} else {
		bs.get(a.key, a.cfg.now()).calls.Add(1)
	}
	return grant{}
}

// get returns the budget of key: the Retrier's, or key's own.
func (bs *budgets) get(key string, now time.Time) *budget {
	if bs.keys != nil {
		return bs.keys.get(key, now, bs.newKey)
	}
	return bs.one
}

// budgetBuckets is the number of slices of a budget's window.
const budgetBuckets = 10

// budget is a sliding-window retry budget. First attempts are counted by
// the Retrier's call counter (one atomic add) on the success path; the budget reads
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

// WithDefaults returns b with its zero fields set to their defaults, one
// by one, and a negative Ratio or Reserve set to zero: none.
func (b Budget) WithDefaults() Budget {
	d := defaultBudget
	b.Ratio = max(cmp.Or(b.Ratio, d.Ratio), 0)
	b.Reserve = max(cmp.Or(b.Reserve, d.Reserve), 0)
	b.Window = cmp.Or(b.Window, d.Window)
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
