package retry

import (
	"context"
	"fmt"
	"sync"
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
		switch {
		case h.Delay < 0:
			c.invalid("WithHedge", h.Delay, "Delay must be >= 0")
		case !(h.Percentile > 0 && h.Percentile < 100):
			c.invalid("WithHedge", h.Percentile, "Percentile must be above 0 and below 100")
		case h.Floor < 0:
			c.invalid("WithHedge", h.Floor, "Floor must be >= 0")
		case h.Ceiling < h.Floor:
			c.invalid("WithHedge", h.Ceiling, fmt.Sprintf("Ceiling must be >= Floor (%v)", h.Floor))
		case h.Max < 0:
			c.invalid("WithHedge", h.Max, "Max must be >= 0")
		case h.Max > 1:
			c.hedge = &hedgeSpec{Hedge: h}
			if h.Delay == 0 {
				c.hedge.sketches = newKeyed[*sketch](maxKeys)
			}
		}
	})
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

// hedging is how a driver (Do, Run, the Transport) takes part in a hedged
// call: its attempt, able to run beside others; take keeps the outcome the
// call ends with (the winner, or the last failure of a turn); drop gives up
// another. Either may be nil. The attempts' goroutines see the call through
// it alone, so that the call itself stays on its caller's stack.
type hedging struct {
	cfg     *config
	key     string
	http    bool // the Transport's: attempts choose their breaker outcome
	attempt attemptFunc
	take    func(*hedgeTry)
	drop    func(*hedgeTry)
}

// hedgeTry is one attempt of a hedged call, run on its own goroutine.
type hedgeTry struct {
	n        int
	hedge    bool               // started as a hedge, not as the turn's first attempt
	cancel   context.CancelFunc // ends the attempt's context; the driver's once taken
	failure  error
	timedOut bool
	panicked any   // what the attempt panicked with
	verdict  error // the breaker outcome the attempt chose itself (the Transport's)
	value    any   // the driver's: Do's value, the Transport's response
}

// tryKey is the context key of an attempt's hedgeTry.
type tryKey struct{}

// tryFrom returns the hedgeTry of an attempt's context, or nil outside a
// hedged call.
func tryFrom(ctx context.Context) *hedgeTry {
	t, _ := ctx.Value(tryKey{}).(*hedgeTry)
	return t
}

// turn is the attempts that run at once, from a first attempt to a winner
// or to the failure of them all. Attempts that finish after the turn is over
// give up their own outcome.
type turn struct {
	mu      sync.Mutex
	over    bool
	results chan *hedgeTry
	running []*hedgeTry
}

// hedgeable reports whether the call's next turn may hedge.
func (c *call) hedgeable() bool {
	if c.hedge == nil {
		return false
	}
	bs := c.cfg.breakers
	return bs == nil || bs.get(c.key, c.cfg.now()).shared == nil
}

// hedged is guarded for a hedged call: it runs one turn. The turn's first
// attempt passes the breaker as any attempt does (the context and the rate
// limiter were passed in begin); each time the delay passes with fewer than
// Max attempts in flight, a hedge passes the breaker, the rate limiter and
// the retry budget (admitHedge) and starts. The turn ends with the first
// success, or with the last failure once every attempt has failed; the
// caller's context ends it at once.
func (c *call) hedged(ctx context.Context) (failure error, timedOut, ran bool, stop error) {
	cfg, h, hg := c.cfg, c.cfg.hedge, c.hedge
	done, wait := c.allowBreaker()
	if done == nil {
		return nil, false, false, c.breakerOpen(ctx, wait)
	}
	tn := &turn{results: make(chan *hedgeTry, h.Max)}
	c.started()
	hg.launch(ctx, c.numbered(ctx), tn, c.attempt, done, false)
	inflight := 1
	delay := h.delay(c.key)
	timer := time.NewTimer(delay)
	defer timer.Stop()
	armed := true      // the timer runs toward the next hedge
	var last *hedgeTry // the latest failure of the turn
	for {
		select {
		case t := <-tn.results:
			inflight--
			if bs := cfg.breakers; bs != nil {
				bs.flush(cfg.onBreaker)
			}
			if t.panicked != nil {
				hg.endTurn(tn, t, last)
				panic(t.panicked)
			}
			if t.failure == nil {
				hg.endTurn(tn, t, last)
				if t.hedge {
					cfg.state.hedgeWins.Add(1)
					c.hedgeEvent(typeHedgeWon, t.n, 0)
				}
				return nil, false, true, nil
			}
			// A failure while others run: they go on.
			if last != nil {
				hg.dropTry(last)
			}
			last = t
			if inflight == 0 {
				hg.endTurn(tn, t, nil)
				return t.failure, t.timedOut, true, nil
			}
			if !armed && c.attempt < cfg.policy.MaxAttempts {
				delay = h.delay(c.key)
				timer.Reset(delay)
				armed = true
			}
		case <-timer.C:
			armed = false
			if c.attempt >= cfg.policy.MaxAttempts || len(tn.results) > 0 {
				// The policy's attempts are spent, or an outcome is
				// waiting: it comes first (a failure arms the timer again).
				continue
			}
			if done := c.admitHedge(ctx); done != nil {
				c.started()
				cfg.state.hedges.Add(1)
				c.hedgeEvent(typeHedgeStarted, c.attempt, delay)
				hg.launch(ctx, c.numbered(ctx), tn, c.attempt, done, true)
				inflight++
			}
			if inflight < h.Max && c.attempt < cfg.policy.MaxAttempts {
				delay = h.delay(c.key)
				timer.Reset(delay)
				armed = true
			}
		case <-ctx.Done():
			hg.endTurn(tn, nil, last)
			if last != nil {
				c.last, c.lastTyp = last.failure, ""
			}
			return nil, false, false, c.canceled(ctx)
		}
	}
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
// the breaker's done, or nil when the hedge may not start.
func (c *call) admitHedge(ctx context.Context) func(error) {
	cfg := c.cfg
	if ctx.Err() != nil {
		return nil
	}
	done, _ := c.allowBreaker()
	if done == nil {
		return nil
	}
	if l := cfg.limiter; l != nil {
		if _, _, ok := l.l.Reserve(ctx, c.key, cfg.mono(), 0); !ok {
			done(errBreakerExcluded)
			return nil
		}
	}
	if cfg.budgeted && !c.allowRetry(ctx, cfg.now()) {
		done(errBreakerExcluded)
		return nil
	}
	return done
}

// launch starts attempt number n on its own goroutine, with a context of its
// own made from nctx (ctx carrying the attempt number), and has it report
// to tn. done receives the breaker outcome.
func (hg *hedging) launch(ctx, nctx context.Context, tn *turn, n int, done func(error), hedge bool) {
	cfg, attempt := hg.cfg, hg.attempt
	t := &hedgeTry{n: n, hedge: hedge}
	actx, cancel := context.WithCancel(nctx)
	t.cancel = cancel
	actx = context.WithValue(actx, tryKey{}, t)
	tn.mu.Lock()
	tn.running = append(tn.running, t)
	tn.mu.Unlock()
	go func() {
		start := time.Now()
		finished := false
		defer func() {
			if !finished {
				t.panicked = recover()
				if t.panicked == nil {
					t.panicked = errNilPanic
				}
				done(errBreakerFailure)
				hg.report(tn, t)
			}
		}()
		t.failure, t.timedOut = attempt(actx)
		finished = true
		cut := actx.Err() != nil && ctx.Err() == nil // canceled as a loser
		if !cut {
			cfg.hedge.record(hg.key, time.Since(start))
		}
		switch {
		case cut:
			done(errBreakerExcluded)
		case hg.http:
			done(t.verdict)
		default:
			done(cfg.breakerOutcome(ctx, t.failure, t.timedOut))
		}
		hg.report(tn, t)
	}()
}

// errNilPanic stands for a panic(nil) in a hedged attempt.
var errNilPanic = fmt.Errorf("retry: attempt panicked with nil")

// report hands a finished attempt to its turn, or, once the turn is over,
// gives up its outcome.
func (hg *hedging) report(tn *turn, t *hedgeTry) {
	tn.mu.Lock()
	over := tn.over
	if !over {
		tn.results <- t // never blocks: at most Max attempts are unread
	}
	tn.mu.Unlock()
	if over {
		hg.dropTry(t)
	}
}

// endTurn ends tn: the driver takes keep (the winner, or the turn's last
// failure), the other attempts are canceled, and those that finished gives
// up their outcome; last is a failure kept so far, now given up.
func (hg *hedging) endTurn(tn *turn, keep, last *hedgeTry) {
	tn.mu.Lock()
	tn.over = true
	running := tn.running
	tn.running = nil
	tn.mu.Unlock()
	for _, t := range running {
		if t != keep {
			t.cancel()
		}
	}
	if keep != nil {
		if take := hg.take; take != nil {
			take(keep)
		} else {
			keep.cancel()
		}
	}
	if last != nil {
		hg.dropTry(last)
	}
	for {
		select {
		case t := <-tn.results:
			hg.dropTry(t)
		default:
			return
		}
	}
}

// dropTry gives up the outcome of an attempt that is not kept.
func (hg *hedging) dropTry(t *hedgeTry) {
	if drop := hg.drop; drop != nil {
		drop(t)
	}
	t.cancel()
}

// hedgeEvent fires the Hedge's OnEvent hook, if set.
func (c *call) hedgeEvent(typ string, attempt int, delay time.Duration) {
	f := c.cfg.hedge.OnEvent
	if f == nil {
		return
	}
	key := c.key
	if key == "" {
		key = c.cfg.key
	}
	f(Event{Attempt: attempt, Type: typ, Delay: delay, Key: key, Method: c.method, URL: c.url, Time: c.cfg.now()})
}

// doHedged is do for a configuration with a Hedge: each attempt keeps its
// own value, the winner's is returned and the losers' are released.
func doHedged[T any](ctx context.Context, cfg *config, fn func(context.Context) (T, error)) (T, error) {
	var v T
	c := call{cfg: cfg, key: cfg.key}
	c.hedge = &hedging{cfg: cfg, key: c.key,
		take: func(t *hedgeTry) {
			if t.failure == nil {
				v, _ = t.value.(T)
			}
			t.cancel()
		},
		drop: func(t *hedgeTry) {
			if rel := cfg.hedge.Release; rel != nil && t.failure == nil {
				rel(t.value)
			}
		},
	}
	c.hedge.attempt = func(ctx context.Context) (error, bool) {
		t := tryFrom(ctx)
		return timed(ctx, cfg.attemptTimeout, func(ctx context.Context) error {
			w, err := fn(ctx) // a panic goes on to the caller
			if t == nil {     // a turn without hedges: the call's own goroutine
				v = w
			} else {
				t.value = w
			}
			return err
		})
	}
	if err := c.run(ctx, c.hedge.attempt); err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// runHedged is run for a configuration with a Hedge.
func runHedged(ctx context.Context, cfg *config, fn func(context.Context) error) error {
	c := call{cfg: cfg, key: cfg.key}
	c.hedge = &hedging{cfg: cfg, key: c.key, attempt: func(ctx context.Context) (error, bool) {
		return timed(ctx, cfg.attemptTimeout, fn)
	}}
	return c.run(ctx, c.hedge.attempt)
}
