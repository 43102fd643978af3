package retry_test

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry"
)

// capacityRun is a run of clients, each with its own Retrier and
// concurrency limit, against one depModel, in synctest's virtual time:
// what the test reads every 100 ms.
type capacityRun struct {
	every   time.Duration
	samples []capacitySample
}

// capacitySample is one reading: each client's limit, the attempts in
// flight from all of them, and the dependency's counters.
type capacitySample struct {
	limits   []int
	inflight int
	served   int64
}

// limit returns the clients' limits, summed.
func (s capacitySample) limit() int {
	n := 0
	for _, l := range s.limits {
		n += l
	}
	return n
}

// at returns the index of the sample taken d into the run.
func (r *capacityRun) at(d time.Duration) int { return min(int(d/r.every), len(r.samples)-1) }

// settled returns how long after from every sample's measure (by get) is
// within ±band of want to the sample at to, or -1 when the last is not.
func (r *capacityRun) settled(from, to time.Duration, want, band float64, get func(capacitySample) int) time.Duration {
	i, j := r.at(from), r.at(to)
	k := j + 1
	for k > i && math.Abs(float64(get(r.samples[k-1]))-want) <= band*want {
		k--
	}
	if k == j+1 {
		return -1
	}
	return time.Duration(k-i) * r.every
}

// throughput returns the requests the dependency served a second between
// from and to.
func (r *capacityRun) throughput(from, to time.Duration) float64 {
	i, j := r.at(from), r.at(to)
	return float64(r.samples[j].served-r.samples[i].served) / (float64(j-i) * r.every.Seconds())
}

// span returns the least and the most of get over the samples from from to
// to.
func (r *capacityRun) span(from, to time.Duration, get func(capacitySample) int) (lo, hi int) {
	xs := make([]int, 0, r.at(to)-r.at(from)+1)
	for _, s := range r.samples[r.at(from) : r.at(to)+1] {
		xs = append(xs, get(s))
	}
	return minMax(xs)
}

func sampleLimit(s capacitySample) int    { return s.limit() }
func sampleInflight(s capacitySample) int { return s.inflight }

// capacityClient is one client of a run: when it starts, how many
// requests a second it offers, its Concurrency and other options.
type capacityClient struct {
	start time.Duration
	rate  float64
	c     retry.Concurrency
	opts  []retry.Option
}

// runCapacity runs clients against d for total, calling at(elapsed) every
// 100 ms before the reading (to change the dependency), and returns the
// readings. It runs in a synctest bubble.
func runCapacity(t *testing.T, workers int, service time.Duration, exponential bool, total time.Duration, clients []capacityClient, at func(time.Duration, *depModel)) *capacityRun {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	d := newDepModel(ctx, &wg, workers, service, exponential)
	rs := make([]*retry.Retrier, len(clients))
	for i, c := range clients {
		rs[i] = retry.New(append([]retry.Option{retry.WithConcurrency(c.c), once}, c.opts...)...)
		if err := rs[i].Err(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			select {
			case <-time.After(c.start):
				d.offer(ctx, &wg, rs[i], c.rate)
			case <-ctx.Done():
			}
		})
	}
	run := &capacityRun{every: 100 * time.Millisecond}
	for elapsed := time.Duration(0); elapsed <= total; elapsed += run.every {
		if at != nil {
			at(elapsed, d)
		}
		s := capacitySample{served: d.served.Load()}
		for _, r := range rs {
			st := r.Stats()
			s.limits = append(s.limits, st.ConcurrencyLimit[""])
			s.inflight += st.InFlight[""]
		}
		run.samples = append(run.samples, s)
		time.Sleep(run.every)
	}
	cancel()
	wg.Wait()
	return run
}

// TestConcurrencyFindsCapacity: started with an Initial far above what the
// dependency serves, under traffic that keeps the limit full from the
// first window (so the first latencies it sees are queued ones), the limit
// and the attempts in flight are within ±20% of the dependency's
// Little's-law limit, computed from its capacity (workers serving at once,
// each for the service time: its workers) and not from what the limit let
// through, within 10 s, and stay there; the dependency serves at least 95%
// of its capacity from then on. Clients that start at different times
// share the dependency the same way.
func TestConcurrencyFindsCapacity(t *testing.T) {
	const (
		settle = 10 * time.Second
		band   = 0.2
		total  = 40 * time.Second
		steady = 15 * time.Second // throughput is measured from here to the end
	)
	tests := []struct {
		name        string
		workers     int
		service     time.Duration
		exponential bool
		clients     []capacityClient
	}{
		{name: "100 workers, 100 ms, Initial 200, 1.5x offered", workers: 100, service: 100 * time.Millisecond,
			clients: []capacityClient{{rate: 1500, c: retry.Concurrency{Initial: 200}}}},
		{name: "100 workers, 100 ms, Initial 500, 1.5x offered", workers: 100, service: 100 * time.Millisecond,
			clients: []capacityClient{{rate: 1500, c: retry.Concurrency{Initial: 500}}}},
		{name: "60 workers, 20 ms, Initial 300, 2x offered", workers: 60, service: 20 * time.Millisecond,
			clients: []capacityClient{{rate: 6000, c: retry.Concurrency{Initial: 300}}}},
		{name: "200 workers, 250 ms, Initial 400, 1.2x offered", workers: 200, service: 250 * time.Millisecond,
			clients: []capacityClient{{rate: 960, c: retry.Concurrency{Initial: 400}}}},
		{name: "100 workers, 100 ms exponential, Initial 200, 1.5x offered", workers: 100, service: 100 * time.Millisecond, exponential: true,
			clients: []capacityClient{{rate: 1500, c: retry.Concurrency{Initial: 200}}}},
		{name: "10 workers, 50 ms, Initial 100, 3x offered", workers: 10, service: 50 * time.Millisecond,
			clients: []capacityClient{{rate: 600, c: retry.Concurrency{Initial: 100}}}},
		{name: "100 workers, 100 ms, Initial 20, 1.5x offered", workers: 100, service: 100 * time.Millisecond,
			clients: []capacityClient{{rate: 1500, c: retry.Concurrency{}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				last := tt.clients[len(tt.clients)-1].start
				run := runCapacity(t, tt.workers, tt.service, tt.exponential, last+total, tt.clients, nil)
				want := float64(tt.workers) // the Little's-law limit: capacity × service time
				capacity := float64(tt.workers) / tt.service.Seconds()
				end := last + total
				tookL := run.settled(last, end, want, band, sampleLimit)
				tookF := run.settled(last, end, want, band, sampleInflight)
				lo, hi := run.span(last+settle, end, sampleLimit)
				flo, fhi := run.span(last+settle, end, sampleInflight)
				got := run.throughput(last+steady, end)
				t.Logf("Little's-law limit %.0f: the limit within ±%.0f%% after %v (%d..%d from %v), in flight after %v (%d..%d); served %.0f/s of %.0f/s (%.1f%%); limits at the end %v",
					want, 100*band, tookL, lo, hi, settle, tookF, flo, fhi, got, capacity, 100*got/capacity, run.samples[len(run.samples)-1].limits)
				if tookL < 0 || tookL > settle {
					t.Errorf("the limit settled within ±%.0f%% of %.0f after %v, want within %v", 100*band, want, tookL, settle)
				}
				if tookF < 0 || tookF > settle {
					t.Errorf("the attempts in flight settled within ±%.0f%% of %.0f after %v, want within %v", 100*band, want, tookF, settle)
				}
				if got < 0.95*capacity {
					t.Errorf("served %.0f/s from %v, want at least 95%% of the capacity %.0f/s", got, last+steady, capacity)
				}
			})
		})
	}
}

// TestConcurrencyStaggeredClients: clients that start at different times,
// each with its own limit (the default Initial), share a dependency that
// their sum of offered load overloads: from 10 s after the last starts,
// their attempts in flight, summed, average within ±20% of the
// dependency's Little's-law limit and stay under 1.3 times it, and it
// serves at least 95% of its capacity. Each limit's baseline is measured
// with the queue of the others that it meets, and a latency-based limit
// cannot tell that queue from the dependency's own latency, so the sum
// sits above the Little's-law limit (a mean of 110 to 115 for 100, up to
// 121 at a time, in these runs), and the shares are uneven.
func TestConcurrencyStaggeredClients(t *testing.T) {
	const (
		settle = 10 * time.Second
		total  = 40 * time.Second
		band   = 0.2
		most   = 1.3
	)
	tests := []struct {
		name    string
		clients []capacityClient
	}{
		{name: "3 clients starting 5 s apart, 0.6x offered each", clients: []capacityClient{{rate: 600}, {start: 5 * time.Second, rate: 600}, {start: 10 * time.Second, rate: 600}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const workers, service = 100, 100 * time.Millisecond
				last := tt.clients[len(tt.clients)-1].start
				end := last + total
				run := runCapacity(t, workers, service, false, end, tt.clients, nil)
				var sum float64
				from, to := run.at(last+settle), run.at(end)
				for _, s := range run.samples[from : to+1] {
					sum += float64(s.inflight)
				}
				mean := sum / float64(to-from+1)
				lo, hi := run.span(last+settle, end, sampleInflight)
				got, capacity := run.throughput(last+settle, end), float64(workers)/service.Seconds()
				t.Logf("in flight from %v after the last start: mean %.1f, %d..%d (Little's-law limit %d); served %.0f/s of %.0f/s; limits at the end %v",
					settle, mean, lo, hi, workers, got, capacity, run.samples[len(run.samples)-1].limits)
				if math.Abs(mean-workers) > band*workers || float64(hi) > most*workers {
					t.Errorf("in flight: mean %.1f, at most %d; want a mean within ±%.0f%% of %d and at most %.0f", mean, hi, 100*band, workers, most*workers)
				}
				if got < 0.95*capacity {
					t.Errorf("served %.0f/s, want at least 95%% of %.0f/s", got, capacity)
				}
			})
		})
	}
}

// TestConcurrencyAfterOutage: after a minute in which the dependency fails
// every request fast (503 in 1 ms), or hangs every one until the attempt's
// timeout, or, for two minutes, fails every other one fast, the limit is
// within ±20% of its healthy level 5 s after the dependency is healthy
// again and stays there, and the dependency serves at least 95% of its
// capacity from 10 s after.
func TestConcurrencyAfterOutage(t *testing.T) {
	const (
		workers = 100
		service = 100 * time.Millisecond
		rate    = 1500
		before  = 30 * time.Second
		after   = 30 * time.Second
		back    = 5 * time.Second
		band    = 0.2
	)
	tests := []struct {
		name   string
		fault  depFault
		length time.Duration
	}{
		{name: "fails fast for 60 s", fault: faultFast, length: time.Minute},
		{name: "times out for 60 s", fault: faultTimeout, length: time.Minute},
		{name: "fails half for 2 min", fault: faultHalf, length: 2 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				end := before + tt.length
				client := capacityClient{rate: rate, opts: []retry.Option{retry.WithAttemptTimeout(time.Second)}}
				run := runCapacity(t, workers, service, false, end+after, []capacityClient{client}, func(elapsed time.Duration, d *depModel) {
					switch elapsed {
					case before:
						d.fault.Store(int32(tt.fault))
					case end:
						d.fault.Store(int32(faultNone))
					}
				})
				lo, hi := run.span(before-10*time.Second, before, sampleLimit)
				healthy := float64(lo+hi) / 2
				dlo, dhi := run.span(before, end, sampleLimit)
				took := run.settled(end, end+after, healthy, band, sampleLimit)
				alo, ahi := run.span(end+back, end+after, sampleLimit)
				capacity := float64(workers) / service.Seconds()
				got := run.throughput(end+2*back, end+after)
				t.Logf("healthy limit %d..%d; %d..%d during the fault; within ±%.0f%% of %.0f %v after it, %d..%d from %v after; served %.0f/s of %.0f/s from %v after",
					lo, hi, dlo, dhi, 100*band, healthy, took, alo, ahi, back, got, capacity, 2*back)
				if math.Abs(healthy-workers) > band*workers {
					t.Errorf("the healthy limit %.0f is not within ±%.0f%% of the workers, %d", healthy, 100*band, workers)
				}
				if took < 0 || took > back {
					t.Errorf("the limit was back within ±%.0f%% of %.0f %v after the fault, want within %v", 100*band, healthy, took, back)
				}
				if got < 0.95*capacity {
					t.Errorf("served %.0f/s from %v after the fault, want at least 95%% of %.0f/s", got, 2*back, capacity)
				}
			})
		})
	}
}

// jumpClock is synctest's clock moved by an offset that a test changes: a
// clock that jumps.
type jumpClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *jumpClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *jumpClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *jumpClock) jump(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// TestConcurrencyClockJumps: when the Retrier's clock jumps an hour
// forward or back, attempts in flight seem to last an hour or less than
// nothing; the limit stays within ±20% of the dependency's Little's-law
// limit, or is back within 5 s.
func TestConcurrencyClockJumps(t *testing.T) {
	const (
		workers = 100
		service = 100 * time.Millisecond
		band    = 0.2
		at      = 20 * time.Second
		back    = 5 * time.Second
	)
	tests := []struct {
		name string
		jump time.Duration
	}{
		{name: "an hour forward", jump: time.Hour},
		{name: "an hour back", jump: -time.Hour},
		{name: "a second back", jump: -time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clock := &jumpClock{}
				client := capacityClient{rate: 1500, opts: []retry.Option{retry.WithClock(clock)}}
				run := runCapacity(t, workers, service, false, at+20*time.Second, []capacityClient{client}, func(elapsed time.Duration, _ *depModel) {
					if elapsed == at {
						clock.jump(tt.jump)
					}
				})
				lo, hi := run.span(at, at+20*time.Second, sampleLimit)
				took := run.settled(at, at+20*time.Second, workers, band, sampleLimit)
				t.Logf("limit %d..%d after the jump; within ±%.0f%% of %d %v after it", lo, hi, 100*band, workers, took)
				if took < 0 || took > back {
					t.Errorf("the limit was within ±%.0f%% of %d %v after the jump, want within %v", 100*band, workers, took, back)
				}
			})
		})
	}
}

// TestConcurrencyStartup: a client far busier than Initial has calls
// refused at first, while the limit grows: 500 callers, each calling every
// 80 ms a dependency that answers in 20 ms (125 in flight at once, against
// the default Initial of 20), have about three in four refused for the
// first half second, and none from a second and a quarter on.
func TestConcurrencyStartup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			callers = 500
			every   = 80 * time.Millisecond
			step    = 250 * time.Millisecond
			steps   = 40
		)
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		r := retry.New(retry.WithConcurrency(retry.Concurrency{}), once)
		d := newDepModel(ctx, &wg, 1000, 20*time.Millisecond, false)
		var calls, refused [steps]atomic.Int64
		start := time.Now()
		for i := range callers {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * every / callers)
				for ctx.Err() == nil {
					b := int(time.Since(start) / step)
					err := r.Run(ctx, d.call)
					if b < steps && ctx.Err() == nil {
						calls[b].Add(1)
						if retry.TypeOf(err) == "concurrency.limit" {
							refused[b].Add(1)
						}
					}
					time.Sleep(every)
				}
			})
		}
		time.Sleep(steps * step)
		cancel()
		wg.Wait()
		share := func(from, to int) float64 {
			var c, n int64
			for b := from; b < to; b++ {
				c, n = c+calls[b].Load(), n+refused[b].Load()
			}
			return float64(n) / float64(max(c, 1))
		}
		first, later := share(0, 2), share(5, steps)
		t.Logf("refused: %.1f%% in the first 500 ms, %.2f%% from 1.25 s to 10 s; by 250 ms: %.0f%%, %.0f%%, %.0f%%, %.0f%%, %.0f%%",
			100*first, 100*later, 100*share(0, 1), 100*share(1, 2), 100*share(2, 3), 100*share(3, 4), 100*share(4, 5))
		if first < 0.6 || first > 0.9 {
			t.Errorf("%.1f%% refused in the first 500 ms, want about three in four", 100*first)
		}
		if later > 0.001 {
			t.Errorf("%.2f%% refused from 1.25 s on, want none", 100*later)
		}
	})
}
