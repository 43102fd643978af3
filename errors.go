package retry

import (
	"strconv"
	"strings"
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
	ReasonThrottled    Reason = "throttled"     // adaptive throttling or the concurrency limit shed the attempt
	ReasonInboundRetry Reason = "inbound_retry" // the request being served is itself a retry: retries happen at one layer (WithInboundAttempt)
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
// not fit the deadline or MaxElapsed (ReasonDeadline) matches
// context.DeadlineExceeded; one stopped, with the same Reason, because a
// server asked for a delay over MaxServerDelay does not.
// Unwrap yields the dead-letter sink's error when routing failed as well.
//
// A call that a gate stopped after attempts ran also unwraps to the gate's
// error, so that errors.Is(err, gobreaker.ErrOpenState) holds for every
// call a circuit breaker stopped, as for one stopped before any attempt,
// whose Err is the gate's error.
//
// TypeOf reports a call stopped by the breaker, the rate limiter or the
// retry budget as "breaker.open", "ratelimit.local" or "budget.exhausted",
// one whose last attempt ran out of its per-attempt timeout as
// TypeAttemptTimeout, "timeout.attempt" (Err is then that attempt's deadline error, not the
// caller's), and any other by the type of Err.
type Error struct {
	Attempts int    // attempts run
	Reason   Reason // why the call stopped
	Err      error  // the last attempt's error

	cause  error  // context cause, when distinct from Err
	ctxErr error  // the context's error, when distinct from Err and cause
	sink   error  // dead-letter routing failure
	gate   error  // the error of the gate that stopped the call after attempts
	typ    string // the type of a stop by the breaker, limiter or budget
}

// Error describes the stop, the attempts and the last error; a nil *Error
// says it is nil.
func (e *Error) Error() string {
	if e == nil {
		return "retry: nil *Error"
	}
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

// Unwrap returns the last error, the context's cause and error, the
// dead-letter sink's error and the error of the gate that stopped the
// call, those that are set.
func (e *Error) Unwrap() []error {
	if e == nil {
		return nil
	}
	errs := make([]error, 0, 4)
	for _, err := range [...]error{e.Err, e.cause, e.ctxErr, e.sink, e.gate} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
