package retry

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/steadyhq/retry/redact"
)

// Reason says why a call stopped; its value is its name.
type Reason string

// The reasons a call stops.
const (
	reasonNone         Reason = ""
	ReasonExhausted    Reason = "exhausted"     // the attempts were used up
	ReasonNonRetryable Reason = "non_retryable" // Permanent, a non-retryable type, or the Decider said no
	ReasonDiscarded    Reason = "discarded"     // the Discard verdict
	ReasonDeadLettered Reason = "dead_lettered" // the DeadLetter verdict
	ReasonFailed       Reason = "failed"        // the Fail verdict
	ReasonCanceled     Reason = "canceled"      // the caller's context ended
	ReasonDeadline     Reason = "deadline"      // the next wait could not fit the deadline, MaxElapsed or MaxServerDelay
	ReasonBudget       Reason = "budget"        // the retry budget had no token
	ReasonBreakerOpen  Reason = "breaker_open"  // the circuit breaker was open and its wait could not fit
	ReasonRateLimited  Reason = "rate_limited"  // the rate limiter's wait could not fit the deadline
)

// String returns the reason's name, such as "exhausted"; "" for the zero Reason.
func (r Reason) String() string { return string(r) }

// Error is the error of a call that did not succeed.
//
// Err is the last attempt's error (or the context's cause when no attempt
// ran). When the caller's context ended, Unwrap also yields the context's
// error and its cause, so that errors.Is(err, context.Canceled) or
// errors.Is(err, context.DeadlineExceeded) holds whether or not the context
// carries a cause (context.WithCancelCause, context.WithTimeoutCause), and
// the cause is reachable too. A call stopped because its next wait could
// not fit the deadline (ReasonDeadline) matches context.DeadlineExceeded.
// Unwrap yields the dead-letter sink's error when routing failed as well.
//
// TypeOf reports a call stopped by the breaker, the rate limiter or the
// retry budget as "breaker.open", "ratelimit.local" or "budget.exhausted",
// one whose last attempt ran out of its per-attempt timeout as
// "timeout.attempt" (Err is then that attempt's deadline error, not the
// caller's), and any other by the type of Err.
type Error struct {
	Attempts int    // attempts run
	Reason   Reason // why the call stopped
	Err      error  // the last attempt's error

	cause  error  // context cause, when distinct from Err
	ctxErr error  // the context's error, when distinct from Err and cause
	sink   error  // dead-letter routing failure
	typ    string // the type of a stop by the breaker, limiter or budget
}

// Error describes the stop, the attempts and the last error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("retry: ")
	b.WriteString(e.Reason.String())
	b.WriteString(" after ")
	b.WriteString(strconv.Itoa(e.Attempts))
	if e.Attempts == 1 {
		b.WriteString(" attempt")
	} else {
		b.WriteString(" attempts")
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if e.cause != nil {
		b.WriteString(" (")
		b.WriteString(e.cause.Error())
		b.WriteString(")")
	}
	if e.sink != nil {
		b.WriteString("; ")
		b.WriteString(e.sink.Error())
	}
	return b.String()
}

// Unwrap returns the last error, the context's cause and error, and the
// dead-letter sink's error, those that are set.
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, 4)
	for _, err := range [...]error{e.Err, e.cause, e.ctxErr, e.sink} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// newError returns the error of a call that stops for reason. A call stopped
// by the caller's context keeps the context's error and its cause, so that
// errors.Is matches both; a call stopped because its next wait could not fit
// (ReasonDeadline) matches context.DeadlineExceeded.
func (c *call) newError(ctx context.Context, reason Reason) *Error {
	e := &Error{Attempts: c.attempt, Reason: reason, Err: c.last}
	switch reason {
	case ReasonCanceled:
		cerr, cause := ctx.Err(), context.Cause(ctx)
		if e.Err == nil {
			e.Err, cause = cause, nil
		}
		if cause != nil && cause != e.Err {
			e.cause = cause
		}
		if cerr != nil && cerr != e.Err && cerr != e.cause {
			e.ctxErr = cerr
		}
	case ReasonDeadline:
		e.ctxErr = context.DeadlineExceeded
	}
	return e
}

// terminal ends the call with reason: counters, events and dead-letter
// routing. failed says the call's last attempt has just failed, so that
// OnFailure reports it. The record goes to the sink before any hook runs,
// so that a panicking hook cannot lose it.
func (c *call) terminal(ctx context.Context, o outcome, reason Reason, now time.Time, failed bool) error {
	cfg := c.cfg
	route := routed(reason, &cfg.policy)
	cfg.state.failedPermanently.Add(1)
	e := c.newError(ctx, reason)
	switch {
	case reason == ReasonBudget, reason == ReasonBreakerOpen, reason == ReasonRateLimited:
		e.typ = o.typ
	case o.typ == typeAttemptTimeout, o.typ == typeTimeout:
		// Err wraps context.DeadlineExceeded: without this, TypeOf would
		// report the caller's own deadline as the cause.
		e.typ = o.typ
	}
	if !route && (!failed || len(cfg.onFailure) == 0) && len(cfg.onGiveUp) == 0 {
		return e
	}
	if now.IsZero() { // the failure path did not need the clock
		now = cfg.now()
	}
	ev := c.event(o, now)
	ev.Reason = reason
	if route {
		if ev.Payload == nil && c.http.req != nil {
			ev.Payload = c.http.record()
		}
		e.sink = c.deadLetter(ctx, ev)
	}
	if failed {
		cfg.fire(cfg.onFailure, ev)
	}
	if route {
		c.alert(ev)
	}
	cfg.fire(cfg.onGiveUp, ev)
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
func (c *call) refuse(ctx context.Context, reason Reason, typ string, err error) error {
	if c.attempt == 0 {
		c.cfg.state.unstarted.Add(1)
		e := &Error{Reason: reason, Err: err, typ: typ}
		c.gaveUp(e, typ)
		return e
	}
	o := inspect(c.last)
	o.typ = typ
	return c.terminal(ctx, o, reason, c.cfg.now(), false)
}

// canceled ends the call because the caller's context is done.
func (c *call) canceled(ctx context.Context) error {
	if c.attempt > 0 {
		c.cfg.state.failedPermanently.Add(1)
	} else {
		c.cfg.state.unstarted.Add(1)
	}
	e := c.newError(ctx, ReasonCanceled)
	if c.lastTyp == typeAttemptTimeout {
		e.typ = c.lastTyp // see terminal
	}
	c.gaveUp(e, "")
	return e
}

// gaveUp fires OnGiveUp for a call that stops with e outside terminal: a
// refusal before any attempt, or the caller's context ending between
// attempts. typ overrides the type of the error.
func (c *call) gaveUp(e *Error, typ string) {
	hooks := c.cfg.onGiveUp
	if len(hooks) == 0 {
		return
	}
	if c.http.url == "" && c.http.req != nil {
		c.http.method, c.http.url = methodOf(c.http.req), redact.SanitizeURL(c.http.req.URL)
	}
	var ev Event
	if c.last != nil {
		o := inspect(c.last)
		if c.lastTyp != "" {
			o.typ = c.lastTyp
		}
		ev = c.event(o, c.cfg.now())
	} else {
		ev = Event{Err: e.Err, Key: c.key, Method: c.http.method, URL: c.http.url, Time: c.cfg.now()}
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
	c.cfg.fire(hooks, ev)
}
