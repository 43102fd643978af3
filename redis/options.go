package redis

import (
	"fmt"
	"time"
)

// Options are the settings the components of this package share. Zero
// fields take the defaults below.
//
// Every Redis round trip of the Limiter and the Budget is bounded by Timeout
// and by half of what is left of the caller's deadline, so that the
// fallback still has time; the Store's by Timeout and by the caller's
// deadline, but for releasing the lock (see Store). Give the client
// ContextTimeoutEnabled and DialerRetries: 1 (go-redis Options) so that a
// slow or stopped Redis is cut at those bounds rather than at the client's
// read timeout and dial retries.
type Options struct {
	// Prefix starts every key this package writes; default "retry:". Give
	// each dependency, or each service, its own prefix when their
	// breakers, limits or budgets must stay apart.
	Prefix string
	// Timeout bounds each Redis round trip; default 50 ms.
	Timeout time.Duration
	// LockTTL is how long the Store's lock lives if its holder vanishes;
	// default 10 s. A probe runs holding the lock, so LockTTL must exceed
	// the longest attempt (see retry.WithAttemptTimeout).
	LockTTL time.Duration
	// StateTTL is how long the Store keeps the state of a breaker nobody
	// uses; default 24 h. An expired state starts again closed.
	StateTTL time.Duration
}

// The defaults of Options.
const (
	DefaultPrefix   = "retry:"
	DefaultTimeout  = 50 * time.Millisecond
	DefaultLockTTL  = 10 * time.Second
	DefaultStateTTL = 24 * time.Hour
)

func (o Options) withDefaults(who string) (Options, error) {
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"Timeout", o.Timeout}, {"LockTTL", o.LockTTL}, {"StateTTL", o.StateTTL}} {
		if f.v < 0 {
			return o, fmt.Errorf("redis: %s: Options.%s = %v: must be >= 0", who, f.name, f.v)
		}
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.LockTTL == 0 {
		o.LockTTL = DefaultLockTTL
	}
	if o.StateTTL == 0 {
		o.StateTTL = DefaultStateTTL
	}
	return o, nil
}
