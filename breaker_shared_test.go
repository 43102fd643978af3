package retry_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sony/gobreaker/v2"
	"github.com/steadyhq/retry"
)

// memStore is an in-memory gobreaker.SharedDataStore standing for a store
// that several processes share; down makes every operation fail.
type memStore struct {
	mu    sync.Mutex
	data  map[string][]byte
	locks map[string]bool
	down  bool
}

var errStoreDown = errors.New("store down")

func newMemStore() *memStore {
	return &memStore{data: make(map[string][]byte), locks: make(map[string]bool)}
}

func (s *memStore) Lock(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.down:
		return errStoreDown
	case s.locks[name]:
		return retry.ErrStoreLocked
	}
	s.locks[name] = true
	return nil
}

func (s *memStore) Unlock(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return errStoreDown
	}
	delete(s.locks, name)
	return nil
}

func (s *memStore) GetData(name string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return nil, errStoreDown
	}
	return s.data[name], nil
}

func (s *memStore) SetData(name string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return errStoreDown
	}
	s.data[name] = data
	return nil
}

func (s *memStore) setDown(down bool) {
	s.mu.Lock()
	s.down = down
	s.mu.Unlock()
}

// shared reads the shared state of the breaker named name.
func (s *memStore) shared(t *testing.T, name string) gobreaker.SharedState {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var st gobreaker.SharedState
	if err := json.Unmarshal(s.data["gobreaker:state:"+name], &st); err != nil {
		t.Fatalf("shared state of %q: %v", name, err)
	}
	return st
}

// fleet returns n Retriers sharing one breaker through store.
func fleet(n int, store gobreaker.SharedDataStore, spec retry.Breaker, opts ...retry.Option) []*retry.Retrier {
	spec.Store = store
	rs := make([]*retry.Retrier, n)
	for i := range rs {
		rs[i] = retry.New(append([]retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 1}), retry.WithBreaker(spec)}, opts...)...)
	}
	return rs
}

// TestSharedBreakerOpensForAll: a failure seen by one Retrier opens the
// breaker for the others, which wait for the probe without consuming an
// attempt; one probe goes through and all resume.
func TestSharedBreakerOpensForAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rs := fleet(3, newMemStore(), tripOnFirst)
		_ = rs[0].Run(t.Context(), func(context.Context) error { return errTransient })

		// Refused at once when the wait may not be taken.
		err := retry.Run(t.Context(), func(context.Context) error { return nil }, rs[1], retry.WithMaxElapsed(time.Millisecond))
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonBreakerOpen || re.Attempts != 0 {
			t.Fatalf("second Retrier: %v, want breaker_open with no attempt", err)
		}

		start := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		ran := 0
		for _, r := range rs[1:] {
			wg.Go(func() {
				err := r.Run(t.Context(), func(context.Context) error {
					mu.Lock()
					ran++
					mu.Unlock()
					return nil
				})
				if err != nil {
					t.Errorf("after the open period: %v", err)
				}
			})
		}
		wg.Wait()
		// The first waits the open period exactly; the second may then
		// wait a moment for the store's lock, held by the probe.
		if elapsed := time.Since(start); elapsed < time.Second || elapsed > time.Second+5*time.Millisecond {
			t.Errorf("resumed after %v, want the 1 s open period", elapsed)
		}
		if ran != 2 {
			t.Errorf("%d attempts, want 2", ran)
		}
		for i, r := range rs[1:] {
			s := r.Stats()
			if s.Attempts != 1 || s.BreakerWaits != 1 || s.BreakerFallbacks != 0 || s.Breakers[""] != "closed" {
				t.Errorf("Retrier %d: %+v, want 1 attempt after 1 wait, closed", i+1, s)
			}
		}
	})
}

// TestSharedBreakerCounts: counts add up across Retriers: six attempts,
// two on each, trip a breaker that needs six, none lost to concurrency.
func TestSharedBreakerCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		rs := fleet(3, store, retry.Breaker{MinRequests: 60, FailureRatio: 0.5, OpenTimeout: time.Minute})
		var wg sync.WaitGroup
		for i := range 59 {
			wg.Go(func() {
				_ = rs[i%3].Run(t.Context(), func(context.Context) error {
					if i%2 == 0 {
						return errTransient
					}
					return nil
				})
			})
		}
		wg.Wait()
		st := store.shared(t, "")
		if st.State != gobreaker.StateClosed || st.Counts.TotalFailures != 30 || st.Counts.TotalSuccesses != 29 {
			t.Fatalf("shared %+v, want closed with 30 failures and 29 successes", st.Counts)
		}
		_ = rs[0].Run(t.Context(), func(context.Context) error { return errTransient })
		if st := store.shared(t, ""); st.State != gobreaker.StateOpen {
			t.Fatalf("state %v after the 60th attempt, want open", st.State)
		}
	})
}

// TestSharedBreakerFallback: with the store down, calls keep their
// deadlines and run through the local breaker, counted in Stats; when the
// store returns they use the shared breaker again.
func TestSharedBreakerFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		r := fleet(1, store, tripOnFirst)[0]
		store.setDown(true)
		err := r.Run(t.Context(), func(context.Context) error { return errTransient }) // opens the local breaker
		if !errors.Is(err, errTransient) {
			t.Fatalf("with the store down: %v, want the attempt's error", err)
		}
		err = retry.Run(t.Context(), func(context.Context) error { return nil }, r, retry.WithMaxElapsed(time.Millisecond))
		if !errors.Is(err, gobreaker.ErrOpenState) {
			t.Fatalf("with the local breaker open: %v", err)
		}
		if s := r.Stats(); s.BreakerFallbacks != 2 {
			t.Fatalf("fallbacks %d, want 2", s.BreakerFallbacks)
		}
		store.setDown(false)
		if err := r.Run(t.Context(), func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if s := r.Stats(); s.BreakerFallbacks != 2 {
			t.Fatalf("fallbacks %d after the store returned, want still 2", s.BreakerFallbacks)
		}
		if st := store.shared(t, ""); st.Counts.TotalSuccesses != 1 {
			t.Fatalf("shared counts %+v, want the one success", st.Counts)
		}
	})
}

// TestSharedBreakerBadState: a stored state that is not one of this
// breaker's (no JSON, or another number of buckets) is a store failure,
// not a panic.
func TestSharedBreakerBadState(t *testing.T) {
	for _, data := range []string{`{`, `{"state":0}`, `{"state":0,"buckets":[{},{}]}`} {
		store := newMemStore()
		store.data["gobreaker:state:"] = []byte(data)
		r := fleet(1, store, tripOnFirst)[0]
		if err := r.Run(t.Context(), func(context.Context) error { return nil }); err != nil {
			t.Errorf("state %s: %v", data, err)
		}
		if s := r.Stats(); s.BreakerFallbacks != 1 {
			t.Errorf("state %s: fallbacks %d, want 1", data, s.BreakerFallbacks)
		}
	}
}

// setShared stores st as the shared state of the breaker named name.
func (s *memStore) setShared(t *testing.T, name string, st gobreaker.SharedState) {
	t.Helper()
	if st.Buckets == nil {
		st.Buckets = make([]gobreaker.Counts, 10) // a Window of ten buckets
	}
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.data["gobreaker:state:"+name] = data
	s.mu.Unlock()
}

// TestSharedBreakerLockBusy: a lock held elsewhere is waited for within
// StoreWait and the caller's deadline; past that the call follows the
// state read without the lock, never the local breaker: closed, the
// attempt runs; open, the call waits for the expiry; half-open (or open
// past its expiry: a probe under way), it looks again shortly.
func TestSharedBreakerLockBusy(t *testing.T) {
	const open, halfOpen, openPast = "open", "half-open", "open past its expiry"
	tests := []struct {
		name       string
		state      string // stored; "" for none, a closed breaker
		storeWait  time.Duration
		deadline   time.Duration // 0: none
		maxElapsed time.Duration // 0: none
		release    time.Duration // the holder releases the lock then; 0: never
		ranAt      time.Duration // -1: the attempt must not run
		took       time.Duration
		err        string // in the error; "" for none
	}{
		// The outcome waits for the lock as long again, then is dropped.
		{"closed: runs past StoreWait", "", 20 * time.Millisecond, 0, 0, 0, 20 * time.Millisecond, 40 * time.Millisecond, ""},
		{"closed: the default StoreWait", "", 0, 0, 0, 0, 50 * time.Millisecond, 100 * time.Millisecond, ""},
		{"closed: the deadline bounds the wait", "", time.Second, 5 * time.Millisecond, 0, 0, -1, 5 * time.Millisecond, "after 0 attempts"},
		{"open: waits for the expiry", open, 20 * time.Millisecond, 0, time.Millisecond, 0, -1, 20 * time.Millisecond, "breaker_open after 0 attempts: retry: circuit breaker is open for another 80ms"},
		{"half-open: looks again", halfOpen, 20 * time.Millisecond, 0, time.Millisecond, 0, -1, 20 * time.Millisecond, "circuit breaker is open for another 100ms"},
		{"open past its expiry: looks again", openPast, 20 * time.Millisecond, 0, time.Millisecond, 0, -1, 20 * time.Millisecond, "circuit breaker is open for another 100ms"},
		{"open: probes once the lock is free", open, 20 * time.Millisecond, time.Second, 0, 150 * time.Millisecond, 220 * time.Millisecond, 220 * time.Millisecond, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := newMemStore()
				switch tt.state {
				case open:
					store.setShared(t, "", gobreaker.SharedState{State: gobreaker.StateOpen, Expiry: time.Now().Add(100 * time.Millisecond)})
				case halfOpen:
					store.setShared(t, "", gobreaker.SharedState{State: gobreaker.StateHalfOpen})
				case openPast:
					store.setShared(t, "", gobreaker.SharedState{State: gobreaker.StateOpen, Expiry: time.Now().Add(-time.Millisecond)})
				}
				spec := tripOnFirst
				spec.StoreWait = tt.storeWait
				r := fleet(1, store, spec)[0]
				store.Lock("gobreaker:mutex:") // held by a stuck process
				if tt.release > 0 {
					time.AfterFunc(tt.release, func() { store.Unlock("gobreaker:mutex:") })
				}
				ctx := t.Context()
				if tt.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.deadline)
					defer cancel()
				}
				var opts []retry.Option
				if tt.maxElapsed > 0 {
					opts = append(opts, retry.WithMaxElapsed(tt.maxElapsed))
				}
				start := time.Now()
				at := time.Duration(-1)
				err := retry.Run(ctx, func(context.Context) error { at = time.Since(start); return nil }, append([]retry.Option{r}, opts...)...)
				took := time.Since(start)
				switch {
				case tt.err == "" && err != nil:
					t.Fatalf("error %v", err)
				case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				// Waits are exact; gobreaker's expiry adds a nanosecond.
				if tt.ranAt >= 0 {
					at = at.Truncate(time.Millisecond)
				}
				if at != tt.ranAt || took.Truncate(time.Millisecond) != tt.took {
					t.Errorf("attempt ran at %v, call took %v; want %v and %v", at, took, tt.ranAt, tt.took)
				}
				if s := r.Stats(); s.BreakerFallbacks != 0 {
					t.Errorf("fallbacks %d, want none: the store did not fail", s.BreakerFallbacks)
				}
			})
		})
	}
}

// slowStore is a memStore whose every operation takes delay; with ctx set,
// it implements retry.ContextStore, its operations cut short by their
// context.
type slowStore struct {
	*memStore
	delay time.Duration
}

func (s slowStore) Lock(name string) error { time.Sleep(s.delay); return s.memStore.Lock(name) }
func (s slowStore) Unlock(name string) error {
	time.Sleep(s.delay)
	return s.memStore.Unlock(name)
}
func (s slowStore) GetData(name string) ([]byte, error) {
	time.Sleep(s.delay)
	return s.memStore.GetData(name)
}
func (s slowStore) SetData(name string, data []byte) error {
	time.Sleep(s.delay)
	return s.memStore.SetData(name, data)
}

type slowContextStore struct{ slowStore }

var _ retry.ContextStore = slowContextStore{}

func (s slowContextStore) wait(ctx context.Context) error {
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s slowContextStore) LockContext(ctx context.Context, name string) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	return s.memStore.Lock(name)
}

func (s slowContextStore) UnlockContext(ctx context.Context, name string) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	return s.memStore.Unlock(name)
}

func (s slowContextStore) GetDataContext(ctx context.Context, name string) ([]byte, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.memStore.GetData(name)
}

func (s slowContextStore) SetDataContext(ctx context.Context, name string, data []byte) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	return s.memStore.SetData(name, data)
}

// TestSharedBreakerSlowStore: a store slower than the caller's deadline
// allows neither starts the attempt past the deadline nor holds the call
// for the outcome once it has passed; a ContextStore is cut at the
// deadline, but for the unlock, and a probe's outcome is written whatever
// the time.
func TestSharedBreakerSlowStore(t *testing.T) {
	const op = 15 * time.Millisecond // each store operation
	tests := []struct {
		name       string
		context    bool          // a ContextStore
		deadline   time.Duration // of the call
		fn         time.Duration // the attempt's time; -1: until its context ends
		halfOpen   bool          // the stored breaker is open past its expiry: the attempt probes
		ran        bool
		took       time.Duration
		wantClosed bool // the stored state is closed afterwards
	}{
		// Lock, then a read cut at 20 ms, then the unlock.
		{"deadline within the admission", true, 20 * time.Millisecond, 0, false, false, 20*time.Millisecond + op, false},
		// Lock and read take 30 ms; the write and the unlock no more.
		{"deadline within the admission, no context", false, 20 * time.Millisecond, 0, false, false, 30*time.Millisecond + op, false},
		// Admission 60 ms, the attempt until the deadline, no outcome.
		{"deadline within the attempt", true, 100 * time.Millisecond, -1, false, true, 100 * time.Millisecond, false},
		{"deadline within the attempt, no context", false, 100 * time.Millisecond, -1, false, true, 100 * time.Millisecond, false},
		// Lock and read 30 ms, the probe 80 ms, then write and unlock.
		{"a probe past the deadline", true, 100 * time.Millisecond, 80 * time.Millisecond, true, true, 110*time.Millisecond + 2*op, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := newMemStore()
				if tt.halfOpen {
					mem.setShared(t, "", gobreaker.SharedState{State: gobreaker.StateOpen, Expiry: time.Now().Add(-time.Millisecond)})
				}
				var store gobreaker.SharedDataStore = slowStore{mem, op}
				if tt.context {
					store = slowContextStore{slowStore{mem, op}}
				}
				r := fleet(1, store, tripOnFirst)[0]
				ctx, cancel := context.WithTimeout(t.Context(), tt.deadline)
				defer cancel()
				start := time.Now()
				ran, late := false, false
				err := r.Run(ctx, func(ctx context.Context) error {
					ran, late = true, ctx.Err() != nil
					if tt.fn < 0 {
						<-ctx.Done()
						return ctx.Err()
					}
					time.Sleep(tt.fn)
					return nil
				})
				took := time.Since(start)
				if ran != tt.ran || late || took != tt.took {
					t.Errorf("ran %v (past the deadline: %v), took %v, %v; want ran %v, took %v", ran, late, took, err, tt.ran, tt.took)
				}
				if !tt.wantClosed && err == nil || tt.wantClosed && err != nil {
					t.Errorf("error %v", err)
				}
				if tt.wantClosed {
					if got := mem.shared(t, "").State; got != gobreaker.StateClosed {
						t.Errorf("stored state %v after the probe succeeded, want closed", got)
					}
				}
				if s := r.Stats(); s.BreakerFallbacks != 0 {
					t.Errorf("fallbacks %d, want none", s.BreakerFallbacks)
				}
			})
		})
	}
}

// TestSharedBreakerStandIn: the local breaker learns the outcomes of
// attempts run through the shared one, without reporting its own changes,
// so that when the store fails it starts from this process's history.
func TestSharedBreakerStandIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		var changes []string
		r := fleet(1, store, tripOnFirst, retry.OnBreakerChange(func(c retry.BreakerChange) {
			changes = append(changes, c.From+">"+c.To)
		}))[0]
		_ = r.Run(t.Context(), func(context.Context) error { return errTransient }) // opens both
		store.setDown(true)
		ran := false
		err := retry.Run(t.Context(), func(context.Context) error { ran = true; return nil }, r, retry.WithMaxElapsed(time.Millisecond))
		if ran || !errors.Is(err, gobreaker.ErrOpenState) {
			t.Fatalf("store down after a failure: ran %v, %v; want the local breaker open", ran, err)
		}
		if s := r.Stats(); s.BreakerFallbacks != 1 {
			t.Errorf("fallbacks %d, want 1", s.BreakerFallbacks)
		}
		// The local breaker probes after its open period, and reports it.
		time.Sleep(time.Second)
		if err := r.Run(t.Context(), func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(changes, " "); got != "closed>open open>half_open half_open>closed" {
			t.Errorf("changes %q, want the shared breaker's opening, then the local one's probe", got)
		}
	})
}

func TestSharedBreakerBadStoreWait(t *testing.T) {
	r := retry.New(retry.WithBreaker(retry.Breaker{StoreWait: -time.Second}))
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "StoreWait = -1s: must be >= 0") {
		t.Fatalf("error %v", err)
	}
}

// TestSharedBreakerPanic: an attempt that panics is recorded in the shared
// breaker as a failure, and the panic reaches the caller.
func TestSharedBreakerPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		rs := fleet(2, store, retry.Breaker{MinRequests: 1, FailureRatio: 1, OpenTimeout: time.Minute})
		func() {
			defer func() {
				if p := recover(); p != "boom" {
					t.Fatalf("recovered %v, want boom", p)
				}
			}()
			_ = rs[0].Run(t.Context(), func(context.Context) error { panic("boom") })
		}()
		if st := store.shared(t, ""); st.State != gobreaker.StateOpen {
			t.Fatalf("shared state %v, want open after the panic", st.State)
		}
	})
}
