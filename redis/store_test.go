package redis_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/steadyhq/retry"
	retryredis "github.com/steadyhq/retry/redis"
)

// backends are the two ways users run Redis: one redis-server, and a
// Cluster of three masters.
var backends = []struct {
	name  string
	start func(t *testing.T) func() goredis.UniversalClient
}{
	{name: "server", start: func(t *testing.T) func() goredis.UniversalClient {
		s := startServer(t)
		// Timeouts for a loaded machine: these tests are about the
		// fleet, not Redis failing.
		return func() goredis.UniversalClient {
			return s.ClientWith(func(o *goredis.Options) {
				o.DialTimeout, o.ReadTimeout, o.WriteTimeout = time.Second, time.Second, time.Second
			})
		}
	}},
	{name: "cluster", start: func(t *testing.T) func() goredis.UniversalClient {
		c := startCluster(t)
		return func() goredis.UniversalClient { return c }
	}},
}

// TestStoreRules: the script's rules, against one redis-server and a
// Cluster, through three stores on their own clients (each reading the
// list of breakers not quiet at every sync: an interval of 1 ms): the
// fleet trips on summed counts (no process's alone enough), all read the
// same opened-until instant, exactly Probes of 30 concurrent claims are
// granted, and the probes' outcome closes or reopens the breaker for all.
func TestStoreRules(t *testing.T) {
	tests := []struct {
		name   string
		probes uint32
		fail   bool // a probe fails
		want   string
	}{
		{name: "one probe closes", probes: 1, want: "closed"},
		{name: "three probes close", probes: 3, want: "closed"},
		{name: "a failed probe reopens", probes: 2, fail: true, want: "open"},
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			client := be.start(t)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					ctx := t.Context()
					spec := retry.Breaker{FailureRatio: 0.5, MinRequests: 30, Window: time.Second, OpenTimeout: 200 * time.Millisecond, Probes: tt.probes}
					stores := make([]*retryredis.Store, 3)
					for i := range stores {
						var err error
						if stores[i], err = retryredis.NewStore(client(), retryredis.Options{Prefix: t.Name() + ":", Timeout: time.Second, SyncInterval: time.Millisecond, Heartbeat: time.Millisecond}); err != nil {
							t.Fatal(err)
						}
					}
					// 3 × (6 failures, 4 successes): 18 of 30.
					for i, s := range stores {
						fl, err := syncOne(ctx, s, "dep", spec, retry.BreakerSync{Successes: 4, Failures: 6})
						if err != nil {
							t.Fatal(err)
						}
						if want := map[bool]string{false: "closed", true: "open"}[i == 2]; fl.State != want {
							t.Fatalf("store %d: %v after the fleet's counts, want %v", i, fl.State, want)
						}
					}
					// Each reply's opened-until instant lies between the
					// send and the receipt plus OpenFor; the stores read
					// one instant if those spans overlap (Redis's clock in
					// whole milliseconds: 2 ms of slack), however slow a
					// round trip on a loaded machine.
					var latest, earliest time.Time // the latest lower bound, the earliest upper
					var gen uint64
					for i, s := range stores {
						time.Sleep(10 * time.Millisecond) // an open time that restarted per read would differ by this
						sent := time.Now()
						fl, err := syncOne(ctx, s, "dep", spec, retry.BreakerSync{})
						if err != nil || fl.State != "open" {
							t.Fatalf("%+v, %v, want open", fl, err)
						}
						lo, hi := sent.Add(fl.OpenFor), time.Now().Add(fl.OpenFor)
						if i == 0 || lo.After(latest) {
							latest = lo
						}
						if i == 0 || hi.Before(earliest) {
							earliest = hi
						}
						gen = fl.Generation
					}
					if d := latest.Sub(earliest); d > 2*time.Millisecond {
						t.Errorf("opened-until differs by at least %v between stores", d)
					}
					// Counts of the old generation are dropped.
					if fl, _ := syncOne(ctx, stores[0], "dep", spec, retry.BreakerSync{Generation: gen - 1, Successes: 100}); fl.State != "open" {
						t.Fatalf("stale counts changed the state: %+v", fl)
					}
					time.Sleep(time.Until(earliest) + 5*time.Millisecond)
					var mu sync.Mutex
					granted := map[uint64]int{}
					var wg sync.WaitGroup
					for i := range 30 {
						wg.Go(func() {
							fl, err := syncOne(ctx, stores[i%3], "dep", spec, retry.BreakerSync{Claim: true})
							if err != nil {
								t.Error(err)
								return
							}
							if fl.Claimed {
								mu.Lock()
								granted[fl.Generation]++
								mu.Unlock()
							}
						})
					}
					wg.Wait()
					if len(granted) != 1 {
						t.Fatalf("claims granted per generation: %v, want %d in one", granted, tt.probes)
					}
					for g, n := range granted {
						if n != int(tt.probes) {
							t.Fatalf("%d of 30 claims granted, want %d", n, tt.probes)
						}
						gen = g
					}
					for i := range tt.probes {
						in := retry.BreakerSync{Generation: gen, ProbeSuccesses: 1}
						if tt.fail && i == 1 {
							in = retry.BreakerSync{Generation: gen, ProbeFailures: 1}
						}
						if _, err := syncOne(ctx, stores[i%3], "dep", spec, in); err != nil {
							t.Fatal(err)
						}
					}
					time.Sleep(2 * time.Millisecond) // an interval: each store reads the list again
					for i, s := range stores {
						if fl, err := syncOne(ctx, s, "dep", spec, retry.BreakerSync{}); err != nil || fl.State != tt.want {
							t.Errorf("store %d after the probes: %+v, %v, want %v", i, fl, err, tt.want)
						}
					}
				})
			}
		})
	}
}

// TestStoreClaimLapses: a claim whose probe never reports (its process
// died) lapses after another OpenTimeout, and a new probe is granted.
func TestStoreClaimLapses(t *testing.T) {
	s := startServer(t)
	store, err := retryredis.NewStore(s.Client(), retryredis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	spec := retry.Breaker{FailureRatio: 1, MinRequests: 1, Window: time.Second, OpenTimeout: 30 * time.Millisecond, Probes: 1}
	if fl, err := syncOne(ctx, store, "x", spec, retry.BreakerSync{Failures: 1}); err != nil || fl.State != "open" {
		t.Fatalf("%+v %v", fl, err)
	}
	time.Sleep(35 * time.Millisecond)
	steps := []struct {
		after time.Duration
		want  bool
	}{
		{want: true},
		{},
		{after: 35 * time.Millisecond, want: true},
	}
	for i, st := range steps {
		time.Sleep(st.after)
		fl, err := syncOne(ctx, store, "x", spec, retry.BreakerSync{Claim: true})
		if err != nil || fl.Claimed != st.want {
			t.Errorf("claim %d: %+v, %v, want granted %v", i, fl, err, st.want)
		}
	}
}

// TestStoreBadReply: a key holding something else than the script's hash
// is an error, not a panic.
func TestStoreBadReply(t *testing.T) {
	s := startServer(t)
	c := s.Client()
	store, err := retryredis.NewStore(c, retryredis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set(context.Background(), "retry:{breaker:x}", "junk", 0).Err(); err != nil {
		t.Fatal(err)
	}
	spec := retry.Breaker{FailureRatio: 0.5, MinRequests: 20, Window: 10 * time.Second, OpenTimeout: 30 * time.Second, Probes: 1}
	if _, err := syncOne(t.Context(), store, "x", retry.Breaker{}, retry.BreakerSync{}); err == nil || !strings.Contains(err.Error(), "Window = 0s: must be > 0") {
		t.Errorf("Sync with zero settings: %v, want an error naming Window", err)
	}
	if _, err := syncOne(t.Context(), store, "x", spec, retry.BreakerSync{Failures: 1}); err == nil {
		t.Error("Sync on a string key: no error")
	}
	if st := store.Stats(); st.Errors != 1 {
		t.Errorf("stats %+v, want 1 error", st)
	}
}

// TestStoreGenerationsGrow: when Redis loses a breaker's state (restarted
// empty, flushed, the key expired), the state made again has a generation
// past every one before, so that a late reply from before the loss cannot
// pass for a newer state; it is closed, and a process that has never
// synced counts in it at once. The Store, which knew it open, reads it
// again alone once it finds it missing from the list of breakers not
// quiet (its interval here 1 ms), or, for a key that expired alone, at its
// heartbeat (1 ms).
func TestStoreGenerationsGrow(t *testing.T) {
	spec := retry.Breaker{Window: time.Second, OpenTimeout: time.Minute, Probes: 1, MinRequests: 2, FailureRatio: 0.5}
	tests := []struct {
		name string
		lose func(t *testing.T, s *server)
	}{
		{name: "restarted empty", lose: func(t *testing.T, s *server) { s.Stop(); s.Start() }},
		{name: "FLUSHALL", lose: func(t *testing.T, s *server) { s.Client().FlushAll(t.Context()) }},
		{name: "expired", lose: func(t *testing.T, s *server) {
			s.Client().PExpire(t.Context(), "retry:{breaker:dep}", time.Millisecond)
			time.Sleep(5 * time.Millisecond)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startServer(t)
			st, err := retryredis.NewStore(s.Client(), retryredis.Options{Timeout: time.Second, SyncInterval: time.Millisecond, Heartbeat: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			first, err := syncOne(t.Context(), st, "dep", spec, retry.BreakerSync{Failures: 2})
			if err != nil || first.State != "open" {
				t.Fatalf("a new breaker's first sync with 2 failures: %+v, %v; want open (a process that never synced counts)", first, err)
			}
			tt.lose(t, s)
			var again retry.BreakerFleet
			for deadline := time.Now().Add(time.Second); again.State != "closed" && time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
				// The first sync after a restart may find the connection
				// the server closed.
				again, _ = syncOne(t.Context(), st, "dep", spec, retry.BreakerSync{Generation: first.Generation})
			}
			if again.State != "closed" || again.Generation <= first.Generation {
				t.Errorf("after the loss: %+v; before: %+v; want closed at a later generation", again, first)
			}
		})
	}
}
