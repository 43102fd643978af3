package redis_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/steadyhq/retry"
	retryredis "github.com/steadyhq/retry/redis"
)

// TestFleetTable measures the table: three Retriers, each with its
// own client, × 32 goroutines calling a 1 ms dependency, one redis-server
// on loopback, for each case: calls/s, p50, p99 and Redis commands per
// call (INFO commandstats before and after, INFO itself left out). It runs
// only with FLEET_TABLE=1; FLEET_TABLE_DURATION (a Go duration, default
// 3s) sets the time per case:
//
//	cd redis && FLEET_TABLE=1 go test -run TestFleetTable -v -count=1 .
func TestFleetTable(t *testing.T) {
	if os.Getenv("FLEET_TABLE") != "1" {
		t.Skip("set FLEET_TABLE=1 to measure the fleet table")
	}
	dur := 3 * time.Second
	if d, err := time.ParseDuration(os.Getenv("FLEET_TABLE_DURATION")); err == nil && d > 0 {
		dur = d
	}
	s := startServer(t)
	admin := s.Client()
	client := func() goredis.UniversalClient {
		return s.ClientWith(func(o *goredis.Options) {
			o.PoolSize = 64
			o.DialTimeout, o.ReadTimeout, o.WriteTimeout = time.Second, time.Second, time.Second
		})
	}
	opts := retryredis.Options{Timeout: time.Second}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	policy := retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond})
	cases := []struct {
		name string
		opts func(c goredis.UniversalClient) []retry.Option
	}{
		{name: "no shared state", opts: func(goredis.UniversalClient) []retry.Option { return nil }},
		{name: "in-process breaker", opts: func(goredis.UniversalClient) []retry.Option {
			return []retry.Option{retry.WithBreaker(retry.Breaker{})}
		}},
		{name: "shared breaker (Breaker.Store)", opts: func(c goredis.UniversalClient) []retry.Option {
			st, err := retryredis.NewStore(c, opts)
			must(err)
			return []retry.Option{retry.WithBreaker(retry.Breaker{Store: st})}
		}},
		{name: "shared limiter (NewLimiter, never binding)", opts: func(c goredis.UniversalClient) []retry.Option {
			l, err := retryredis.NewLimiter(c, 1e6, 100000, false, opts)
			must(err)
			return []retry.Option{retry.WithRateLimit(retry.RateLimit{Shared: l})}
		}},
		{name: "shared budget", opts: func(c goredis.UniversalClient) []retry.Option {
			b, err := retryredis.NewBudget(c, retry.Budget{}, opts)
			must(err)
			return []retry.Option{retry.WithBudget(retry.Budget{Shared: b})}
		}},
	}
	var out strings.Builder
	fmt.Fprintf(&out, "\n| case | calls/s | p50 | p99 | Redis commands per call |\n|---|---:|---:|---:|---:|\n")
	for _, tc := range cases {
		rs := make([]*retry.Retrier, 3)
		for i := range rs {
			rs[i] = retry.New(append([]retry.Option{policy}, tc.opts(client())...)...)
		}
		before := commands(t, admin)
		stop := time.Now().Add(dur)
		var mu sync.Mutex
		var lat []time.Duration
		var wg sync.WaitGroup
		start := time.Now()
		for _, r := range rs {
			for range 32 {
				wg.Go(func() {
					own := make([]time.Duration, 0, 4096)
					for time.Now().Before(stop) {
						t0 := time.Now()
						_ = r.Run(context.Background(), func(context.Context) error {
							time.Sleep(time.Millisecond)
							return nil
						})
						own = append(own, time.Since(t0))
					}
					mu.Lock()
					lat = append(lat, own...)
					mu.Unlock()
				})
			}
		}
		wg.Wait()
		elapsed := time.Since(start)
		cmds := commands(t, admin) - before
		slices.Sort(lat)
		n := len(lat)
		fmt.Fprintf(&out, "| %s | %s | %.2f ms | %.2f ms | %.3f |\n", tc.name, thousands(float64(n)/elapsed.Seconds()),
			ms(lat[n/2]), ms(lat[n*99/100]), float64(cmds)/float64(n))
	}
	t.Log(out.String())
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func thousands(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// commands sums the calls of every command in INFO commandstats but INFO.
func commands(t *testing.T, c *goredis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "cmdstat_") || strings.HasPrefix(line, "cmdstat_info:") {
			continue
		}
		_, rest, _ := strings.Cut(line, "calls=")
		v, _, _ := strings.Cut(rest, ",")
		k, err := strconv.ParseInt(v, 10, 64)
		if err == nil {
			n += k
		}
	}
	return n
}
