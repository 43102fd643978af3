package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/steadyhq/retry"
	retryredis "github.com/steadyhq/retry/redis"
)

// TestStoreLock: the lock is had by one store at a time, expires after
// LockTTL, and is released only by its holder: an unlock after the lock
// expired and passed to another leaves the new holder's lock in place.
func TestStoreLock(t *testing.T) {
	s := startServer(t)
	const ttl = 30 * time.Millisecond
	type step struct {
		who  int    // the store, of three; -1 for the pause
		op   string // "lock", "unlock" or "expire" (a pause past LockTTL)
		busy bool   // Lock returns retry.ErrStoreLocked
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"held by one at a time", []step{{0, "lock", false}, {1, "lock", true}, {0, "unlock", false}, {1, "lock", false}}},
		{"expires after LockTTL", []step{{0, "lock", false}, {1, "lock", true}, {-1, "expire", false}, {1, "lock", false}, {0, "lock", true}}},
		{"an expired holder's unlock leaves the next holder's lock", []step{
			{0, "lock", false}, {-1, "expire", false}, {1, "lock", false},
			{0, "unlock", false}, {2, "lock", true},
			{1, "unlock", false}, {2, "lock", false},
		}},
		{"an unlock without the lock does nothing", []step{{0, "unlock", false}, {0, "lock", false}, {1, "unlock", false}, {2, "lock", true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stores [3]*retryredis.Store
			for i := range stores {
				st, err := retryredis.NewStore(s.Client(), retryredis.Options{Prefix: tt.name + ":", LockTTL: ttl})
				if err != nil {
					t.Fatal(err)
				}
				stores[i] = st
			}
			var busy int64
			for i, st := range tt.steps {
				var err error
				switch st.op {
				case "expire":
					time.Sleep(ttl + 10*time.Millisecond)
					continue
				case "lock":
					err = stores[st.who].Lock("m")
				case "unlock":
					err = stores[st.who].Unlock("m")
				}
				if st.busy {
					busy++
					if !errors.Is(err, retry.ErrStoreLocked) {
						t.Fatalf("step %d: store %d %s: %v, want the lock held elsewhere", i, st.who, st.op, err)
					}
				} else if err != nil {
					t.Fatalf("step %d: store %d %s: %v", i, st.who, st.op, err)
				}
			}
			var got int64
			for _, st := range stores {
				if e := st.Stats().Errors; e != 0 {
					t.Errorf("%d store errors", e)
				}
				got += st.Stats().Busy
			}
			if got != busy {
				t.Errorf("Busy %d, want %d", got, busy)
			}
		})
	}
}

// TestStoreStalledLock: a lock request cut by the store's timeout while
// Redis is stalled runs when Redis resumes; the lock it takes is not left
// for LockTTL: the store takes it back on its next request and releases
// it, after which another store has it at once.
func TestStoreStalledLock(t *testing.T) {
	s := startServer(t)
	c := s.Client()
	store, err := retryredis.NewStore(c, retryredis.Options{Timeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	other, err := retryredis.NewStore(s.Client(), retryredis.Options{Timeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Lock("m"); err != nil { // a pooled connection, as in use
		t.Fatal(err)
	}
	if err := store.Unlock("m"); err != nil {
		t.Fatal(err)
	}
	blocker := s.ClientWith(func(o *goredis.Options) { o.ReadTimeout = time.Second })
	resumed := make(chan error)
	go func() { resumed <- blocker.Do(context.Background(), "DEBUG", "SLEEP", "0.2").Err() }()
	time.Sleep(20 * time.Millisecond) // Redis asleep
	if err := store.Lock("m"); err == nil || errors.Is(err, retry.ErrStoreLocked) {
		t.Fatalf("Lock with Redis stalled: %v, want the timeout", err)
	}
	if err := <-resumed; err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(t.Context()).Err(); err != nil { // after the queued requests
		t.Fatal(err)
	}
	ttl, _ := c.PTTL(t.Context(), "retry:m").Result()
	t.Logf("after Redis resumed, the lock's PTTL is %v (-2ms: none)", ttl)
	if err := store.Lock("m"); err != nil {
		t.Fatalf("Lock after Redis resumed: %v, want the lock the failed request left taken back", err)
	}
	if err := store.Unlock("m"); err != nil {
		t.Fatal(err)
	}
	if err := other.Lock("m"); err != nil {
		t.Fatalf("another store's Lock: %v, want the lock free", err)
	}
}

// TestStoreSlowDeadline: with every command slow (15 ms, under the
// store's 50 ms timeout), a call is held past its deadline at most one
// store timeout, and its attempt never starts past the deadline.
func TestStoreSlowDeadline(t *testing.T) {
	s := startServer(t)
	for _, deadline := range []time.Duration{20 * time.Millisecond, 100 * time.Millisecond} {
		t.Run(deadline.String(), func(t *testing.T) {
			c := s.Client()
			c.AddHook(latency(15 * time.Millisecond))
			store, err := retryredis.NewStore(c, retryredis.Options{Prefix: deadline.String()})
			if err != nil {
				t.Fatal(err)
			}
			r := retry.New(retry.WithBreaker(retry.Breaker{Store: store}))
			if err := r.Run(t.Context(), func(context.Context) error { return nil }); err != nil { // a pooled connection
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), deadline)
			defer cancel()
			start := time.Now()
			ran, late := false, false
			err = r.Run(ctx, func(ctx context.Context) error { ran, late = true, ctx.Err() != nil; return nil })
			took := time.Since(start)
			t.Logf("%v deadline, 15 ms per command: returned after %v: ran %v, %v", deadline, took, ran, err)
			if late || took > deadline+retryredis.DefaultTimeout+25*time.Millisecond {
				t.Errorf("attempt started past the deadline: %v; call took %v", late, took)
			}
			if ran != (err == nil) {
				t.Errorf("ran %v, error %v", ran, err)
			}
		})
	}
}
