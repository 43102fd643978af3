package redis_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/steadyhq/retry"
	retryredis "github.com/steadyhq/retry/redis"
)

// trips is a client hook that counts the client's round trips: each
// pipeline, and each command sent alone.
type trips struct{ n atomic.Int64 }

func (*trips) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *trips) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *trips) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// scaleProc is one process of the tests below: a Retrier with a shared
// breaker per key, on a client of its own whose round trips are counted.
type scaleProc struct {
	r     *retry.Retrier
	store *retryredis.Store
	trips *trips
}

func newScaleProc(t *testing.T, s *server, opts retryredis.Options, b retry.Breaker) *scaleProc {
	c := s.Client()
	h := &trips{}
	c.AddHook(h)
	return newScaleProcOn(t, c, h, opts, b)
}

// newScaleProcOn is newScaleProc on client c, whose round trips h counts.
func newScaleProcOn(t *testing.T, c goredis.UniversalClient, h *trips, opts retryredis.Options, b retry.Breaker) *scaleProc {
	store := mustStore(t, c, opts)
	b.Store, b.PerKey = store, true
	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}), retry.WithBreaker(b), retry.WithBudget(retry.Budget{Off: true}))
	return &scaleProc{r: r, store: store, trips: h}
}

// callAll has each process call keys round robin, one call every pace,
// until stop closes; fail says whether a key's calls fail.
func callAll(ps []*scaleProc, keys []string, pace time.Duration, fail func(key string) bool, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() {
			tick := time.NewTicker(pace)
			defer tick.Stop()
			for n := i; ; n++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				k := keys[n%len(keys)]
				retry.Run(context.Background(), func(context.Context) error {
					if fail != nil && fail(k) {
						return errDown
					}
					return nil
				}, p.r, retry.WithKey(k))
			}
		})
	}
	return &wg
}

// TestHealthyKeysCost: healthy keys cost Redis almost nothing, and a
// process syncs all its breakers in one round trip an interval (on a
// Cluster, one a master, in parallel). Three processes calling 50 keys
// that never fail, with a 20 ms SyncInterval and a 200 ms Heartbeat, ask
// Redis (every master of a Cluster, summed) for at most the model's
// commands a second (see the package documentation: 3 an interval a
// process to read the list of breakers not quiet, and 5 a Heartbeat a
// breaker), with a margin of a half for the timers of a loaded machine;
// the Store syncing each breaker every interval, with its nine commands,
// asked for 67,500. Each process makes at most about one round trip an
// interval to each master.
func TestHealthyKeysCost(t *testing.T) {
	const (
		procs, nkeys = 3, 50
		interval     = 20 * time.Millisecond
		beat         = 200 * time.Millisecond
	)
	tests := []struct {
		name    string
		cluster bool
	}{
		{name: "one server"},
		{name: "3-master Cluster", cluster: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := retryredis.Options{SyncInterval: interval, Heartbeat: beat, Timeout: time.Second}
			spec := retry.Breaker{StoreWait: time.Second}
			ps := make([]*scaleProc, procs)
			var masters []*server
			if tt.cluster {
				var cc *goredis.ClusterClient
				cc, masters = startClusterServers(t)
				for i := range ps {
					c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cc.Options().Addrs, ContextTimeoutEnabled: true})
					t.Cleanup(func() { c.Close() })
					h := &trips{}
					c.OnNewNode(func(n *goredis.Client) { n.AddHook(h) }) // a round trip is a node's
					ps[i] = newScaleProcOn(t, c, h, opts, spec)
				}
			} else {
				s := startServer(t)
				masters = []*server{s}
				for i := range ps {
					ps[i] = newScaleProc(t, s, opts, spec)
				}
			}
			admins := make([]*goredis.Client, len(masters))
			for i, m := range masters {
				admins[i] = m.Client()
			}
			sum := func() (n int64) {
				for _, a := range admins {
					n += commands(t, a)
				}
				return n
			}
			keys := make([]string, nkeys)
			for i := range keys {
				keys[i] = fmt.Sprintf("dep-%d", i)
			}
			run := func(d time.Duration) time.Duration {
				stop := make(chan struct{})
				start := time.Now()
				wg := callAll(ps, keys, 500*time.Microsecond, nil, stop)
				time.Sleep(d)
				close(stop)
				wg.Wait()
				return time.Since(start)
			}
			run(2 * beat) // the first reads, and the heartbeats spread
			before := sum()
			var trips []int64
			for _, p := range ps {
				trips = append(trips, p.trips.n.Load())
			}
			took := run(time.Second)
			perSec := float64(sum()-before) / took.Seconds()
			model := procs * (3/interval.Seconds() + 5*nkeys/beat.Seconds())
			t.Logf("%.0f Redis commands a second for %d processes × %d healthy keys (model %.0f; a sync per key an interval, %.0f)",
				perSec, procs, nkeys, model, procs*nkeys*9/interval.Seconds())
			if perSec > 1.5*model {
				t.Errorf("%.0f Redis commands a second, want at most %.0f (the model's %.0f and a half)", perSec, 1.5*model, model)
			}
			intervals := took.Seconds() / interval.Seconds()
			for i, p := range ps {
				n := float64(p.trips.n.Load() - trips[i])
				t.Logf("process %d: %.0f round trips in %.0f intervals, to %d masters", i, n, intervals, len(masters))
				if n > float64(len(masters))*(1.2*intervals+2) {
					t.Errorf("process %d: %.0f round trips in %.0f intervals, want about one an interval to each of %d masters", i, n, intervals, len(masters))
				}
				if st := p.r.Stats(); st.BreakerFallbacks != 0 {
					t.Errorf("process %d: %d fallbacks with Redis healthy", i, st.BreakerFallbacks)
				}
			}
		})
	}
}

// TestFailuresTravelFast: with 100 healthy keys syncing at their
// heartbeat, a key that starts failing in every process trips the fleet
// within two sync intervals of the failures (and scheduling slack), as
// does a key no process had called; when both recover and fall idle, the
// state Redis kept of them expires, and a later call finds them closed,
// on the fleet's state.
func TestFailuresTravelFast(t *testing.T) {
	s := startServer(t)
	const (
		procs    = 3
		interval = 50 * time.Millisecond
		slack    = 100 * time.Millisecond // a loaded machine's scheduling
		window   = 200 * time.Millisecond
		open     = 300 * time.Millisecond
	)
	opts := retryredis.Options{SyncInterval: interval, Heartbeat: 500 * time.Millisecond, Timeout: time.Second}
	spec := retry.Breaker{MinRequests: 10, FailureRatio: 0.5, Window: window, OpenTimeout: open, StoreWait: time.Second, MaxWait: -1}
	ps := make([]*scaleProc, procs)
	for i := range ps {
		ps[i] = newScaleProc(t, s, opts, spec)
	}
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = fmt.Sprintf("dep-%d", i)
	}
	var failing sync.Map // key → true while its calls fail
	fail := func(k string) bool { _, ok := failing.Load(k); return ok }
	stop := make(chan struct{})
	background := callAll(ps, keys, time.Millisecond, fail, stop)
	defer func() { close(stop); background.Wait() }()
	time.Sleep(time.Second) // healthy: heartbeats under way

	refused := func(p *scaleProc, key string) bool {
		err := retry.Run(t.Context(), func(context.Context) error { return errDown }, p.r, retry.WithKey(key))
		var re *retry.Error
		return errors.As(err, &re) && re.Reason == retry.ReasonBreakerOpen
	}
	trip := func(key string) time.Duration {
		failing.Store(key, true)
		start := time.Now()
		seen := make([]time.Duration, procs)
		var wg sync.WaitGroup
		for i, p := range ps {
			wg.Go(func() {
				for time.Since(start) < 2*time.Second {
					if refused(p, key) {
						seen[i] = time.Since(start)
						return
					}
					time.Sleep(2 * time.Millisecond)
				}
			})
		}
		wg.Wait()
		var last time.Duration
		for i, d := range seen {
			if d == 0 {
				t.Fatalf("process %d never refused on %s", i, key)
			}
			last = max(last, d)
		}
		return last
	}
	for _, key := range []string{"dep-7", "idle-until-now"} {
		took := trip(key)
		t.Logf("%s: every process refused %v after the failures began (bound %v)", key, took.Round(time.Millisecond), 2*interval+slack)
		if took > 2*interval+slack {
			t.Errorf("%s: every process refused %v after the failures began, want within two intervals (%v) and slack", key, took, 2*interval)
		}
	}

	// Both recover; then no process calls them.
	failing.Clear()
	time.Sleep(open)
	for _, key := range []string{"dep-7", "idle-until-now"} {
		waitFor(t, time.Second, key+" closed again for every process", func() bool {
			for _, p := range ps {
				if retry.Run(t.Context(), func(context.Context) error { return nil }, p.r, retry.WithKey(key)) != nil {
					return false
				}
			}
			return true
		})
	}
	close(stop)
	background.Wait()
	stop = make(chan struct{})
	background = callAll(ps, keys[10:20], time.Millisecond, nil, stop) // the processes go on with other keys
	c := s.Client()
	waitFor(t, 2*time.Second, "the recovered keys' state and entries to expire", func() bool {
		n, err := c.Exists(t.Context(), "retry:{breaker:dep-7}", "retry:{breaker:idle-until-now}").Result()
		if err != nil {
			t.Fatal(err)
		}
		listed, err := c.HExists(t.Context(), "retry:{breakers}", "dep-7").Result()
		if err != nil {
			t.Fatal(err)
		}
		return n == 0 && !listed
	})
	for i, p := range ps {
		before := p.r.Stats().BreakerFallbacks
		for _, key := range []string{"dep-7", "idle-until-now"} {
			if err := retry.Run(t.Context(), func(context.Context) error { return nil }, p.r, retry.WithKey(key)); err != nil {
				t.Errorf("process %d: a call on %s after it fell idle: %v", i, key, err)
			}
		}
		if st := p.r.Stats(); st.BreakerFallbacks != before || !st.BreakersOnFleet["dep-7"] {
			t.Errorf("process %d: %d fallbacks, on the fleet %v, after the idle keys were called again", i, st.BreakerFallbacks-before, st.BreakersOnFleet["dep-7"])
		}
	}
}

// TestProcessManyKeys: a process calling 10,000 keys in turn keeps what it
// knows bounded (its Retrier 1,024 breakers, its Store 4,096) and still
// makes about one round trip an interval: the breakers it has not read
// are answered by the list of breakers not quiet, read with the interval's
// round trip.
func TestProcessManyKeys(t *testing.T) {
	s := startServer(t)
	const interval = 20 * time.Millisecond
	p := newScaleProc(t, s, retryredis.Options{SyncInterval: interval, Timeout: time.Second}, retry.Breaker{StoreWait: time.Second})
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("host-%d", i)
	}
	stop := make(chan struct{})
	wg := callAll([]*scaleProc{p}, keys, 100*time.Microsecond, nil, stop)
	time.Sleep(200 * time.Millisecond)
	before := p.trips.n.Load()
	start := time.Now()
	time.Sleep(time.Second)
	n := float64(p.trips.n.Load() - before)
	intervals := time.Since(start).Seconds() / interval.Seconds()
	close(stop)
	wg.Wait()
	st, sst := p.r.Stats(), p.store.Stats()
	t.Logf("%.0f round trips in %.0f intervals; the Retrier keeps %d breakers, the Store %d; %d fallbacks", n, intervals, len(st.Breakers), sst.Breakers, st.BreakerFallbacks)
	if n > 1.5*intervals+2 {
		t.Errorf("%.0f round trips in %.0f intervals, want about one an interval", n, intervals)
	}
	if len(st.Breakers) > 1024 || sst.Breakers > 4096 {
		t.Errorf("the Retrier keeps %d breakers, the Store %d: want at most 1,024 and 4,096", len(st.Breakers), sst.Breakers)
	}
	if st.BreakerFallbacks != 0 {
		t.Errorf("%d fallbacks with Redis healthy", st.BreakerFallbacks)
	}
}

// TestListUnreadable: while the list of breakers not quiet cannot be read
// (its key is of another type here; on a Cluster, its master down), each
// process reads its breakers alone: the fleet still trips on its summed
// counts, every process sees it, none falls back to its own breaker, and
// the failure is counted.
func TestListUnreadable(t *testing.T) {
	s := startServer(t)
	if err := s.Client().Set(t.Context(), "retry:{breakers}", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	const interval = 20 * time.Millisecond
	spec := retry.Breaker{MinRequests: 20, FailureRatio: 0.5, Window: time.Second, OpenTimeout: time.Minute, StoreWait: time.Second, MaxWait: -1}
	ps := []*scaleProc{
		newScaleProc(t, s, retryredis.Options{SyncInterval: interval, Timeout: time.Second}, spec),
		newScaleProc(t, s, retryredis.Options{SyncInterval: interval, Timeout: time.Second}, spec),
	}
	call := func(p *scaleProc, fail bool) error {
		return retry.Run(t.Context(), func(context.Context) error {
			if fail {
				return errDown
			}
			return nil
		}, p.r, retry.WithKey("dep"))
	}
	for range 5 {
		for _, p := range ps {
			call(p, false)
		}
		time.Sleep(interval)
	}
	for range 12 { // 24 failures, 10 successes: the fleet's ratio trips, neither process's own
		for _, p := range ps {
			call(p, true)
		}
	}
	// Waited for by the processes' Stats, not by calls: a call let through
	// while the failures travel would count a success, and at a poll every
	// 2 ms the successes of a slow sync would bring the fleet's ratio
	// under the threshold, so that it never trips.
	waitFor(t, time.Second, "every process to see the fleet's breaker open", func() bool {
		for _, p := range ps {
			if p.r.Stats().Breakers["dep"] != retry.BreakerOpen {
				return false
			}
		}
		return true
	})
	for i, p := range ps {
		var re *retry.Error
		if err := call(p, false); !errors.As(err, &re) || re.Reason != retry.ReasonBreakerOpen {
			t.Errorf("process %d: a call with the fleet's breaker open returned %v, want it refused with %s", i, err, retry.ReasonBreakerOpen)
		}
	}
	for i, p := range ps {
		st, sst := p.r.Stats(), p.store.Stats()
		if st.BreakerFallbacks != 0 || !st.BreakersOnFleet["dep"] || sst.Errors == 0 {
			t.Errorf("process %d: %d fallbacks, on the fleet %v, %d store errors: want the fleet's state, read breaker by breaker, and the list's failure counted", i, st.BreakerFallbacks, st.BreakersOnFleet["dep"], sst.Errors)
		}
	}
}
