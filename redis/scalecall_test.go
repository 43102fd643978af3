package redis_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/steadyhq/retry"
	retryredis "github.com/steadyhq/retry/redis"
)

// BenchmarkFleetCall is the client's side of BenchmarkFleetScale's cases
// at its smallest: one process calling 100 keys round robin on every core,
// each call named by WithKey, the dependency returning at once, so that
// what a call costs the process is the cases' own work (and the
// background syncs and lease renewals its calls start). It reports the
// process's CPU time a call (getrusage) beside ns/op and the allocations;
// with -cpuprofile it shows which component spends it:
//
//	cd redis && go test -run '^$' -bench FleetCall -benchtime 2s -cpuprofile cpu.prof .
func BenchmarkFleetCall(b *testing.B) {
	const keys = 100
	names := make([]string, keys)
	for i := range names {
		names[i] = "dep-" + strconv.Itoa(i)
	}
	for _, sc := range scaleCases {
		if sc.name == "none (A/A)" {
			continue
		}
		b.Run(sc.name, func(b *testing.B) {
			s := startServer(b)
			c := s.ClientWith(func(o *goredis.Options) { o.PoolSize = 32 })
			o, _, err := sc.opts(c, retryredis.Options{Prefix: "call:"})
			if err != nil {
				b.Fatal(err)
			}
			r := retry.New(append([]retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond})}, o...)...)
			ok := func(context.Context) error { return nil }
			for i := range 10 * keys {
				// Warm: every key read, leased and built.
				if err := retry.Run(context.Background(), ok, r, retry.WithKey(names[i%keys])); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := processCPU()
			var next atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(37))
				for pb.Next() {
					i++
					_ = retry.Run(context.Background(), ok, r, retry.WithKey(names[i%keys]))
				}
			})
			b.ReportMetric((processCPU()-cpu)/float64(b.N)*1e9, "cpu-ns/op")
		})
	}
}
