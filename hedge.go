package retry

import (
	"cmp"
	"context"
	"fmt"
	"time"
)

// Hedge configures hedged attempts (WithHedge): when an attempt has not
// returned after a delay, another is started beside it, up to Max in
// flight. The first success wins, whichever attempt returns it, and is
// returned; the others are canceled through their contexts, and a success
// that arrives after the winner is released (Release, or drained and
// closed by the Transport), never returned. A failure that may be retried
// does not stop the others: while others run, it starts the next hedge at
// once, or, when it carries a server-directed delay (After, Retry-After,
// gRPC pushback), after that delay; a delay longer than the maximum server
// delay (WithMaxServerDelay) starts no further hedge, and the attempts in
// flight go on. A failure that stops the call whatever is left (Permanent,
// a type the policy or the built-in rules call non-retryable, the Discard,
// DeadLetter or Fail verdict) ends the call at once with that failure, as
// gRFC A6's fatal status ends a hedged RPC: the others are canceled, and a
// success that arrives later is released; unless it also carries a delay
// over the maximum server delay, which only starts no further hedge. Once
// all have failed, the policy decides the retry as usual, on the failure
// with the longest server delay, or else the last. Every attempt, hedge or retry, counts against
// the policy's MaxAttempts, and the caller's context bounds them all.
//
// The first attempt of each round runs on the caller's goroutine, as
// without hedging, so that a call that ends before the delay starts no
// goroutine; hedges run on goroutines of their own. When a hedge succeeds
// first, the first attempt's context is canceled and the call returns the
// hedge's value as soon as that attempt returns: fn must heed its context
// for a hedge to cut the wait.
//
// A hedge is load: it passes the same gates as a retry (the circuit
// breaker, a rate-limit token that is there at once, a token from the
// retry budget); a hedge any of them refuses is not sent (the call goes on
// with the attempts in flight). A hedge that starts keeps its token, and
// counts in Stats, even when its call is won before it is sent (see Stats). Under a full outage hedging thus adds no
// more attempts than the budget allows retries. Hedges are admitted and
// started on a goroutine of the call's own, never under a lock the caller
// waits on.
//
// The Transport hedges only requests it may retry whatever the failure
// (idempotent methods, an Idempotency-Key, or HTTP.AllMethods) whose body,
// if any, can be sent again: through GetBody, or a length known to fit
// HTTP.MaxReplayBytes. The first attempt sends the caller's own body, which
// is closed exactly once. Responses that lose are drained and closed.
// Attempts iterators (Retrier.Attempts) never hedge, nor do calls whose
// breaker is shared through a Breaker.Store.
//
// Zero fields take the defaults given beside them.
type Hedge struct {
	// Delay is how long an attempt runs alone before a hedge starts, and
	// then the time between hedges. Zero makes it adaptive: the
	// Percentile of the recent latencies of the call's key, within Floor
	// and Ceiling, so that about 100-Percentile % of calls hedge. The
	// latencies are those of first attempts (a hedge's would be those of
	// the fast, that won), a first attempt that lost to a hedge counting
	// with the time it ran.
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
	// Release receives the value of a successful attempt of Hedged that
	// is not returned, because another attempt won first, so that a value
	// holding resources (a connection, a file) can be closed. It runs on
	// the losing attempt's goroutine, once per value. Default: none.
	Release func(any)
	// OnEvent receives an Event when a hedge starts (Type
	// TypeHedgeStarted, Delay the wait that preceded it), before the
	// hedge runs, and when a hedge's success wins (Type TypeHedgeWon), as
	// it wins; Err is nil. It runs on the goroutine that starts or wins
	// the hedge, never under a lock, so it must be safe for concurrent
	// use; a hedge.started may come after the call has returned, when the
	// first attempt won meanwhile. Default: none.
	OnEvent func(Event)
}

// Defaults of Hedge.
const (
	defaultHedgePercentile = 95
	defaultHedgeFloor      = time.Millisecond
	defaultHedgeCeiling    = time.Second
	defaultHedgeMax        = 2
)

// The types of the events of hedges.
const (
	// TypeHedgeStarted is the type of the Event that Hedge.OnEvent
	// receives when a hedge starts.
	TypeHedgeStarted = "hedge.started"
	// TypeHedgeWon is the type of the Event that Hedge.OnEvent receives
	// when a hedge's success wins.
	TypeHedgeWon = "hedge.won"
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
			c.invalid("WithHedge", "Delay", h.Delay, "must be >= 0")
		case h.Percentile != 0 && !(h.Percentile > 0 && h.Percentile < 100):
			c.invalid("WithHedge", "Percentile", h.Percentile, "must be above 0 and below 100")
		case h.Floor < 0:
			c.invalid("WithHedge", "Floor", h.Floor, "must be >= 0")
		case h.Ceiling < 0 || h.Ceiling != 0 && h.Ceiling < h.Floor:
			c.invalid("WithHedge", "Ceiling", h.Ceiling, fmt.Sprintf("must be >= Floor (%v)", h.Floor))
		case h.Max < 0:
			c.invalid("WithHedge", "Max", h.Max, "must be >= 0")
		default:
			c.hedge = newHedgeSpec(h)
		}
	})
}

// newHedgeSpec returns h with its zero fields set to their defaults, and
// the latency sketches of an adaptive delay.
func newHedgeSpec(h Hedge) *hedgeSpec {
	h.Percentile = cmp.Or(h.Percentile, defaultHedgePercentile)
	h.Floor = cmp.Or(h.Floor, defaultHedgeFloor)
	h.Ceiling = cmp.Or(h.Ceiling, max(defaultHedgeCeiling, h.Floor))
	h.Max = cmp.Or(h.Max, defaultHedgeMax)
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

// hedgeable reports whether a call on key may hedge: Max allows a second
// attempt, and the breaker is not shared through a Breaker.Store, whose
// probes are claimed fleet-wide one attempt at a time.
func (c *config) hedgeable(h *hedgeSpec) bool {
	return h.Max >= 2 && (c.breakers == nil || c.breakers.spec.Store == nil)
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
	cfg, key := &std.cfg, std.cfg.key
	if len(opts) > 0 {
		cfg, key = resolve(opts)
	}
	var zero T
	switch {
	case ctx == nil:
		return zero, errNilContext
	case cfg.err != nil:
		return zero, cfg.err
	case fn == nil:
		return zero, errNilFunc
	}
	hc := &hedgedCall[T]{fn: fn, cfg: cfg}
	hc.tn = takeTurn(hc, cfg, cfg.hedgeSpec(), key, nil)
	defer hc.tn.recycle()
	hc.drv.verdict, hc.drv.cause = hc.tn.verdictFn, hc.tn.causeFn
	c := &hc.c
	*c = call{cfg: cfg, key: key}
	err := c.run(ctx, &hc.drv, func(actx context.Context) (bool, error) {
		t := hc.tn.run(actx, c)
		if t.hedge && t.failure == nil {
			hc.v, _ = t.value.(T)
		}
		hc.tn.release(t)
		return t.timedOut, t.failure
	})
	if err != nil {
		return zero, err
	}
	return hc.v, nil
}

// hedgedCall is Hedged's driver of its turns: the first attempt's value
// stays in v, a hedge's in its try.
type hedgedCall[T any] struct {
	fn  func(context.Context) (T, error)
	cfg *config
	v   T
	c   call
	drv driver
	tn  *turn
}

func (hc *hedgedCall[T]) attempt(ctx context.Context, t *try) {
	var v T
	if d := hc.cfg.attemptTimeout; d > 0 {
		t.timedOut, t.failure = timed(ctx, hc.cfg, d, func(ctx context.Context) error {
			var err error
			v, err = hc.fn(ctx)
			return err
		})
	} else {
		v, t.failure = hc.fn(ctx)
	}
	if t.hedge {
		t.value = v
	} else {
		hc.v = v
	}
	t.verdict = hc.cfg.breakerOutcome(ctx, t.failure, t.timedOut)
}

func (hc *hedgedCall[T]) discard(t *try) {
	release := hc.tn.spec.Release
	if t.failure != nil || t.panicked != nil || release == nil {
		return
	}
	if t.hedge {
		release(t.value)
	} else {
		release(hc.v)
	}
}
