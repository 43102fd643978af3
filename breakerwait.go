package retry

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// holds are the waits for open breakers a breaker gate granted, and the
// calls it stopped, for Stats: the built-in breaker's, or gobreaker's.
type holds struct {
	waits  atomic.Int64 // times a call waited for an open breaker
	denied atomic.Int64 // calls stopped by an open breaker
}

// hold grants a wait for an open breaker, of which held is beyond the
// policy's, when the call's waits for open breakers stay within maxWait
// and the wait fits the time left; otherwise it refuses with no.
func (h *holds) hold(ctx context.Context, maxWait time.Duration, a *ask, wait, held time.Duration, no *breakerError) grant {
	if maxWait < 0 || a.held+held > maxWait || wait > a.room(ctx) {
		h.denied.Add(1)
		return grant{no: &refusal{reason: ReasonBreakerOpen, typ: typeBreakerOpen, err: no}}
	}
	h.waits.Add(1)
	return grant{wait: wait, held: held}
}

func newBreakers(b Breaker) *breakers {
	bs := &breakers{spec: b}
	if b.Store != nil {
		bs.fleet = newFleetSync(bs)
	}
	if b.PerKey {
		bs.keys = newKeyed[*breaker](maxKeys)
	} else {
		bs.single = bs.newBreaker("")
	}
	return bs
}

// refusalOf is the error of a refusal whose wait is wait, made half-open
// with its probes in flight when busy.
func refusalOf(wait time.Duration, busy bool) *breakerError {
	if busy {
		return &breakerError{wait: wait, cause: gobreaker.ErrTooManyRequests}
	}
	return &breakerError{wait: wait}
}

// refuse answers an attempt that a breaker did not let through: the call
// waits wait for it, without consuming an attempt, when that fits maxWait
// and the time left, and otherwise stops with no; a hedge, which starts
// now or not at all, is refused at once.
func (h *holds) refuse(ctx context.Context, a *ask, wait time.Duration, no *breakerError, maxWait time.Duration) grant {
	switch {
	case ctx.Err() != nil: // the caller's context ended while the breaker was consulted
		return grant{no: &refusal{reason: ReasonCanceled}}
	case a.kind == kindHedge:
		return grant{no: &refusal{reason: ReasonBreakerOpen, typ: typeBreakerOpen, err: no}}
	}
	return h.hold(ctx, maxWait, a, wait, wait, no)
}

// breakerError is the failure of a call stopped by a breaker: open, or
// half-open with its probes in flight (cause gobreaker.ErrTooManyRequests).
// It matches gobreaker.ErrOpenState whatever its cause, and its cause.
type breakerError struct {
	wait  time.Duration
	cause error // gobreaker.ErrTooManyRequests, or nil or gobreaker.ErrOpenState for an open breaker
}

func (e *breakerError) Error() string {
	if e.cause == gobreaker.ErrTooManyRequests {
		return "retry: circuit breaker is half-open, its probes in flight (too many requests)"
	}
	return "retry: circuit breaker is open for another " + e.wait.Round(time.Millisecond).String()
}

func (e *breakerError) ErrorType() string { return typeBreakerOpen }

// Is reports that every breaker refusal is gobreaker's ErrOpenState.
func (e *breakerError) Is(target error) bool { return target == gobreaker.ErrOpenState }

// Unwrap returns the refusal's cause: gobreaker.ErrTooManyRequests for a
// breaker half-open with its probes in flight, or gobreaker's own error
// for one of its breakers.
func (e *breakerError) Unwrap() error { return e.cause }
