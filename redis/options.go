package redis

import (
	"fmt"
	"time"
)

// Options are the settings the components of this package share. Zero
// fields take the defaults below.
//
// Every Redis round trip is bounded by Timeout; those on a call's path (a
// Limiter's lease, a Budget's token, a Store's probe claim) also by half of
// what is left of the caller's deadline, so that the fallback still has
// time. Give the client
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
	// SyncInterval is how often a process with calls syncs each breaker
	// of a Store, and the term of a Limiter's leases; default 100 ms.
	SyncInterval time.Duration
	// StateTTL is how long the Store keeps the state of a breaker nobody
	// uses (at least twice its Window and OpenTimeout); default 24 h. An
	// expired state starts again closed.
	StateTTL time.Duration
}

// The defaults of Options.
const (
	DefaultPrefix       = "retry:"
	DefaultTimeout      = 50 * time.Millisecond
	DefaultSyncInterval = 100 * time.Millisecond
	DefaultStateTTL     = 24 * time.Hour
)

func (o Options) withDefaults(who string) (Options, error) {
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"Timeout", o.Timeout}, {"SyncInterval", o.SyncInterval}, {"StateTTL", o.StateTTL}} {
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
	if o.SyncInterval == 0 {
		o.SyncInterval = DefaultSyncInterval
	}
	if o.StateTTL == 0 {
		o.StateTTL = DefaultStateTTL
	}
	return o, nil
}
