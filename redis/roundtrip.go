package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// roundTrip runs f, one Redis round trip, under a context bounded by
// timeout, and returns when f does or when that context ends, whichever
// comes first: a client that ignores context deadlines (go-redis without
// ContextTimeoutEnabled) cannot hold the caller past the bound. An f cut
// short runs on in the background until the client gives up, and its
// result is dropped.
func roundTrip[T any](ctx context.Context, timeout time.Duration, f func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel() // f has returned, or ctx has ended already
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f(ctx)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, context.Cause(ctx)
	}
}

// health is what one component knows of Redis: its keys' health, its
// error count and the rate-limited log of its errors.
type health struct {
	who   string // the component, as logs name it
	log   *slog.Logger
	retry time.Duration // how long a key stays on the fallback after a failure

	timeout  time.Duration
	errors   atomic.Int64 // round trips that failed
	down     atomic.Int64 // keys whose last round trip failed
	lastFail atomic.Int64 // unix ns of the last round trip that failed
	lastOK   atomic.Int64 // unix ns of the last round trip that succeeded

	mu         sync.Mutex
	logged     time.Time // when an error was last logged
	suppressed int       // errors not logged since
}

// keyHealth is what a component knows of Redis for one key (one breaker,
// one limit, one budget): a key that fails (a Cluster master down, a key
// of the wrong type) rests alone, and the others go on asking Redis.
type keyHealth struct {
	h        *health
	down     atomic.Bool  // the last round trip failed
	next     atomic.Int64 // while down: unix ns after which one request may ask Redis
	cutSince atomic.Int64 // unix ns of the first cut round trip since the last success; 0 if none
	last     atomic.Pointer[error]
}

// errResting is the error of a request not sent because Redis failed
// within the last SyncInterval and another request is asking.
var errResting = errors.New("not asked: Redis failed within the last SyncInterval")

// resting is the error of a request for what (the component and its
// key) not sent because the key rests: it names the key's last failure,
// so that a key of the wrong type can be told from a server that is down.
func (k *keyHealth) resting(what string) error {
	return fmt.Errorf("redis: %s: %w; last failure: %v", what, errResting, k.lastErr())
}

// lastErr is the key's last failure, or nil.
func (k *keyHealth) lastErr() error {
	if p := k.last.Load(); p != nil {
		return *p
	}
	return nil
}

// logEvery is the least time between two error records of one component.
const logEvery = time.Second

func newHealth(who string, opts Options) *health {
	return &health{who: who, log: opts.Logger, retry: opts.SyncInterval, timeout: opts.Timeout}
}

// key returns the health of a new key.
func (h *health) key() *keyHealth { return &keyHealth{h: h} }

// skip reports whether a request should leave Redis alone and run on the
// fallback: the key's last round trip failed, and either it is not yet
// time to ask again or another request is asking. The request that finds
// the time passed asks, and the next may ask one interval later.
func (k *keyHealth) skip(now time.Time) bool {
	if !k.down.Load() {
		return false
	}
	next := k.next.Load()
	if now.UnixNano() < next {
		return true
	}
	return !k.next.CompareAndSwap(next, now.Add(k.h.retry).UnixNano())
}

// failed counts a failed round trip and logs it, at most once a second;
// what names the key. A round trip cut short because the caller's context
// ended says nothing of Redis and is not counted; nor is one cut by the
// caller's deadline before Timeout (cut), unless round trips have been cut
// for a whole SyncInterval without one succeeding: callers whose deadlines
// are all short then find Redis as slow as Timeout would, and stop waiting
// on it.
func (k *keyHealth) failed(ctx context.Context, err error, cut bool, what string) {
	if ctx.Err() != nil {
		return
	}
	if cut && errors.Is(err, context.DeadlineExceeded) {
		now := time.Now().UnixNano()
		if k.cutSince.CompareAndSwap(0, now) {
			return
		}
		if time.Duration(now-k.cutSince.Load()) < k.h.retry {
			return
		}
	}
	h := k.h
	k.note(err)
	if !k.down.Load() {
		k.next.Store(time.Now().Add(h.retry).UnixNano())
		if k.down.CompareAndSwap(false, true) {
			h.down.Add(1)
		}
	}
	h.warn(what, err, "round trip failed; running on the fallback")
}

// missed counts a failed round trip that leaves the key up: a Limiter's
// renewal ahead that failed while the lease it renews still has tokens,
// which the calls go on spending. It is logged as failed is.
func (k *keyHealth) missed(err error, what string) {
	k.note(err)
	k.h.warn(what, err, "renewal ahead failed; spending the lease's tokens left")
}

// rest puts the key down until next, after a failure missed already
// counted: from then, one request may ask Redis.
func (k *keyHealth) rest(next time.Time) {
	if k.down.Load() {
		return
	}
	k.next.Store(next.UnixNano())
	if k.down.CompareAndSwap(false, true) {
		k.h.down.Add(1)
	}
}

// note counts a failed round trip of the key.
func (k *keyHealth) note(err error) {
	k.h.errors.Add(1)
	k.h.lastFail.Store(time.Now().UnixNano())
	k.last.Store(&err)
}

// warn logs a failed round trip of what, at most once every logEvery.
func (h *health) warn(what string, err error, msg string) {
	if h.log == nil {
		return
	}
	err = fmt.Errorf("redis: %s: %w", what, err)
	h.mu.Lock()
	now := time.Now()
	if now.Sub(h.logged) < logEvery {
		h.suppressed++
		h.mu.Unlock()
		return
	}
	n := h.suppressed
	h.logged, h.suppressed = now, 0
	h.mu.Unlock()
	h.log.Warn("redis: "+h.who+": "+msg, "error", err, "suppressed", n)
}

// ok notes a round trip that succeeded, and logs the return of Redis when
// it was the last key down. The errors left out of the log since the last
// record are counted in that record, and the count starts again.
func (k *keyHealth) ok() {
	k.h.lastOK.Store(time.Now().UnixNano())
	k.cutSince.Store(0)
	if !k.down.Load() || !k.down.CompareAndSwap(true, false) {
		return
	}
	h := k.h
	if h.down.Add(-1) != 0 || h.log == nil {
		return
	}
	h.mu.Lock()
	n := h.suppressed
	h.suppressed = 0
	h.mu.Unlock()
	h.log.Info("redis: "+h.who+": Redis answers again; back on the fleet's state", "suppressed", n)
}

// onFleet reports whether the component runs on the fleet's state: no
// key's last round trip failed, or none failed within two intervals and a
// Timeout (a key that failed and has had no request since does not count).
func (h *health) onFleet() bool {
	return h.down.Load() == 0 || time.Since(time.Unix(0, h.lastFail.Load())) > 2*h.retry+h.timeout
}

// status is a component's FleetStatus: on the fleet's state or not, the
// last round trip that succeeded (zero before one), the round trips that
// failed.
func (h *health) status() (onFleet bool, lastSync time.Time, errors int64) {
	if ns := h.lastOK.Load(); ns != 0 {
		lastSync = time.Unix(0, ns)
	}
	return h.onFleet(), lastSync, h.errors.Load()
}

// pipeline sends the commands build queues on p in one pipeline (on a
// Redis Cluster, one per master, in parallel), bounded by timeout as
// roundTrip bounds a round trip, and returns them, each with its own
// error, with the error of the round trip itself (when that is not nil,
// no command is returned: they may still be running). Scripts are sent by
// their SHA; when Redis lost them (a restart), the commands are built again
// with eval set, and sent with their source.
func pipeline(ctx context.Context, client goredis.UniversalClient, timeout time.Duration, build func(ctx context.Context, p goredis.Pipeliner, eval bool) []*goredis.Cmd) ([]*goredis.Cmd, error) {
	return roundTrip(ctx, timeout, func(ctx context.Context) ([]*goredis.Cmd, error) {
		p := client.Pipeline()
		cmds := build(ctx, p, false)
		p.Exec(ctx) // each command keeps its error
		for _, c := range cmds {
			if goredis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
				p = client.Pipeline()
				cmds = build(ctx, p, true)
				p.Exec(ctx)
				break
			}
		}
		return cmds, ctx.Err()
	})
}

// runScript queues sc on p: by its SHA, or with its source when eval.
func runScript(ctx context.Context, p goredis.Pipeliner, eval bool, sc *goredis.Script, keys []string, args ...any) *goredis.Cmd {
	if eval {
		return sc.Eval(ctx, p, keys, args...)
	}
	return sc.EvalSha(ctx, p, keys, args...)
}
