package retry

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// WithGoBreaker puts sony/gobreaker's two-step circuit breakers in front of
// the attempts, in place of the built-in breaker (WithBreaker), so that
// breakers tuned with gobreaker's Settings (ReadyToTrip, IsSuccessful,
// IsExcluded, OnStateChange, MaxRequests) guard a Retrier, a Transport or
// the gRPC interceptors.
//
// breaker returns the breaker of a key: the call's (WithKey, the
// Transport's request key, by default the host, or the gRPC interceptors'
// target), "" for a call without one. It is called when a key is first
// met, outside any lock of the Retrier (calls that meet a new key at once
// may each call it; one answer is kept), and its breaker kept, for at most
// 1024 keys, the idlest dropped and asked for again when met again; it may
// return one breaker for every key. A nil breaker leaves the key's
// attempts unguarded.
//
// Every attempt, first, retry or hedge, asks the breaker's Allow, and its
// done is told the attempt's outcome as gobreaker's Execute would be: nil
// for a success, or the attempt's error: Do's function's, the Transport's
// transport error or *StatusError (for a status it retries), the gRPC
// interceptors' status error. The breaker's own Settings decide what
// counts, half-open probes included. An attempt the breaker let through
// that its call then gave up (a later gate refused it, or it was a hedge
// canceled because another attempt won) is told an error that wraps
// context.Canceled; a panic, an error. Exclude context.Canceled in
// IsExcluded, as gobreaker's documentation suggests, to keep them and the
// caller's own cancellations out of the counts.
//
// A refusal is the built-in breaker's: the attempt is neither run nor
// counted; the call waits, without consuming an attempt, for the breaker to
// let a probe through when that fits b.MaxWait and the caller's deadline,
// and otherwise stops at once with Reason breaker_open, type
// "breaker.open", an error that errors.Is gobreaker.ErrOpenState and,
// when the breaker was half-open with its probes in flight,
// gobreaker.ErrTooManyRequests. A retry's wait is raised to the end of an
// open breaker's open time in the same way. Events and Stats (Breakers,
// BreakerWaits, BreakerDenied) report as for the built-in breaker.
//
// gobreaker does not say how long a breaker stays open: b.OpenTimeout must
// be the Timeout of the breakers' Settings (zero: gobreaker's default,
// 60 s), and the open time is counted from the moment this Retrier first
// saw the breaker open, which is later than its opening when the breaker
// opened on another's calls. Only b.OpenTimeout and b.MaxWait apply; the
// other fields of b are gobreaker's Settings' to set and must be zero.
// gobreaker reads the wall clock: WithClock does not move it.
func WithGoBreaker[T any](breaker func(key string) *gobreaker.TwoStepCircuitBreaker[T], b Breaker) Option {
	return optionFunc(func(c *config) {
		if err := goBreakerSettings(breaker == nil, b); err != nil {
			c.optErrs = append(c.optErrs, err)
			return
		}
		of := func(key string) twoStep {
			if cb := breaker(key); cb != nil {
				return cb
			}
			return nil
		}
		c.breakers, c.goBreakers = nil, newGoBreakers(of, b)
	})
}

// goBreakerSettings returns the error of WithGoBreaker's arguments, or nil.
func goBreakerSettings(nilFunc bool, b Breaker) error {
	bad := func(field string, v any, rule string) error {
		return optionError("WithGoBreaker", field, v, rule)
	}
	notHere := "set it in the gobreaker.Settings of the breakers, not here"
	switch {
	case nilFunc:
		return bad("breaker", "nil", "must return the breaker of each key")
	case b.OpenTimeout < 0:
		return bad("OpenTimeout", b.OpenTimeout, "must be >= 0 (the Timeout of the breakers' Settings)")
	case b.FailureRatio != 0:
		return bad("FailureRatio", b.FailureRatio, notHere+" (ReadyToTrip)")
	case b.MinRequests != 0:
		return bad("MinRequests", b.MinRequests, notHere+" (ReadyToTrip)")
	case b.Window != 0:
		return bad("Window", b.Window, notHere+" (Interval, BucketPeriod)")
	case b.Probes != 0:
		return bad("Probes", b.Probes, notHere+" (MaxRequests)")
	case b.PerKey:
		return bad("PerKey", b.PerKey, "the breaker func is asked per key; it may return one breaker for all")
	case b.Store != nil:
		return bad("Store", b.Store, "gobreaker's breakers are shared by gobreaker's own means")
	case b.StoreWait != 0:
		return bad("StoreWait", b.StoreWait, "applies to Store only")
	case b.OnChange != nil:
		return bad("OnChange", "set", notHere+" (OnStateChange)")
	}
	return nil
}

// gobreakerTimeout is gobreaker's default Timeout, its open time.
const gobreakerTimeout = 60 * time.Second

// twoStep is what the gate uses of a *gobreaker.TwoStepCircuitBreaker[T],
// whatever its T.
type twoStep interface {
	Allow() (done func(error), err error)
	State() gobreaker.State
}

// goBreakers is the breaker gate over a user's gobreaker breakers, one per
// key.
type goBreakers struct {
	of      func(key string) twoStep
	keys    *keyed[*goBreaker]
	timeout time.Duration // the breakers' open time
	maxWait time.Duration
	recheck time.Duration // how long a call waits for a half-open breaker's probes
	holds
}

func newGoBreakers(of func(string) twoStep, b Breaker) *goBreakers {
	spec := Breaker{OpenTimeout: b.OpenTimeout, MaxWait: b.MaxWait}.withDefaults()
	if b.OpenTimeout == 0 {
		spec.OpenTimeout = gobreakerTimeout
	}
	return &goBreakers{of: of, keys: newKeyed[*goBreaker](maxKeys), timeout: spec.OpenTimeout,
		maxWait: spec.MaxWait, recheck: spec.recheck()}
}

// goBreaker is one key's gobreaker breaker, and when the opening of it last
// seen ends.
type goBreaker struct {
	cb    twoStep      // nil: the key is not guarded
	until atomic.Int64 // unix ns; 0 when the breaker was not seen open since it last let an attempt through
}

// get returns the breaker of key, asking the user's func outside the map's
// lock the first time the key is met.
func (g *goBreakers) get(key string) *goBreaker {
	if b, ok := g.keys.find(key); ok {
		return b
	}
	b := &goBreaker{cb: g.of(key)}
	return g.keys.get(key, time.Time{}, func() *goBreaker { return b })
}

// openFor returns how long b stays open from now, or zero when it is not
// open: until just after its open time, when gobreaker turns it
// half-open. An opening not seen before is taken to have begun now.
func (g *goBreakers) openFor(b *goBreaker, now time.Time) time.Duration {
	if b.cb == nil || b.cb.State() != gobreaker.StateOpen {
		return 0
	}
	until := b.until.Load()
	if until < now.UnixNano() {
		until = now.Add(g.timeout).UnixNano()
		b.until.Store(until)
	}
	return time.Duration(until-now.UnixNano()) + 1
}

// acts: as the built-in breaker, it admits retries, which may wait for its
// open time, and every attempt enters it.
func (g *goBreakers) acts() (admits, enters uint8) { return onRetry, onAll }

// admit raises a retry's wait to the end of an open breaker's open time,
// when that fits MaxWait and the time left; otherwise it refuses.
func (g *goBreakers) admit(ctx context.Context, a *ask, gr *grant) {
	if a.kind != kindRetry {
		return
	}
	left := g.openFor(g.get(a.key), time.Now())
	if left > a.wait {
		*gr = g.hold(ctx, g.maxWait, a, left, left-a.wait, &breakerError{wait: left, cause: gobreaker.ErrOpenState})
	}
}

// enter asks the key's breaker to let the attempt through; its done learns
// the outcome. A refusal is waited for, or ends the call, as the built-in
// breaker's.
func (g *goBreakers) enter(ctx context.Context, a *ask, gr *grant) {
	b := g.get(a.key)
	if b.cb == nil {
		return
	}
	done, err := b.cb.Allow()
	if err == nil {
		if b.until.Load() != 0 {
			b.until.Store(0) // not open now: a later opening is a new one
		}
		gr.learner = goDone(done)
		return
	}
	wait := g.recheck
	if !errors.Is(err, gobreaker.ErrTooManyRequests) {
		if left := g.openFor(b, time.Now()); left > 0 {
			wait = left
		}
	}
	*gr = g.refuse(ctx, a, wait, &breakerError{wait: wait, cause: err}, g.maxWait)
}

// goDone is a gobreaker breaker's done, as the learner of an attempt.
type goDone func(error)

// learn tells done the attempt's outcome by its cause (see pass.learn).
func (d goDone) learn(_ *config, _ int64, outcome, cause error) {
	if outcome == errNotRun {
		cause = errWithdrawn
	}
	d(cause)
}

// Causes of outcomes that are not an attempt's own error (see pass.learn).
var (
	errWithdrawn = fmt.Errorf("retry: attempt given up by its call, not sent or outrun by another: %w", context.Canceled)
	errPanicked  = errors.New("retry: attempt panicked")
)

// states returns the state of every key's breaker.
func (g *goBreakers) states() map[string]string {
	states := make(map[string]string)
	g.keys.each(func(key string, b *goBreaker) {
		if b.cb == nil {
			return
		}
		switch b.cb.State() {
		case gobreaker.StateOpen:
			states[key] = BreakerOpen
		case gobreaker.StateHalfOpen:
			states[key] = BreakerHalfOpen
		default:
			states[key] = BreakerClosed
		}
	})
	return states
}
