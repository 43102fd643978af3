package redis

import (
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Options are the settings the components of this package share. Zero
// fields take the defaults below.
//
// Every Redis round trip is bounded by Timeout, whatever the client's own
// settings: the component stops waiting at Timeout and goes on without
// Redis. Those on a call's path (a Limiter's lease, a Budget's token, a
// Store's probe claim) are also bounded by half of what is left of the
// caller's deadline, so that the fallback still has time. A Limiter's
// renewal ahead of a lease, on no call's path while the lease has tokens,
// is bounded by the larger of Timeout and SyncInterval instead; a call
// waits for it no longer than Timeout. Give the client
// ContextTimeoutEnabled: true (go-redis Options) so that the command
// itself is cut at the same bound and its connection freed; without it,
// the command runs on in the background until the client's ReadTimeout
// (3 s by default), MaxRetries (3 by default) may repeat it, and
// DialerRetries (5 by default) repeats each failed dial. After a failed
// round trip for a key (a breaker, a limit, a budget) a component does not
// ask Redis again for that key for one SyncInterval; then one request at a
// time asks, while the others run on the fallback. Other keys go on asking:
// a key that fails alone (a Cluster master down, a key of the wrong type)
// rests alone.
type Options struct {
	// Prefix starts every key this package writes; default "retry:". Give
	// each dependency, or each service, its own prefix when their
	// breakers, limits or budgets must stay apart. It may not contain '{'
	// or '}': each key's hash tag, which keeps the keys of one breaker,
	// limit or budget in one slot of a Redis Cluster, follows it.
	Prefix string
	// Timeout bounds each Redis round trip; default 50 ms.
	Timeout time.Duration
	// SyncInterval is how often a process with calls syncs each breaker
	// of a Store, the term of a Limiter's leases, and how long a
	// component runs on its fallback after a failed round trip before it
	// asks Redis again; default 100 ms.
	SyncInterval time.Duration
	// Heartbeat is how often a process with calls, but nothing new to
	// tell, talks to Redis for each key: a Store sends a quiet breaker's
	// successes (and reads an open one alone) once a Heartbeat, or a fifth
	// of the breaker's Window when that is shorter, and a Limiter's lease
	// lasts a Heartbeat while the fleet uses less than half its limit;
	// default 2 s, and at least SyncInterval. A longer one asks less of
	// Redis; see the package documentation for what each costs.
	Heartbeat time.Duration
	// StateTTL is how long the Store keeps the state of an open or
	// half-open breaker nobody uses (at least twice its Window and
	// OpenTimeout); default 24 h. An expired state starts again closed. A
	// closed breaker's state lives twice its Window after its last sync.
	StateTTL time.Duration
	// Logger, when set, receives the Redis errors of the component at
	// level Warn, at most one record a second per component (the
	// "suppressed" attribute counts those left out), and one record at
	// level Info when Redis answers again. Errors are counted in the
	// component's Stats whether or not a Logger is set.
	Logger *slog.Logger
}

// The defaults of Options.
const (
	DefaultPrefix       = "retry:"
	DefaultTimeout      = 50 * time.Millisecond
	DefaultSyncInterval = 100 * time.Millisecond
	DefaultStateTTL     = 24 * time.Hour
	DefaultHeartbeat    = 2 * time.Second
)

func (o Options) withDefaults(who string) (Options, error) {
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"Timeout", o.Timeout}, {"SyncInterval", o.SyncInterval}, {"Heartbeat", o.Heartbeat}, {"StateTTL", o.StateTTL}} {
		if f.v < 0 {
			return o, fmt.Errorf("redis: %s: Options.%s = %v: must be >= 0", who, f.name, f.v)
		}
	}
	if strings.ContainsAny(o.Prefix, "{}") {
		return o, fmt.Errorf("redis: %s: Options.Prefix = %q: must not contain '{' or '}' (the hash tag of each key follows the prefix)", who, o.Prefix)
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
	if o.Heartbeat == 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	o.Heartbeat = max(o.Heartbeat, o.SyncInterval)
	return o, nil
}

// key names the Redis key of one breaker, limit, budget or stream: the
// prefix, then the hash tag {KIND:NAME}, never empty, so that every key one
// script touches (the returned name, or the name and a suffix) hashes to
// one slot of a Redis Cluster.
func (o Options) key(kind, name string) string {
	return o.Prefix + "{" + kind + ":" + name + "}"
}

// isNilClient reports whether c is nil or a typed nil, such as a nil
// *redis.Client, whose methods would panic on the first round trip.
func isNilClient(c goredis.UniversalClient) bool {
	if c == nil {
		return true
	}
	v := reflect.ValueOf(c)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
