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
			if s.Attempts != 1 || s.BreakerWaits != 1 || s.BreakerFallbacks != 0 || s.Breakers[""] != retry.BreakerClosed {
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

// TestSharedBreakerLockWait: a lock held elsewhere is waited for within
// StoreWait and the caller's deadline, then the call falls back.
func TestSharedBreakerLockWait(t *testing.T) {
	tests := []struct {
		name      string
		storeWait time.Duration
		deadline  time.Duration // 0: none
		want      time.Duration
	}{
		{"StoreWait bounds the wait", 20 * time.Millisecond, 0, 20 * time.Millisecond},
		{"default StoreWait", 0, 0, 50 * time.Millisecond},
		{"the deadline bounds the wait", time.Second, 5 * time.Millisecond, 5 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := newMemStore()
				spec := tripOnFirst
				spec.StoreWait = tt.storeWait
				r := fleet(1, store, spec)[0]
				store.Lock("gobreaker:mutex:") // held by a stuck process
				ctx := t.Context()
				if tt.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.deadline)
					defer cancel()
				}
				start := time.Now()
				var at time.Duration
				err := r.Run(ctx, func(context.Context) error { at = time.Since(start); return nil })
				if err != nil {
					t.Fatal(err)
				}
				if at > tt.want || at < tt.want-5*time.Millisecond {
					t.Errorf("attempt ran after %v, want about %v", at, tt.want)
				}
				if s := r.Stats(); s.BreakerFallbacks != 1 {
					t.Errorf("fallbacks %d, want 1", s.BreakerFallbacks)
				}
			})
		})
	}
}

func TestSharedBreakerBadStoreWait(t *testing.T) {
	r := retry.New(retry.WithBreaker(retry.Breaker{StoreWait: -time.Second}))
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "StoreWait = -1s: must be >= 0") {
		t.Fatalf("error %v", err)
	}
}
