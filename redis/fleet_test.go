package redis_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/steadyhq/retry"
	retryredis "github.com/steadyhq/retry/redis"
)

var errDown = errors.New("dependency down")

func mustStore(t *testing.T, c goredis.UniversalClient) *retryredis.Store {
	t.Helper()
	s, err := retryredis.NewStore(c, retryredis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFleetBreaker: three Retrier with separate clients share one breaker:
// failures seen by one open it for all, and all resume after one probe.
func TestFleetBreaker(t *testing.T) {
	s := startServer(t)
	var mu sync.Mutex
	changes := map[string]int{}
	// The default StoreWait: calls that queue past it for the lock follow
	// the state read without it.
	spec := retry.Breaker{MinRequests: 3, FailureRatio: 1, OpenTimeout: 100 * time.Millisecond}
	rs := make([]*retry.Retrier, 3)
	for i := range rs {
		spec.Store = mustStore(t, s.Client())
		rs[i] = retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}), retry.WithBreaker(spec),
			retry.OnBreakerChange(func(c retry.BreakerChange) {
				mu.Lock()
				changes[c.From+">"+c.To]++
				mu.Unlock()
			}))
	}
	ctx := t.Context()
	for range 3 {
		_ = rs[0].Run(ctx, func(context.Context) error { return errDown })
	}
	for i, r := range rs {
		err := retry.Run(ctx, func(context.Context) error { return nil }, r, retry.WithMaxElapsed(time.Millisecond))
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonBreakerOpen || re.Attempts != 0 {
			t.Fatalf("Retrier %d after 3 failures on Retrier 0: %v, want breaker_open before any attempt", i, err)
		}
	}
	var ran atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for _, r := range rs {
		for range 4 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				if err := r.Run(ctx, func(context.Context) error { ran.Add(1); return nil }); err != nil {
					t.Errorf("after the open period: %v", err)
				}
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	if ran.Load() != 12 {
		t.Errorf("%d attempts, want 12: waits for an open breaker consume none", ran.Load())
	}
	if elapsed < 50*time.Millisecond || elapsed > 500*time.Millisecond {
		t.Errorf("resumed after %v, want about the 100 ms open period", elapsed)
	}
	if changes["half_open>closed"] != 1 || changes["closed>open"] != 1 {
		t.Errorf("changes %v: want the breaker opened once and closed by one probe", changes)
	}
	for i, r := range rs {
		if st := r.Stats(); st.BreakerFallbacks != 0 || st.Breakers[""] != "closed" && i > 0 {
			t.Errorf("Retrier %d: %+v", i, st)
		}
	}
	t.Logf("three Retrier resumed %v after the breaker opened; changes %v", elapsed, changes)
}

// TestFleetBreakerBusyLock: 48 callers across three Retrier queue for the
// store's lock past StoreWait, while the shared breaker is open or
// half-open with its one probe in flight: none runs an attempt against
// the dependency, and none falls back to its process's closed breaker.
func TestFleetBreakerBusyLock(t *testing.T) {
	s := startServer(t)
	tests := []struct {
		name        string
		openTimeout time.Duration
		probe       time.Duration // a probe that fails after this, started half-open; 0: none
	}{
		{"open", 10 * time.Second, 0},
		{"half-open, its probe slow", 100 * time.Millisecond, 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := retry.Breaker{MinRequests: 3, FailureRatio: 1, OpenTimeout: tt.openTimeout}
			rs := make([]*retry.Retrier, 3)
			for i := range rs {
				// Timeouts for a loaded machine: this test is about the
				// lock, not Redis failing.
				c := s.ClientWith(func(o *goredis.Options) {
					o.DialTimeout, o.ReadTimeout, o.WriteTimeout = time.Second, time.Second, time.Second
				})
				store, err := retryredis.NewStore(c, retryredis.Options{Prefix: tt.name + ":", Timeout: time.Second})
				if err != nil {
					t.Fatal(err)
				}
				spec.Store = store
				rs[i] = retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}), retry.WithBreaker(spec))
			}
			for range 3 {
				_ = rs[0].Run(t.Context(), func(context.Context) error { return errDown })
			}
			var guarded atomic.Bool // attempts must not run
			guarded.Store(true)
			var wg sync.WaitGroup
			if tt.probe > 0 {
				time.Sleep(tt.openTimeout + 20*time.Millisecond)
				wg.Go(func() {
					_ = rs[0].Run(t.Context(), func(context.Context) error {
						time.Sleep(tt.probe)
						guarded.Store(false)
						return errDown // still down
					})
				})
				time.Sleep(30 * time.Millisecond) // the probe holds the lock
			}
			var calls, ran atomic.Int64
			stop := time.Now().Add(300 * time.Millisecond)
			for _, r := range rs {
				for range 16 {
					wg.Go(func() {
						for time.Now().Before(stop) {
							calls.Add(1)
							ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
							_ = r.Run(ctx, func(context.Context) error {
								if guarded.Load() {
									ran.Add(1)
								}
								return errDown
							})
							cancel()
						}
					})
				}
			}
			wg.Wait()
			var fallbacks int64
			for _, r := range rs {
				fallbacks += r.Stats().BreakerFallbacks
			}
			t.Logf("%d calls; %d attempts ran while guarded; %d fallbacks", calls.Load(), ran.Load(), fallbacks)
			if ran.Load() != 0 || fallbacks != 0 {
				t.Errorf("%d attempts ran against the dependency, %d calls fell back to a local breaker; want none", ran.Load(), fallbacks)
			}
		})
	}
}

// TestFleetLimiter: three clients share one limit; over a measured period
// their attempts stay within limit·T + burst and come within 20% of it (the
// floor leaves room for a loaded machine's scheduling).
func TestFleetLimiter(t *testing.T) {
	s := startServer(t)
	const limit, burst = 200.0, 2
	rs := make([]*retry.Retrier, 3)
	ls := make([]*retryredis.Limiter, 3)
	for i := range rs {
		l, err := retryredis.NewLimiter(s.Client(), limit, burst, false, retryredis.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ls[i] = l
		rs[i] = retry.New(retry.WithRateLimit(retry.RateLimit{Shared: l}))
	}
	var n atomic.Int64
	var wg sync.WaitGroup
	// Calls without a deadline: one near its end would leave Redis less
	// than its round trip and rightly take a local token.
	start := time.Now()
	stop := start.Add(500 * time.Millisecond)
	for _, r := range rs {
		for range 3 {
			wg.Go(func() {
				for time.Now().Before(stop) {
					_ = r.Run(t.Context(), func(context.Context) error { n.Add(1); return nil })
				}
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	ceiling := limit*elapsed + burst
	got := float64(n.Load())
	var st retryredis.LimiterStats
	for _, l := range ls {
		s := l.Stats()
		st.Allowed += s.Allowed
		st.Waits += s.Waits
		st.Fallbacks += s.Fallbacks
	}
	t.Logf("%.0f attempts in %.3f s across 3 clients at %.0f/s burst %d: %.1f%% of limit·T+burst; %+v", got, elapsed, limit, burst, 100*got/ceiling, st)
	if got > ceiling+1 || got < 0.8*ceiling {
		t.Errorf("%.0f attempts, want within [80%%, 100%%] of %.1f", got, ceiling)
	}
	if st.Fallbacks != 0 {
		t.Errorf("%d fallbacks with Redis up", st.Fallbacks)
	}
}

// scaledClock runs k times faster than real time, so that minutes of
// traffic take seconds: budgets, windows and backoff all in its time.
type scaledClock struct {
	start time.Time
	k     float64
}

func (c scaledClock) Now() time.Time {
	return c.start.Add(time.Duration(float64(time.Since(c.start)) * c.k))
}

func (c scaledClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(time.Duration(float64(d) / c.k))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// outage sends rate calls per second of clk's time for dur to the Retrier
// in turn, every attempt failing, and returns attempts per call.
func outage(t *testing.T, clk scaledClock, rs []*retry.Retrier, rate int, dur time.Duration) float64 {
	var attempts atomic.Int64
	var wg sync.WaitGroup
	n := int(float64(rate) * dur.Seconds())
	every := time.Second / time.Duration(rate)
	for i := range n {
		wg.Go(func() {
			_ = rs[i%len(rs)].Run(t.Context(), func(context.Context) error {
				attempts.Add(1)
				return errDown
			})
		})
		// Keep to the schedule: a late timer makes the next calls go at once.
		if d := clk.start.Add(time.Duration(i+1) * every).Sub(clk.Now()); d > 0 {
			clk.Sleep(t.Context(), d)
		}
	}
	wg.Wait()
	return float64(attempts.Load()) / float64(n)
}

// TestFleetBudgetAmplification: under a full outage at 100 calls per second
// across three Retrier, the fleet budget (the default retry.Budget's rule)
// keeps the load within 1.2 times the calls, as the in-process budget does
// for one Retrier (TestOutageAmplification); the clock runs 30 times fast.
func TestFleetBudgetAmplification(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates 30 s of traffic in 2 s")
	}
	s := startServer(t)
	clk := scaledClock{start: time.Now(), k: 30}
	policy := retry.WithPolicy(retry.Policy{MaxAttempts: 3})
	single := outage(t, clk, []*retry.Retrier{retry.New(policy, retry.WithClock(clk))}, 100, 30*time.Second)

	clk = scaledClock{start: time.Now(), k: 30}
	rs := make([]*retry.Retrier, 3)
	bs := make([]*retryredis.Budget, 3)
	for i := range rs {
		// Timeouts for a loaded machine: this test is about the budget's
		// rule, not Redis failing.
		c := s.ClientWith(func(o *goredis.Options) {
			o.DialTimeout, o.ReadTimeout, o.WriteTimeout = time.Second, time.Second, time.Second
		})
		b, err := retryredis.NewBudget(c, retry.Budget{}, retryredis.Options{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		bs[i] = b
		rs[i] = retry.New(policy, retry.WithClock(clk), retry.WithBudget(retry.Budget{Shared: b}))
	}
	fleet := outage(t, clk, rs, 100, 30*time.Second)
	var st retryredis.BudgetStats
	for _, b := range bs {
		s := b.Stats()
		st.Granted += s.Granted
		st.Denied += s.Denied
		st.FailOpen += s.FailOpen
	}
	t.Logf("100 calls/s for 30 s, all failing: amplification %.3f across 3 Retrier on Redis, %.3f for one in process; budget %+v", fleet, single, st)
	if fleet > 1.2 || fleet < 1.05 {
		t.Errorf("fleet amplification %.3f, want in [1.05, 1.2]", fleet)
	}
	if st.FailOpen != 0 {
		t.Errorf("%d retries failed open with Redis up", st.FailOpen)
	}
}
