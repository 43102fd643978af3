package retry

import (
	"context"
	"time"
)

// Clock is the time source of a Retrier: what it reads to fit waits into the
// caller's deadline and MaxElapsed, to slide the windows of the retry
// budget, the circuit breaker and adaptive throttling, to time the circuit
// breaker's open period, to measure the latencies of the concurrency limit
// and to reserve rate-limiter tokens, and how it waits between attempts.
//
// The default is the real clock. A virtual clock lets a simulator drive the
// real engine through hours of backoff in milliseconds (package
// github.com/steadyhq/retry/sim does).
//
// A Clock may also have the method
//
//	AfterFunc(d time.Duration, f func()) (stop func() bool)
//
// which calls f on a goroutine of its own once d has passed on the clock;
// stop keeps f from running and reports whether it did, as time.Timer's
// Stop does. With it, the engine's own timers run on the Clock too: the
// per-attempt timeout of Do, Run and Hedged (WithAttemptTimeout), whose
// context then has a deadline on the Clock and reports
// context.DeadlineExceeded, and the delays of hedges and the latencies
// their adaptive delay follows; hedges start through
// AfterFunc(0, ...), and a goroutine of a hedged call that waits for
// another (the caller for its hedges) sleeps on the Clock until the other
// cancels the context it sleeps on. Without it, those stay on the real
// clock, as do the Transport's per-attempt timeout, the dead-letter sink's
// timeout and the syncs of a breaker shared through a BreakerStore.
//
// A Clock must be safe for concurrent use when the Retrier is shared.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Sleep waits d, or until ctx is done; it returns a non-nil error only
	// in the latter case.
	Sleep(ctx context.Context, d time.Duration) error
}

// timerClock is a Clock that runs the engine's own timers (see Clock).
type timerClock interface {
	Clock
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// WithClock sets the Retrier's clock; nil means the real clock.
func WithClock(clock Clock) Option {
	return optionFunc(func(cfg *config) {
		if clock != nil && isNil(clock) {
			cfg.invalid("WithClock", "clock", "nil", typedNil(clock))
			return
		}
		cfg.clock = clock
		cfg.timers, _ = clock.(timerClock)
	})
}

// now reads the configured clock.
func (c *config) now() time.Time {
	if c.clock != nil {
		return c.clock.Now()
	}
	return time.Now()
}

// monoBase anchors mono: times derived from it carry a monotonic reading.
var monoBase = time.Now()

// mono reads the configured clock, or the monotonic clock alone, which costs
// half of time.Now: for the rate limiter, which reads it on the success
// path. Its wall time may drift from time.Now's after the wall clock is set,
// so events keep using now.
func (c *config) mono() time.Time {
	if c.clock != nil {
		return c.clock.Now()
	}
	return monoBase.Add(time.Since(monoBase))
}

// withClockTimeout is context.WithTimeout on a timerClock: the clock
// cancels the context d from now, with the cause
// context.DeadlineExceeded.
func withClockTimeout(ctx context.Context, clk timerClock, d time.Duration) (context.Context, context.CancelFunc) {
	dl := clk.Now().Add(d)
	if pdl, ok := ctx.Deadline(); ok && !pdl.After(dl) {
		return context.WithCancel(ctx) // the parent's deadline comes first
	}
	inner, cancel := context.WithCancelCause(ctx)
	stop := clk.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return &clockDeadline{Context: inner, deadline: dl}, func() {
		stop()
		cancel(context.Canceled)
	}
}

// clockDeadline is a context whose deadline is on a timerClock. It embeds
// the cancelable context the clock cancels, so that contexts derived from
// it are canceled with it at once (they report context.Canceled, with the
// cause context.DeadlineExceeded).
type clockDeadline struct {
	context.Context
	deadline time.Time
}

func (c *clockDeadline) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *clockDeadline) Err() error {
	err := c.Context.Err()
	if err != nil && context.Cause(c.Context) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return err
}
