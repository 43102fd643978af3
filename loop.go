package retry

import (
	"context"
	"time"
)

// attemptFunc runs one attempt with the attempt's context and reports its
// failure (nil for a success) and whether the attempt's own timeout cut it
// off. Do, Attempts and the Transport each supply one to the loop.
type attemptFunc func(ctx context.Context) (failure error, timedOut bool)

// call is the state of one logical call across its attempts.
type call struct {
	cfg     *config
	key     string        // the dependency's key: breakers, limiters, budgets, events
	attempt int           // attempts run so far
	start   time.Time     // start of the call, read only when MaxElapsed is set
	first   time.Time     // time of the first failure
	prev    time.Duration // previous sampled wait, for decorrelated jitter
	timer   *time.Timer   // one reusable timer per call
	last    error         // the last attempt's error
	lastTyp string        // its type, as the engine classified it
	nested  bool          // the caller's context already carried an attempt number
	halt    bool          // the attempt asked the loop to stop: Attempts' body broke out
	verdict error         // the breaker outcome the attempt chose itself, if any (the Transport's)
	hedge   *hedging      // the driver's part in hedged attempts; nil without a Hedge
	won     *hedgeTry     // the hedge whose success ended the call

	tokened     bool            // the limiter already gave the next attempt its token
	untoken     func(time.Time) // gives that token back if the attempt never runs
	breakerWait time.Duration   // time waited, in all, for open breakers
	dl          time.Time       // the caller's deadline
	dlKnown     uint8           // 0: not looked up yet; 1: none; 2: dl

	// The Transport's request and its state across attempts: kept in the
	// call itself, so that a request costs no allocation of its own.
	http roundTrip
}

// run is the one attempt loop that Do, Run, Attempts and the Transport
// drive. Each turn: admission (the context, the rate limiter, the circuit
// breaker), the attempt, its outcome, the decision, the retry budget, the
// events, and the wait. It returns nil on success and otherwise the error
// that ends the call.
func (c *call) run(ctx context.Context, attempt attemptFunc) error {
	defer c.end()
	for {
		// The context, then the rate limiter: a wait for a token is not
		// an attempt.
		if err := c.begin(ctx); err != nil {
			return err
		}
		// The breaker admits the attempt, which runs and reports its
		// outcome; an open breaker is waited for without consuming it.
		failure, timedOut, ran, err := c.guarded(ctx, attempt)
		if err != nil {
			return err
		}
		if !ran {
			continue
		}
		if failure == nil || c.halt {
			return nil
		}
		// The decision, the budget and the events; then the wait.
		d, err := c.fail(ctx, failure, timedOut)
		if err != nil {
			return err
		}
		if c.http.req != nil {
			c.http.discard()
		}
		if err := c.sleep(ctx, d); err != nil {
			return err
		}
	}
}

// begin runs the admission steps before an attempt that do not involve the
// breaker: the caller's context, then the rate limiter.
func (c *call) begin(ctx context.Context) error {
	if ctx.Err() == nil && c.cfg.maxElapsed <= 0 && c.cfg.limiter == nil && !c.tokened && c.untoken == nil {
		return nil // nothing to admit: the common case, kept small enough to inline
	}
	return c.admit(ctx)
}

// admit is begin's work when there is some.
func (c *call) admit(ctx context.Context) error {
	tokened := c.tokened
	c.tokened, c.untoken = false, nil
	if ctx.Err() != nil {
		return c.canceled(ctx)
	}
	if c.cfg.maxElapsed > 0 && c.start.IsZero() {
		c.start = c.cfg.now() // MaxElapsed counts the waits before the first attempt too
	}
	if l := c.cfg.limiter; l != nil && !tokened {
		ok, err := l.wait(ctx, c, c.key)
		if err != nil {
			return err
		}
		if !ok {
			return c.refuse(ctx, ReasonRateLimited, typeRateLimited, rateLimitError{})
		}
	}
	return nil
}

// guarded runs one attempt through the circuit breaker, if there is one:
// Allow, the attempt, then the outcome (gobreaker's two-step form). When
// the breaker is open the attempt is neither run nor counted: guarded waits
// until the breaker may let a probe through and returns ran == false, or
// returns the error that stops the call when that wait cannot fit. A panic
// in the attempt is recorded as a failure and goes on.
func (c *call) guarded(ctx context.Context, attempt attemptFunc) (failure error, timedOut, ran bool, stop error) {
	if c.hedge != nil && c.hedgeable() {
		return c.hedged(ctx, attempt)
	}
	if c.cfg.breakers == nil {
		c.started()
		failure, timedOut = attempt(c.numbered(ctx))
		return failure, timedOut, true, nil
	}
	return c.breakered(ctx, attempt)
}

// breakered is guarded with a circuit breaker.
func (c *call) breakered(ctx context.Context, attempt attemptFunc) (failure error, timedOut, ran bool, stop error) {
	bs := c.cfg.breakers
	var now time.Time
	if bs.keys != nil {
		now = c.cfg.now()
	}
	b := bs.get(c.key, now)
	var done func(error)
	var wait time.Duration
	if b.shared != nil {
		done, wait = b.allowShared(ctx, bs)
	} else {
		done, wait = b.allow(&bs.spec)
	}
	bs.flush(c.cfg.onBreaker) // a change made as the attempt was let through
	if done == nil {
		return nil, false, false, c.breakerOpen(ctx, wait)
	}
	c.started()
	finished := false
	defer func() {
		if !finished { // the attempt panicked
			done(errBreakerFailure)
			bs.flush(c.cfg.onBreaker)
		}
	}()
	failure, timedOut = attempt(c.numbered(ctx))
	finished = true
	done(c.outcome(ctx, failure, timedOut))
	bs.flush(c.cfg.onBreaker)
	return failure, timedOut, true, nil
}

// outcome is what the attempt that has just run means to the breaker.
func (c *call) outcome(ctx context.Context, failure error, timedOut bool) error {
	if v := c.verdict; v != nil || c.http.req != nil {
		c.verdict = nil
		return v
	}
	return c.cfg.breakerOutcome(ctx, failure, timedOut)
}

// breakerOpen waits for an open breaker to let a probe through when that
// fits the caller's deadline and MaxWait, and otherwise stops the call.
func (c *call) breakerOpen(ctx context.Context, wait time.Duration) error {
	bs := c.cfg.breakers
	if ctx.Err() != nil { // the caller's deadline ended while the breaker was consulted
		return c.canceled(ctx)
	}
	c.breakerWait += wait
	if bs.spec.MaxWait < 0 || c.breakerWait > bs.spec.MaxWait || wait > c.left(ctx, c.cfg.now()) {
		bs.denied.Add(1)
		return c.refuse(ctx, ReasonBreakerOpen, typeBreakerOpen, &breakerError{wait: wait})
	}
	bs.waits.Add(1)
	return c.sleep(ctx, wait)
}

// started counts the attempt about to run.
func (c *call) started() {
	if cfg := c.cfg; c.attempt == 0 && cfg.keyBudgets == nil && cfg.sharedBudget == nil {
		c.attempt = 1
		cfg.state.calls.Add(1) // the common case, kept small enough to inline
		return
	}
	c.count()
}

// count is started's work for a retry, or for a call whose budget counts
// first attempts per key or outside the Retrier.
func (c *call) count() {
	c.attempt++
	cfg := c.cfg
	if c.attempt > 1 {
		cfg.state.retryAttempts.Add(1)
		return
	}
	cfg.state.calls.Add(1)
	if cfg.keyBudgets != nil {
		c.budget(cfg.now()).calls.Add(1)
	}
	if sb := cfg.sharedBudget; sb != nil {
		sb.First(c.key)
	}
}

// attemptKey is the context key of the attempt number.
type attemptKey struct{}

// AttemptFrom returns the number of the attempt whose context is ctx: 1 for
// the first attempt of a call, 2 for the first retry, and so on; 1 for a
// context that carries no attempt number. The first attempt runs with the
// caller's own context.
func AttemptFrom(ctx context.Context) int {
	if n, ok := ctx.Value(attemptKey{}).(int); ok {
		return n
	}
	return 1
}

// numbered returns ctx carrying the current attempt number, or ctx itself
// for the first attempt of a call whose context carries none.
func (c *call) numbered(ctx context.Context) context.Context {
	if c.attempt == 1 && ctx.Value(attemptKey{}) == nil {
		return ctx // the first attempt runs with the caller's own context
	}
	if c.attempt == 1 {
		c.nested = true
	}
	return context.WithValue(ctx, attemptKey{}, c.attempt)
}

// timed runs f with a per-attempt timeout of d > 0, and reports whether
// that timeout, not the caller's context, cut it off. A failure returned
// once the attempt's own deadline has passed counts as cut off even before
// the context's timer fires: a dependency that was given the deadline (gRPC
// sends it along) may give up first.
func timed(ctx context.Context, d time.Duration, f func(context.Context) error) (error, bool) {
	actx, cancel := context.WithTimeout(ctx, d)
	defer cancel() // also when f panics
	err := f(actx)
	if err == nil || ctx.Err() != nil {
		return err, false
	}
	adl, _ := actx.Deadline()
	if dl, ok := ctx.Deadline(); ok && !dl.After(adl) {
		return err, false // the caller's deadline, not the attempt's
	}
	return err, actx.Err() != nil || !time.Now().Before(adl)
}

// fail handles a failed attempt: classify, decide, take a budget token,
// report. It returns the wait before the next attempt, or the error that
// ends the call.
func (c *call) fail(ctx context.Context, err error, timedOut bool) (time.Duration, error) {
	cfg := c.cfg
	cfg.state.failed.Add(1)
	c.last = err
	o := attemptOutcome(ctx, err, timedOut)
	c.lastTyp = o.typ
	var now time.Time
	if c.clocked(ctx) {
		now = cfg.now()
		if c.first.IsZero() {
			c.first = now
		}
	}
	f := failure{err: err, class: o, attempt: c.attempt, done: ctx.Err() != nil, prev: c.prev, left: maxDuration}
	if !f.done {
		f.draw = cfg.random()
		if !now.IsZero() {
			f.left = c.left(ctx, now)
		}
	}
	dec, sampled := decide(cfg, f)
	if !dec.Retry {
		return 0, c.terminal(ctx, o, dec.Reason, now, true)
	}
	d := dec.Delay
	if sampled {
		c.prev = d
	}
	if cfg.breakers != nil || cfg.limiter != nil {
		var reason Reason
		if d, reason = c.admitNext(ctx, d, now); reason != reasonNone {
			if reason == ReasonCanceled {
				return 0, c.canceled(ctx)
			}
			o.typ = typeBreakerOpen
			if reason == ReasonRateLimited {
				o.typ = typeRateLimited
			}
			return 0, c.terminal(ctx, o, reason, now, true)
		}
	}
	if cfg.budgeted && !c.allowRetry(ctx, now) {
		o.typ = typeBudgetExhausted
		return 0, c.terminal(ctx, o, ReasonBudget, now, true)
	}
	cfg.state.retried.Add(1)
	if cfg.hooks() {
		ev := c.event(o, now)
		ev.Delay = d
		cfg.fire(cfg.onFailure, ev)
		cfg.fire(cfg.onRetry, ev)
	}
	return d, nil
}

// admitNext decides, before the outcome in hand is given up (for the
// Transport, before the response is drained), whether the next attempt may
// run after the wait d: an open breaker whose open time outlasts d must
// fit MaxWait and the deadline, and the rate limiter's token for the next
// attempt is taken now. It returns the wait before the next attempt, at
// least d, or the reason that stops the call.
func (c *call) admitNext(ctx context.Context, d time.Duration, now time.Time) (time.Duration, Reason) {
	cfg := c.cfg
	if bs := cfg.breakers; bs != nil {
		if now.IsZero() {
			now = cfg.now()
		}
		if left := bs.get(c.key, now).openFor(&bs.spec); left > d {
			c.breakerWait += left - d
			if bs.spec.MaxWait < 0 || c.breakerWait > bs.spec.MaxWait || left > c.left(ctx, now) {
				bs.denied.Add(1)
				return 0, ReasonBreakerOpen
			}
			bs.waits.Add(1)
			d = left
		}
	}
	if l := cfg.limiter; l != nil {
		mono := cfg.mono()
		w, cancel, ok := l.l.Reserve(ctx, c.key, mono, c.room(ctx, mono))
		if !ok {
			if ctx.Err() != nil {
				return 0, ReasonCanceled
			}
			l.denied.Add(1)
			return 0, ReasonRateLimited
		}
		c.tokened, c.untoken = true, cancel
		if w > d {
			l.waits.Add(1)
			d = w
		}
	}
	return d, reasonNone
}

// clocked says whether a failure must read the clock: for events and
// records, MaxElapsed, the caller's deadline or the retry budget.
// Otherwise the failure path reads no clock at all.
func (c *call) clocked(ctx context.Context) bool {
	if c.cfg.clockAlways {
		return true
	}
	_, ok := c.deadline(ctx)
	return ok
}

// left returns the longest wait from now that ends before the caller's
// deadline and within MaxElapsed of the call's start; it may be negative.
func (c *call) left(ctx context.Context, now time.Time) time.Duration {
	dl, ok := c.deadline(ctx)
	var elapsed time.Duration
	if c.cfg.maxElapsed > 0 {
		elapsed = now.Sub(c.start)
	}
	return waitRoom(now, dl, ok, c.cfg.maxElapsed, elapsed)
}

// waitRoom returns the longest wait from now that ends before the deadline
// dl, when there is one, and within maxElapsed (when positive) of a call
// that has run for elapsed; it may be negative.
func waitRoom(now, dl time.Time, hasDL bool, maxElapsed, elapsed time.Duration) time.Duration {
	left := maxDuration
	if maxElapsed > 0 {
		left = maxElapsed - elapsed
	}
	if hasDL {
		left = min(left, maxDuration/2-1, dl.Sub(now)-1)
	}
	return left
}

// deadline returns ctx's deadline, looked up once per call: a context's
// deadline never changes.
func (c *call) deadline(ctx context.Context) (time.Time, bool) {
	if c.dlKnown == 0 {
		var ok bool
		c.dl, ok = ctx.Deadline()
		c.dlKnown = 1
		if ok {
			c.dlKnown = 2
		}
	}
	return c.dl, c.dlKnown == 2
}

// sleep waits d with the call's reusable timer; a zero delay takes no timer.
// The caller's context interrupts the wait.
func (c *call) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	if clk := c.cfg.clock; clk != nil {
		if clk.Sleep(ctx, d) != nil {
			return c.canceled(ctx)
		}
		return nil
	}
	if c.timer == nil {
		c.timer = time.NewTimer(d)
	} else {
		c.timer.Reset(d)
	}
	select {
	case <-c.timer.C:
		return nil
	case <-ctx.Done():
		c.timer.Stop()
		return c.canceled(ctx)
	}
}

// budget returns the retry budget of the call: the Retrier's, its key's,
// or nil when the budget is off.
func (c *call) budget(now time.Time) *budget {
	if kb := c.cfg.keyBudgets; kb != nil {
		return kb.get(c.key, now, c.cfg.newKeyBudget)
	}
	return c.cfg.budget
}

// end releases what the call holds: its timer, and a rate-limit token
// taken for an attempt that never ran.
func (c *call) end() {
	if c.timer != nil || c.untoken != nil {
		c.release()
	}
}

// release stops the call's timer and gives back a token taken for an
// attempt that never ran.
func (c *call) release() {
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.untoken != nil {
		c.untoken(c.cfg.mono())
		c.untoken = nil
	}
}
