package redis_test

import (
	"context"
	"fmt"
	"math"
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

// TestLimiterSmallKeys: leases fit keys with little traffic. Three
// processes calling 20 keys, each key a few times a second in each
// process, lease about once a Heartbeat a key, not once a call; where the
// calls of a key ask for more than its limit, the fleet is admitted the
// limit within 5%; and the tokens a lease leaves unspent go back to the
// fleet's bucket when its term ends, for another process to take.
func TestLimiterSmallKeys(t *testing.T) {
	s := startServer(t)
	const interval, beat = 50 * time.Millisecond, 500 * time.Millisecond
	opts := retryredis.Options{SyncInterval: interval, Heartbeat: beat, Timeout: time.Second}
	newLimiters := func(limit float64, burst int) []*retryredis.Limiter {
		ls := make([]*retryredis.Limiter, 3)
		for i := range ls {
			l, err := retryredis.NewLimiter(s.Client(), limit, burst, true, retryredis.Options{Prefix: fmt.Sprintf("%s:%v:", t.Name(), limit), SyncInterval: opts.SyncInterval, Heartbeat: opts.Heartbeat, Timeout: opts.Timeout})
			if err != nil {
				t.Fatal(err)
			}
			ls[i] = l
		}
		return ls
	}
	// run has each process reserve on each of keys every pace for d, and
	// returns the tokens granted a second, by key, over the last
	// three-quarters of d (the first quarter leases and settles).
	run := func(ls []*retryredis.Limiter, keys []string, pace, d time.Duration) (calls int64, rate map[string]float64) {
		var mu sync.Mutex
		granted := map[string]int64{}
		var n atomic.Int64
		from := time.Now().Add(d / 4)
		end := time.Now().Add(d)
		var wg sync.WaitGroup
		for _, l := range ls {
			for _, k := range keys {
				wg.Go(func() {
					for time.Now().Before(end) {
						n.Add(1)
						if _, _, ok := l.Reserve(t.Context(), k, time.Now(), 500*time.Millisecond); ok && time.Now().After(from) {
							mu.Lock()
							granted[k]++
							mu.Unlock()
						}
						time.Sleep(pace)
					}
				})
			}
		}
		wg.Wait()
		rate = map[string]float64{}
		for k, g := range granted {
			rate[k] = float64(g) / (0.75 * d.Seconds())
		}
		return n.Load(), rate
	}
	keys := make([]string, 20)
	for i := range keys {
		keys[i] = fmt.Sprintf("small-%d", i)
	}

	// Little traffic, a generous limit: about 10 calls a second a key in
	// each process (half a call an interval), 600 a second in all; a
	// lease a key about once a Heartbeat (every 5 calls), not once a call.
	ls := newLimiters(1000, 1000)
	before := commands(t, s.Client())
	calls, _ := run(ls, keys, 100*time.Millisecond, 2*time.Second)
	cmds := commands(t, s.Client()) - before
	var leases, fallbacks int64
	for _, l := range ls {
		st := l.Stats()
		leases += st.Leases
		fallbacks += st.Fallbacks
	}
	t.Logf("little traffic: %d calls, %d leases, %d Redis commands", calls, leases, cmds)
	if cmds > 12*leases {
		t.Errorf("%d Redis commands for %d leases, want about 10 a lease and 6 a give-back of one that lapsed", cmds, leases)
	}
	if most := min(calls/3, int64(3*20*(2*time.Second/beat+2))); leases > most || fallbacks != 0 {
		t.Errorf("%d leases and %d fallbacks for %d calls, want at most %d leases (a lease a key and process about once a Heartbeat, and the first) on the fleet's bucket", leases, fallbacks, calls, most)
	}

	// More demand than the limit on each of two keys: 3 × 40 calls a
	// second asking for a limit of 50, with bursts of 5. Over the 1.5 s
	// measured the bucket can grant the limit and a burst, 53.3/s.
	_, rate := run(newLimiters(50, 5), keys[:2], 25*time.Millisecond, 2*time.Second)
	for _, k := range keys[:2] {
		t.Logf("key %s: admitted %.1f/s of a 50/s limit, bursts of 5", k, rate[k])
		if most := 50 + 5/1.5; rate[k] < 0.95*50 || rate[k] > 1.05*most {
			t.Errorf("key %s: admitted %.1f/s, want within 5%% of the limit, 50/s, and its burst, %.1f/s", k, rate[k], most)
		}
	}

	// A lease left unspent: one process leases a key's whole burst of
	// 100 and stops; once the lease's term ends the tokens are back in the
	// fleet's bucket, which refills at only 10 a second, and another
	// process takes them at once.
	ls = newLimiters(10, 100)
	reserve := func(l *retryredis.Limiter) bool {
		_, _, ok := l.Reserve(t.Context(), "k", time.Now(), 300*time.Millisecond)
		return ok
	}
	for range 5 { // the first lease is one token; the next, the demand's
		reserve(ls[0])
	}
	if st := ls[0].Stats(); st.Allowed < 50 {
		t.Fatalf("%+v: want a lease of most of the burst", st)
	}
	waitFor(t, beat+4*interval+500*time.Millisecond, "the unspent tokens given back", func() bool { return ls[0].Stats().GivenBack > 0 })
	got := 0
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); {
		if reserve(ls[1]) {
			got++
		}
	}
	back := ls[0].Stats().GivenBack
	t.Logf("given back %d tokens; another process took %d in 200 ms (the bucket refills 2 in that time)", back, got)
	if got < int(back)-5 {
		t.Errorf("another process took %d tokens in 200 ms after %d were given back", got, back)
	}
}

// TestLimiterLeaseAfterQueue: the calls that queue behind a key's first
// lease (a floor of a few tokens) and spend it within a round trip are
// counted as demand over at least a SyncInterval, not over that round
// trip: the renewal they start leases about their number for each
// interval of its term, not a rate of thousands a second that would take
// the fleet's whole burst and leave the other processes' tokens scarce.
func TestLimiterLeaseAfterQueue(t *testing.T) {
	s := startServer(t)
	cases := []struct {
		name           string
		calls          int
		interval, beat time.Duration
		limit          float64
		burst          int
	}{
		{name: "64 calls, 1 s interval, 10 s heartbeat", calls: 64, interval: time.Second, beat: 10 * time.Second, limit: 1e6, burst: 100000},
		{name: "16 calls, defaults", calls: 16, limit: 1e6, burst: 100000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := retryredis.Options{Prefix: t.Name() + ":", SyncInterval: tc.interval, Heartbeat: tc.beat, Timeout: 5 * time.Second}
			l, err := retryredis.NewLimiter(s.Client(), tc.limit, tc.burst, true, opts)
			if err != nil {
				t.Fatal(err)
			}
			interval, beat := tc.interval, tc.beat
			if interval == 0 {
				interval, beat = retryredis.DefaultSyncInterval, retryredis.DefaultHeartbeat
			}
			var wg sync.WaitGroup
			var refused atomic.Int64
			for range tc.calls {
				wg.Go(func() {
					if _, _, ok := l.Reserve(t.Context(), "k", time.Now(), 5*time.Second); !ok {
						refused.Add(1)
					}
				})
			}
			wg.Wait()
			// A renewal started by the last of them may still be in flight.
			waitFor(t, 5*time.Second, "no lease in flight", func() bool {
				_, _, ok := l.Reserve(t.Context(), "k", time.Now(), 5*time.Second)
				return ok
			})
			st := l.Stats()
			// The demand counted over an interval, for a term, twice (the
			// renewal and the one after the last call above), and the
			// first lease's floor.
			most := int64(2*float64(tc.calls+1)*beat.Seconds()/interval.Seconds()) + 4
			t.Logf("%d calls: %d tokens in %d leases, want at most %d", tc.calls, st.Allowed, st.Leases, most)
			if refused.Load() != 0 || st.Fallbacks != 0 {
				t.Errorf("%d refused, %d fallbacks: want none", refused.Load(), st.Fallbacks)
			}
			if st.Allowed > most {
				t.Errorf("%d calls leased %d tokens (of a burst of %d): want at most %d, their number for each interval of a Heartbeat", tc.calls, st.Allowed, tc.burst, most)
			}
		})
	}
}

// TestLimiterShareGiveBackOutOfWindow: tokens a lease left unspent and
// gave back after its grant left the share window leave the window's
// counts as they found them: the grant is no longer counted, so nothing
// is taken off for it. A give-back taken off the counts of the slice it
// was made in, rather than of the grant's, lowered the fleet's count of
// the window (and the process's own) by tokens granted before it, so that
// the next processes to lease were told of unused tokens the fleet had in
// fact spent (a share of 0.53 for a process that used a third of the
// limit). The leases run in the order that produces it: A leases 4 tokens
// (the fleet has then taken half the window's 8, so tokens are scarce and
// a lease lasts one SyncInterval), spends them, leases a batch and spends
// one of it; the batch lapses and leaves the window; A leases again,
// giving the rest back; then C leases its first 4. C's share is the
// rule's (Limiter's doc) on the grants within the window: its 4 and A's
// last lease, among 2 lessees.
func TestLimiterShareGiveBackOutOfWindow(t *testing.T) {
	const (
		limit = 16.0 // with a window of 0.5 s: 8 tokens in the window
		burst = 1000 // the bucket never runs dry: the leases are the demand's
		sync  = 50 * time.Millisecond
	)
	s := startServer(t)
	newLimiter := func() *retryredis.Limiter {
		l, err := retryredis.NewLimiter(s.Client(), limit, burst, false, retryredis.Options{Prefix: t.Name() + ":", SyncInterval: sync, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	reserve := func(l *retryredis.Limiter) {
		t.Helper()
		if _, _, ok := l.Reserve(context.Background(), "", time.Now(), time.Second); !ok {
			t.Fatal("a reservation refused")
		}
	}
	a := newLimiter()
	for range 5 { // the first lease of 4, spent, and a batch, of which one
		reserve(a)
	}
	first := a.Stats()
	if batch := first.Allowed - 4; first.Leases != 2 || batch < 2 {
		// A batch is the demand over a SyncInterval: 5 calls within 100 ms
		// make one of 2 tokens or more.
		t.Fatalf("A leased %d times, %d tokens, want 4 and then a batch of 2 or more", first.Leases, first.Allowed)
	}
	// The batch's term (one SyncInterval) ends, and its grant leaves the
	// window (ten SyncIntervals, on both clocks) with two more to spare.
	time.Sleep(12 * sync)
	reserve(a)
	st := a.Stats()
	last := st.Allowed - first.Allowed
	if back := st.GivenBack - first.GivenBack; back != first.Allowed-4-1 {
		t.Fatalf("A gave back %d tokens with its third lease, want the batch's %d left", back, first.Allowed-4-1)
	}
	c := newLimiter()
	reserve(c)
	whole := limit * 10 * sync.Seconds()
	fleet := float64(c.Stats().Allowed + last)
	want := min(max((float64(c.Stats().Allowed)+max(whole-fleet, 0)/2)/whole, 0.5/2), 1)
	if got := c.Stats().Share; math.Abs(got-want) > 1e-9 {
		t.Errorf("C's share %.4f, want %.4f: its %d tokens and A's last %d within the window of %v tokens, 2 lessees (A gave back %d of a batch granted before the window)",
			got, want, c.Stats().Allowed, last, whole, st.GivenBack-first.GivenBack)
	}
}
