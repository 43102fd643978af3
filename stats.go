package retry

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/steadyhq/retry/internal/debugstats"
)

// Stats is a snapshot of a Retrier's counters. The JSON names follow the
// lifecycle counters of job systems (attempts, failed, retried,
// failed_permanently, dead_letter_failed).
//
// An attempt that panics counts in Calls and Attempts only: the panic goes
// on to the caller unrecovered, so that the success path needs no deferred
// call, and a circuit breaker records it as a failure.
//
// A call's first attempt counts in Calls and Attempts when it ends: as it
// returns (a failure counts then, whatever follows) or panics; while its
// first attempt runs, a call is in neither. Every other attempt counts when
// the engine starts it, calling Do's function, the base transport or the
// gRPC invoker, whether or not that sends anything: a hedge whose call is
// won just as it starts, canceled before its request leaves the client,
// counts in Attempts and Hedges, and has taken its retry-budget token. The
// engine does not see the wire, so under hedging a server may count fewer
// arrivals than Attempts.
type Stats struct {
	Calls             int64 `json:"calls"`              // calls, those stopped before their first attempt included (see Stats)
	Attempts          int64 `json:"attempts"`           // attempts: first ones as they end, others as they start (see Stats)
	Failed            int64 `json:"failed"`             // failed attempts, retried or not (a panic is not a failure here; see Stats)
	Retried           int64 `json:"retried"`            // failed attempts followed by a retry
	FailedPermanently int64 `json:"failed_permanently"` // calls that ran an attempt and ended in failure, whatever the reason
	DeadLettered      int64 `json:"dead_lettered"`      // records the sink accepted
	DeadLetterFailed  int64 `json:"dead_letter_failed"` // records lost: no sink, or the sink failed
	AlertsSuppressed  int64 `json:"alerts_suppressed"`  // dead-letter alerts suppressed by the dedup window

	// Breakers is the state of each circuit breaker by key ("" for a
	// single breaker): BreakerClosed, BreakerHalfOpen or BreakerOpen; nil without
	// WithBreaker or WithGoBreaker (whose breakers are listed by the keys
	// met, a key whose func returned nil left out).
	Breakers      map[string]string `json:"breakers,omitempty"`
	BreakerWaits  int64             `json:"breaker_waits"`  // waits for an open breaker, attempts not consumed
	BreakerDenied int64             `json:"breaker_denied"` // calls stopped by an open breaker
	// BreakerFallbacks counts attempts guarded by this process's own
	// breaker because the shared breaker's store (Breaker.Store) failed.
	BreakerFallbacks int64 `json:"breaker_fallbacks"`
	// BreakersOnFleet says, with Breaker.Store, for each breaker by key,
	// whether its last decision was made on the fleet's state (true) or
	// by this process's own breaker standing in while the store failed
	// (false); Breakers then gives the state of the breaker that decided.
	// Nil without Breaker.Store.
	BreakersOnFleet map[string]bool `json:"breakers_on_fleet,omitempty"`
	// BreakerChanges lists the last changes of state of the breakers,
	// up to 32 of all keys, oldest first: each breaker's key ("" for a
	// single breaker), the states it left and entered (BreakerClosed,
	// BreakerHalfOpen or BreakerOpen) and when, on the Retrier's Clock;
	// nil without WithBreaker or before the first change.
	BreakerChanges []struct {
		Key  string    `json:"key"`
		From string    `json:"from"`
		To   string    `json:"to"`
		Time time.Time `json:"time"`
	} `json:"breaker_changes,omitempty"`

	// BudgetBalance is the tokens the retry budget holds now, the retries
	// after fast failures it would grant (see Budget; zero while a Shadow
	// budget is overdrawn); -1 when the budget is off, Shared or kept per
	// key.
	BudgetBalance float64 `json:"budget_balance"`
	BudgetDenied  int64   `json:"budget_denied"` // retries the budget refused
	// BudgetShadowDenied counts the retries a Shadow budget would have
	// refused, and let through.
	BudgetShadowDenied int64 `json:"budget_shadow_denied"`
	// BudgetDeniedKey, BudgetDeniedType and BudgetDeniedBalance describe
	// the last retry the budget refused: the call's key, the type of the
	// failure whose retry it was, and the budget's balance then, in
	// tokens (0 for a Shared budget). BudgetDeniedType is "" until the
	// budget refuses one.
	BudgetDeniedKey     string  `json:"budget_denied_key,omitempty"`
	BudgetDeniedType    string  `json:"budget_denied_type,omitempty"`
	BudgetDeniedBalance float64 `json:"budget_denied_balance,omitempty"`
	// Budgets is the balance of each key's budget with Budget.PerKey.
	Budgets map[string]float64 `json:"budgets,omitempty"`

	// Throttled counts attempts that adaptive throttling (WithThrottle)
	// shed before they reached the dependency.
	Throttled int64 `json:"throttled"`
	// Throttle is, by key ("" for a single throttle), the probability
	// with which adaptive throttling sheds an attempt now; nil without
	// WithThrottle.
	Throttle map[string]float64 `json:"throttle,omitempty"`

	// ConcurrencyWaits counts attempts that waited for a permit of the
	// concurrency limit (WithConcurrency); ConcurrencyDenied, attempts
	// refused one.
	ConcurrencyWaits  int64 `json:"concurrency_waits"`
	ConcurrencyDenied int64 `json:"concurrency_denied"`
	// ConcurrencyLimit and InFlight are, by key ("" for a single limit),
	// the concurrency limit now and the attempts holding a permit; nil
	// without WithConcurrency.
	ConcurrencyLimit map[string]int `json:"concurrency_limit,omitempty"`
	InFlight         map[string]int `json:"in_flight,omitempty"`

	LimiterWaits  int64 `json:"limiter_waits"`  // attempts that waited for a rate-limit token
	LimiterDenied int64 `json:"limiter_denied"` // calls stopped because the wait could not fit
	// Tokens is, by key ("" for a single bucket), the tokens the rate
	// limit's bucket holds now, below zero while reservations wait for
	// tokens to come; nil without WithRateLimit, or with RateLimit.Shared,
	// whose buckets are its own.
	Tokens map[string]float64 `json:"tokens,omitempty"`

	// Denials lists the last calls that a gate stopped (Reason budget,
	// breaker_open, rate_limited or throttled), up to 32, oldest first:
	// each as an Event with its Attempt (0 when no attempt ran), Key,
	// Type (for the budget, the type of the failure whose retry it
	// denied, as in OnGiveUp's Event), Reason, Time and, for the budget,
	// Balance; the other fields are left empty.
	Denials []Event `json:"denials,omitempty"`

	Hedges    int64 `json:"hedges"`     // hedges started (Hedged and the Transport), counted in Attempts too
	HedgeWins int64 `json:"hedge_wins"` // calls whose returned success came from a hedge
}

// Stats returns a snapshot of r's counters. The default Retrier's are
// reported for a nil r.
func (r *Retrier) Stats() Stats { return r.config().stats() }

// stats returns a snapshot of t's counters: those of the Retrier it was
// built with, which it shares, or its own. A nil t has none: its Stats
// are zero, with BudgetBalance -1 (no budget). Package retryz reads it
// through internal/debugstats, so that the exported API does not grow.
func (t *Transport) stats() Stats {
	if t == nil {
		return Stats{BudgetBalance: -1}
	}
	return t.config().stats()
}

func init() {
	debugstats.TransportStats = func(t any) any { return t.(*Transport).stats() }
}

func (c *config) stats() Stats {
	st := c.state
	failed := st.failed.Load() // before the attempts: see fail
	won := st.won.sum()
	if st.wins != nil {
		won += st.wins.sum()
	}
	// The calls that ran a first attempt: it ended in a success, a
	// failure or a panic. (A call that ends meanwhile may be missing.)
	calls := won - st.wonFailed.Load() + st.failedCalls.Load()
	s := Stats{
		Calls:             calls + st.unstarted.Load(),
		Attempts:          calls + st.retryAttempts.Load(),
		Failed:            failed,
		Retried:           st.retried.Load(),
		FailedPermanently: st.failedPermanently.Load(),
		DeadLettered:      st.deadLettered.Load(),
		DeadLetterFailed:  st.deadLetterFailed.Load(),
		AlertsSuppressed:  st.alertsSuppressed.Load(),
		BudgetBalance:     -1,
		Hedges:            st.hedges.Load(),
		HedgeWins:         st.hedgeWins.Load(),
		Denials:           st.denials.list(),
	}
	if bs := c.breakers; bs != nil {
		s.Breakers, s.BreakersOnFleet = bs.states(c.mono())
		s.BreakerChanges = bs.recent.list()
		s.BreakerWaits = bs.waits.Load()
		s.BreakerDenied = bs.denied.Load()
		s.BreakerFallbacks = bs.fallbacks.Load()
	}
	if g := c.goBreakers; g != nil {
		s.Breakers = g.states()
		s.BreakerWaits = g.waits.Load()
		s.BreakerDenied = g.denied.Load()
	}
	if bs := c.budget; bs != nil {
		bs.stats(&s, c.now())
	}
	if t := c.throttle; t != nil {
		t.stats(c, &s)
	}
	if l := c.concurrency; l != nil {
		l.stats(&s)
	}
	if l := c.limiter; l != nil {
		s.LimiterWaits = l.waits.Load()
		s.LimiterDenied = l.denied.Load()
		if rl, ok := l.l.(*rateLimiter); ok {
			s.Tokens = rl.tokens(c.mono())
		}
	}
	return s
}

// state is what the calls of one Retrier share.
type state struct {
	// The calls that succeeded are counted once, so that a success makes
	// one atomic add: wins is the count of the retry budget built with
	// the state (a Retrier's own, by default), which its calls add to for
	// the budget; won counts those of Retriers sharing the state with
	// another budget or none. Stats counts a call that ran an attempt
	// when it ends, or at its first failure (failedCalls; wonFailed are
	// then not counted again).
	wins              *stripes
	won               stripes
	wonFailed         atomic.Int64 // calls that succeeded after a failure
	failedCalls       atomic.Int64 // calls at their first failure, or panicking in their first attempt
	unstarted         atomic.Int64 // calls stopped before their first attempt
	retryAttempts     atomic.Int64
	failed            atomic.Int64
	retried           atomic.Int64
	failedPermanently atomic.Int64
	deadLettered      atomic.Int64
	deadLetterFailed  atomic.Int64
	alertsSuppressed  atomic.Int64
	hedges            atomic.Int64
	hedgeWins         atomic.Int64
	hedgeOnce         sync.Once
	hedge             *hedgeSpec // Hedged's without WithHedge: the zero Hedge
	alerts            alerts
	denials           recent[Event] // the last calls a gate stopped
	// owner is the Retrier that made the state: what shares the state (a
	// Transport built with it) keeps it alive, so that a weak pointer to
	// it, such as package retryz keeps, lives while its state is in use.
	owner *Retrier
}

func newState() *state { return &state{won: newStripes(0)} }
