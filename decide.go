package retry

import (
	"time"
)

// Decision is what the engine decides after a failed attempt: retry after
// Delay, or stop for Reason. Type is the failure's type (TypeOf, or the
// type the engine gives it: timeout.attempt, timeout.deadline_exceeded).
// The zero Decision is the one for a success: no retry, no reason. It is a
// plain value.
type Decision struct {
	Retry  bool
	Delay  time.Duration
	Reason Reason
	Type   string
}

// failure is what the decision core knows of one failed attempt: no clock,
// no context, no state, so that the same facts always give the same
// decision.
type failure struct {
	err     error         // the attempt's error, for the Decider
	class   outcome       // its classification
	attempt int           // attempts run so far, 1 after the first
	inbound bool          // the request being served is a retry: retry at one layer
	done    bool          // the caller's context has ended
	draw    float64       // the random draw in [0, 1) for jitter
	prev    time.Duration // the previous sampled wait, for decorrelated jitter
	left    time.Duration // the longest wait that fits the deadline and MaxElapsed
}

// decide is the decision core of every call after a failure, a pure
// function of the configuration and the failure. The first answer wins:
//
//  1. the caller's context ended: stop (canceled);
//  2. an explicit verdict: Discard, DeadLetter and Fail stop; Retryable
//     overrides Permanent and the built-in classification, not the
//     policy's non_retryable_errors;
//  3. Permanent: stop (non_retryable);
//  4. a type the policy or the built-in rules call non-retryable: stop;
//  5. the attempts are used up: stop (exhausted);
//  6. the request being served is itself a retry (WithInboundAttempt):
//     stop (inbound_retry);
//  7. the Decider vetoes: stop (non_retryable);
//  8. the wait: the Decider's, else the server's hint (a minimum, spread
//     upward by at most 10% and one second when the policy has jitter),
//     else the policy's backoff; a hint over MaxServerDelay, or a wait
//     longer than f.left, stops (deadline).
//
// sampled says the wait is the policy's backoff, which the next
// decorrelated draw starts from; so says the server that a stop for
// ReasonDeadline came from a server's delay over MaxServerDelay, not from
// the deadline or MaxElapsed. The retry budget is the loop's: it is state,
// not a rule.
func decide(cfg *config, f failure) (d Decision, how decided) {
	d.Type = f.class.typ
	stop := func(r Reason) (Decision, decided) { d.Reason = r; return d, how }
	o := f.class
	if f.done {
		return stop(ReasonCanceled)
	}
	if r := cfg.stops(o); r != reasonNone {
		return stop(r)
	}
	if f.attempt >= cfg.policy.MaxAttempts {
		return stop(ReasonExhausted)
	}
	if f.inbound {
		return stop(ReasonInboundRetry)
	}
	if cfg.decider != nil && !cfg.decider.ShouldRetry(f.attempt, f.err) {
		return stop(ReasonNonRetryable)
	}
	var wait time.Duration
	if cfg.decider != nil {
		wait = max(cfg.decider.Delay(f.attempt), 0)
	}
	switch {
	case wait > 0:
	case o.hint > 0:
		if o.hint > cfg.maxServerDelay {
			how.server = true
			return stop(ReasonDeadline)
		}
		wait = o.hint
		if cfg.policy.Jitter.Kind != JitterNone {
			spread := time.Duration(float64(min(wait/10, time.Second)) * unit(f.draw))
			wait = min(wait, maxDuration-spread) + spread // saturate, never wrap
		}
	default:
		wait = cfg.policy.sample(f.attempt, f.prev, unit(f.draw))
		how.sampled = true
	}
	if wait > f.left {
		return stop(ReasonDeadline)
	}
	d.Retry, d.Delay = true, wait
	return d, how
}

// decided is what decide tells its caller beside the Decision.
type decided struct {
	sampled bool // the wait is the policy's backoff
	server  bool // the stop is for a server's delay over MaxServerDelay
}

// stops returns the reason a failure classified as o stops its call
// whatever attempts and time are left (rules 2 to 4 of decide), or
// reasonNone when it may be retried. A hedged turn ends at once on such a
// failure, as gRFC A6 ends a hedged call on a fatal status.
func (cfg *config) stops(o outcome) Reason {
	switch o.verdict {
	case verdictDiscard:
		return ReasonDiscarded
	case verdictDeadLetter:
		return ReasonDeadLettered
	case verdictFail:
		return ReasonFailed
	}
	transient := o.verdict == verdictRetry
	if cfg.listed(o.typ) || !transient && (o.permanent || cfg.nonRetryable(o.typ)) {
		return ReasonNonRetryable
	}
	return reasonNone
}

// routed reports whether a call that stops for reason sends its failure to
// the dead-letter sink: always for the DeadLetter verdict, never for
// Discard, Fail or the caller's cancellation, and otherwise as the policy's
// on_exhaustion says.
func routed(reason Reason, p *Policy) bool {
	switch reason {
	case ReasonDeadLettered:
		return true
	case ReasonDiscarded, ReasonFailed, ReasonCanceled:
		return false
	}
	return p.OnExhaustion == ExhaustDeadLetter
}

// unit clamps a random draw into [0, 1).
func unit(u float64) float64 {
	if !(u >= 0) {
		return 0
	}
	if u >= 1 {
		return 0.9999999999999999
	}
	return u
}

// maxDuration is the longest time.Duration.
const maxDuration = time.Duration(1<<63 - 1)
