package retry

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// hedgeDriver is what a turn needs from its driver (Hedged's, the
// Transport's).
type hedgeDriver interface {
	// attempt runs attempt t.n with ctx, on any goroutine and beside other
	// attempts, and fills in t's outcome and verdict.
	attempt(ctx context.Context, t *try)
	// discard gives up what t produced when it is not returned: a value
	// goes to Release, a response is drained and closed.
	discard(t *try)
}

// try is one attempt of a hedged turn.
type try struct {
	n        int
	hedge    bool               // false for the turn's first attempt, run by the caller
	cancel   context.CancelFunc // ends the attempt's context
	value    any                // a hedge's value or response
	release  func()             // the driver's end of the attempt, if any
	failure  error
	timedOut bool
	verdict  error // what the outcome means to the gates
	panicked any
	fatal    bool          // a failure that ends the turn (see judge)
	hint     time.Duration // a failure's server-directed delay, or 0
	p        pass          // a hedge's way through the gates
}

// turn is the attempts of a hedged call that run at once, from a first
// attempt to a winner or to the failure of them all. The first runs on the
// caller's goroutine; when the delay passes, the timer's goroutine becomes
// the turn's coordinator: one select over the results, the next hedge's
// time and the caller's context. The first success wins by a
// compare-and-swap, so whichever attempt returns it, it is the one
// returned.
type turn struct {
	fire      func()       // coordinate, made once per turn value
	verdictFn func() error // verdictOf, likewise
	causeFn   func() error // causeOf, likewise
	drv       hedgeDriver  // set by takeTurn, for one call
	cfg       *config
	spec      *hedgeSpec
	key       string
	desc      func() (method, url string)
	timer     *time.Timer // starts the coordinator; one per call, reset each turn
	stop      func() bool // stops the coordinator's start on a timerClock, in place of timer
	mu        sync.Mutex  // makes the channels, once, for the caller or the coordinator
	// On a timerClock, the coordinator and the caller sleep on the clock
	// while they wait; the other wakes them. mu guards both.
	coordWake, callerWake waker

	// Set by run before the timer is armed; the coordinator's afterwards.
	ctx     context.Context
	first   try
	delay   time.Duration
	n       atomic.Int64 // attempts of the call so far
	winner  atomic.Pointer[try]
	results chan *try // every attempt's end, once the coordinator runs
	answer  chan *try // the coordinator's to the caller: the turn's outcome
	verdict error     // the first attempt's, for the loop's gates
	cause   error     // the first attempt's error, likewise
}

// verdictOf is what the first attempt of the last turn means to the gates.
func (tn *turn) verdictOf() error { return tn.verdict }

// causeOf is the first attempt of the last turn's own error (see
// pass.learn).
func (tn *turn) causeOf() error { return tn.cause }

// turns keeps turns whose calls never started a hedge: they hold no
// channel, timer or goroutine of a synctest bubble, and take one
// allocation off the next call.
var turns = sync.Pool{New: func() any {
	tn := new(turn)
	tn.fire, tn.verdictFn, tn.causeFn = tn.coordinate, tn.verdictOf, tn.causeOf
	return tn
}}

// takeTurn returns a turn for one call of drv.
func takeTurn(drv hedgeDriver, cfg *config, spec *hedgeSpec, key string, desc func() (string, string)) *turn {
	tn := turns.Get().(*turn)
	tn.drv, tn.cfg, tn.spec, tn.key, tn.desc = drv, cfg, spec, key, desc
	return tn
}

// recycle ends the turn's call: a turn that never started a hedge goes back
// to the pool.
func (tn *turn) recycle() {
	if tn.results == nil {
		*tn = turn{fire: tn.fire, verdictFn: tn.verdictFn, causeFn: tn.causeFn}
		turns.Put(tn)
	}
}

// channels makes the turn's channels, the first time any turn of the call
// hands over to its coordinator; they are empty again when a turn ends,
// and serve the next.
func (tn *turn) channels() {
	tn.mu.Lock()
	if tn.results == nil {
		tn.results, tn.answer = make(chan *try, tn.spec.Max+1), make(chan *try, 1)
	}
	tn.mu.Unlock()
}

// run runs one turn as the loop's attempt c.attempt, on ctx, and returns
// its outcome: the winner, or the last failure.
func (tn *turn) run(ctx context.Context, c *call) *try {
	tn.ctx, tn.first = ctx, try{n: c.attempt}
	first := &tn.first
	if !tn.cfg.hedgeable(tn.spec) {
		tn.drv.attempt(ctx, first)
		tn.verdict, tn.cause = first.verdict, first.failure
		return first
	}
	tn.n.Store(int64(c.attempt))
	tn.winner.Store(nil)
	var actx context.Context
	actx, first.cancel = context.WithCancel(ctx)
	tn.delay = tn.spec.delay(tn.key)
	tn.arm()
	var start time.Time
	if tn.spec.sketches != nil {
		start = tn.now()
	}
	finished := false
	defer func() {
		if !finished { // the attempt panicked: the turn ends, the panic goes on
			first.cancel()
			first.panicked = errNilPanic
			if !tn.disarm() {
				tn.channels()
				tn.report(first)
				// A hedge that won before the panic is returned to no one:
				// give it up as a loser.
				if t := tn.awaitAnswer(); t != nil && t != first && t.failure == nil && t.panicked == nil {
					tn.drv.discard(t)
					tn.release(t)
				}
			}
		}
	}()
	tn.drv.attempt(actx, first)
	finished = true
	lost := actx.Err() != nil && ctx.Err() == nil
	if ctx.Err() == nil && tn.spec.sketches != nil {
		// The adaptive delay learns from first attempts alone, a loser's
		// time included: it ran at least that long, past the delay, which
		// is all a percentile needs to know of it. Hedges, and a loser
		// left out, would be a sample of the fast (those that won the
		// race), and the delay would fall: at the 95th percentile, 9% of
		// calls hedged in place of 5%.
		tn.spec.record(tn.key, tn.now().Sub(start))
	}
	tn.verdict, tn.cause = first.verdict, first.failure
	if lost {
		tn.verdict, tn.cause = errBreakerExcluded, errWithdrawn
	}
	if tn.disarm() { // no hedge ever started: the turn is this attempt
		return first
	}
	tn.channels()
	tn.judge(first, lost)
	tn.report(first)
	c.attempt = int(tn.n.Load()) // the hedges started count, whichever attempt the turn returns
	if tn.winner.Load() == first {
		return first
	}
	t := tn.awaitAnswer()
	c.attempt = int(tn.n.Load())
	switch {
	case t == nil: // the caller's context ended
		return &try{failure: context.Cause(ctx)}
	case t.panicked != nil:
		panic(t.panicked)
	}
	return t
}

// judge notes what a failed attempt means to the rest of its turn: a
// failure that stops the call whatever is left (Permanent, a non-retryable
// type, a verdict that ends the call) is fatal and ends the turn, as a
// fatal status ends a hedged call in gRFC A6; a server-directed delay
// holds the next hedge back, and one over MaxServerDelay starts no further
// hedge but lets the attempts in flight finish, fatal or not, as A6's
// pushback that says not to retry. An attempt canceled as a loser, or by
// the caller, says nothing.
func (tn *turn) judge(t *try, canceled bool) {
	if t.failure == nil || t.panicked != nil || canceled || tn.ctx.Err() != nil {
		return
	}
	o := attemptOutcome(tn.ctx, t.failure, t.timedOut)
	t.hint = o.hint
	t.fatal = tn.cfg.stops(o) != reasonNone && t.hint <= tn.cfg.maxServerDelay
}

// report hands an attempt's end to the coordinator. A success, a fatal
// failure or a panic claims the win if no attempt has; a success or a
// fatal failure that comes after the winner is given up at once.
func (tn *turn) report(t *try) {
	if t.failure == nil || t.fatal || t.panicked != nil {
		switch {
		case tn.winner.CompareAndSwap(nil, t):
			if t.hedge && t.panicked == nil && t.failure == nil {
				tn.cfg.state.hedgeWins.Add(1)
				tn.event(TypeHedgeWon, t.n, 0)
			}
		case t.panicked == nil:
			tn.drv.discard(t)
			tn.release(t)
		}
	}
	tn.results <- t // never blocks: it holds every attempt of the turn
	tn.poke(&tn.coordWake)
}

// release ends t's context and the driver's part of it.
func (tn *turn) release(t *try) {
	if t.release != nil {
		t.release()
	}
	if t.cancel != nil {
		t.cancel()
	}
}

// coordinate runs the turn once its delay has passed, on the timer's
// goroutine: it starts hedges, each after the delay or at once after a
// failure while others run; it answers the caller with the winner, or,
// once every attempt has failed or the caller's context has ended and the
// first attempt is in, with the last failure (nil if none; the one with
// the longest server delay when any had one), after which no success can
// win; and it gives up whatever else the attempts return.
func (tn *turn) coordinate() {
	tn.channels()
	var (
		running  = []*try{&tn.first}
		inflight = 1
		held     bool      // a server's delay too long to honour: no more hedges
		hold     time.Time // no hedge before then: the longest server delay so far
		last     *try      // the latest failure, kept until a later one or the answer
		answer   *try      // what the caller was answered: the caller's from then on
		answered bool
		firstIn  bool // the caller's first attempt has reported
		ended    bool // the caller's context has ended
		next     = tn.newAlarm()
		ctxDone  = tn.ctx.Done()
	)
	defer next.Stop()
	drop := func(t *try) {
		tn.drv.discard(t)
		tn.release(t)
	}
	reply := func(t *try) {
		answer, answered = t, true
		for _, r := range running {
			if r != t && r.cancel != nil {
				r.cancel()
			}
		}
		if last != nil && last != t {
			drop(last)
		}
		last = nil
		tn.answer <- t
		tn.poke(&tn.callerWake)
	}
	// settle answers t, a failure or nil, unless a success has won by
	// then; it closes the race, so that a success arriving later loses.
	settle := func(t *try) {
		if !tn.winner.CompareAndSwap(nil, &settled) {
			t = tn.winner.Load()
		}
		reply(t)
	}
	hedge := func() {
		if held {
			return
		}
		if h := tn.start(); h != nil {
			running = append(running, h)
			inflight++
		}
		if inflight < tn.spec.Max && tn.n.Load() < int64(tn.cfg.policy.MaxAttempts) {
			next.Reset(tn.delay)
		}
	}
	hedge()
	for inflight > 0 {
		t, ev := tn.await(next, ctxDone)
		switch ev {
		case turnResult:
			inflight--
			firstIn = firstIn || t == &tn.first
			switch w := tn.winner.Load(); {
			case answered && t == answer: // the caller's
			case t == w && !answered: // the winner: answered below
			case (t.failure == nil || t.fatal) && t.panicked == nil && t != w: // a loser, given up in report
			case !answered && w == nil && last != nil && last.hint > t.hint:
				// A failure after one that carried a longer server delay:
				// the turn keeps the delay, which the policy must honour.
				drop(t)
			case !answered && w == nil: // a failure: the latest
				if last != nil {
					drop(last)
				}
				last = t
			default: // anything that arrives after the answer
				drop(t)
			}
			switch w := tn.winner.Load(); {
			case answered:
			case w != nil:
				reply(w)
			case inflight == 0: // every attempt failed: the policy decides
				settle(last)
			case ended:
				if firstIn {
					settle(last)
				}
			case t.hint > tn.cfg.maxServerDelay: // the server wants no attempt this turn can wait for
				held = true
				next.Stop()
			case t.hint > 0: // the next hedge when the server said, then every delay
				if until := tn.now().Add(t.hint); until.After(hold) {
					hold = until
					next.Reset(t.hint)
				}
			case tn.now().Before(hold): // a failure while a server's delay runs: the hedge waits for it
			default: // a failure while others run: the next hedge now
				hedge()
			}
		case turnTimer:
			if !answered && !held && tn.winner.Load() == nil && inflight < tn.spec.Max {
				hedge()
			}
		case turnDone: // the attempts' contexts end with it
			ctxDone, ended = nil, true
			if !answered && firstIn {
				settle(last)
			}
		}
	}
}

// start starts a hedge if the policy has an attempt left for it and the
// gates let it through now, and returns it; nil when it does not start.
func (tn *turn) start() *try {
	if tn.n.Load() >= int64(tn.cfg.policy.MaxAttempts) || tn.winner.Load() != nil || tn.ctx.Err() != nil || tn.cfg.inboundRetry(tn.ctx) {
		return nil
	}
	t := &try{hedge: true}
	t.p = pass{ask: ask{cfg: tn.cfg, kind: kindHedge, key: tn.key}}
	if tn.cfg.admits(kindHedge) {
		if no := tn.cfg.admit(tn.ctx, &t.p); no != nil {
			return nil
		}
	}
	if tn.cfg.enters(kindHedge) {
		if _, wait, no := tn.cfg.enter(tn.ctx, &t.p, 0); no != nil || wait > 0 {
			if no == nil { // a hedge does not wait
				t.p.notRun(tn.cfg)
			}
			return nil
		}
	}
	t.p.spend()
	t.n = int(tn.n.Add(1))
	tn.cfg.state.retryAttempts.Add(1)
	tn.cfg.state.hedges.Add(1)
	tn.event(TypeHedgeStarted, t.n, tn.delay)
	actx, cancel := context.WithCancel(withAttempt(tn.ctx, t.n))
	t.cancel = cancel
	tn.spawn(actx, t)
	tn.delay = tn.spec.delay(tn.key)
	return t
}

// settled stands for the winner of a turn that ended without a success,
// so that no later success can win it.
var settled try

// hedge runs hedge t on its own goroutine and reports it to the turn.
func (tn *turn) hedge(actx context.Context, t *try) {
	finished := false
	defer func() {
		if !finished {
			if t.panicked = recover(); t.panicked == nil {
				t.panicked = errNilPanic
			}
			t.p.learn(errBreakerFailure, errPanicked)
			tn.report(t)
		}
	}()
	tn.drv.attempt(actx, t)
	finished = true
	lost := actx.Err() != nil && tn.ctx.Err() == nil
	cause := t.failure
	if lost { // canceled as a loser
		t.verdict, cause = errBreakerExcluded, errWithdrawn
	}
	t.p.learn(t.verdict, cause)
	tn.judge(t, actx.Err() != nil)
	tn.report(t)
}

// errNilPanic stands for a panic with no value in a hedge.
var errNilPanic = errors.New("retry: hedge panicked")

// event fires the Hedge's OnEvent hook, if set.
func (tn *turn) event(typ string, attempt int, delay time.Duration) {
	f := tn.spec.OnEvent
	if f == nil {
		return
	}
	var method, url string
	if tn.desc != nil {
		method, url = tn.desc()
	}
	f(Event{Attempt: attempt, Type: typ, Delay: delay, Key: tn.key, Method: method, URL: url, Time: tn.cfg.now()})
}
