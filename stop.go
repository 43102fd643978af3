package retry

import (
	"context"
	"errors"
	"time"
)

// refused ends the call a gate refused (see refusal), or returns nil when
// no gate did.
func (c *call) refused(ctx context.Context, drv *driver, no *refusal) error {
	switch {
	case no == nil:
		return nil
	case no.reason == ReasonCanceled:
		return c.canceled(ctx, drv)
	}
	return c.refuse(ctx, drv, no.reason, no.typ, no.err)
}

// newError returns the error of a call that stops for reason. A call stopped
// by the caller's context keeps the context's error and its cause, so that
// errors.Is matches both; a call stopped because its next wait could not fit
// the deadline or MaxElapsed (ReasonDeadline) matches
// context.DeadlineExceeded, and one stopped because a server's delay was
// over MaxServerDelay does not.
func (c *call) newError(ctx context.Context, reason Reason) *Error {
	e := &Error{Attempts: c.attempt, Reason: reason, Err: c.last, gate: c.refusal}
	switch reason {
	case ReasonCanceled:
		cerr, cause := ctx.Err(), context.Cause(ctx)
		if e.Err == nil {
			e.Err, cause = cause, nil
		}
		if cause != nil && !errors.Is(e.Err, cause) { // an Err that carries it says it already
			e.cause = cause
		}
		if cerr != nil && cerr != e.Err && cerr != e.cause {
			e.ctxErr = cerr
		}
	case ReasonDeadline:
		if !c.serverDelay {
			e.ctxErr = context.DeadlineExceeded
		}
	}
	return e
}

// terminal ends the call with reason: counters, events and dead-letter
// routing. failed says the call's last attempt has just failed, so that
// OnFailure reports it. The record goes to the sink before any hook runs,
// so that a panicking hook cannot lose it.
func (c *call) terminal(ctx context.Context, drv *driver, o outcome, reason Reason, now time.Time, failed bool) error {
	cfg := c.cfg
	route := routed(reason, &cfg.policy)
	cfg.state.failedPermanently.Add(1)
	switch reason {
	case ReasonBudget:
		if now.IsZero() {
			now = cfg.now()
		}
		var bal float64
		if bs := cfg.budget; bs != nil {
			bal, _ = bs.balance(c.key, now)
			bs.deny(budgetDenial{key: c.eventKey(), typ: c.lastTyp, balance: bal})
		}
		c.denied(reason, c.lastTyp, now, bal)
	case ReasonBreakerOpen, ReasonRateLimited, ReasonThrottled:
		if now.IsZero() {
			now = cfg.now()
		}
		c.denied(reason, o.typ, now, 0)
	}
	e := c.newError(ctx, reason)
	switch {
	case reason == ReasonBudget, reason == ReasonBreakerOpen, reason == ReasonRateLimited, reason == ReasonThrottled:
		e.typ = o.typ
	case o.typ == TypeAttemptTimeout, o.typ == typeTimeout:
		// Err wraps context.DeadlineExceeded: without this, TypeOf would
		// report the caller's own deadline as the cause.
		e.typ = o.typ
	}
	if !route && (!failed || len(cfg.hooks.failure) == 0) && len(cfg.hooks.giveUp) == 0 {
		return e
	}
	if now.IsZero() { // the failure path did not need the clock
		now = cfg.now()
	}
	ev := c.event(drv, o, now)
	ev.Reason = reason
	if reason == ReasonBudget {
		ev.Type = c.lastTyp // the failure's, not the budget's (see Event.Type)
	}
	if route {
		if ev.Payload == nil && drv != nil && drv.record != nil {
			ev.Payload = drv.record()
		}
		e.sink = c.deadLetter(ctx, ev)
	}
	if failed {
		fire(cfg.hooks.failure, ev)
	}
	if route {
		c.alert(ev)
	}
	fire(cfg.hooks.giveUp, ev)
	return e
}

// refuse stops the call before an attempt: the breaker, the rate limiter or
// the budget said no. The error keeps the last attempt's error, if any, and
// is typed by what refused.
//
// A refusal is not a failed attempt: it fires no OnFailure. Before any
// attempt ran it is only the returned error (counted in Stats as a breaker
// or limiter denial); after one, it ends the call like exhaustion, routed by
// the policy's on_exhaustion with the last failure.
func (c *call) refuse(ctx context.Context, drv *driver, reason Reason, typ string, err error) error {
	if c.attempt == 0 {
		c.cfg.state.unstarted.Add(1)
		c.denied(reason, typ, c.cfg.now(), 0)
		e := &Error{Reason: reason, Err: err, typ: typ}
		c.gaveUp(drv, e, typ)
		return e
	}
	o := inspect(c.last)
	o.typ, c.refusal = typ, err
	return c.terminal(ctx, drv, o, reason, c.cfg.now(), false)
}

// canceled ends the call because the caller's context is done.
func (c *call) canceled(ctx context.Context, drv *driver) error {
	if c.attempt > 0 {
		c.cfg.state.failedPermanently.Add(1)
	} else {
		c.cfg.state.unstarted.Add(1)
	}
	e := c.newError(ctx, ReasonCanceled)
	if c.lastTyp == TypeAttemptTimeout {
		e.typ = c.lastTyp // see terminal
	}
	c.gaveUp(drv, e, "")
	return e
}

// gaveUp fires OnGiveUp for a call that stops with e outside terminal: a
// refusal before any attempt, or the caller's context ending between
// attempts. typ overrides the type of the error.
func (c *call) gaveUp(drv *driver, e *Error, typ string) {
	hooks := c.cfg.hooks.giveUp
	if len(hooks) == 0 {
		return
	}
	var ev Event
	if c.last != nil {
		o := inspect(c.last)
		if c.lastTyp != "" {
			o.typ = c.lastTyp
		}
		ev = c.event(drv, o, c.cfg.now())
	} else {
		method, url := drv.describeOr()
		ev = Event{Err: e.Err, Key: c.key, Method: method, URL: url, Time: c.cfg.now()}
		if ev.Key == "" {
			ev.Key = c.cfg.key
		}
		if e.Err != nil {
			ev.Message = c.cfg.sanitize(e.Err.Error())
			ev.Type = TypeOf(e.Err)
		}
	}
	if typ != "" {
		ev.Type = typ
	}
	ev.Reason = e.Reason
	fire(hooks, ev)
}
