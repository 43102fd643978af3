package retry

import (
	"cmp"
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Budget limits retries to what the calls that succeed earn, so that an
// outage does not multiply the load on a struggling dependency, whether one
// client calls it or a fleet of a thousand. It is a bucket of tokens: a
// retry (or a hedge) takes one, and a call that succeeds earns Ratio and
// gives back every token its retries took, so that retries that work cost
// nothing. The bucket starts full and holds the larger of Tokens and Ratio
// for each call that succeeded in the last Window. Nothing else refills
// it, no reserve a second that would sum across a fleet into load that
// lasts: a full outage spends it once, whatever the fleet's size, while
// under independent failures the calls that succeed keep it full.
//
// Tokens are a quiet client's stock for brief failures that cost the
// dependency little: a refused connection, an immediate 503 or 429, a
// refusal with Retry-After. A retry after a timeout (types timeout.attempt,
// timeout.deadline_exceeded, net.timeout, grpc.deadline_exceeded,
// http.5xx.504), the signature of an overloaded dependency, may spend what
// the successes of the last Window earned and no more than TimeoutTokens of
// the stock: once retries not given back have taken that much of it, a
// timeout is retried only from what successes earn, so that a fleet of
// quiet clients cannot keep an overload going on their stocks.
//
// A retry the budget denies ends the call with Reason budget; its events
// carry the key, the type of the failure whose retry was denied and the
// balance in tokens (Event.Balance), as Stats does for the last denial.
//
// The zero Budget, which every Retrier has, holds 12 tokens, 1 of them for
// timeouts, or 0.2 for each call that succeeded in the last 10 s when that
// is more. On the simulator's model with the default policy (retry sim
// --budgets, seed 1), a client that calls every 10 s loses none of 10
// calls made at once as its dependency restarts for 400 ms; a full outage
// of 60 s loads the dependency with 1.03 times the requests for one client
// at 10, 100 and 1,000 requests a second (2.93 without a budget), and 1.20
// times for fleets of 10, 100 and 1,000 clients at 1 request a second each;
// under independent failures, fast or timing out, as many calls succeed as
// without a budget within 0.04 points at 10% and 20%, and 0.40 at 30%.
//
// Zero fields take the defaults above, one by one; -1 means none:
// Budget{TimeoutTokens: -1} retries timeouts only from what successes
// earned. Any other negative value, a NaN, Tokens or TimeoutTokens over
// 1e9, a Ratio over 1000 or a negative Window is an error. The budget a
// Retrier keeps is safe for concurrent use.
type Budget struct {
	Tokens        float64       // the stock a quiet client holds; default 12, -1 for none
	TimeoutTokens float64       // of the stock, what retries after timeouts may spend; default 1, -1 for none
	Ratio         float64       // tokens a call that succeeds earns; default 0.2, -1 for none
	Window        time.Duration // the window whose successes size the bucket; default 10 s
	// PerKey keeps one budget per key (WithKey, or the Transport's request
	// key, by default the host), so that one failing dependency cannot
	// spend the retries of the others; at most 1024 keys are kept, the
	// idlest dropped. A key dropped and met again starts afresh, full, so
	// the bound holds per key kept, not for the Retrier.
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
	// by its own rule: the fields above but Shadow are then not used.
	// Stats report its balance as -1, and Event.Balance and
	// Stats.BudgetDeniedBalance as 0: Shared keeps its own. Shadow applies
	// to it too, counted in Stats only.
	Shared SharedBudget
}

// defaultBudget is the budget every Retrier has unless told otherwise.
var defaultBudget = Budget{Tokens: 12, TimeoutTokens: 1, Ratio: 0.2, Window: 10 * time.Second}

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
		case !noneOr(b.Tokens, 1e9):
			c.invalid("WithBudget", "Tokens", b.Tokens, "must be in [0, 1e9], or -1 for none")
			return
		case !noneOr(b.TimeoutTokens, 1e9):
			c.invalid("WithBudget", "TimeoutTokens", b.TimeoutTokens, "must be in [0, 1e9], or -1 for none")
			return
		case !noneOr(b.Ratio, 1000):
			c.invalid("WithBudget", "Ratio", b.Ratio, "must be in [0, 1000], or -1 for none")
			return
		case b.Window < 0:
			c.invalid("WithBudget", "Window", b.Window, "must be >= 0")
			return
		}
		c.budgetSpec = &b
	})
}

// noneOr reports whether v is -1 (none) or in [0, most].
func noneOr(v, most float64) bool { return v == -1 || v >= 0 && v <= most }

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
			return newBudget(b, now(), 16) // one of up to maxKeys: small
		}}
	}
	return &budgets{shadow: b.Shadow, one: newBudget(b, now(), 0)}
}

// SharedBudget is a retry budget kept outside the Retrier, such as one
// shared by a fleet of processes (github.com/steadyhq/retry/redis has one on
// Redis); Budget.Shared sets it in place of the Retrier's own budget.
//
// Implementations must be safe for concurrent use.
type SharedBudget interface {
	// Won counts a call on key (WithKey, or the Transport's request key)
	// that succeeded, whose retries took refund tokens: what it earns,
	// and what it gives back. It runs on the success path of every call,
	// so it must be cheap: no clock, no I/O, no contended cache line;
	// count locally and settle the counts in Retry.
	Won(key string, refund int)
	// Retry takes a retry token for key at now, the Retrier's clock
	// reading, or reports false, which ends the call with Reason budget;
	// slow says the retry follows a timeout (see Budget). It runs after a
	// failure, once the wait before the retry is known to fit; ctx is the
	// caller's, and Retry must not outlast its deadline.
	Retry(ctx context.Context, key string, slow bool, now time.Time) bool
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

// acts: retries and hedges take a token; the calls that succeed are
// counted as they end (win).
func (bs *budgets) acts() (admits, enters uint8) { return onRetry | onHedge, 0 }

// admit takes a token for a retry or a hedge; a first attempt needs none.
func (bs *budgets) admit(ctx context.Context, a *ask, g *grant) {
	now := a.cfg.now()
	var ok bool
	if bs.shared != nil {
		ok = bs.shared.Retry(ctx, a.key, a.slow, now)
	} else {
		b := bs.get(a.key)
		ok = b.take(now, b.won(), a.slow, bs.shadow)
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

// charges reports whether a call counts what its retries take, to give
// it back once it succeeds (won): not with a Shadow SharedBudget, whose
// denials the Retrier lets through without its knowing.
func (bs *budgets) charges() bool { return bs != nil && (bs.shared == nil || !bs.shadow) }

// won counts a call on key that succeeded, whose retries took refund
// tokens: it earns Ratio tokens, and gives the refund back, at cfg's now.
func (bs *budgets) won(cfg *config, key string, refund float64) {
	switch {
	case bs.shared != nil:
		bs.shared.Won(key, int(refund))
	case refund > 0:
		b := bs.get(key)
		b.wins.add()
		b.refund(cfg.now(), b.won(), refund)
	default:
		bs.get(key).wins.add()
	}
}

// slowFailure reports whether a failure of type typ is a timeout, the
// dependency not answering in time (see Budget).
func slowFailure(typ string) bool {
	switch typ {
	case typeTimeout, TypeAttemptTimeout, typeNetTimeout, typeGRPCDeadline, typeHTTP504:
		return true
	}
	return false
}

// enter is never asked: no attempt enters the budget (acts).
func (bs *budgets) enter(context.Context, *ask, *grant) {}

// balance returns the balance of key's budget at now, in tokens, as a
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

// budget is a bucket of retry tokens. It counts the calls that succeeded
// as they end (on the success path, one atomic add to the calling
// goroutine's stripe, so that calls on every core write no shared cache
// line), and sums the count only when it is asked for tokens, given some
// back, or read for Stats.
type budget struct {
	spec  Budget // with its defaults, none as 0
	wins  stripes
	slice time.Duration
	mu    sync.Mutex
	// tokens is the balance at the last reading, seen, when the count of
	// calls that succeeded was seenWon.
	tokens  float64
	seen    time.Time
	seenWon int64
	ring    [budgetBuckets]budgetBucket
}

// budgetBucket is one slice of the window: when it began, and the calls
// that succeeded in it.
type budgetBucket struct {
	start int64 // slice number; 0 is unused
	won   int64
}

// WithDefaults returns b with its zero fields set to their defaults, one
// by one, and a Tokens or Ratio of -1 set to zero: none.
func (b Budget) WithDefaults() Budget {
	d := defaultBudget
	b.Tokens = max(cmp.Or(b.Tokens, d.Tokens), 0)
	b.TimeoutTokens = max(cmp.Or(b.TimeoutTokens, d.TimeoutTokens), 0)
	b.Ratio = max(cmp.Or(b.Ratio, d.Ratio), 0)
	b.Window = cmp.Or(b.Window, d.Window)
	return b
}

// newBudget returns a full bucket of b's tokens at now, its count of
// successes in at most stripes stripes (see newStripes).
func newBudget(b Budget, now time.Time, stripes int) *budget {
	b = b.WithDefaults()
	return &budget{
		spec:   b,
		wins:   newStripes(stripes),
		slice:  max(b.Window/budgetBuckets, time.Millisecond),
		tokens: b.Tokens,
		seen:   now,
	}
}

// won returns the count of calls that succeeded.
func (b *budget) won() int64 { return b.wins.sum() }

// take takes a token at now for a retry, slow after a timeout, won being
// the calls that have succeeded so far, and reports whether the bucket had
// one for it (force: takes it anyway, for Shadow).
func (b *budget) take(now time.Time, won int64, slow, force bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	size, earned := b.read(now, won)
	floor := 0.0
	if slow {
		floor = size - earned - b.spec.TimeoutTokens
	}
	had := b.tokens-1 >= max(floor, 0)
	if had || force {
		b.tokens--
	}
	return had
}

// refund gives back n tokens at now, up to the size, and returns the
// balance; balanceAt gives back none.
func (b *budget) refund(now time.Time, won int64, n float64) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	size, _ := b.read(now, won)
	b.tokens = min(b.tokens+n, size)
	return b.tokens
}

func (b *budget) balanceAt(now time.Time, won int64) float64 { return b.refund(now, won, 0) }

// read brings the bucket up to now, won being the calls that have
// succeeded so far, and returns its size and what the window's successes
// earned. The calls since the last reading earn Ratio tokens each, and
// count in the window in full when that reading is within it, otherwise
// by the share of the time since then that it covers. b.mu is held.
func (b *budget) read(now time.Time, won int64) (size, earned float64) {
	s := now.UnixNano()/int64(b.slice) + 1
	cur := &b.ring[b.index(now)]
	if cur.start != s {
		*cur = budgetBucket{start: s}
	}
	if n := won - b.seenWon; n > 0 {
		in := n
		if since := now.Sub(b.seen); since > b.spec.Window {
			in = int64(float64(n) * float64(b.spec.Window) / float64(since))
		}
		cur.won += in
		b.tokens += b.spec.Ratio * float64(n)
	}
	b.seen, b.seenWon = now, won
	var inWindow int64
	for i := range b.ring {
		// A slice after now's, left by a clock that stepped back, is
		// not in the window.
		if bk := &b.ring[i]; bk.start > s-budgetBuckets && bk.start <= s {
			inWindow += bk.won
		}
	}
	earned = b.spec.Ratio * float64(inWindow)
	size = max(b.spec.Tokens, earned)
	b.tokens = min(b.tokens, size)
	return size, earned
}

func (b *budget) index(now time.Time) int {
	// Never negative, whatever the clock says (a time before 1970, or past
	// 2262, where UnixNano overflows).
	return int(((now.UnixNano()/int64(b.slice))%budgetBuckets + budgetBuckets) % budgetBuckets)
}
