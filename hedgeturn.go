package retry

import (
	"context"
	"errors"
	"sync"
	"time"
)

// turn is the attempts that run at once, from a first attempt to a winner
// or to the failure of them all. The first runs on the caller's goroutine;
// while it runs, the turn's timer starts hedges from its own goroutine
// (fire), under mu. When the first attempt returns, the caller takes over:
// the timer then only wakes it (tick), and hedges start from the caller.
// Hedges that finish after the turn is over give up their own outcome.
type turn struct {
	timer    *time.Timer // runs fire; kept when the turn is pooled
	fireFunc func()      // tn.fire, made once per turn

	// Set before the timer is armed.
	hg    hedging
	ctx   context.Context // the caller's
	spec  *hedgeSpec
	limit int // the policy's MaxAttempts

	mu       sync.Mutex
	n        int                // the call's attempts so far
	inline   bool               // the caller runs the first attempt
	primary  context.CancelFunc // cancels it
	over     bool
	delay    time.Duration // the wait before the next hedge
	arms     int           // the timer's armings not stopped
	fires    int           // and its runs of fire
	skip     int           // runs of fire to ignore: armed before the caller took over
	launched int           // hedges started
	results  chan *hedgeTry
	tick     chan struct{}
	running  []*hedgeTry
	events   []Event // hedges started by the timer, for the caller's hooks
}

// hedgeable reports whether the call's next turn may hedge.
func (c *call) hedgeable() bool {
	if c.hedge == nil || c.hedge.spec.Max < 2 {
		return false
	}
	bs := c.cfg.breakers
	return bs == nil || bs.get(c.key, c.cfg.now()).shared == nil
}

// hedged is guarded for a hedged call: it runs one turn. The turn's first
// attempt passes the breaker as any attempt does (the context and the rate
// limiter were passed in begin) and runs on the caller's goroutine, its
// context canceled should a hedge succeed first. Each time the delay passes
// with fewer than Max attempts in flight, a hedge passes the breaker, the
// rate limiter and the retry budget (admitHedge) and starts on a goroutine
// of its own. The turn ends with the first success the caller sees, or with
// the last failure once every attempt has failed; after the first attempt,
// the caller's context ends it at once.
func (c *call) hedged(ctx context.Context, attempt attemptFunc) (failure error, timedOut, ran bool, stop error) {
	cfg, h := c.cfg, c.hedge.spec
	done, wait := c.allowBreaker()
	if done == nil {
		return nil, false, false, c.breakerOpen(ctx, wait)
	}
	c.started()
	// The clock's reading also tells whether the call runs in a synctest
	// bubble, whose clock has no monotonic reading: a timer made in a
	// bubble must never be touched outside it, so only turns made outside
	// bubbles are pooled, and only outside bubbles are they taken.
	start := time.Now()
	pooled := start != start.Round(0)
	tn := takeTurn(pooled)
	tn.hg, tn.ctx, tn.spec, tn.limit, tn.n, tn.inline = *c.hedge, ctx, h, cfg.policy.MaxAttempts, c.attempt, true
	pctx, pcancel := context.WithCancel(c.numbered(ctx))
	tn.primary = pcancel
	tn.delay = h.delay(c.key)
	tn.mu.Lock() // fire waits until the turn is complete
	if tn.timer == nil {
		tn.timer = time.AfterFunc(tn.delay, tn.fireFunc)
	} else {
		tn.timer.Reset(tn.delay)
	}
	tn.arms = 1
	tn.mu.Unlock()
	finished := false
	defer func() {
		if !finished { // the attempt panicked: the turn ends, the panic goes on
			tn.end(nil)
			pcancel()
			done(errBreakerFailure)
		}
	}()
	failure, timedOut = attempt(pctx)
	finished = true
	if h.sketches != nil {
		h.record(c.key, time.Since(start))
	}
	cut := failure != nil && pctx.Err() != nil && ctx.Err() == nil // a hedge won
	stopped := tn.timer.Stop()
	tn.mu.Lock()
	if stopped {
		tn.arms--
	}
	alone := tn.launched == 0
	if alone {
		tn.over = true
	}
	// The timer never ran fire and never will: nothing else holds the turn.
	idle := alone && stopped && tn.fires == 0
	tn.mu.Unlock()
	if idle && pooled {
		tn.recycle()
	}
	if alone { // no hedge started: the turn is this attempt alone
		done(c.hedgeOutcome(ctx, failure, timedOut, false))
		c.flushBreaker()
		if c.hedge.inline != nil {
			c.hedge.keep(c.firstTry(failure, timedOut, pcancel))
		} else {
			pcancel()
		}
		return failure, timedOut, true, nil
	}
	return c.coordinate(ctx, tn, done, c.firstTry(failure, timedOut, pcancel), cut)
}

// firstTry returns the hedgeTry of the turn's first attempt.
func (c *call) firstTry(failure error, timedOut bool, cancel context.CancelFunc) *hedgeTry {
	t := c.hedge.inline // the Transport's, holding the response
	if t == nil {
		t = new(hedgeTry)
	}
	t.n, t.inline, t.failure, t.timedOut, t.cancel = c.attempt, true, failure, timedOut, cancel
	return t
}

// hedgeOutcome is what the first attempt of a turn means to the breaker;
// cut says a hedge's success canceled it.
func (c *call) hedgeOutcome(ctx context.Context, failure error, timedOut, cut bool) error {
	switch {
	case cut:
		return errBreakerExcluded
	case c.hedge.http:
		return c.hedge.inline.verdict
	}
	return c.cfg.breakerOutcome(ctx, failure, timedOut)
}

// flushBreaker delivers the breaker's changes of state to the hooks.
func (c *call) flushBreaker() {
	if bs := c.cfg.breakers; bs != nil {
		bs.flush(c.cfg.onBreaker)
	}
}

// coordinate goes on with a turn whose hedges started while its first
// attempt ran on the caller's goroutine, first the outcome of that attempt.
func (c *call) coordinate(ctx context.Context, tn *turn, done func(error), first *hedgeTry, cut bool) (failure error, timedOut, ran bool, stop error) {
	cfg, hg := c.cfg, c.hedge
	tn.mu.Lock()
	tn.inline = false
	tn.tick = make(chan struct{}, 1)
	tn.skip = tn.arms - tn.fires // a run of fire already due belongs to the first attempt's time
	c.attempt = tn.n
	events := tn.takeEvents()
	inflight := tn.launched // hedges not yet received
	if tn.n < tn.limit {
		tn.timer.Reset(tn.delay)
		tn.arms++
	}
	tn.mu.Unlock()
	c.hedgeEvents(events)
	done(c.hedgeOutcome(ctx, first.failure, first.timedOut, cut))
	c.flushBreaker()
	if first.failure == nil {
		tn.end(first)
		return nil, false, true, nil
	}
	var last *hedgeTry // the latest failure of the turn
	if cut {
		hg.discard(first)
	} else {
		last = first
	}
	for {
		select {
		case t := <-tn.results:
			inflight--
			c.flushBreaker()
			if t.panicked != nil {
				tn.end(nil)
				discardTry(hg, last)
				panic(t.panicked)
			}
			if t.failure == nil {
				tn.end(t)
				discardTry(hg, last)
				c.won = t
				cfg.state.hedgeWins.Add(1)
				c.hedgeEvent(typeHedgeWon, t.n, 0)
				return nil, false, true, nil
			}
			// A failure while others run: they go on.
			discardTry(hg, last)
			last = t
			if inflight == 0 {
				tn.end(t)
				return t.failure, t.timedOut, true, nil
			}
		case <-tn.tick:
			tn.mu.Lock()
			if len(tn.results) == 0 && inflight < tn.spec.Max { // an outcome waiting comes first
				if tn.hedge() {
					inflight++
				}
			}
			if tn.n < tn.limit {
				tn.timer.Reset(tn.delay)
				tn.arms++
			}
			c.attempt = tn.n
			events := tn.takeEvents()
			tn.mu.Unlock()
			c.hedgeEvents(events)
		case <-ctx.Done():
			tn.end(nil)
			if last != nil {
				c.last, c.lastTyp = last.failure, ""
				discardTry(hg, last)
			}
			return nil, false, false, c.canceled(ctx)
		}
	}
}

// discardTry discards t, when there is one.
func discardTry(hg *hedging, t *hedgeTry) {
	if t != nil {
		hg.discard(t)
	}
}

// fire is the turn's timer: while the caller runs the first attempt, it
// starts a hedge itself; afterwards it wakes the caller.
func (tn *turn) fire() {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	tn.fires++
	switch {
	case tn.over:
	case tn.skip > 0:
		tn.skip--
	case !tn.inline:
		select {
		case tn.tick <- struct{}{}:
		default:
		}
	default:
		tn.hedge()
		if tn.n < tn.limit && 1+tn.launched < tn.spec.Max {
			tn.timer.Reset(tn.delay)
			tn.arms++
		}
	}
}

// hedge starts a hedge if the policy has an attempt left for it and
// admitHedge lets it through; tn.mu is held. It reports whether it did.
func (tn *turn) hedge() bool {
	hg, cfg := &tn.hg, tn.hg.cfg
	if tn.n >= tn.limit {
		return false
	}
	done := admitHedge(tn.ctx, cfg, hg.key)
	if done == nil {
		return false
	}
	tn.n++
	tn.launched++
	cfg.state.retryAttempts.Add(1)
	cfg.state.hedges.Add(1)
	tn.events = append(tn.events, Event{Attempt: tn.n, Type: typeHedgeStarted, Delay: tn.delay})
	if tn.results == nil {
		tn.results = make(chan *hedgeTry, tn.spec.Max)
	}
	t := &hedgeTry{n: tn.n}
	actx, cancel := context.WithCancel(context.WithValue(tn.ctx, attemptKey{}, tn.n))
	t.cancel = cancel
	tn.running = append(tn.running, t)
	go tn.run(actx, t, done)
	tn.delay = tn.spec.delay(hg.key)
	return true
}

// run runs hedge t on its own goroutine and reports it to the turn.
func (tn *turn) run(actx context.Context, t *hedgeTry, done func(error)) {
	hg, cfg := &tn.hg, tn.hg.cfg
	start := time.Now()
	finished := false
	defer func() {
		if !finished {
			if t.panicked = recover(); t.panicked == nil {
				t.panicked = errNilPanic
			}
			done(errBreakerFailure)
			tn.report(t)
		}
	}()
	t.failure, t.timedOut = hg.run(actx, t)
	finished = true
	cut := actx.Err() != nil && tn.ctx.Err() == nil // canceled as a loser
	if !cut {
		tn.spec.record(hg.key, time.Since(start))
	}
	switch {
	case cut:
		done(errBreakerExcluded)
	case hg.http:
		done(t.verdict)
	default:
		done(cfg.breakerOutcome(tn.ctx, t.failure, t.timedOut))
	}
	tn.report(t)
}

// errNilPanic stands for a panic with no value in a hedge.
var errNilPanic = errors.New("retry: hedge panicked")

// report hands a finished hedge to its turn, or, once the turn is over,
// gives up its outcome. A success or a panic cancels the first attempt if
// the caller still runs it, so that the caller takes it over.
func (tn *turn) report(t *hedgeTry) {
	tn.mu.Lock()
	over := tn.over
	if !over {
		tn.results <- t                    // never blocks: at most Max hedges are unread
		if t.failure == nil && tn.inline { // a success, or a panic
			tn.primary()
		}
	}
	tn.mu.Unlock()
	if over {
		tn.hg.discard(t)
	}
}

// end ends the turn: the driver keeps keep (the winner, or the turn's last
// failure), the hedges still running are canceled, and those finished give
// up their outcome.
func (tn *turn) end(keep *hedgeTry) {
	tn.timer.Stop()
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
		tn.hg.keep(keep)
	}
	for {
		select {
		case t := <-tn.results:
			if t != keep {
				tn.hg.discard(t)
			}
		default:
			return
		}
	}
}

// takeEvents returns the events of the hedges started since the last
// call; tn.mu is held.
func (tn *turn) takeEvents() []Event {
	events := tn.events
	tn.events = nil
	return events
}

// turns holds idle turns made outside synctest bubbles, with their timers.
var turns sync.Pool

// takeTurn returns an idle turn: a pooled one when pooled, else a new one.
func takeTurn(pooled bool) *turn {
	if pooled {
		if tn, _ := turns.Get().(*turn); tn != nil {
			return tn
		}
	}
	tn := new(turn)
	tn.fireFunc = tn.fire
	return tn
}

// recycle pools a turn whose timer is stopped and never ran fire.
func (tn *turn) recycle() {
	*tn = turn{timer: tn.timer, fireFunc: tn.fireFunc}
	turns.Put(tn)
}
