package retry

import (
	"cmp"
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Budget limits retries to a share of the calls that succeed, so that an
// outage does not multiply the load on a struggling dependency. Over a
// sliding Window, retries (and hedges) may reach Ratio times the calls that
// succeeded in it, plus Reserve retries per second so that a quiet client
// can still retry. A call that fails earns nothing, so a full outage drains
// the budget to its reserve within one Window whatever the rate of
// requests, while under independent failures the calls that succeed keep
// earning. Successes refill the budget as in the AWS SDKs' retry quota; the
// sliding window (Finagle's) makes what the budget carries into an outage a
// share of its recent traffic, not a fixed stock that would dominate at low
// rates. Every retry takes one token, whatever the failure: an outage of
// timeouts earns nothing either, and independent timeouts, where a retry
// helps most, cost no more than other failures (the AWS SDKs dropped their
// surcharge on timeouts in 2026 too).
//
// A retry the budget denies ends the call with Reason budget; its OnFailure
// and OnGiveUp Event carries the key, the type of the failure whose retry
// was denied and the budget's balance (Event.Balance), and Stats carries
// the same for the last denial. With Shadow, the budget denies nothing but
// counts what it would have denied (Stats.BudgetShadowDenied), for rolling
// a budget out.
//
// The zero Budget, which every Retrier has, allows 0.15 retries per call
// that succeeded plus 0.5 a second over 10 s. On the simulator's model with
// the default policy (retry sim --budgets, seed 1), a full outage of 60 s
// after 20 s of health loads the dependency with 1.073, 1.030 and 1.025
// times the requests at 10, 100 and 1,000 requests a second (2.93 to 2.94
// without a budget). An outage first spends what the window earned before
// it, as fast as calls fail: at 100 requests a second the load peaks at
// 187 hits a second in the outage's first seconds, then stays at the
// requests' rate (retry sim --rate 100 --duration 2m --outage 30s:60s).
// Calls still running earn nothing, so a burst of calls that fail at once
// gets no more than the rule gives. Under 10% independent failures it
// denies no retry: 100.00%, 99.90% and 99.88% of the calls succeed, as
// without a budget. It starts denying between 12% and 15%: at 15% and 100
// requests a second, 97.83% of the calls succeed instead of 99.72% (retry
// sim --rate 100 --duration 1m --fail-rate 0.15, and with --budget off).
//
// Zero fields take the defaults above, field by field, so Budget{Ratio: 0.5}
// keeps the default Reserve and Window; a negative Ratio or Reserve means
// none. A NaN, a Ratio over 1000, a Reserve over 1e9 or a negative Window is
// an error. The budget a Retrier keeps is safe for concurrent use.
type Budget struct {
	Ratio   float64       // retries per call that succeeded; default 0.15, negative for none
	Reserve float64       // retries per second always allowed; default 0.5, negative for none
	Window  time.Duration // the sliding window; default 10 s
	// PerKey keeps one budget per key (WithKey, or the Transport's request
	// key, by default the host), so that one failing dependency cannot
	// spend the retries of the others; at most 1024 keys are kept, the
	// idlest dropped. A key dropped and met again starts afresh, its
	// reserve in full: with more than 1024 keys failing at once, each one
	// met again gets the reserve's retries anew, so the bound holds per
	// key kept, not for the Retrier.
	PerKey bool
	// Shadow lets every retry through, counting those the budget would
	// have denied in Stats.BudgetShadowDenied. The budget still charges
	// them, so that its balance (Event.Balance) goes below zero while it
	// would be denying: an event with a negative Balance and no Reason is
	// a retry it would have denied.
	Shadow bool
	// Off disables the budget; it overrides Shared.
	Off bool
	// Shared, when set, keeps the budget outside the Retrier, such as one
	// shared by a fleet (github.com/steadyhq/retry/redis has one on Redis),
	// by its own rule: Ratio, Reserve, Window and PerKey are then not used.
	// Stats report its balance as -1, and Event.Balance and
	// Stats.BudgetDeniedBalance as 0: Shared keeps its own. Shadow applies
	// to it too, counted in Stats only.
	Shared SharedBudget
}

// defaultBudget is the budget every Retrier has unless told otherwise.
var defaultBudget = Budget{Ratio: 0.15, Reserve: 0.5, Window: 10 * time.Second}

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
// when the budget is off.
func newBudgets(b Budget, clock Clock) *budgets {
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
		return &budgets{shared: b.Shared, shadow: b.Shadow}
	case b.PerKey:
		return &budgets{shadow: b.Shadow, keys: newKeyed[*budget](maxKeys), newKey: func() *budget {
			return newBudget(b, now())
		}}
	}
	return &budgets{shadow: b.Shadow, one: newBudget(b, now())}
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
	shadow bool // count denials, deny nothing

	denied, shadowDenied atomic.Int64

	mu   sync.Mutex
	last budgetDenial // the last denial, for Stats
}

// budgetDenial describes a retry the budget denied.
type budgetDenial struct {
	key, typ string
	balance  float64
}

// acts: retries and hedges take a token; a SharedBudget counts first
// attempts as they enter. The calls that succeed are counted as they end
// (win).
func (bs *budgets) acts() (admits, enters uint8) {
	if bs.shared != nil {
		return onRetry | onHedge, onFirst
	}
	return onRetry | onHedge, 0
}

// admit takes a token for a retry or a hedge; a first attempt needs none.
func (bs *budgets) admit(ctx context.Context, a *ask, g *grant) {
	now := a.cfg.now()
	var ok bool
	if bs.shared != nil {
		ok = bs.shared.Retry(ctx, a.key, now)
	} else {
		b := bs.get(a.key)
		ok = b.take(now, b.won(), bs.shadow)
	}
	switch {
	case ok:
	case bs.shadow:
		bs.shadowDenied.Add(1)
	default:
		bs.denied.Add(1)
		g.no = &refusal{reason: ReasonBudget, typ: typeBudgetExhausted}
	}
}

// enter counts a first attempt for a SharedBudget.
func (bs *budgets) enter(_ context.Context, a *ask, _ *grant) {
	bs.shared.First(a.key)
}

// win counts a call on key that succeeded: it earns Ratio retries. It is
// the budget's one cost on the success path, an atomic add (and, per key,
// the key's lookup).
func (bs *budgets) win(key string) {
	if bs.shared == nil {
		bs.get(key).wins.Add(1)
	}
}

// balance returns the balance of key's budget at now, in retries, as a
// retry of a call on key that has failed and not yet ended sees it (see
// admit); false for a SharedBudget, whose balance the Retrier does not
// know.
func (bs *budgets) balance(key string, now time.Time) (float64, bool) {
	if bs.shared != nil {
		return 0, false
	}
	b := bs.get(key)
	return b.balanceAt(now, b.won()), true
}

// deny records d, the last denial, for Stats.
func (bs *budgets) deny(d budgetDenial) {
	bs.mu.Lock()
	bs.last = d
	bs.mu.Unlock()
}

// stats fills the budget's fields of s at now.
func (bs *budgets) stats(s *Stats, now time.Time) {
	s.BudgetDenied = bs.denied.Load()
	s.BudgetShadowDenied = bs.shadowDenied.Load()
	bs.mu.Lock()
	s.BudgetDeniedKey, s.BudgetDeniedType, s.BudgetDeniedBalance = bs.last.key, bs.last.typ, bs.last.balance
	bs.mu.Unlock()
	switch {
	case bs.one != nil:
		s.BudgetBalance = max(bs.one.balanceAt(now, bs.one.won()), 0)
	case bs.keys != nil:
		s.Budgets = make(map[string]float64)
		bs.keys.each(func(key string, b *budget) {
			s.Budgets[key] = max(b.balanceAt(now, b.won()), 0)
		})
	}
}

// get returns the budget of key: the Retrier's, or key's own.
func (bs *budgets) get(key string) *budget {
	if bs.keys != nil {
		return bs.keys.get(key, time.Time{}, bs.newKey)
	}
	return bs.one
}

// budgetBuckets is the number of slices of a budget's window.
const budgetBuckets = 10

// budget is a sliding-window retry budget. It counts the calls that
// succeeded as they end (on the success path, one atomic add), and reads
// the count only when a retry asks for a token. A call still running
// counts for nothing: a burst of calls that fail together earns no more
// than one.
type budget struct {
	spec  Budget
	wins  atomic.Int64 // calls that succeeded
	slice time.Duration
	mu    sync.Mutex
	ring  [budgetBuckets]budgetBucket
	// seen and seenWon are when the budget last read its count of calls
	// that succeeded, and what it read: the calls since then ended after
	// seen, so a new slice counts them, in full when seen is within the
	// window, and otherwise as if they were spread evenly since seen.
	seen    time.Time
	seenWon int64
}

// budgetBucket is one slice of the window: when it began, the count of
// calls that succeeded then, and the retries granted in it.
type budgetBucket struct {
	start   int64 // slice number; 0 is unused
	won     int64
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

func newBudget(b Budget, now time.Time) *budget {
	b = b.WithDefaults()
	return &budget{
		spec:  b,
		slice: max(b.Window/budgetBuckets, time.Millisecond),
		seen:  now,
	}
}

// won returns the count of calls that succeeded.
func (b *budget) won() int64 { return b.wins.Load() }

// take takes a retry token at now, won being the calls that have succeeded
// so far, and reports whether the window had one; force takes it even
// when it had none (Shadow), so that the balance goes below zero.
func (b *budget) take(now time.Time, won int64, force bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	had := b.balance(now, won) >= 1
	if had || force {
		b.ring[b.index(now)].retries++
	}
	return had
}

// balanceAt returns the retries the window allows at now, less those
// granted in it.
func (b *budget) balanceAt(now time.Time, won int64) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.balance(now, won)
}

// balance advances the window to now and returns the retries it allows,
// less those granted in it: Ratio times the calls that succeeded in it
// (never less than none), plus the reserve. b.mu is held.
func (b *budget) balance(now time.Time, won int64) float64 {
	s := now.UnixNano()/int64(b.slice) + 1
	cur := &b.ring[b.index(now)]
	if cur.start != s {
		// The calls that ended since the last reading count in the
		// window in full when that reading is within it, and otherwise in
		// the share of the time since then that the window covers.
		base := b.seenWon
		if since := now.Sub(b.seen); since > b.spec.Window {
			base = won - int64(float64(won-b.seenWon)*float64(b.spec.Window)/float64(since))
		} else if since < 0 {
			base = won
		}
		*cur = budgetBucket{start: s, won: base}
	}
	b.seen, b.seenWon = now, won
	first, base, granted := s, cur.won, int64(0)
	for i := range b.ring {
		bk := &b.ring[i]
		if bk.start == 0 || bk.start <= s-budgetBuckets {
			continue
		}
		granted += bk.retries
		if bk.start < first {
			first, base = bk.start, bk.won
		}
	}
	earned := max(b.spec.Ratio*float64(won-base), 0)
	return earned + b.spec.Reserve*b.spec.Window.Seconds() - float64(granted)
}

func (b *budget) index(now time.Time) int {
	// Never negative, whatever the clock says (a time before 1970, or past
	// 2262, where UnixNano overflows).
	return int(((now.UnixNano()/int64(b.slice))%budgetBuckets + budgetBuckets) % budgetBuckets)
}
