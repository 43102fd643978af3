package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
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

// health is what one component knows of Redis: whether its last round trip
// failed, when to ask again, and the rate-limited log of its errors.
type health struct {
	who   string // the component, as logs name it
	log   *slog.Logger
	retry time.Duration // how long to stay on the fallback after a failure

	down   atomic.Bool  // the last round trip failed
	lastOK atomic.Int64 // unix ns of the last round trip that succeeded
	next   atomic.Int64 // while down: unix ns after which one request may ask Redis
	errors atomic.Int64 // round trips that failed

	mu         sync.Mutex
	logged     time.Time // when an error was last logged
	suppressed int       // errors not logged since
}

// errResting is the error of a request not sent because Redis failed
// within the last SyncInterval and another request is asking.
var errResting = errors.New("not asked: Redis failed within the last SyncInterval")

// logEvery is the least time between two error records of one component.
const logEvery = time.Second

func newHealth(who string, opts Options) *health {
	h := &health{who: who, log: opts.Logger, retry: opts.SyncInterval}
	h.lastOK.Store(time.Now().UnixNano())
	return h
}

// skip reports whether a request should leave Redis alone and run on the
// fallback: Redis failed at the last round trip, and either it is not yet
// time to ask again or another request is asking. The request that finds
// the time passed asks, and the next may ask one interval later.
func (h *health) skip(now time.Time) bool {
	if !h.down.Load() {
		return false
	}
	next := h.next.Load()
	if now.UnixNano() < next {
		return true
	}
	return !h.next.CompareAndSwap(next, now.Add(h.retry).UnixNano())
}

// failed counts a failed round trip and logs it, at most once a second;
// what names the key. A round trip cut short because the caller's context
// ended says nothing of Redis and is not counted; nor is one cut by the
// caller's deadline before Timeout (cut), unless no round trip has
// succeeded for a whole SyncInterval: callers whose deadlines are all
// short then find Redis as slow as Timeout would, and stop waiting on it.
func (h *health) failed(ctx context.Context, err error, cut bool, what string) {
	if ctx.Err() != nil {
		return
	}
	if cut && errors.Is(err, context.DeadlineExceeded) && time.Since(time.Unix(0, h.lastOK.Load())) < h.retry {
		return
	}
	err = fmt.Errorf("redis: %s: %w", what, err)
	h.errors.Add(1)
	if !h.down.Load() {
		h.next.Store(time.Now().Add(h.retry).UnixNano())
		h.down.Store(true)
	}
	if h.log == nil {
		return
	}
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
	h.log.Warn("redis: "+h.who+": round trip failed; running on the fallback", "error", err, "suppressed", n)
}

// ok notes a round trip that succeeded, and logs the return of Redis after
// a failure.
func (h *health) ok() {
	h.lastOK.Store(time.Now().UnixNano())
	if !h.down.Load() || !h.down.CompareAndSwap(true, false) {
		return
	}
	if h.log != nil {
		h.log.Info("redis: " + h.who + ": Redis answers again; back on the fleet's state")
	}
}

// onFleet reports whether the last round trip succeeded.
func (h *health) onFleet() bool { return !h.down.Load() }
