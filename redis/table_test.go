package redis_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
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

// BenchmarkFleetTable measures the fleet table of docs/fleet.md, "Fleet-wide,
// on Redis": three Retriers, each with its own client as three processes
// would have, × 32 goroutines calling a 1 ms dependency, on one
// redis-server that it starts on a loopback port, for each case: calls/s,
// p50, p99 and Redis commands per call (INFO commandstats before and
// after, INFO itself left out). Each case runs once, for
// FLEET_TABLE_DURATION (a Go duration, default 3s), whatever b.N; it
// reports its figures as metrics and prints the table at the end:
//
//	cd redis && go test -run '^$' -bench FleetTable -benchtime 1x .
func BenchmarkFleetTable(b *testing.B) {
	dur := 3 * time.Second
	if d, err := time.ParseDuration(os.Getenv("FLEET_TABLE_DURATION")); err == nil && d > 0 {
		dur = d
	}
	s := startServer(b)
	admin := s.Client()
	client := func() goredis.UniversalClient {
		return s.ClientWith(func(o *goredis.Options) {
			o.PoolSize = 64
			o.DialTimeout, o.ReadTimeout, o.WriteTimeout = time.Second, time.Second, time.Second
		})
	}
	opts := retryredis.Options{Timeout: time.Second}
	policy := retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond})
	cases := []struct {
		name string
		opts func(c goredis.UniversalClient) ([]retry.Option, error)
	}{
		{name: "no shared state", opts: func(goredis.UniversalClient) ([]retry.Option, error) { return nil, nil }},
		{name: "in-process breaker", opts: func(goredis.UniversalClient) ([]retry.Option, error) {
			return []retry.Option{retry.WithBreaker(retry.Breaker{})}, nil
		}},
		{name: "shared breaker (`Breaker.Store`)", opts: func(c goredis.UniversalClient) ([]retry.Option, error) {
			st, err := retryredis.NewStore(c, opts)
			return []retry.Option{retry.WithBreaker(retry.Breaker{Store: st})}, err
		}},
		{name: "shared limiter (`NewLimiter`, never binding)", opts: func(c goredis.UniversalClient) ([]retry.Option, error) {
			l, err := retryredis.NewLimiter(c, 1e6, 100000, false, opts)
			return []retry.Option{retry.WithRateLimit(retry.RateLimit{Shared: l})}, err
		}},
		{name: "shared budget", opts: func(c goredis.UniversalClient) ([]retry.Option, error) {
			bg, err := retryredis.NewBudget(c, retry.Budget{}, opts)
			return []retry.Option{retry.WithBudget(retry.Budget{Shared: bg})}, err
		}},
	}
	rows := make([]fleetRow, len(cases))
	for i, tc := range cases {
		b.Run(strings.NewReplacer("`", "", "(", "", ")", "", ",", "").Replace(tc.name), func(b *testing.B) {
			rs := make([]*retry.Retrier, 3)
			for i := range rs {
				o, err := tc.opts(client())
				if err != nil {
					b.Fatal(err)
				}
				rs[i] = retry.New(append([]retry.Option{policy}, o...)...)
			}
			before := commands(b, admin)
			stop := time.Now().Add(dur)
			var mu sync.Mutex
			var lat []time.Duration
			var wg sync.WaitGroup
			b.ResetTimer()
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
			b.StopTimer()
			cmds := commands(b, admin) - before
			slices.Sort(lat)
			n := len(lat)
			rows[i] = fleetRow{name: tc.name, rate: float64(n) / elapsed.Seconds(),
				p50: lat[n/2], p99: lat[n*99/100], perCall: float64(cmds) / float64(n)}
			b.ReportMetric(rows[i].rate, "calls/s")
			b.ReportMetric(ms(rows[i].p50), "p50-ms")
			b.ReportMetric(ms(rows[i].p99), "p99-ms")
			b.ReportMetric(rows[i].perCall, "cmds/call")
			b.ReportMetric(0, "ns/op")
		})
	}
	if rows[len(rows)-1].name == "" {
		return // a case failed, or -bench chose some cases only
	}
	fmt.Printf("\n%v per case, %d CPUs\n\n| case | calls/s | p50 | p99 | Redis commands per call |\n|---|---:|---:|---:|---:|\n", dur, runtime.NumCPU())
	for _, r := range rows {
		fmt.Printf("| %s | %s | %.2f ms | %.2f ms | %.3f |\n", r.name, thousands(r.rate), ms(r.p50), ms(r.p99), r.perCall)
	}
	fmt.Printf("\nshared breaker: %.2f× the in-process breaker's calls/s (target ≥ 0.9×), p50 %+.2f ms (target ≤ +0.1 ms)\n",
		rows[2].rate/rows[1].rate, ms(rows[2].p50-rows[1].p50))
	fmt.Printf("shared limiter: %.2f× no shared state's calls/s (target ≥ 0.9×), p50 %+.2f ms (target ≤ +0.1 ms)\n\n",
		rows[3].rate/rows[0].rate, ms(rows[3].p50-rows[0].p50))
}

// fleetRow is one case of BenchmarkFleetTable.
type fleetRow struct {
	name     string
	rate     float64 // calls/s
	p50, p99 time.Duration
	perCall  float64 // Redis commands per call
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
func commands(t testing.TB, c *goredis.Client) int64 {
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
