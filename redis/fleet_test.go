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

func mustStore(t *testing.T, c goredis.UniversalClient, opts retryredis.Options) *retryredis.Store {
	t.Helper()
	s, err := retryredis.NewStore(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFleetBreaker: three Retriers with their own clients share one
// breaker, on one redis-server and on a Cluster: failures seen by one open
// it for all within two sync intervals, without any call waiting on Redis
// in the closed state; the waits consume no attempt; and one probe closes
// it for all.
func TestFleetBreaker(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			client := be.start(t)
			const interval = 20 * time.Millisecond
			var mu sync.Mutex
			changes := map[string]int{}
			spec := retry.Breaker{MinRequests: 3, FailureRatio: 1, OpenTimeout: 200 * time.Millisecond, MaxWait: time.Second, StoreWait: 500 * time.Millisecond}
			rs := make([]*retry.Retrier, 3)
			stores := make([]*retryredis.Store, 3)
			for i := range rs {
				stores[i] = mustStore(t, client(), retryredis.Options{Prefix: t.Name() + ":", SyncInterval: interval, Timeout: time.Second})
				spec.Store = stores[i]
				spec.OnChange = func(_, from, to string) {
					mu.Lock()
					changes[from+">"+to]++
					mu.Unlock()
				}
				rs[i] = retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}), retry.WithBreaker(spec))
			}
			ctx := t.Context()
			// One round trip per store first, on a breaker of its own: a
			// cold client's first (its dial, the script's load) is not
			// what is measured.
			warm := retry.Breaker{Window: time.Second, OpenTimeout: time.Second, Probes: 1, MinRequests: 1, FailureRatio: 1}
			for _, st := range stores {
				if _, err := syncOne(ctx, st, "warm", warm, retry.BreakerSync{}); err != nil {
					t.Fatal(err)
				}
			}
			for range 3 {
				_ = rs[0].Run(ctx, func(context.Context) error { return errDown })
			}
			failed := time.Now()
			// The others keep calling, refused at once once they see it open.
			seen := make([]time.Duration, 3)
			var wg sync.WaitGroup
			for i, r := range rs {
				wg.Go(func() {
					for time.Since(failed) < time.Second {
						// Left out of the counts: the trip is Retrier 0's.
						err := retry.Run(ctx, func(context.Context) error { return retry.Permanent(errDown) }, r, retry.WithMaxElapsed(time.Millisecond))
						var re *retry.Error
						if errors.As(err, &re) && re.Reason == retry.ReasonBreakerOpen && re.Attempts == 0 {
							seen[i] = time.Since(failed)
							return
						}
						time.Sleep(time.Millisecond)
					}
				})
			}
			wg.Wait()
			for i, d := range seen {
				// Two intervals, and room for a loaded machine.
				if d == 0 || d > 2*interval+100*time.Millisecond {
					t.Errorf("Retrier %d saw the breaker open %v after the failures, want within two %v intervals", i, d, interval)
				}
			}
			var ran atomic.Int64
			start := time.Now()
			for _, r := range rs {
				for range 4 {
					wg.Go(func() {
						ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
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
			if elapsed > 600*time.Millisecond {
				t.Errorf("resumed after %v, want about the 200 ms open period", elapsed)
			}
			var granted int64
			for _, s := range stores {
				granted += s.Stats().Granted
			}
			if granted != 1 {
				t.Errorf("%d probes granted, want 1", granted)
			}
			if changes["closed>open"] != 3 {
				t.Errorf("changes %v: want each Retrier to see the breaker open once", changes)
			}
			for i, r := range rs {
				if st := r.Stats(); st.BreakerFallbacks != 0 || st.Breakers[""] != "closed" {
					t.Errorf("Retrier %d: %+v", i, st)
				}
			}
			t.Logf("seen open after %v; resumed %v after; changes %v", seen, elapsed, changes)
		})
	}
}

// TestFleetBreakerProbes: 48 callers across three Retriers keep calling a
// dependency that stays down, with the breaker tripped: while it is open
// the dependency sees at most Probes attempts per OpenTimeout from the
// whole fleet, and no call falls back to its process's own breaker.
func TestFleetBreakerProbes(t *testing.T) {
	s := startServer(t)
	tests := []struct {
		name   string
		probes uint32
	}{
		{name: "one probe", probes: 1},
		{name: "two probes", probes: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const open = 100 * time.Millisecond
			// StoreWait for a loaded machine: this test is about probes, not
			// Redis failing.
			spec := retry.Breaker{MinRequests: 3, FailureRatio: 1, OpenTimeout: open, Probes: tt.probes, MaxWait: -1, StoreWait: 500 * time.Millisecond}
			rs := make([]*retry.Retrier, 3)
			for i := range rs {
				c := s.ClientWith(func(o *goredis.Options) {
					o.DialTimeout, o.ReadTimeout, o.WriteTimeout = time.Second, time.Second, time.Second
				})
				spec.Store = mustStore(t, c, retryredis.Options{Prefix: tt.name + ":", SyncInterval: 10 * time.Millisecond, Timeout: time.Second})
				rs[i] = retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}), retry.WithBreaker(spec))
			}
			for range 3 {
				_ = rs[0].Run(t.Context(), func(context.Context) error { return errDown })
			}
			time.Sleep(50 * time.Millisecond) // the fleet sees it open
			var ran atomic.Int64
			var wg sync.WaitGroup
			start := time.Now()
			const period = 5 * open
			for _, r := range rs {
				for range 16 {
					wg.Go(func() {
						for time.Since(start) < period {
							_ = r.Run(t.Context(), func(context.Context) error {
								ran.Add(1)
								time.Sleep(5 * time.Millisecond)
								return errDown
							})
							time.Sleep(time.Millisecond)
						}
					})
				}
			}
			wg.Wait()
			var fallbacks int64
			for _, r := range rs {
				fallbacks += r.Stats().BreakerFallbacks
			}
			// The open periods that ended within the test, each with its
			// probes, and one more for the edges.
			limit := int64(tt.probes) * int64(period/open+1)
			t.Logf("%d attempts in %v (at most %d allowed); %d fallbacks", ran.Load(), period, limit, fallbacks)
			if ran.Load() > limit || ran.Load() == 0 || fallbacks != 0 {
				t.Errorf("%d attempts reached the dependency, want 1 to %d; %d fallbacks, want 0", ran.Load(), limit, fallbacks)
			}
		})
	}
}

// TestFleetLimiter: three clients share one limit; over a measured period
// of 2 s their attempts stay within limit·T + burst and come within 20% of
// it (the floor leaves room for a loaded machine's scheduling, and the
// period makes the first lease's round trips a small part of it).
func TestFleetLimiter(t *testing.T) {
	s := startServer(t)
	const limit, burst = 200.0, 2
	rs := make([]*retry.Retrier, 3)
	ls := make([]*retryredis.Limiter, 3)
	for i := range rs {
		// Timeout 1 s, as in the fleet's other healthy-Redis tests: a
		// loaded machine's stall is not a Redis failure.
		l, err := retryredis.NewLimiter(s.Client(), limit, burst, false, retryredis.Options{Timeout: time.Second})
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
	// Attempts are counted within the period only: a call still waiting
	// for its token at the end runs past it.
	const period = 2 * time.Second
	start := time.Now()
	stop := start.Add(period)
	for _, r := range rs {
		for range 3 {
			wg.Go(func() {
				for time.Now().Before(stop) {
					_ = r.Run(t.Context(), func(context.Context) error {
						if time.Now().Before(stop) {
							n.Add(1)
						}
						return nil
					})
				}
			})
		}
	}
	wg.Wait()
	elapsed := period.Seconds()
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
// across three Retrier, the fleet budget spends the fleet's one bucket, its
// 12 tokens, as one Retrier's own budget spends its own: both keep the
// load within 1.01 times the calls, where three budgets of their own would
// spend three buckets; the clock runs 30 times fast.
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
		st.Fallbacks += s.Fallbacks
	}
	t.Logf("100 calls/s for 30 s, all failing: amplification %.3f across 3 Retrier on Redis, %.3f for one in process; budget %+v", fleet, single, st)
	if fleet > 1.01 || single > 1.01 || st.Granted != 12 {
		t.Errorf("fleet amplification %.3f (%d retries granted), one Retrier's %.3f; want both within 1.01, the fleet's 12", fleet, st.Granted, single)
	}
	if st.Fallbacks != 0 {
		t.Errorf("%d retries decided without Redis, with Redis up", st.Fallbacks)
	}
}

// TestLimiterDeadlineIsRateLimited: two members of a fleet offer four
// times the limit, each call with a deadline; a call whose tokens the other
// callers keep taking waits again and again within its deadline, and when
// its time runs out that way it is refused as rate-limited (Reason
// rate_limited, counted in Denied) before the deadline passes, not ended by
// it.
func TestLimiterDeadlineIsRateLimited(t *testing.T) {
	s := startServer(t)
	const limit, burst = 100.0, 2
	var mu sync.Mutex
	outcomes := map[string]int{}
	var denied atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(time.Second)
	for range 2 {
		l, err := retryredis.NewLimiter(s.Client(), limit, burst, false, retryredis.Options{Timeout: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		r := retry.New(retry.WithRateLimit(retry.RateLimit{Shared: l}))
		var mine sync.WaitGroup
		for range 8 {
			mine.Go(func() {
				for time.Now().Before(stop) {
					ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
					err := r.Run(ctx, func(context.Context) error { return nil })
					cancel()
					var re *retry.Error
					what := "ok"
					switch {
					case errors.As(err, &re):
						what = string(re.Reason)
					case err != nil:
						what = err.Error()
					}
					mu.Lock()
					outcomes[what]++
					mu.Unlock()
				}
			})
		}
		wg.Go(func() {
			mine.Wait()
			denied.Add(l.Stats().Denied)
		})
	}
	wg.Wait()
	t.Logf("outcomes %v; Denied %d", outcomes, denied.Load())
	// Without the margin, about one call in ten ended by its deadline;
	// with it, none in 6 runs, 5 of them under -race beside two CPU hogs.
	// One in fifty is left for a timer later than the margin.
	total := 0
	for _, n := range outcomes {
		total += n
	}
	if n := outcomes[string(retry.ReasonCanceled)]; n*50 > total {
		t.Errorf("%d of %d calls ended by their deadline while waiting for a token, want them rate_limited (%v)", n, total, outcomes)
	}
}

// syncOne syncs one breaker through s, as a Retrier with one breaker does.
func syncOne(ctx context.Context, s *retryredis.Store, name string, b retry.Breaker, in retry.BreakerSync) (retry.BreakerFleet, error) {
	in.Name = name
	out, err := s.Sync(ctx, b, []retry.BreakerSync{in})
	if err != nil {
		return retry.BreakerFleet{}, err
	}
	return out[0], out[0].Err
}
