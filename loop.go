package retry

import (
	"context"
	"time"
)

// attemptFunc runs one attempt with the attempt's context and reports
// whether the attempt's own timeout cut it off, and its failure (nil for a
// success). Do, Run and Attempts supply a function of theirs; the Transport and
// Hedged supply theirs with a driver.
type attemptFunc func(ctx context.Context) (timedOut bool, failure error)

// driver is what a driver other than a plain function (the Transport, a
// hedged call) tells the loop; any func may be nil. It is a struct of
// funcs, not an interface, so that a driver kept on its caller's stack
// stays there.
type driver struct {
	// verdict returns what the attempt that has just run means to the
	// gates (see pass.learn), in place of the rule for errors.
	verdict func() error
	// cause returns that attempt's own error, when it is not the one the
	// loop was given (a hedged turn returns its winner's).
	cause func() error
	// giveUp gives up the outcome in hand once a retry is admitted: the
	// Transport drains and closes the response.
	giveUp func()
	// describe returns the method and URL of events and records.
	describe func() (method, url string)
	// record returns the payload of a dead-letter record.
	record func() any
}

// call is the state of one logical call across its attempts.
type call struct {
	cfg     *config
	key     string        // the dependency's key: gates, events
	attempt int           // attempts run so far
	start   time.Time     // start of the call, read only when MaxElapsed is set
	first   time.Time     // time of the first failure
	prev    time.Duration // previous sampled wait, for decorrelated jitter
	last    error         // the last attempt's error
	lastTyp string        // its type, as the engine classified it
	charged float64       // the retry-budget tokens its retries took
	refusal error         // the error of the gate that stopped the call, if one did
	halt    bool          // the attempt asked the loop to stop: Attempts' body broke out
	// uncounted says the first attempt (or hedged turn) is running: the
	// call counts in Stats when it ends, in won or fail as it returns, in
	// release if it panics.
	uncounted bool
	// serverDelay says the call stopped for a server's delay over
	// MaxServerDelay, which is not the deadline's doing.
	serverDelay bool
}

// run is the one attempt loop that Do, Run, Attempts, Hedged and the
// Transport drive. Each turn: the gates (for a retry, already passed as
// it was decided), the wait, the attempt and its outcome; after a failure
// the decision, then the gates of the retry. It returns nil on success and
// otherwise the error that ends the call.
//
// drv is nil for Do, Run and Attempts. It, the next attempt's way through
// the gates (p) and the call's one reusable timer are kept apart from the
// call and passed down: escape analysis does not tell a struct's fields
// apart, so anything the call points to would go to the heap with what
// the gates are told or a stopped timer, and with it whatever a driver
// keeps on its caller's stack.
func (c *call) run(ctx context.Context, drv *driver, attempt attemptFunc) error {
	p := pass{ask: ask{cfg: c.cfg, kind: kindFirst, key: c.key}}
	var timer *time.Timer
	defer c.release(&p, &timer)
	for {
		// The caller's context, then the gates of a first attempt.
		if p.kind == kindFirst && (ctx.Err() != nil || c.cfg.maxElapsed > 0 || c.cfg.admits(kindFirst)) {
			if err := c.admitFirst(ctx, drv, &p); err != nil {
				return err
			}
		}
		// The wait: the policy's, or what the gates asked for.
		if p.wait > 0 {
			if err := c.sleep(ctx, drv, &timer, p.wait); err != nil {
				return err
			}
		}
		// The gates let the attempt run now; an open breaker is waited
		// for without consuming an attempt. (The gates are asked here
		// first, and enter is called only to wait or refuse: a call of
		// its own on every gated attempt cost 1 to 3 ns.)
		if c.cfg.enters(p.kind) {
			p.start = c.start
			if i, wait, no := c.cfg.enter(ctx, &p, 0); no != nil || wait > 0 {
				if err := c.enter(ctx, drv, &p, &timer, i, wait, no); err != nil {
					return err
				}
			}
		}
		timedOut, failure := c.try(ctx, drv, &p, attempt)
		if failure == nil || c.halt {
			c.won() // a success earns retries
			return nil
		}
		// The decision, the gates of the retry, the events.
		if err := c.fail(ctx, drv, &p, failure, timedOut); err != nil {
			return err
		}
	}
}

// won counts the call's success, for the retry budget and for Stats: a
// success with no failure before, on a Retrier whose budget's count Stats
// reads too (state.wins), makes the success path's one atomic add (to the
// goroutine's stripe). A success after a failure, whose call Stats counted
// at the failure, is told apart; a call that retried gives back the tokens
// its retries took.
func (c *call) won() {
	cfg := c.cfg
	if c.last != nil {
		cfg.state.wonFailed.Add(1)
	}
	if !cfg.winsInStats {
		cfg.state.won.add()
	}
	if w := cfg.wins; w != nil && c.charged == 0 {
		w.add()
	} else if bs := cfg.budget; bs != nil {
		bs.won(cfg, c.key, c.charged)
	}
}

// admitFirst checks the caller's context and passes the first attempt
// through the gates; run calls it only when one of them has work.
func (c *call) admitFirst(ctx context.Context, drv *driver, p *pass) error {
	if ctx.Err() != nil {
		return c.canceled(ctx, drv)
	}
	if c.cfg.maxElapsed > 0 {
		c.start = c.cfg.now() // MaxElapsed counts the waits before the first attempt too
	}
	if !c.cfg.admits(kindFirst) {
		return nil
	}
	p.start = c.start
	return c.refused(ctx, drv, c.cfg.admit(ctx, p))
}

// enter waits as the gates that the attempt of p enters asked (wait, for
// the i-th of them) and asks them again from there after each wait, until
// every one has let it run, or ends the call on a refusal (no).
func (c *call) enter(ctx context.Context, drv *driver, p *pass, timer **time.Timer, i int, wait time.Duration, no *refusal) error {
	for no == nil && wait > 0 {
		if err := c.sleep(ctx, drv, timer, wait); err != nil {
			p.notRun(c.cfg)
			return err
		}
		i, wait, no = c.cfg.enter(ctx, p, i)
	}
	if no != nil {
		return c.refused(ctx, drv, no)
	}
	return nil
}

// try runs one attempt and reports its outcome to the gates. A panic in
// the attempt goes on, and release reports it to them as a failure.
func (c *call) try(ctx context.Context, drv *driver, p *pass, attempt attemptFunc) (timedOut bool, failure error) {
	p.spend()
	c.started()
	timedOut, failure = attempt(c.numbered(ctx))
	switch {
	case p.heard == 0: // no gate asked for the outcome
	case drv == nil && failure == nil:
		p.learn(nil, nil) // a success of Do's fn
	default:
		c.learn(ctx, drv, p, failure, timedOut)
	}
	c.uncounted = false // it returned: won or fail counts it
	return timedOut, failure
}

// learn tells the gates what the attempt that has just run means to them
// (see pass.learn), and its own error.
func (c *call) learn(ctx context.Context, drv *driver, p *pass, failure error, timedOut bool) {
	outcome, cause := error(nil), failure
	if drv != nil && drv.cause != nil {
		cause = drv.cause()
	}
	switch {
	case drv != nil && drv.verdict != nil:
		outcome = drv.verdict()
	case failure != nil:
		outcome = c.cfg.breakerOutcome(ctx, failure, timedOut)
	}
	p.learn(outcome, cause)
}

// started counts the attempt about to run: a retry or a hedge now, the
// first attempt when it ends (won, fail or, for a panic, release).
func (c *call) started() {
	c.attempt++
	if c.attempt == 1 {
		c.uncounted = true
		return
	}
	c.cfg.state.retryAttempts.Add(1)
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
	return withAttempt(ctx, c.attempt)
}

// withAttempt returns ctx carrying attempt number n, or ctx itself for a
// first attempt whose context carries no number. A call inside an attempt
// of another (a Transport inside Do's fn) numbers its own attempts, and
// keeps the higher number the enclosing attempts send on the wire (see
// OutboundAttempt) beside them, so that its requests are marked retries
// when the enclosing call is retrying.
func withAttempt(ctx context.Context, n int) context.Context {
	if n == 1 && ctx.Value(attemptKey{}) == nil {
		return ctx
	}
	outer := max(AttemptFrom(ctx), enclosing(ctx))
	ctx = context.WithValue(ctx, attemptKey{}, n)
	if outer > n {
		ctx = context.WithValue(ctx, enclosingKey{}, outer)
	}
	return ctx
}

// enclosingKey is the context key of the highest attempt number of the
// calls that enclose the call whose attempt the context is.
type enclosingKey struct{}

// enclosing returns the highest attempt number of the calls enclosing
// the attempt whose context is ctx, 0 when there is none.
func enclosing(ctx context.Context) int {
	n, _ := ctx.Value(enclosingKey{}).(int)
	return n
}

// timed runs f with a per-attempt timeout of d > 0, and reports whether
// that timeout, not the caller's context, cut it off. A failure returned
// once the attempt's own deadline has passed counts as cut off even before
// the context's timer fires: a dependency that was given the deadline (gRPC
// sends it along) may give up first.
//
// On a Clock that runs the engine's timers (see Clock), the deadline and
// its timer are on that clock.
func timed(ctx context.Context, cfg *config, d time.Duration, f func(context.Context) error) (bool, error) {
	var actx context.Context
	var cancel context.CancelFunc
	if clk := cfg.timers; clk != nil {
		actx, cancel = withClockTimeout(ctx, clk, d)
	} else {
		actx, cancel = context.WithTimeout(ctx, d)
	}
	defer cancel() // also when f panics
	err := f(actx)
	if err == nil || ctx.Err() != nil {
		return false, err
	}
	adl, _ := actx.Deadline()
	if dl, ok := ctx.Deadline(); ok && !dl.After(adl) {
		return false, err // the caller's deadline, not the attempt's
	}
	if actx.Err() != nil {
		return true, err
	}
	if cfg.timers != nil {
		return !cfg.timers.Now().Before(adl), err
	}
	return !time.Now().Before(adl), err
}

// fail handles a failed attempt: classify, decide, pass the retry through
// the gates, report, and have the driver give up what it holds. It sets
// the wait before the next attempt, or returns the error that ends the
// call.
func (c *call) fail(ctx context.Context, drv *driver, p *pass, err error, timedOut bool) error {
	cfg := c.cfg
	if c.last == nil { // the call's first failure; before failed, so that Stats' Attempts is never below Failed
		cfg.state.failedCalls.Add(1)
	}
	cfg.state.failed.Add(1)
	c.last = err
	o := attemptOutcome(ctx, err, timedOut)
	c.lastTyp = o.typ
	var now time.Time
	if cfg.clockAlways || c.hasDeadline(ctx) {
		now = cfg.now()
		if c.first.IsZero() {
			c.first = now
		}
	}
	f := failure{err: err, class: o, attempt: c.attempt, done: ctx.Err() != nil, inbound: cfg.inboundRetry(ctx), prev: c.prev, left: maxDuration}
	if !f.done {
		f.draw = cfg.random()
		if !now.IsZero() {
			f.left = c.left(ctx, now)
		}
	}
	dec, how := decide(cfg, f)
	if !dec.Retry {
		c.serverDelay = how.server
		return c.terminal(ctx, drv, o, dec.Reason, now, true)
	}
	if how.sampled {
		c.prev = dec.Delay
	}
	*p = pass{ask: ask{cfg: cfg, kind: kindRetry, key: c.key, wait: dec.Delay, start: c.start, held: p.held, slow: slowFailure(o.typ)}}
	if cfg.admits(kindRetry) {
		if no := cfg.admit(ctx, p); no != nil {
			if no.reason == ReasonCanceled {
				return c.canceled(ctx, drv)
			}
			o.typ, c.refusal = no.typ, no.err
			return c.terminal(ctx, drv, o, no.reason, now, true)
		}
		if cfg.budget.charges() {
			c.charged++
		}
	}
	cfg.state.retried.Add(1)
	if h := &cfg.hooks; len(h.failure) > 0 || len(h.retry) > 0 {
		ev := c.event(drv, o, now)
		ev.Delay = p.wait
		fire(h.failure, ev)
		fire(h.retry, ev)
	}
	if drv != nil && drv.giveUp != nil {
		drv.giveUp()
	}
	return nil
}

// hasDeadline reports whether ctx has a deadline.
func (c *call) hasDeadline(ctx context.Context) bool {
	_, ok := ctx.Deadline()
	return ok
}

// left returns the longest wait from now that ends before the caller's
// deadline and within MaxElapsed of the call's start; it may be negative.
func (c *call) left(ctx context.Context, now time.Time) time.Duration {
	dl, ok := ctx.Deadline()
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

// sleep waits d with the call's reusable timer, made on first use; a zero
// delay takes no timer. The caller's context interrupts the wait.
func (c *call) sleep(ctx context.Context, drv *driver, timer **time.Timer, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	if clk := c.cfg.clock; clk != nil {
		if clk.Sleep(ctx, d) != nil {
			return c.canceled(ctx, drv)
		}
		return nil
	}
	t := *timer
	if t == nil {
		t = time.NewTimer(d)
		*timer = t
	} else {
		t.Reset(d)
	}
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		t.Stop()
		return c.canceled(ctx, drv)
	}
}

// release frees what the call holds, as it returns or panics: its timer,
// what gates took for an attempt that never ran, and the gates waiting
// for the outcome of an attempt that panicked, which learn it as a
// failure. A first attempt that panicked is counted in Stats here. (The
// check is as much as the inliner takes: run's defer calls it inlined.)
func (c *call) release(p *pass, timer **time.Timer) {
	if *timer != nil || p.undo != nil || p.heard > 0 || c.uncounted {
		c.releaseHeld(p, *timer)
	}
}

// releaseHeld is release for a call that holds something.
func (c *call) releaseHeld(p *pass, timer *time.Timer) {
	if c.uncounted {
		c.uncounted = false
		c.cfg.state.failedCalls.Add(1)
	}
	if timer != nil {
		timer.Stop()
	}
	if p.heard > 0 {
		p.learn(errBreakerFailure, errPanicked)
	}
	p.giveBack(c.cfg)
}
