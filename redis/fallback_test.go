package redis_test

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/steadyhq/retry"
	retryredis "github.com/steadyhq/retry/redis"
)

// openLoop calls r at rate calls a second, each in its own goroutine with
// a deadline of deadline, until stop closes; it counts the calls made
// (fired: a starved ticker drops ticks, so the demand is what fired, not
// rate) and those whose attempt ran (admitted) in the current measure, and
// the longest a call took before its attempt started or it was refused.
type openLoop struct {
	fired    atomic.Int64
	admitted atomic.Int64
	longest  atomic.Int64 // ns
	wg       sync.WaitGroup
}

func (o *openLoop) run(r *retry.Retrier, rate float64, deadline time.Duration, stop <-chan struct{}) {
	defer o.wg.Done()
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		o.fired.Add(1)
		o.wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			start := time.Now()
			var took time.Duration
			err := r.Run(ctx, func(context.Context) error {
				took = time.Since(start)
				return nil
			})
			if err == nil {
				o.admitted.Add(1)
			} else {
				took = time.Since(start)
			}
			for {
				old := o.longest.Load()
				if int64(took) <= old || o.longest.CompareAndSwap(old, int64(took)) {
					break
				}
			}
		})
	}
}

// TestLimiterFallbackShare: while Redis is away (killed, its replies
// delayed 1 s, or cut off), each process paces at its last lease share
// of the fleet's limit, not at the whole limit and not stalled, so that
// the fleet stays near its limit; no call waits on Redis longer than
// Options.Timeout plus slack; and with Redis back each process leases
// again. Two processes, with demands within the limit (each keeps what
// it used and half the headroom) and over it with short deadlines (each
// its part of what the fleet was admitted); on Redis, the fleet is
// admitted within its limit in both.
func TestLimiterFallbackShare(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 2 s of traffic a case")
	}
	const (
		limit   = 300.0
		timeout = 50 * time.Millisecond
		// slack is the scheduling delay allowed on top of a wait's bound
		// on a loaded machine; a call held by the away Redis waits 1 s.
		slack = 75 * time.Millisecond
	)
	type demand struct {
		name     string
		rates    []float64     // calls a second, per process
		deadline time.Duration // each call's
		shares   []float64     // the expected share of each process; nil: its part of what the fleet was admitted on Redis
		most     float64       // the fleet's rate in fallback, at most, as Limiter's doc states
		sync     time.Duration // the processes' SyncInterval
		settle   time.Duration // the traffic before the measures
	}
	demands := []demand{
		// Within the limit, a SyncInterval of 50 ms makes the share
		// window 0.5 s, 150 tokens of the limit, so that a share follows
		// the demand within the 0.15 checked below. A share counts a
		// lease's tokens when granted, and Redis's count of the window
		// is 9 to 10 of its tenths: the last lease (at most the burst,
		// 10 tokens) and a tenth of the fleet's grants (10 tokens) move
		// a share by up to 0.033 each, and a stall of the loaded machine
		// by slack takes 0.025 of the demand out of the window. With a
		// window of 0.2 s (60 tokens) those came to 0.083, 0.033 and
		// 0.06, and with a stall the fleet's count fell under half the
		// limit, so that a process leased a whole burst for a Heartbeat:
		// shares off by 0.18. The window at the fault starts after the
		// first leases, made before the fleet had been granted half a
		// window's tokens (a burst each, for a Heartbeat).
		{name: "within the limit", rates: []float64{150, 50}, deadline: time.Second, shares: []float64{(150 + 50) / limit, (50 + 50) / limit}, most: limit,
			sync: 50 * time.Millisecond, settle: 900 * time.Millisecond},
		// Over the limit, the shares are the parts of what the fleet was
		// admitted, on a window of 0.2 s: with 50 ms, a round trip
		// slower than Timeout on the loaded machine rested a process on
		// its local bucket for 50 ms, on top of Redis's grants, and 2 of
		// 45 runs were admitted past the 1.1 times the limit checked on
		// Redis (332/s and 365/s).
		{name: "over the limit", rates: []float64{400, 400}, deadline: 20 * time.Millisecond, most: 1.5 * limit,
			sync: 20 * time.Millisecond, settle: 400 * time.Millisecond},
	}
	type away struct {
		name         string
		inject, heal func(f *faulty)
	}
	aways := []away{
		{name: "killed", inject: func(f *faulty) { f.s.Stop() }, heal: func(f *faulty) { f.s.Start() }},
		{name: "replies delayed 1s", inject: func(f *faulty) { f.p.Delay(time.Second) }, heal: func(f *faulty) { f.p.Delay(0); f.p.Heal() }},
		{name: "cut off", inject: func(f *faulty) { f.p.Partition() }, heal: func(f *faulty) { f.p.Heal() }},
	}
	for _, a := range aways {
		for _, d := range demands {
			t.Run(a.name+"/"+d.name, func(t *testing.T) {
				f := newFaulty(t)
				ls := make([]*retryredis.Limiter, len(d.rates))
				rs := make([]*retry.Retrier, len(d.rates))
				for i := range ls {
					c := goredis.NewClient(&goredis.Options{Addr: f.p.Addr(), DialTimeout: time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1})
					t.Cleanup(func() { c.Close() })
					l, err := retryredis.NewLimiter(c, limit, 10, false, retryredis.Options{Timeout: timeout, SyncInterval: d.sync})
					if err != nil {
						t.Fatal(err)
					}
					ls[i] = l
					rs[i] = retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}), retry.WithRateLimit(retry.RateLimit{Shared: l}), retry.WithBudget(retry.Budget{Off: true}))
				}
				loops := make([]*openLoop, len(rs))
				stop := make(chan struct{})
				for i, r := range rs {
					loops[i] = &openLoop{}
					loops[i].wg.Add(1)
					go loops[i].run(r, d.rates[i], d.deadline, stop)
				}
				defer func() {
					close(stop)
					for _, o := range loops {
						o.wg.Wait()
					}
				}()
				// measure returns each process's admitted calls a second
				// over dur, and the calls it made a second.
				measure := func(dur time.Duration) (admitted, fired []float64) {
					for _, o := range loops {
						o.fired.Store(0)
						o.admitted.Store(0)
						o.longest.Store(0)
					}
					start := time.Now()
					time.Sleep(dur)
					secs := time.Since(start).Seconds()
					for _, o := range loops {
						admitted = append(admitted, float64(o.admitted.Load())/secs)
						fired = append(fired, float64(o.fired.Load())/secs)
					}
					return admitted, fired
				}
				time.Sleep(d.settle) // leases and shares settle
				on, _ := measure(300 * time.Millisecond)
				if total := on[0] + on[1]; total > 1.1*limit {
					t.Errorf("fleet %.0f/s on Redis (%.0f/s and %.0f/s), want within the limit %v/s", total, on[0], on[1], limit)
				}

				a.inject(f)
				time.Sleep(100 * time.Millisecond) // the requests in flight end
				away, fired := measure(500 * time.Millisecond)
				var longest time.Duration
				for _, o := range loops {
					longest = max(longest, time.Duration(o.longest.Load()))
				}
				shares := d.shares
				if shares == nil {
					shares = []float64{on[0] / (on[0] + on[1]), on[1] / (on[0] + on[1])}
				}
				var total float64
				for i, l := range ls {
					st := l.Stats()
					total += away[i]
					t.Logf("process %d: %.0f/s on Redis, %.0f/s admitted of %.0f/s called with Redis away (share %.2f, want %.2f); %+v", i, on[i], away[i], fired[i], st.Share, shares[i], st)
					if math.Abs(st.Share-shares[i]) > 0.15 {
						t.Errorf("process %d: share %.2f, want %.2f", i, st.Share, shares[i])
					}
					if want := math.Min(fired[i], st.Share*limit); away[i] < 0.7*want || away[i] > 1.2*want+20 {
						t.Errorf("process %d: %.0f/s with Redis away, want about %.0f (its share of %v/s, or the %.0f/s it called)", i, away[i], want, limit, fired[i])
					}
					if st.OnFleet || st.Fallbacks == 0 {
						t.Errorf("process %d: OnFleet %v, %d fallbacks with Redis away", i, st.OnFleet, st.Fallbacks)
					}
				}
				t.Logf("fleet %.0f/s with Redis away against a limit of %v/s; longest wait %v", total, limit, longest.Round(time.Millisecond))
				if total > d.most*1.05 {
					t.Errorf("fleet %.0f/s with Redis away, want at most %.0f/s (5%% for the measure)", total, d.most)
				}
				if bound := min(timeout, d.deadline) + slack; longest > bound {
					t.Errorf("a call waited %v with Redis away, want at most %v", longest, bound)
				}

				a.heal(f)
				leases := make([]int64, len(ls))
				for i, l := range ls {
					leases[i] = l.Stats().Leases
				}
				waitFor(t, time.Second, "each process to lease again", func() bool {
					for i, l := range ls {
						if st := l.Stats(); !st.OnFleet || st.Leases == leases[i] {
							return false
						}
					}
					return true
				})
			})
		}
	}
}
