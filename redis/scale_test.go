package redis_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/steadyhq/retry"
	retryredis "github.com/steadyhq/retry/redis"
)

// BenchmarkFleetScale measures what the fleet's shared state costs as
// processes and keys grow: for each size P × K, P Retriers (the
// processes), each with its own go-redis client and its own components,
// on a redis-server of their own on a loopback port (one for each case,
// so that each case's commands are its own), each with
// FLEET_SCALE_GOROUTINES goroutines (default 16) calling a 1 ms
// dependency that never fails, the calls spread round robin over K keys,
// every shared component per key. For each size it runs the cases
//
//   - none: no breaker and no limiter (the Retrier's own budget);
//   - local breaker: an in-process breaker per key;
//   - shared breaker: Breaker.Store, per key;
//   - shared limiter: NewLimiter per key, never binding;
//   - none (A/A): none again, so that its ratio to none shows how far two
//     runs of the same case differ on this machine at this load;
//   - everything shared: shared breaker, limiter and budget, per key,
//
// FLEET_SCALE_ROUNDS times (default 3), each for FLEET_SCALE_DURATION
// (default 6s, of which the last three quarters are measured: a case's
// Retriers sit idle while the others run, and each run starts cold; the
// 4.5 s measured hold two heartbeats of every key), the
// cases interleaved and their order rotated from round to round, so that
// a change in the machine's load falls on every case alike; a warm-up
// pass of each case comes first. It prints the median
// over the rounds of each ratio (calls/s of the shared case over its
// in-process counterpart), of the Redis commands per call and of the
// commands a second (INFO commandstats before and after each run, INFO
// left out), of the CPU time a call of the benchmark's process
// (getrusage) and of Redis (INFO cpu), and the p99 latencies; each run's
// line also gives the calls a Limiter passed to its local bucket (Redis
// slower than Timeout, or failing) and the load average at its end; FLEET_SCALE_SIZES (default "3x1,10x1,10x10,10x100") chooses
// the sizes:
//
//	cd redis && go test -run '^$' -bench FleetScale -benchtime 1x -timeout 30m .
func BenchmarkFleetScale(b *testing.B) {
	dur := envDuration("FLEET_SCALE_DURATION", 6*time.Second)
	rounds := envInt("FLEET_SCALE_ROUNDS", 3)
	goroutines := envInt("FLEET_SCALE_GOROUTINES", 16)
	sizes := os.Getenv("FLEET_SCALE_SIZES")
	if sizes == "" {
		sizes = "3x1,10x1,10x10,10x100"
	}
	load := func() string { l, _ := os.ReadFile("/proc/loadavg"); return strings.TrimSpace(string(l)) }
	fmt.Printf("\nBenchmarkFleetScale: %v per run, %d rounds, %d goroutines a process, %d CPUs, load average at start %s\n",
		dur, rounds, goroutines, runtime.NumCPU(), load())
	var table []string
	for _, size := range strings.Split(sizes, ",") {
		p, k, ok := strings.Cut(strings.TrimSpace(size), "x")
		procs, err1 := strconv.Atoi(p)
		keys, err2 := strconv.Atoi(k)
		if !ok || err1 != nil || err2 != nil || procs < 1 || keys < 1 {
			b.Fatalf("FLEET_SCALE_SIZES: %q: want PROCSxKEYS", size)
		}
		b.Run(size, func(b *testing.B) {
			table = append(table, scaleSize(b, procs, keys, goroutines, rounds, dur))
		})
	}
	fmt.Printf("\nload average at end %s\n\n", load())
	fmt.Println("| processes × keys | shared breaker vs local | cmds/call | shared limiter vs none | cmds/call | everything shared vs none | cmds/call | none vs none (A/A) | Redis cmds/s: shared breaker / shared limiter / everything shared | CPU µs a call, process+Redis: none / shared breaker / shared limiter / everything | p99 none / local breaker / shared breaker / shared limiter / everything |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, row := range table {
		fmt.Println(row)
	}
	fmt.Println()
}

// scaleCase is one configuration of BenchmarkFleetScale's processes.
type scaleCase struct {
	name string
	// opts returns the options of one process, and its Limiter if it has
	// one.
	opts func(c goredis.UniversalClient, opts retryredis.Options) ([]retry.Option, *retryredis.Limiter, error)
}

var scaleCases = []scaleCase{
	{name: "none", opts: func(goredis.UniversalClient, retryredis.Options) ([]retry.Option, *retryredis.Limiter, error) {
		return nil, nil, nil
	}},
	{name: "local breaker", opts: func(goredis.UniversalClient, retryredis.Options) ([]retry.Option, *retryredis.Limiter, error) {
		return []retry.Option{retry.WithBreaker(retry.Breaker{PerKey: true})}, nil, nil
	}},
	{name: "shared breaker", opts: func(c goredis.UniversalClient, o retryredis.Options) ([]retry.Option, *retryredis.Limiter, error) {
		st, err := retryredis.NewStore(c, o)
		return []retry.Option{retry.WithBreaker(retry.Breaker{Store: st, PerKey: true})}, nil, err
	}},
	{name: "shared limiter", opts: func(c goredis.UniversalClient, o retryredis.Options) ([]retry.Option, *retryredis.Limiter, error) {
		l, err := retryredis.NewLimiter(c, 1e6, 100000, true, o)
		return []retry.Option{retry.WithRateLimit(retry.RateLimit{Shared: l})}, l, err
	}},
	{name: "none (A/A)", opts: func(goredis.UniversalClient, retryredis.Options) ([]retry.Option, *retryredis.Limiter, error) {
		return nil, nil, nil
	}},
	{name: "everything shared", opts: func(c goredis.UniversalClient, o retryredis.Options) ([]retry.Option, *retryredis.Limiter, error) {
		st, err1 := retryredis.NewStore(c, o)
		l, err2 := retryredis.NewLimiter(c, 1e6, 100000, true, o)
		bg, err3 := retryredis.NewBudget(c, retry.Budget{PerKey: true}, o)
		return []retry.Option{
			retry.WithBreaker(retry.Breaker{Store: st, PerKey: true}),
			retry.WithRateLimit(retry.RateLimit{Shared: l}),
			retry.WithBudget(retry.Budget{Shared: bg}),
		}, l, errors.Join(err1, err2, err3)
	}},
}

// scaleRun is what one run of one case measured.
type scaleRun struct {
	rate, perCall, cmdsPerSec float64
	p99                       time.Duration
	cpu, redisCPU             float64 // µs a call of the benchmark's process and of Redis
	fallbacks                 float64 // a call: reservations on a Limiter's local bucket
}

// fallbacks sums the fallbacks of limiters (LimiterStats.Fallbacks).
func fallbacks(limiters []*retryredis.Limiter) int64 {
	var n int64
	for _, l := range limiters {
		n += l.Stats().Fallbacks
	}
	return n
}

// processCPU returns the CPU time this process has used, in seconds.
func processCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// scaleSize runs every case at procs × keys and returns its row of the
// table.
func scaleSize(b *testing.B, procs, keys, goroutines, rounds int, dur time.Duration) string {
	policy := retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond})
	// The Retriers of each case, built once: their state stays warm from
	// round to round, as a process's would.
	fleets := make([][]*retry.Retrier, len(scaleCases))
	admins := make([]*goredis.Client, len(scaleCases))
	limiters := make([][]*retryredis.Limiter, len(scaleCases))
	for i, sc := range scaleCases {
		s := startServer(b)
		admins[i] = s.Client()
		for range procs {
			c := s.ClientWith(func(o *goredis.Options) { o.PoolSize = 32 })
			o, l, err := sc.opts(c, retryredis.Options{Prefix: fmt.Sprintf("scale:%d:", i)})
			if err != nil {
				b.Fatal(err)
			}
			if l != nil {
				limiters[i] = append(limiters[i], l)
			}
			fleets[i] = append(fleets[i], retry.New(append([]retry.Option{policy}, o...)...))
		}
	}
	names := make([]string, keys)
	for i := range names {
		names[i] = "dep-" + strconv.Itoa(i)
	}
	// run runs case i for d and measures its last three quarters: the
	// Retriers of a case sit idle while the other cases run, so each run
	// starts cold (leases lapsed, heartbeats due), which a fleet under
	// steady load is not.
	run := func(i int, d time.Duration) scaleRun {
		rs, admin := fleets[i], admins[i]
		start := time.Now()
		from, stop := start.Add(d/4), start.Add(d)
		type reading struct {
			cmds, fallbacks int64
			cpu, redis      float64
		}
		before := make(chan reading, 1)
		time.AfterFunc(d/4, func() {
			before <- reading{commands(b, admin), fallbacks(limiters[i]), processCPU(), redisCPU(b, admin)}
		})
		var mu sync.Mutex
		var lat []time.Duration
		var wg sync.WaitGroup
		var next atomic.Int64
		for _, r := range rs {
			for range goroutines {
				off := int(next.Add(1))
				wg.Go(func() {
					own := make([]time.Duration, 0, 8192)
					for i := off; time.Now().Before(stop); i++ {
						t0 := time.Now()
						_ = retry.Run(context.Background(), func(context.Context) error {
							time.Sleep(time.Millisecond)
							return nil
						}, r, retry.WithKey(names[i%keys]))
						if t0.After(from) {
							own = append(own, time.Since(t0))
						}
					}
					mu.Lock()
					lat = append(lat, own...)
					mu.Unlock()
				})
			}
		}
		wg.Wait()
		elapsed := time.Since(from)
		cpu, redis := processCPU(), redisCPU(b, admin)
		b0 := <-before
		cmds := commands(b, admin) - b0.cmds
		slices.Sort(lat)
		n := len(lat)
		return scaleRun{rate: float64(n) / elapsed.Seconds(), perCall: float64(cmds) / float64(n),
			cmdsPerSec: float64(cmds) / elapsed.Seconds(), p99: lat[n*99/100],
			cpu: (cpu - b0.cpu) / float64(n) * 1e6, redisCPU: (redis - b0.redis) / float64(n) * 1e6,
			fallbacks: float64(fallbacks(limiters[i])-b0.fallbacks) / float64(n)}
	}
	for i := range scaleCases {
		run(i, dur/4) // warm-up: first reads, scripts loaded, pools dialed
	}
	runs := make([][]scaleRun, len(scaleCases))
	for r := range rounds {
		for j := range scaleCases {
			i := (j + r) % len(scaleCases)
			runtime.GC()
			runs[i] = append(runs[i], run(i, dur))
			x := runs[i][r]
			fmt.Printf("%d×%d round %d %-17s %8.0f calls/s, %.3f cmds/call, %6.0f cmds/s, p99 %.2f ms, CPU µs a call %.2f + Redis %.2f, fallbacks a call %.4f, load %s\n",
				procs, keys, r, scaleCases[i].name, x.rate, x.perCall, x.cmdsPerSec, ms(x.p99), x.cpu, x.redisCPU, x.fallbacks, loadavg())
		}
	}
	// ratio is the median over the rounds of case a's calls/s over case
	// b's in the same round.
	ratio := func(a, base int) float64 {
		var v []float64
		for r := range rounds {
			v = append(v, runs[a][r].rate/runs[base][r].rate)
		}
		return median(v)
	}
	med := func(i int, f func(scaleRun) float64) float64 {
		var v []float64
		for _, x := range runs[i] {
			v = append(v, f(x))
		}
		return median(v)
	}
	perCall := func(x scaleRun) float64 { return x.perCall }
	p99 := func(x scaleRun) float64 { return ms(x.p99) }
	const none, local, shared, limiter, aa, all = 0, 1, 2, 3, 4, 5
	b.ReportMetric(ratio(shared, local), "breaker-ratio")
	b.ReportMetric(ratio(limiter, none), "limiter-ratio")
	b.ReportMetric(ratio(all, none), "all-ratio")
	b.ReportMetric(ratio(aa, none), "aa-ratio")
	b.ReportMetric(med(all, func(x scaleRun) float64 { return x.cmdsPerSec }), "cmds/s")
	b.ReportMetric(0, "ns/op")
	perSec := func(x scaleRun) float64 { return x.cmdsPerSec }
	cpu := func(i int) string {
		return fmt.Sprintf("%.1f+%.1f", med(i, func(x scaleRun) float64 { return x.cpu }), med(i, func(x scaleRun) float64 { return x.redisCPU }))
	}
	return fmt.Sprintf("| %d × %d | %.2f× | %.3f | %.2f× | %.3f | %.2f× | %.3f | %.2f× | %s / %s / %s | %s / %s / %s / %s | %.1f / %.1f / %.1f / %.1f / %.1f ms |",
		procs, keys, ratio(shared, local), med(shared, perCall), ratio(limiter, none), med(limiter, perCall),
		ratio(all, none), med(all, perCall), ratio(aa, none), thousands(med(shared, perSec)), thousands(med(limiter, perSec)), thousands(med(all, perSec)),
		cpu(none), cpu(shared), cpu(limiter), cpu(all),
		med(none, p99), med(local, p99), med(shared, p99), med(limiter, p99), med(all, p99))
}

// BenchmarkFleetCapacity measures what one redis-server carries of the
// Store's work: 8 clients, as 8 processes' Stores, each sending round trip
// after round trip of FLEET_CAPACITY_KEYS (default 100) breakers'
// heartbeats and a read of the list of breakers not quiet, for
// FLEET_CAPACITY_DURATION (default 3s). It reports Redis's commands a
// second, its own CPU time (INFO cpu) per command, and what that makes a
// second of one core: the commands one Redis, single-threaded, carries of
// this work, whatever else the machine runs.
//
//	cd redis && go test -run '^$' -bench FleetCapacity -benchtime 1x .
func BenchmarkFleetCapacity(b *testing.B) {
	dur := envDuration("FLEET_CAPACITY_DURATION", 3*time.Second)
	nkeys := envInt("FLEET_CAPACITY_KEYS", 100)
	s := startServer(b)
	admin := s.Client()
	spec := retry.Breaker{FailureRatio: 0.5, MinRequests: 20, Window: 10 * time.Second, OpenTimeout: 30 * time.Second, Probes: 1}
	var stores []*retryredis.Store
	for range 8 {
		// Every sync a heartbeat: a Heartbeat as short as the interval,
		// and each round trip one interval after the last.
		st, err := retryredis.NewStore(s.ClientWith(nil), retryredis.Options{SyncInterval: time.Millisecond, Heartbeat: time.Millisecond, Timeout: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		stores = append(stores, st)
	}
	in := make([]retry.BreakerSync, nkeys)
	for i := range in {
		in[i] = retry.BreakerSync{Name: fmt.Sprintf("dep-%d", i), Successes: 10}
	}
	loop := func(d time.Duration) {
		var wg sync.WaitGroup
		end := time.Now().Add(d)
		for _, st := range stores {
			wg.Go(func() {
				for time.Now().Before(end) {
					if _, err := st.Sync(context.Background(), spec, in); err != nil {
						b.Error(err)
						return
					}
					time.Sleep(time.Millisecond)
				}
			})
		}
		wg.Wait()
	}
	loop(300 * time.Millisecond)
	before, cpu0, start := commands(b, admin), redisCPU(b, admin), time.Now()
	loop(dur)
	cmds, cpu, el := commands(b, admin)-before, redisCPU(b, admin)-cpu0, time.Since(start)
	perCore := float64(cmds) / cpu
	b.ReportMetric(float64(cmds)/el.Seconds(), "cmds/s")
	b.ReportMetric(cpu/float64(cmds)*1e6, "redis-cpu-µs/cmd")
	b.ReportMetric(perCore, "cmds/core-s")
	b.ReportMetric(0, "ns/op")
	fmt.Printf("\nBenchmarkFleetCapacity: %d Stores × %d breakers, heartbeats back to back: %s Redis commands a second over %v, %.2f µs of Redis CPU each: one Redis core carries %s commands a second of this work (load average %s)\n\n",
		len(stores), nkeys, thousands(float64(cmds)/el.Seconds()), dur, cpu/float64(cmds)*1e6, thousands(perCore), loadavg())
}

func loadavg() string {
	l, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(l))
}

// redisCPU returns the CPU time Redis has used, in seconds (INFO cpu).
func redisCPU(t testing.TB, c *goredis.Client) float64 {
	t.Helper()
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				sum += f
			}
		}
	}
	return sum
}

func median(v []float64) float64 {
	slices.Sort(v)
	if len(v) == 0 {
		return 0
	}
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
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
