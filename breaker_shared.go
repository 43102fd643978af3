package retry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sony/gobreaker/v2"
)

// sharedBreaker is a breaker whose state lives in a Breaker.Store, run as
// gobreaker's DistributedCircuitBreaker. DistributedCircuitBreaker.Execute
// holds the store's lock, fleet-wide, for as long as its function runs; to
// keep attempts from queueing on that lock, an attempt in the closed state
// runs between two short Executes:
//
//  1. admission: an Execute whose function reports an excluded outcome, so
//     that it counts nothing; the breaker's answer (open, too many
//     requests, or admitted) is gobreaker's own;
//  2. the attempt, outside the lock, if the caller's context is still live;
//  3. the outcome: an Execute whose function reports it, unless the
//     breaker's generation changed meanwhile (gobreaker drops such
//     outcomes too), the breaker is no longer closed, or the caller's
//     context has ended (the outcome is then dropped rather than make the
//     call wait for the store past its end).
//
// A probe, in the half-open state, runs inside the admission's Execute,
// holding the lock, so that the fleet lets through exactly Probes of them.
// Calls that find the lock taken wait for it up to Breaker.StoreWait; past
// that they read the state without the lock and follow it: an open breaker
// makes them wait for its expiry, a half-open one (a probe under way) look
// again shortly, and a closed one lets the attempt run, its outcome sent as
// in step 3. Only a store that fails sends a call to the local breaker. An
// open breaker's wait is read from the shared state's expiry, so a rejected
// call waits for the probe exactly, without consuming an attempt.
type sharedBreaker struct {
	dcb  *gobreaker.DistributedCircuitBreaker[struct{}]
	view *storeView
	sem  chan struct{} // one Execute at a time in this process
}

func newSharedBreaker(s gobreaker.SharedDataStore, settings gobreaker.Settings) *sharedBreaker {
	sb := &sharedBreaker{view: &storeView{store: s, initializing: true}, sem: make(chan struct{}, 1)}
	// With the view initializing, the constructor never reaches the store:
	// it records the names of the lock and the state and the initial
	// state, which the view serves whenever the store holds none (first
	// use, or a store that lost its data).
	dcb, err := gobreaker.NewDistributedCircuitBreaker[struct{}](sb.view, settings)
	if err != nil {
		panic("retry: shared breaker: " + err.Error()) // unreachable: the view cannot fail while initializing
	}
	sb.view.initializing = false
	sb.dcb = dcb
	return sb
}

// ErrStoreLocked is the error a Breaker.Store's Lock should return, or
// wrap, when another holder has the lock: the call then tries again for up
// to Breaker.StoreWait, and past it reads the state without the lock. Any
// other error is the store failing, and the call falls back to the local
// breaker at once.
var ErrStoreLocked = errors.New("retry: breaker store: lock held elsewhere")

// ContextStore is a Breaker.Store whose operations take a context, as the
// Store of github.com/steadyhq/retry/redis does. The shared breaker then
// bounds each operation by the caller's deadline (taking the lock, also by
// Breaker.StoreWait), so that a slow store holds a call at most one of its
// own timeouts past its deadline. It releases the lock, and records a
// probe's outcome, with a context that keeps the caller's values but not
// its deadline: the store's own timeout bounds those.
//
// A Store without these methods is called through gobreaker's
// SharedDataStore, which takes no context: each operation is bounded by
// the store alone, and none starts once the caller's context has ended
// (but the same two).
type ContextStore interface {
	gobreaker.SharedDataStore
	LockContext(ctx context.Context, name string) error
	UnlockContext(ctx context.Context, name string) error
	GetDataContext(ctx context.Context, name string) ([]byte, error)
	SetDataContext(ctx context.Context, name string, data []byte) error
}

// errStoreBusy reports that the store's lock could not be had in time.
var errStoreBusy = errors.New("retry: breaker store: lock not acquired in time")

// run runs attempt through the shared breaker, as breaker.run does. ok is
// false when the store failed before the attempt ran: the caller then runs
// it through the local breaker. ran and wait are both zero when the
// caller's context ended before the attempt could start.
func (sb *sharedBreaker) run(ctx context.Context, spec *Breaker, attempt func() error) (ran bool, wait time.Duration, ok bool) {
	var probed bool
	err, set, serr := sb.execute(ctx, spec.StoreWait, func() (struct{}, error) {
		if sb.dcb.CircuitBreaker.State() == gobreaker.StateHalfOpen && !ended(ctx) {
			probed = true
			sb.view.probe = true
			return struct{}{}, attempt()
		}
		return struct{}{}, errBreakerExcluded
	})
	if probed {
		return true, 0, true // whatever the store did afterwards
	}
	var gen uint64
	switch {
	case ended(ctx):
		return false, 0, true
	case errors.Is(serr, errStoreBusy):
		st, err := sb.peek(ctx)
		switch {
		case err != nil:
			return false, 0, ended(ctx)
		case st.State == gobreaker.StateOpen && time.Now().Before(st.Expiry):
			return false, openWait(st.Expiry), true
		case st.State != gobreaker.StateClosed:
			// Half-open, or open past its expiry: the lock's holder is
			// likely probing.
			return false, spec.recheck(), true
		}
		gen = st.Generation
	case serr != nil:
		return false, 0, false
	case err == gobreaker.ErrOpenState:
		return false, openWait(set.Expiry), true
	case err == gobreaker.ErrTooManyRequests:
		return false, spec.recheck(), true
	case err != errBreakerExcluded:
		return false, 0, false
	default:
		gen = set.Generation
	}
	if ended(ctx) {
		return false, 0, true
	}
	record := func(outcome error) {
		if !ended(ctx) {
			sb.execute(ctx, spec.StoreWait, func() (struct{}, error) {
				if sb.view.seen.Generation != gen {
					return struct{}{}, errBreakerExcluded
				}
				return struct{}{}, outcome
			})
		}
	}
	returned := false
	defer func() {
		if !returned { // attempt panicked: a failure, and the panic goes on
			record(errBreakerFailure)
		}
	}()
	outcome := attempt()
	returned = true
	record(outcome)
	return true, 0, true
}

// ended reports whether ctx is done or its deadline has passed, which a
// timer set for the same instant may notice first.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// openWait is the wait for an open breaker that expires at expiry:
// gobreaker lets a probe through once its clock is past the expiry, not at
// it, so one nanosecond beyond.
func openWait(expiry time.Time) time.Duration {
	return max(time.Until(expiry)+1, time.Nanosecond)
}

// peek reads the shared state without the lock.
func (sb *sharedBreaker) peek(ctx context.Context) (gobreaker.SharedState, error) {
	v := sb.view
	var st gobreaker.SharedState
	var data []byte
	var err error
	if cs, ok := v.store.(ContextStore); ok {
		data, err = cs.GetDataContext(ctx, v.state)
	} else if err = ctx.Err(); err == nil {
		data, err = v.store.GetData(v.state)
	}
	if err != nil {
		return st, err
	}
	if len(data) == 0 {
		data = v.initial
	}
	err = json.Unmarshal(data, &st)
	return st, err
}

// execute runs one DistributedCircuitBreaker.Execute of req, waiting at most
// wait (and not past ctx's deadline) for this process's turn and for the
// store's lock. It returns Execute's error, the state written to the store,
// and the store's failure, if any.
func (sb *sharedBreaker) execute(ctx context.Context, wait time.Duration, req func() (struct{}, error)) (err error, set gobreaker.SharedState, serr error) {
	until := time.Now().Add(wait)
	if dl, ok := ctx.Deadline(); ok && dl.Before(until) {
		until = dl
	}
	select {
	case sb.sem <- struct{}{}:
	default:
		t := time.NewTimer(time.Until(until))
		select {
		case sb.sem <- struct{}{}:
			t.Stop()
		case <-t.C:
			return nil, set, errStoreBusy
		case <-ctx.Done():
			t.Stop()
			return nil, set, errStoreBusy
		}
	}
	v := sb.view
	defer func() {
		v.ctx = nil // not kept past the call
		<-sb.sem
	}()
	v.ctx, v.until, v.err, v.probe = ctx, until, nil, false
	v.seen, v.set = gobreaker.SharedState{}, gobreaker.SharedState{}
	_, err = sb.dcb.Execute(req)
	return err, v.set, v.err
}

// storeView is the SharedDataStore the DistributedCircuitBreaker uses: it
// stands between gobreaker and Breaker.Store, one Execute at a time.
//
// gobreaker v2.4.0 reads the shared state before it takes the lock, so an
// update made between the two would be lost; the view takes the lock
// before reading and treats gobreaker's own Lock call as done. While the
// lock is held elsewhere (ErrStoreLocked) it tries again, briefly, until
// the call's bound (gobreaker would sleep 500 ms between tries, for up to
// 5 s), records the states it reads and writes and the store's first
// failure, and releases the lock itself when the read fails, since
// gobreaker then returns without unlocking. It passes the Execute's context
// to a ContextStore (see there).
type storeView struct {
	store        gobreaker.SharedDataStore
	initializing bool
	mutex        string // the lock's name, from the constructor
	state        string // the state's name, from the constructor
	initial      []byte // the initial state, from the constructor
	buckets      int    // the length of a state's Buckets
	held         bool

	// Set by execute for one Execute, under sharedBreaker.sem: the
	// caller's context (dropped when Execute returns), the bound of the
	// wait for the lock, and whether the function ran a probe.
	ctx   context.Context
	until time.Time
	probe bool
	err   error
	seen  gobreaker.SharedState // as read
	set   gobreaker.SharedState // as written
}

func (v *storeView) Lock(name string) error {
	if v.initializing {
		v.mutex = name
		return nil
	}
	if v.held {
		return nil // taken before the read
	}
	return v.lock()
}

func (v *storeView) lock() error {
	pause := 500 * time.Microsecond
	for {
		err := v.lockOnce()
		if err == nil {
			v.held = true
			return nil
		}
		left := time.Until(v.until)
		switch {
		case left <= 0:
			// Held elsewhere, or cut at the bound of the wait (by this
			// process's queue, or the store's own slowness, which a read
			// without the lock then shows).
			return v.fail(fmt.Errorf("%w: %w", errStoreBusy, err))
		case !errors.Is(err, ErrStoreLocked):
			return v.fail(err)
		}
		t := time.NewTimer(min(pause, left))
		select {
		case <-t.C:
		case <-v.ctx.Done():
			t.Stop()
			return v.fail(fmt.Errorf("%w: %w", errStoreBusy, err))
		}
		pause = min(2*pause, 4*time.Millisecond)
	}
}

// lockOnce asks the store for the lock once, within the wait's bound.
func (v *storeView) lockOnce() error {
	if cs, ok := v.store.(ContextStore); ok {
		ctx, cancel := context.WithDeadline(v.ctx, v.until)
		defer cancel()
		return cs.LockContext(ctx, v.mutex)
	}
	if err := v.ctx.Err(); err != nil {
		return err
	}
	return v.store.Lock(v.mutex)
}

func (v *storeView) fail(err error) error {
	if v.err == nil {
		v.err = err
	}
	return err
}

func (v *storeView) Unlock(name string) error {
	if v.initializing || !v.held {
		return nil
	}
	v.held = false
	var err error
	if cs, ok := v.store.(ContextStore); ok {
		err = cs.UnlockContext(context.WithoutCancel(v.ctx), name)
	} else {
		err = v.store.Unlock(name)
	}
	if err != nil {
		return v.fail(err)
	}
	return nil
}

func (v *storeView) GetData(name string) ([]byte, error) {
	if v.initializing {
		v.state = name
		return nil, nil
	}
	if err := v.lock(); err != nil {
		return nil, err
	}
	var data []byte
	var err error
	if cs, ok := v.store.(ContextStore); ok {
		data, err = cs.GetDataContext(v.ctx, name)
	} else if err = v.ctx.Err(); err == nil {
		data, err = v.store.GetData(name)
	}
	if err != nil {
		v.fail(err)
		v.Unlock(v.mutex)
		return nil, err
	}
	if len(data) == 0 {
		data = v.initial
	}
	err = json.Unmarshal(data, &v.seen)
	if err == nil && len(v.seen.Buckets) != v.buckets {
		// gobreaker would index past the end of the buckets.
		err = fmt.Errorf("retry: breaker store: state %s has %d buckets, want %d", name, len(v.seen.Buckets), v.buckets)
	}
	if err != nil {
		v.fail(err)
		v.Unlock(v.mutex)
		return nil, err
	}
	return data, nil
}

func (v *storeView) SetData(name string, data []byte) error {
	if v.initializing {
		v.initial = data
		var st gobreaker.SharedState
		err := json.Unmarshal(data, &st)
		v.buckets = len(st.Buckets)
		return err
	}
	if err := json.Unmarshal(data, &v.set); err != nil {
		return v.fail(err)
	}
	// A probe's outcome is written whatever is left of the caller's time:
	// the fleet waits for it.
	var err error
	if cs, ok := v.store.(ContextStore); ok {
		ctx := v.ctx
		if v.probe {
			ctx = context.WithoutCancel(ctx)
		}
		err = cs.SetDataContext(ctx, name, data)
	} else if err = v.ctx.Err(); err == nil || v.probe {
		err = v.store.SetData(name, data)
	}
	if err != nil {
		return v.fail(err)
	}
	return nil
}
