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
// real engine through hours of backoff in milliseconds (cmd/retry sim does).
// Some times stay real whatever the Clock: the per-attempt timeout, the
// dead-letter sink's timeout, and the syncs of a breaker shared through a
// BreakerStore.
//
// A Clock must be safe for concurrent use when the Retrier is shared.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Sleep waits d, or until ctx is done; it returns a non-nil error only
	// in the latter case.
	Sleep(ctx context.Context, d time.Duration) error
}

// WithClock sets the Retrier's clock; nil means the real clock.
func WithClock(clock Clock) Option {
	return optionFunc(func(cfg *config) {
		if clock != nil && isNil(clock) {
			cfg.invalid("WithClock", "clock", "nil", typedNil(clock))
			return
		}
		cfg.clock = clock
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
