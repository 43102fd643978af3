package redis_test

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	retryredis "github.com/steadyhq/retry/redis"
)

// TestFleetLimiterLeases: three processes' limiters, each on its own
// client, lease from one bucket of 1,000/s at uneven demand (70%, 15% and
// 15% of 2,000/s offered): over the measured window the fleet's admitted
// rate is within ±5% of the limit, no process starves, and Redis sees a
// request per lease, not per attempt. The window is 2 s (LEASE_WINDOW, a
// Go duration, changes it; the figure is for 10 s); against one
// redis-server and a Cluster.
func TestFleetLimiterLeases(t *testing.T) {
	window := 2 * time.Second
	if w, err := time.ParseDuration(os.Getenv("LEASE_WINDOW")); err == nil && w > 0 {
		window = w
	}
	const limit, burst = 1000.0, 20
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			client := be.start(t)
			demand := []int{14, 3, 3} // goroutines, each offering up to 100/s
			ls := make([]*retryredis.Limiter, 3)
			rs := make([]*retry.Retrier, 3)
			for i := range ls {
				l, err := retryredis.NewLimiter(client(), limit, burst, false, retryredis.Options{Prefix: t.Name() + ":", SyncInterval: 50 * time.Millisecond, Timeout: time.Second})
				if err != nil {
					t.Fatal(err)
				}
				ls[i], rs[i] = l, retry.New(retry.WithRateLimit(retry.RateLimit{Shared: l}))
			}
			warm := 200 * time.Millisecond
			start := time.Now()
			from, until := start.Add(warm), start.Add(warm+window)
			var admitted [3]atomic.Int64
			var wg sync.WaitGroup
			for i, r := range rs {
				for range demand[i] {
					wg.Go(func() {
						for time.Now().Before(until) {
							_ = r.Run(t.Context(), func(context.Context) error {
								if now := time.Now(); now.After(from) && now.Before(until) {
									admitted[i].Add(1)
								}
								return nil
							})
							time.Sleep(10 * time.Millisecond)
						}
					})
				}
			}
			wg.Wait()
			var total int64
			var leases, fallbacks int64
			for i := range admitted {
				total += admitted[i].Load()
				st := ls[i].Stats()
				leases += st.Leases
				fallbacks += st.Fallbacks
			}
			rate := float64(total) / window.Seconds()
			t.Logf("admitted %.0f/s over %v (limit %.0f/s): per process %d, %d, %d; %d leases, %d fallbacks",
				rate, window, limit, admitted[0].Load(), admitted[1].Load(), admitted[2].Load(), leases, fallbacks)
			if rate < 0.95*limit || rate > 1.05*limit {
				t.Errorf("admitted %.0f/s, want within 5%% of %.0f/s", rate, limit)
			}
			for i := range admitted {
				if got := float64(admitted[i].Load()) / window.Seconds(); got < 0.05*limit {
					t.Errorf("process %d admitted %.0f/s: starved", i, got)
				}
			}
			if fallbacks != 0 {
				t.Errorf("%d fallbacks with Redis up", fallbacks)
			}
		})
	}
}
