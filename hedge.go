package retry

import (
	"context"
	"fmt"
	"time"
)

// Hedge configures hedged attempts (WithHedge): when an attempt has not
// returned after a delay, another is started beside it, up to Max in
// flight. The first success wins and is returned; the others are canceled
// through their contexts. A failed attempt does not stop the others: the
// call goes on while any runs, and once all have failed the policy decides
// the retry as usual. Every attempt, hedge or retry, counts against the
// policy's MaxAttempts, and the caller's context bounds them all.
//
// The first attempt of each round runs on the caller's goroutine, as
// without hedging, so that a call that ends before the delay starts no
// goroutine; hedges run on goroutines of their own. When a hedge succeeds
// first, the first attempt's context is canceled and the call returns the
// hedge's value as soon as that attempt returns: fn must heed its context
// for a hedge to cut the wait.
//
// A hedge is load: before it starts it passes the circuit breaker, takes a
// rate-limit token that is there at once, and takes a token from the retry
// budget, like a retry; a hedge any of them refuses is not sent (the call
// goes on with the attempts in flight). Under a full outage hedging thus
// adds no more attempts than the budget allows retries.
//
// The Transport hedges only requests it may retry whatever the failure
// (idempotent methods, an Idempotency-Key, or HTTP.AllMethods) whose body,
// if any, can be sent again: through GetBody, or a length known to fit
// HTTP.MaxReplayBytes. Responses that lose are drained and closed. Attempts
// iterators (Retrier.Attempts) never hedge, nor do calls whose breaker is
// shared through a Breaker.Store.
//
// Zero fields take the defaults given beside them.
type Hedge struct {
	// Delay is how long an attempt runs alone before a hedge starts, and
	// then the time between hedges. Zero makes it adaptive: the
	// Percentile of the recent attempt latencies of the call's key,
	// within Floor and Ceiling.
	Delay time.Duration
	// Percentile of the recent latencies that the adaptive delay
	// follows, above 0 and below 100. Default 95.
	Percentile float64
	// Floor is the shortest adaptive delay. Default 1 ms.
	Floor time.Duration
	// Ceiling is the longest adaptive delay, and the delay while fewer
	// than 20 latencies of the key are known. Default 1 s.
	Ceiling time.Duration
	// Max is the number of attempts in flight at once, the first one
	// included; 1 turns hedging off. Default 2.
	Max int
	// Release receives the value of a successful attempt of Do that lost
	// to another, so that a value holding resources (a connection, a
	// file) can be closed. It runs on the losing attempt's goroutine, or
	// the caller's. Default: none.
	Release func(any)
	// OnEvent receives an Event when a hedge starts (Type
	// "hedge.started", Delay the wait that preceded it) and when a hedge's
	// success is the one returned (Type "hedge.won"); Err is nil. It runs
	// on the calling goroutine. Default: none.
	OnEvent func(Event)
}

// Defaults of Hedge.
const (
	defaultHedgePercentile = 95
	defaultHedgeFloor      = time.Millisecond
	defaultHedgeCeiling    = time.Second
	defaultHedgeMax        = 2
)

// Event types of hedges.
const (
	typeHedgeStarted = "hedge.started"
	typeHedgeWon     = "hedge.won"
)

// WithHedge turns on hedged attempts, configured by h, in place of any
// before it; see Hedge. Keep the option in a Retrier or Transport built
// once: the adaptive delay learns from the calls that share it. An invalid
// field makes every call return an error naming it.
func WithHedge(h Hedge) Option {
	return optionFunc(func(c *config) {
		c.hedge = nil
		switch {
		case h.Delay < 0:
			c.invalid("WithHedge", h.Delay, "Delay must be >= 0")
		case h.Percentile != 0 && !(h.Percentile > 0 && h.Percentile < 100):
			c.invalid("WithHedge", h.Percentile, "Percentile must be above 0 and below 100")
		case h.Floor < 0:
			c.invalid("WithHedge", h.Floor, "Floor must be >= 0")
		case h.Ceiling < 0 || h.Ceiling != 0 && h.Ceiling < h.Floor:
			c.invalid("WithHedge", h.Ceiling, fmt.Sprintf("Ceiling must be >= Floor (%v)", h.Floor))
		case h.Max < 0:
			c.invalid("WithHedge", h.Max, "Max must be >= 0")
		default:
			c.hedge = newHedgeSpec(h)
		}
	})
}

// newHedgeSpec returns h with its zero fields set to their defaults, and
// the latency sketches of an adaptive delay.
func newHedgeSpec(h Hedge) *hedgeSpec {
	if h.Percentile == 0 {
		h.Percentile = defaultHedgePercentile
	}
	if h.Floor == 0 {
		h.Floor = defaultHedgeFloor
	}
	if h.Ceiling == 0 {
		h.Ceiling = max(defaultHedgeCeiling, h.Floor)
	}
	if h.Max == 0 {
		h.Max = defaultHedgeMax
	}
	s := &hedgeSpec{Hedge: h}
	if h.Delay == 0 {
		s.sketches = newKeyed[*sketch](maxKeys)
	}
	return s
}

// hedgeSpec is a resolved Hedge and the latency sketches of its keys.
type hedgeSpec struct {
	Hedge
	sketches *keyed[*sketch] // nil for a fixed delay
}

// delay returns the wait before the next hedge of a call on key.
func (h *hedgeSpec) delay(key string) time.Duration {
	if h.sketches == nil {
		return h.Delay
	}
	return h.sketches.get(key, time.Time{}, newSketch).delay(h.Floor, h.Ceiling)
}

// record adds an attempt's latency to key's sketch, for an adaptive delay.
func (h *hedgeSpec) record(key string, d time.Duration) {
	if h.sketches != nil {
		h.sketches.get(key, time.Time{}, newSketch).add(d, h.Percentile)
	}
}

func newSketch() *sketch { return new(sketch) }

// hedging is a driver's part in hedged attempts (Do, Run, the Transport):
// how a hedge runs, on its own goroutine, and, for the Transport, how the
// outcome kept (the winner, or a turn's last failure) is taken and the
// others dropped. The turn's first attempt is the loop's own attempt, run
// on the caller's goroutine.
type hedging struct {
	cfg  *config
	spec *hedgeSpec
	key  string
	http bool // the Transport's: attempts choose their breaker outcome

	// Do and Run: call runs fn for a hedge, keeping its value in t.
	fn hedgeFunc

	// The Transport: attempt runs a hedge (its hedgeTry in its context);
	// inline is the first attempt's hedgeTry; take and drop as above.
	attempt attemptFunc
	inline  *hedgeTry
	take    func(*hedgeTry)
	drop    func(*hedgeTry)
}

// run runs a hedge.
func (hg *hedging) run(ctx context.Context, t *hedgeTry) (error, bool) {
	if hg.attempt != nil {
		return hg.attempt(context.WithValue(ctx, tryKey{}, t))
	}
	if hg.cfg.attemptTimeout <= 0 {
		return hg.fn.run(ctx, t), false
	}
	return timed(ctx, hg.cfg.attemptTimeout, func(ctx context.Context) error { return hg.fn.run(ctx, t) })
}

// keep hands the driver the outcome the turn ends with.
func (hg *hedging) keep(t *hedgeTry) {
	if hg.take != nil {
		hg.take(t)
		return
	}
	t.cancel()
}

// discard gives up the outcome of an attempt that is not kept: the
// Transport drains and closes its response; Do releases a losing value.
func (hg *hedging) discard(t *hedgeTry) {
	switch {
	case hg.drop != nil:
		hg.drop(t)
	case t.failure == nil && !t.inline && hg.spec.Release != nil:
		hg.spec.Release(t.value)
	}
	t.cancel()
}

// hedgeTry is one attempt of a hedged call.
type hedgeTry struct {
	n        int
	inline   bool               // the turn's first attempt, run by the caller
	cancel   context.CancelFunc // ends the attempt's context; the driver's once kept
	failure  error
	timedOut bool
	panicked any   // what a hedge panicked with
	verdict  error // the breaker outcome the attempt chose itself (the Transport's)
	value    any   // Do's value, the Transport's response
}

// tryKey is the context key of a Transport hedge's hedgeTry.
type tryKey struct{}

// tryFrom returns the hedgeTry of a Transport hedge's context, or nil.
func tryFrom(ctx context.Context) *hedgeTry {
	t, _ := ctx.Value(tryKey{}).(*hedgeTry)
	return t
}

// allowBreaker asks the call's breaker, if any, to let an attempt through;
// see breaker.allow. Without a breaker, done reports nothing.
func (c *call) allowBreaker() (done func(error), wait time.Duration) {
	bs := c.cfg.breakers
	if bs == nil {
		return func(error) {}, 0
	}
	done, wait = bs.get(c.key, c.cfg.now()).allow(&bs.spec)
	bs.flush(c.cfg.onBreaker)
	return done, wait
}

// admitHedge runs a hedge's admission, as for a retry: the breaker, a
// rate-limit token that is there now, and a retry-budget token. It returns
// the breaker's done, or nil when the hedge may not start. Changes of the
// breaker's state reach the hooks at the caller's next flush.
func admitHedge(ctx context.Context, cfg *config, key string) func(error) {
	if ctx.Err() != nil {
		return nil
	}
	done := func(error) {}
	if bs := cfg.breakers; bs != nil {
		if done, _ = bs.get(key, cfg.now()).allow(&bs.spec); done == nil {
			return nil
		}
	}
	if l := cfg.limiter; l != nil {
		if _, _, ok := l.l.Reserve(ctx, key, cfg.mono(), 0); !ok {
			done(errBreakerExcluded)
			return nil
		}
	}
	if cfg.budgeted {
		c := call{cfg: cfg, key: key}
		if !c.allowRetry(ctx, cfg.now()) {
			done(errBreakerExcluded)
			return nil
		}
	}
	return done
}

// hedgeEvents fires the events of hedges started, on the caller's
// goroutine.
func (c *call) hedgeEvents(events []Event) {
	for _, ev := range events {
		c.hedgeEvent(ev.Type, ev.Attempt, ev.Delay)
	}
}

// hedgeEvent fires the Hedge's OnEvent hook, if set.
func (c *call) hedgeEvent(typ string, attempt int, delay time.Duration) {
	f := c.hedge.spec.OnEvent
	if f == nil {
		return
	}
	key := c.key
	if key == "" {
		key = c.cfg.key
	}
	f(Event{Attempt: attempt, Type: typ, Delay: delay, Key: key, Method: c.http.method, URL: c.http.url, Time: c.cfg.now()})
}

// Hedged is Do with hedged attempts: when an attempt has not returned
// after the Hedge's delay, another starts beside it; the first success is
// returned and the others are canceled through their contexts (see Hedge).
// The Hedge is the one given by WithHedge among opts or in a *Retrier among
// them, or else the zero Hedge: a delay that follows the 95th percentile of
// the Retrier's recent latencies for the call's key. Pass the same
// *Retrier to every call so that the adaptive delay learns.
//
// Unlike Do, Hedged runs fn on goroutines of its own for the hedges, so a
// closure passed to it is allocated on the heap. Do and Run never hedge,
// whatever their options.
func Hedged[T any](ctx context.Context, fn func(context.Context) (T, error), opts ...Option) (T, error) {
	cfg := &std.cfg
	if len(opts) > 0 {
		cfg = resolve(opts)
	}
	var v T
	switch {
	case ctx == nil:
		return v, errNilContext
	case cfg.err != nil:
		return v, cfg.err
	case fn == nil:
		return v, errNilFunc
	}
	c := call{cfg: cfg, key: cfg.key}
	hg := hedging{cfg: cfg, spec: cfg.hedgeSpec(), key: c.key, fn: valueFunc[T]{fn}}
	c.hedge = &hg
	err := c.run(ctx, func(ctx context.Context) (error, bool) {
		if cfg.attemptTimeout <= 0 {
			var err error
			v, err = fn(ctx) // a panic goes on to the caller
			return err, false
		}
		return timed(ctx, cfg.attemptTimeout, func(ctx context.Context) error {
			var err error
			v, err = fn(ctx)
			return err
		})
	})
	if err != nil {
		var zero T
		return zero, err
	}
	if t := c.won; t != nil {
		v, _ = t.value.(T)
	}
	return v, nil
}

// hedgeFunc runs a hedge of Hedged and keeps its value in t.
type hedgeFunc interface {
	run(ctx context.Context, t *hedgeTry) error
}

// valueFunc is Hedged's fn as a hedgeFunc. Being a single func, it is
// stored in the interface without an allocation.
type valueFunc[T any] struct {
	fn func(context.Context) (T, error)
}

func (f valueFunc[T]) run(ctx context.Context, t *hedgeTry) error {
	v, err := f.fn(ctx)
	t.value = v
	return err
}

// hedgeSpec returns the Hedge of the configuration: WithHedge's, or else
// the zero Hedge's, whose latency sketches the Retrier's state keeps.
func (c *config) hedgeSpec() *hedgeSpec {
	if c.hedge != nil {
		return c.hedge
	}
	st := c.state
	st.hedgeOnce.Do(func() { st.hedge = newHedgeSpec(Hedge{}) })
	return st.hedge
}
