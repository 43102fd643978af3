package retry

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// errNeither is HTTPFailure's failure when it is given neither a response
// nor an error.
var errNeither = errors.New("retry: HTTPFailure: neither a response nor an error")

// Decide returns the decision r's engine takes when attempt (1 for the
// first) has failed with err, for retry loops that are not driven by this
// package, such as another HTTP client's. It is the decision core of Do and
// the Transport: the context, verdicts, Permanent, non-retryable types, the
// attempt limit, the Decider, and the wait (the Decider's, the server's, or
// the policy's with jitter), which must fit the context's deadline,
// MaxServerDelay and MaxElapsed counted from now. prev is the wait that came
// before the failed attempt (zero after the first), for decorrelated jitter.
//
// Decide changes nothing: it fires no hook, counts nothing, and neither
// consults nor charges the retry budget, the circuit breaker or the rate
// limiter. A nil err is a success (Retry false, zero Reason); an invalid
// configuration stops with ReasonFailed; a nil ctx is context.Background().
func (r *Retrier) Decide(ctx context.Context, attempt int, prev time.Duration, err error) Decision {
	cfg := r.config()
	if err == nil {
		return Decision{}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	o := attemptOutcome(ctx, err, false)
	if cfg.err != nil {
		return Decision{Reason: ReasonFailed, Type: o.typ}
	}
	dl, hasDL := ctx.Deadline()
	d, _ := decide(cfg, failure{
		err:     err,
		class:   o,
		attempt: max(attempt, 1),
		done:    ctx.Err() != nil,
		draw:    cfg.random(),
		prev:    prev,
		left:    waitRoom(cfg.now(), dl, hasDL, cfg.maxElapsed, 0),
	})
	return d
}

// HTTPFailure returns the failure r's Transport decides on after one attempt
// of req that returned resp and err, for HTTP clients that run their own
// retry loop:
//
//   - nil when resp is final: a success, or a status that is not retried
//     (the Transport returns such a response at once);
//   - for a retryable status (408, 425, 429, 5xx but 501 and 505), a
//     *StatusError carrying the response's Retry-After;
//   - err otherwise.
//
// When req is not safe to repeat (see Transport; HTTP.AllMethods among r's
// options makes every request safe), the failure is marked Permanent
// unless its type proves the request was never sent. A nil req skips that
// rule. Decide then gives the decision.
func (r *Retrier) HTTPFailure(req *http.Request, resp *http.Response, err error) error {
	failure := err
	switch {
	case err != nil:
	case resp == nil:
		failure = errNeither
	default:
		if failure = r.config().statusFailure(resp); failure == nil {
			return nil
		}
	}
	if req != nil && !mayRepeat(r.config().http.AllMethods || idempotent(req), failure) {
		return Permanent(failure)
	}
	return failure
}
