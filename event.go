package retry

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// Event describes a failed attempt to the hooks and, as a dead-letter record,
// to the sink.
//
// Err is the real error, for programs; Message is Err's text passed through
// the sanitizer, and is what logs, metrics, records and tools should use.
type Event struct {
	Attempt int           // the attempt that failed, 1 for the first
	Err     error         // the attempt's error
	Message string        // Err's text, sanitized
	Type    string        // TypeOf the error, or timeout.attempt
	Delay   time.Duration // the wait before the next attempt (OnRetry)
	Reason  Reason        // why the call stops; zero when a retry follows
	Key     string        // the call's key (WithKey, or the Transport's key)
	Method  string        // HTTP method, for the Transport
	URL     string        // request URL without credentials, for the Transport
	First   time.Time     // when the call's first failure happened
	Time    time.Time     // when this failure happened
	Payload any           // what a dead-letter record needs to replay the work
}

// event builds the Event of the current failure.
func (c *call) event(o outcome, now time.Time) Event {
	key := c.key
	if key == "" {
		key = c.cfg.key
	}
	return Event{
		Attempt: c.attempt,
		Err:     c.last,
		Message: c.cfg.sanitize(c.last.Error()),
		Type:    o.typ,
		Key:     key,
		Method:  c.method,
		URL:     c.url,
		First:   c.first,
		Time:    now,
	}
}

// errNoDeadLetterSink is joined into a call's error when a failure is routed
// to dead letter but no sink was configured: the record would otherwise be
// lost without a trace.
var errNoDeadLetterSink = errors.New("retry: no dead-letter sink configured")

// deadLetter routes ev to the sink and returns the routing failure, if any.
func (c *call) deadLetter(ctx context.Context, ev Event) error {
	cfg, st := c.cfg, c.cfg.state
	var err error
	if cfg.sink == nil {
		err = errNoDeadLetterSink
	} else {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.sinkTimeout)
		err = callSink(sctx, cfg.sink, ev)
		cancel()
		if err != nil {
			err = fmt.Errorf("retry: dead-letter sink: %w", err)
		}
	}
	if err != nil {
		st.deadLetterFailed.Add(1)
	} else {
		st.deadLettered.Add(1)
	}
	return err
}

// alert raises the dead-letter alert for ev, unless the same alert was
// raised within the dedup window.
func (c *call) alert(ev Event) {
	cfg, st := c.cfg, c.cfg.state
	if len(cfg.onDeadLetter) == 0 {
		return
	}
	if st.alerts.admit(ev.Key, ev.Type, ev.Message, ev.Time, cfg.dedupWindow) {
		cfg.fire(cfg.onDeadLetter, ev)
	} else {
		st.alertsSuppressed.Add(1)
	}
}

// callSink calls the sink, turning a panic into an error: a record must not
// be lost, nor the caller's goroutine, because the sink failed.
func callSink(ctx context.Context, sink func(context.Context, Event) error, ev Event) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return sink(ctx, ev)
}

// Stats is a snapshot of a Retrier's counters. The JSON names follow the
// lifecycle counters of job systems (attempts, failed, retried,
// failed_permanently, dead_letter_failed).
//
// An attempt that panics counts in Calls and Attempts only: the panic goes
// on to the caller unrecovered, so that the success path needs no deferred
// call, and a circuit breaker records it as a failure.
type Stats struct {
	Calls             int64 `json:"calls"`              // calls, those stopped before their first attempt included
	Attempts          int64 `json:"attempts"`           // attempts run, first ones included
	Failed            int64 `json:"failed"`             // failed attempts, retried or not (a panic is not a failure here; see Stats)
	Retried           int64 `json:"retried"`            // failed attempts followed by a retry
	FailedPermanently int64 `json:"failed_permanently"` // calls that ran an attempt and ended in failure, whatever the reason
	DeadLettered      int64 `json:"dead_lettered"`      // records the sink accepted
	DeadLetterFailed  int64 `json:"dead_letter_failed"` // records lost: no sink, or the sink failed
	AlertsSuppressed  int64 `json:"alerts_suppressed"`  // dead-letter alerts suppressed by the dedup window

	// Breakers is the state of each circuit breaker by key ("" for a
	// single breaker): "closed", "half_open" or "open"; nil without
	// WithBreaker.
	Breakers      map[string]string `json:"breakers,omitempty"`
	BreakerWaits  int64             `json:"breaker_waits"`  // waits for an open breaker, attempts not consumed
	BreakerDenied int64             `json:"breaker_denied"` // calls stopped by an open breaker
	// BreakerFallbacks counts attempts guarded by this process's own
	// breaker because the shared breaker's store (Breaker.Store) failed.
	BreakerFallbacks int64 `json:"breaker_fallbacks"`

	// BudgetBalance is the number of retries the retry budget would grant
	// now; -1 when the budget is off.
	BudgetBalance float64 `json:"budget_balance"`
	BudgetDenied  int64   `json:"budget_denied"` // retries the budget refused
	// Budgets is the balance of each key's budget with Budget.PerKey.
	Budgets map[string]float64 `json:"budgets,omitempty"`

	LimiterWaits  int64 `json:"limiter_waits"`  // attempts that waited for a rate-limit token
	LimiterDenied int64 `json:"limiter_denied"` // calls stopped because the wait could not fit
}

// Stats returns a snapshot of r's counters. The default Retrier's are
// reported for a nil r.
func (r *Retrier) Stats() Stats { return r.config().stats() }

func (c *config) stats() Stats {
	st := c.state
	calls := st.calls.Load()
	s := Stats{
		Calls:             calls + st.unstarted.Load(),
		Attempts:          calls + st.retryAttempts.Load(),
		Failed:            st.failed.Load(),
		Retried:           st.retried.Load(),
		FailedPermanently: st.failedPermanently.Load(),
		DeadLettered:      st.deadLettered.Load(),
		DeadLetterFailed:  st.deadLetterFailed.Load(),
		AlertsSuppressed:  st.alertsSuppressed.Load(),
		BudgetBalance:     -1,
	}
	if bs := c.breakers; bs != nil {
		s.Breakers = bs.states()
		s.BreakerWaits = bs.waits.Load()
		s.BreakerDenied = bs.denied.Load()
		s.BreakerFallbacks = bs.fallbacks.Load()
	}
	if b := c.budget; b != nil {
		s.BudgetBalance = b.available(c.now())
		s.BudgetDenied = b.denied.Load()
	}
	if kb := c.keyBudgets; kb != nil {
		now := c.now()
		s.Budgets = make(map[string]float64)
		kb.each(func(key string, b *budget) {
			s.Budgets[key] = b.available(now)
			s.BudgetDenied += b.denied.Load()
		})
	}
	if l := c.limiter; l != nil {
		s.LimiterWaits = l.waits.Load()
		s.LimiterDenied = l.denied.Load()
	}
	return s
}

// state is what the calls of one Retrier share.
type state struct {
	calls             atomic.Int64 // calls that ran a first attempt
	unstarted         atomic.Int64 // calls stopped before their first attempt
	retryAttempts     atomic.Int64
	failed            atomic.Int64
	retried           atomic.Int64
	failedPermanently atomic.Int64
	deadLettered      atomic.Int64
	deadLetterFailed  atomic.Int64
	alertsSuppressed  atomic.Int64
	alerts            alerts
}

func newState() *state { return &state{} }

// maxAlerts bounds the dedup window's memory.
const maxAlerts = 4096

// alerts remembers recent dead-letter alerts for deduplication.
type alerts struct {
	mu   sync.Mutex
	seed maphash.Seed
	seen map[uint64]time.Time
}

// admit reports whether an alert for (key, typ, msg) at now should be raised,
// and remembers it for window.
func (a *alerts) admit(key, typ, msg string, now time.Time, window time.Duration) bool {
	if window <= 0 {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seen == nil {
		a.seed = maphash.MakeSeed()
		a.seen = make(map[uint64]time.Time)
	}
	var h maphash.Hash
	h.SetSeed(a.seed)
	h.WriteString(key)
	h.WriteByte(0)
	h.WriteString(typ)
	h.WriteByte(0)
	h.WriteString(msg)
	sum := h.Sum64()
	if t, ok := a.seen[sum]; ok && now.Sub(t) < window {
		return false
	}
	if len(a.seen) >= maxAlerts {
		for k, t := range a.seen {
			if now.Sub(t) >= window {
				delete(a.seen, k)
			}
		}
		if len(a.seen) >= maxAlerts {
			clear(a.seen) // a burst of distinct alerts: forget rather than grow
		}
	}
	a.seen[sum] = now
	return true
}
