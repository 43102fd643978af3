package retry

import "time"

// A verdict is a handler's explicit instruction attached to an error.
type verdict uint8

// verdictError carries a verdict; it is transparent to errors.Is, errors.As
// and TypeOf.
type verdictError struct {
	err error
	v   verdict
}

func (e *verdictError) Error() string { return e.err.Error() }

func (e *verdictError) Unwrap() error { return e.err }

func withVerdict(err error, v verdict) error {
	if err == nil {
		return nil
	}
	return &verdictError{err: err, v: v}
}

// Permanent marks err as not worth retrying, the @DoNotRetry of Go: the call
// stops at once and the error is routed by the policy's on_exhaustion (it
// reaches the dead-letter sink when that is "dead_letter"). An explicit
// verdict (Retryable, Discard, DeadLetter, Fail) in the same chain takes
// precedence. Permanent(nil) is nil.
func Permanent(err error) error { return withVerdict(err, verdictPermanent) }

// Retryable is the RETRY verdict: err is transient, so Permanent and the
// built-in classification (a 4xx, or another type non-retryable by default)
// are overridden. The policy's non_retryable_errors still stop the call, as
// the OJS RETRY verdict means "the normal policy applies", and so do the
// attempt limit, the Decider, the deadline and the retry budget.
// Retryable(nil) is nil.
func Retryable(err error) error { return withVerdict(err, verdictRetry) }

// Discard is the DISCARD verdict: stop now, no retry and no dead letter.
// Discard(nil) is nil.
func Discard(err error) error { return withVerdict(err, verdictDiscard) }

// DeadLetter is the DEAD_LETTER verdict: stop now and send the failure to the
// dead-letter sink whatever the policy's on_exhaustion. DeadLetter(nil) is nil.
func DeadLetter(err error) error { return withVerdict(err, verdictDeadLetter) }

// Fail is the FAIL verdict: a recognised permanent failure. Like Discard it
// stops now and never reaches the dead-letter sink; the call ends with reason
// "failed". Fail(nil) is nil.
func Fail(err error) error { return withVerdict(err, verdictFail) }

// afterError carries a server-directed delay.
type afterError struct {
	err error
	d   time.Duration
}

func (e *afterError) Error() string { return e.err.Error() }

func (e *afterError) Unwrap() error { return e.err }

// After attaches a server-directed delay to err, as an HTTP Retry-After does:
// the next attempt waits at least d (never shortened, spread upward by at most
// 10%, and at most one second, when the policy has jitter). A delay over the
// maximum server delay stops the call at once. After(nil, d) is nil.
func After(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &afterError{err: err, d: d}
}
