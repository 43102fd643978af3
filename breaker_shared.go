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
//  2. the attempt, outside the lock;
//  3. the outcome: an Execute whose function reports it, unless the
//     breaker's generation changed meanwhile (gobreaker drops such
//     outcomes too) or the breaker is no longer closed.
//
// A probe, in the half-open state, runs inside the admission's Execute,
// holding the lock, so that the fleet lets through exactly Probes of them;
// calls that find the lock taken wait for it, and fall back to the local
// breaker past Breaker.StoreWait. An open breaker's wait is read from the
// shared state's expiry, so a rejected call waits for the probe exactly,
// without consuming an attempt.
type sharedBreaker struct {
	dcb  *gobreaker.DistributedCircuitBreaker[struct{}]
	view *storeView
	sem  chan struct{} // one Execute at a time in this process
}

func newSharedBreaker(s gobreaker.SharedDataStore, settings gobreaker.Settings) *sharedBreaker {
	sb := &sharedBreaker{view: &storeView{store: s, initializing: true}, sem: make(chan struct{}, 1)}
	// With the view initializing, the constructor never reaches the store:
	// it records the lock's name and the initial state, which the view
	// serves whenever the store holds none (first use, or a store that
	// lost its data).
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
// to Breaker.StoreWait. Any other error is the store failing, and the call
// falls back to the local breaker at once.
var ErrStoreLocked = errors.New("retry: breaker store: lock held elsewhere")

// errStoreBusy reports that the store's lock could not be had in time.
var errStoreBusy = errors.New("retry: breaker store: lock not acquired in time")

// run runs attempt through the shared breaker, as breaker.run does. ok is
// false when the store failed before the attempt ran: the caller then runs
// it through the local breaker.
func (sb *sharedBreaker) run(ctx context.Context, spec *Breaker, attempt func() error) (ran bool, wait time.Duration, ok bool) {
	var probed bool
	err, set, serr := sb.execute(ctx, spec.StoreWait, func() (struct{}, error) {
		if sb.dcb.CircuitBreaker.State() == gobreaker.StateHalfOpen {
			probed = true
			return struct{}{}, attempt()
		}
		return struct{}{}, errBreakerExcluded
	})
	if probed {
		return true, 0, true // whatever the store did afterwards
	}
	if serr != nil {
		return false, 0, false
	}
	switch err {
	case gobreaker.ErrOpenState:
		// gobreaker lets a probe through once its clock is past the
		// expiry, not at it: wait one nanosecond beyond.
		return false, max(time.Until(set.Expiry)+1, time.Nanosecond), true
	case gobreaker.ErrTooManyRequests:
		return false, min(max(spec.OpenTimeout/10, 10*time.Millisecond), time.Second), true
	case errBreakerExcluded:
	default:
		return false, 0, false
	}
	gen := set.Generation
	outcome := attempt()
	sb.execute(ctx, spec.StoreWait, func() (struct{}, error) {
		if sb.view.seen.Generation != gen {
			return struct{}{}, errBreakerExcluded
		}
		return struct{}{}, outcome
	})
	return true, 0, true
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
	defer func() { <-sb.sem }()
	v := sb.view
	v.until, v.done, v.err = until, ctx.Done(), nil
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
// 5 s), records the states it reads and writes
// and the store's first failure, and releases the lock itself when the
// read fails, since gobreaker then returns without unlocking.
type storeView struct {
	store        gobreaker.SharedDataStore
	initializing bool
	mutex        string // the lock's name, from the constructor
	initial      []byte // the initial state, from the constructor
	held         bool

	until time.Time
	done  <-chan struct{}
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
		err := v.store.Lock(v.mutex)
		if err == nil {
			v.held = true
			return nil
		}
		left := time.Until(v.until)
		if left <= 0 || !errors.Is(err, ErrStoreLocked) {
			return v.fail(fmt.Errorf("%w: %w", errStoreBusy, err))
		}
		t := time.NewTimer(min(pause, left))
		select {
		case <-t.C:
		case <-v.done:
			t.Stop()
			return v.fail(fmt.Errorf("%w: %w", errStoreBusy, err))
		}
		pause = min(2*pause, 4*time.Millisecond)
	}
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
	if err := v.store.Unlock(name); err != nil {
		return v.fail(err)
	}
	return nil
}

func (v *storeView) GetData(name string) ([]byte, error) {
	if v.initializing {
		return nil, nil
	}
	if err := v.lock(); err != nil {
		return nil, err
	}
	data, err := v.store.GetData(name)
	if err != nil {
		v.fail(err)
		v.Unlock(v.mutex)
		return nil, err
	}
	if len(data) == 0 {
		data = v.initial
	}
	if err := json.Unmarshal(data, &v.seen); err != nil {
		v.fail(err)
		v.Unlock(v.mutex)
		return nil, err
	}
	return data, nil
}

func (v *storeView) SetData(name string, data []byte) error {
	if v.initializing {
		v.initial = data
		return nil
	}
	if err := json.Unmarshal(data, &v.set); err != nil {
		return v.fail(err)
	}
	if err := v.store.SetData(name, data); err != nil {
		return v.fail(err)
	}
	return nil
}
