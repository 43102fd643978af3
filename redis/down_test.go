package redis_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/steadyhq/retry"
	retryredis "github.com/steadyhq/retry/redis"
)

// storeTimeout bounds the round trips of the Store, the Limiter and the
// Budget (long enough for a loaded machine's healthy round trip, far
// shorter than the 1 s stall of the test), and storeSync is their sync
// interval and the term of the limiter's leases: two intervals after Redis
// stops answering, the fleet's state is stale and the local breaker
// decides, and no leased token is left.
const (
	storeTimeout = 100 * time.Millisecond
	storeSync    = 10 * time.Millisecond
)

// fleetMember is one Retrier with all three shared components on one client.
type fleetMember struct {
	r       *retry.Retrier
	store   *retryredis.Store
	limiter *retryredis.Limiter
	budget  *retryredis.Budget
}

func newMember(t *testing.T, c goredis.UniversalClient) fleetMember {
	t.Helper()
	store, err := retryredis.NewStore(c, retryredis.Options{Timeout: storeTimeout, SyncInterval: storeSync})
	if err != nil {
		t.Fatal(err)
	}
	m := fleetMember{store: store}
	// Leases of one interval (a Heartbeat as short as the interval): each
	// call with Redis away finds its process's lease ended, and meets
	// the fallback.
	if m.limiter, err = retryredis.NewLimiter(c, 1000, 10, false, retryredis.Options{Timeout: storeTimeout, SyncInterval: storeSync, Heartbeat: storeSync}); err != nil {
		t.Fatal(err)
	}
	if m.budget, err = retryredis.NewBudget(c, retry.Budget{Tokens: 1000}, retryredis.Options{Timeout: storeTimeout, SyncInterval: storeSync}); err != nil {
		t.Fatal(err)
	}
	m.r = retry.New(
		retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond, MaxInterval: time.Millisecond}),
		retry.WithBreaker(retry.Breaker{Store: m.store, MinRequests: 100, OpenTimeout: time.Second}),
		retry.WithRateLimit(retry.RateLimit{Shared: m.limiter}),
		retry.WithBudget(retry.Budget{Shared: m.budget}),
	)
	return m
}

// flaky fails its first attempt and succeeds on the retry, so that a call
// meets the limiter twice, the breaker twice and the budget once.
func flaky() func(context.Context) error {
	var n atomic.Int64
	return func(context.Context) error {
		if n.Add(1) == 1 {
			return errDown
		}
		return nil
	}
}

// TestRedisDown: with Redis killed mid-run, and then slow, calls keep their
// deadlines and fall back as documented (the local breaker, the local
// limiter and the local budget stand in), the counters show it, and all goes
// back to Redis when it returns on the same port.
func TestRedisDown(t *testing.T) {
	s := startServer(t)
	m := newMember(t, s.Client())
	ctx := t.Context()
	call := func(timeout time.Duration) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		start := time.Now()
		err := m.r.Run(ctx, flaky())
		return time.Since(start), err
	}

	if _, err := call(time.Second); err != nil {
		t.Fatalf("with Redis up: %v", err)
	}
	if st, ls, bs := m.store.Stats(), m.limiter.Stats(), m.budget.Stats(); st.Errors != 0 || ls.Leases == 0 || ls.Fallbacks != 0 || bs.Granted != 1 {
		t.Fatalf("with Redis up: store %+v, limiter %+v, budget %+v", st, ls, bs)
	}

	s.Stop()
	time.Sleep(3 * storeSync) // the fleet's state goes stale
	// slack is what a loaded machine may add between a deadline and the
	// moment the call notices it.
	const slack = 50 * time.Millisecond
	for _, timeout := range []time.Duration{time.Second, 100 * time.Millisecond, 30 * time.Millisecond} {
		took, err := call(timeout)
		if err != nil {
			t.Errorf("Redis down, deadline %v: %v, want success through the fallbacks", timeout, err)
		}
		if took > timeout+slack {
			t.Errorf("Redis down: call took %v, past its %v deadline", took, timeout)
		}
	}
	down := m.r.Stats()
	st, ls, bs := m.store.Stats(), m.limiter.Stats(), m.budget.Stats()
	t.Logf("Redis down: retry %+v; store %+v; limiter %+v; budget %+v", down, st, ls, bs)
	if down.BreakerFallbacks < 3 || st.Errors == 0 || ls.Fallbacks < 3 || bs.Fallbacks < 1 {
		t.Errorf("Redis down: fallbacks not counted")
	}

	s.Start()
	// The client reconnects on its next command.
	took, err := call(time.Second)
	if err != nil {
		t.Fatalf("Redis back: %v", err)
	}
	time.Sleep(2 * storeSync) // a sync reads the fleet's state again
	if _, err := call(time.Second); err != nil {
		t.Fatalf("Redis back: %v", err)
	}
	before := m.r.Stats().BreakerFallbacks
	ls0, bs0 := m.limiter.Stats(), m.budget.Stats()
	if _, err := call(time.Second); err != nil {
		t.Fatalf("Redis back: %v", err)
	}
	ls1, bs1 := m.limiter.Stats(), m.budget.Stats()
	if m.r.Stats().BreakerFallbacks != before || ls1.Fallbacks != ls0.Fallbacks || bs1.Fallbacks != bs0.Fallbacks ||
		bs1.Granted != bs0.Granted+1 {
		t.Errorf("Redis back: limiter %+v → %+v, budget %+v → %+v; want Redis answering again", ls0, ls1, bs0, bs1)
	}
	t.Logf("first call after the restart took %v", took)

	// Slow: Redis stalled for 1 s. Calls keep their deadlines: one with
	// time for the fallbacks succeeds through them; one without starts no
	// attempt past its deadline. A round trip not cut at its bound would
	// hold a call for the stall, far past either bound.
	blocker := s.ClientWith(func(o *goredis.Options) { o.ReadTimeout = 2 * time.Second })
	resumed := make(chan error, 1)
	go func() { resumed <- blocker.Do(context.Background(), "DEBUG", "SLEEP", "1").Err() }()
	probe := s.Client()
	waitFor(t, time.Second, "Redis stalled", func() bool {
		ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		return probe.Ping(ctx).Err() != nil
	})
	for _, tt := range []struct {
		timeout time.Duration
		ok      bool
	}{
		// Limiter 100 ms, breaker 100 ms, the attempt, budget 100 ms,
		// limiter 100 ms, breaker 100 ms: 500 ms, all within the stall.
		{timeout: 700 * time.Millisecond, ok: true},
		// Limiter 25 ms (half the time left), the breaker half of the
		// rest: whatever the outcome, nothing past the deadline.
		{timeout: 50 * time.Millisecond},
	} {
		s0, ls0 := m.r.Stats(), m.limiter.Stats()
		ctx, cancel := context.WithTimeout(ctx, tt.timeout)
		start := time.Now()
		var late atomic.Bool
		first := true
		err := m.r.Run(ctx, func(ctx context.Context) error {
			if ctx.Err() != nil {
				late.Store(true)
			}
			if first {
				first = false
				return errDown
			}
			return nil
		})
		took := time.Since(start)
		cancel()
		s1, ls1 := m.r.Stats(), m.limiter.Stats()
		t.Logf("Redis slow, deadline %v: returned after %v: %v; %d attempts, %d breaker fallbacks, %d limiter fallbacks",
			tt.timeout, took, err, s1.Attempts-s0.Attempts, s1.BreakerFallbacks-s0.BreakerFallbacks, ls1.Fallbacks-ls0.Fallbacks)
		if took > tt.timeout+storeTimeout+slack || late.Load() {
			t.Errorf("Redis slow: call took %v, past its %v deadline and the store's %v; an attempt started past the deadline: %v", took, tt.timeout, storeTimeout, late.Load())
		}
		if tt.ok && (err != nil || s1.Attempts-s0.Attempts != 2 || ls1.Fallbacks-ls0.Fallbacks != 2) {
			t.Errorf("Redis slow, deadline %v: %v; want success after 2 attempts through 2 limiter fallbacks", tt.timeout, err)
		}
		var re *retry.Error
		if !tt.ok && err != nil && !errors.As(err, &re) {
			t.Errorf("Redis slow, deadline %v: %v", tt.timeout, err)
		}
	}
	if err := <-resumed; err != nil {
		t.Fatal(err)
	}
	// Redis answers again: after a sync, the shared breaker serves the
	// next call.
	_, _ = call(time.Second)
	time.Sleep(2 * storeSync)
	_, _ = call(time.Second)
	s0, st0 := m.r.Stats(), m.store.Stats()
	if _, err := call(time.Second); err != nil {
		t.Fatalf("Redis resumed: %v", err)
	}
	if s1, st1 := m.r.Stats(), m.store.Stats(); s1.BreakerFallbacks != s0.BreakerFallbacks || st1.Errors != st0.Errors {
		t.Errorf("Redis resumed: store %+v → %+v, fallbacks %d → %d; want the shared breaker", st0, st1, s0.BreakerFallbacks, s1.BreakerFallbacks)
	}
}

// TestRejoinAfterPoolGaveUp: an outage long enough for the client's pool to
// stop dialing (PoolSize failed dials in a row: one here, with PoolSize 1)
// delays the way back: go-redis then dials once a second. Every component
// is back on the fleet's state within about a second more than
// SyncInterval plus Timeout of Redis answering, as the package doc says
// (here 1.09 to 1.11 s; the bound allows 500 ms for a loaded machine).
func TestRejoinAfterPoolGaveUp(t *testing.T) {
	const slack = 500 * time.Millisecond
	s := startServer(t)
	m := newMember(t, s.ClientWith(func(o *goredis.Options) { o.PoolSize = 1 }))
	call := func() { m.r.Run(t.Context(), flaky()) }
	onFleet := func() bool {
		call()
		return m.r.Stats().BreakersOnFleet[""] && m.limiter.Stats().OnFleet && m.budget.Stats().OnFleet
	}
	waitFor(t, 3*time.Second, "every component on the fleet's state", onFleet)
	s.Stop()
	waitFor(t, 3*time.Second, "every component off the fleet's state", func() bool {
		call()
		return !m.r.Stats().BreakersOnFleet[""] && !m.limiter.Stats().OnFleet && !m.budget.Stats().OnFleet
	})
	for range 20 { // more failed dials than the pool's size
		call()
		time.Sleep(storeSync)
	}
	s.Start()
	back := time.Now()
	bound := time.Second + storeSync + storeTimeout + slack
	waitFor(t, bound, "every component back on the fleet's state", onFleet)
	t.Logf("back on the fleet's state %v after Redis answered (bound %v)", time.Since(back).Round(time.Millisecond), bound)
}
