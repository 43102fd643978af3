package retry_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry"
)

// depModel is a dependency of workers that serve requests from one FIFO
// queue, each for a service time drawn uniformly within ±20% of service,
// or exponentially. Workers beyond active stop taking requests, so that
// capacity can be cut. It runs on synctest's virtual clock until ctx ends.
type depModel struct {
	queue   chan chan struct{}
	active  atomic.Int64
	service atomic.Int64 // mean service time, ns
	served  atomic.Int64 // requests served
	fault   atomic.Int32 // a depFault: how requests fail, if they do
	flips   atomic.Uint64
	mu      sync.Mutex // guards share and draws
	share   float64    // the share of requests faultShareFast fails
	draws   *rand.Rand // which requests faultShare fails, seeded
}

// depFault is how a depModel fails its requests.
type depFault int32

const (
	faultNone      depFault = iota
	faultFast               // every request fails with a 503 in 1 ms, before the queue
	faultTimeout            // every request hangs until its attempt's context ends
	faultHalf               // every other request fails with a 503 in 1 ms; the rest are served
	faultShareFast          // a share of requests (share), drawn at random, fails with a 503 in 1 ms; the rest are served
)

func newDepModel(ctx context.Context, wg *sync.WaitGroup, workers int, service time.Duration, exponential bool) *depModel {
	d := &depModel{queue: make(chan chan struct{}, 1<<16), draws: rand.New(rand.NewPCG(1, 31))}
	d.active.Store(int64(workers))
	d.service.Store(int64(service))
	for id := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(id), 29))
			for ctx.Err() == nil {
				if int64(id) >= d.active.Load() {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				select {
				case done := <-d.queue:
					f := 0.8 + 0.4*rng.Float64()
					if exponential {
						f = rng.ExpFloat64()
					}
					s := time.Duration(float64(d.service.Load()) * f)
					time.Sleep(s)
					d.served.Add(1)
					close(done)
				case <-ctx.Done():
				}
			}
		})
	}
	return d
}

// call is one request to the dependency, as an attempt.
func (d *depModel) call(ctx context.Context) error {
	switch depFault(d.fault.Load()) {
	case faultFast:
		time.Sleep(time.Millisecond)
		return &retry.StatusError{StatusCode: http.StatusServiceUnavailable}
	case faultTimeout:
		<-ctx.Done()
		return ctx.Err()
	case faultHalf:
		if d.flips.Add(1)%2 == 0 {
			time.Sleep(time.Millisecond)
			return &retry.StatusError{StatusCode: http.StatusServiceUnavailable}
		}
	case faultShareFast:
		if d.draw() {
			time.Sleep(time.Millisecond)
			return &retry.StatusError{StatusCode: http.StatusServiceUnavailable}
		}
	}
	done := make(chan struct{})
	d.queue <- done
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// failShare makes the dependency fail share of its requests fast
// (faultShareFast).
func (d *depModel) failShare(share float64) {
	d.mu.Lock()
	d.share = share
	d.mu.Unlock()
	d.fault.Store(int32(faultShareFast))
}

// draw reports whether a request of faultShareFast fails: at random,
// with probability share.
func (d *depModel) draw() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.draws.Float64() < d.share
}

// offer starts calls through r at rate per second until ctx ends.
func (d *depModel) offer(ctx context.Context, wg *sync.WaitGroup, r *retry.Retrier, rate float64) {
	wg.Go(func() {
		every := time.Duration(float64(time.Second) / rate)
		for ctx.Err() == nil {
			time.Sleep(every)
			wg.Go(func() { _ = r.Run(ctx, d.call) })
		}
	})
}

// depSample is what the test reads every 100 ms.
type depSample struct {
	inflight, limit int
	served          int64
}

// TestConcurrencyLittlesLaw: against a dependency offered more than it can
// serve, the attempts in flight settle within ±20% of its Little's-law
// limit, computed from its capacity (workers serving at once, each for the
// mean service time: throughput times service time is its workers), not
// from what the limit let through, and it serves at least 95% of that
// capacity; when it loses half its workers they settle within 10 s to
// within ±20% of the new limit and swing less than ±25% after. A limit
// pinned at 20 against 100 workers fails it (it serves 201 of 1,000 a
// second).
func TestConcurrencyLittlesLaw(t *testing.T) {
	const (
		every  = 100 * time.Millisecond
		after  = 30 * time.Second // the run after the loss
		settle = 10 * time.Second
		band   = 0.2  // settled: within this share of the Little's-law limit
		swing  = 0.25 // the most a sample after settling may stray from their mean, as a share of it
		served = 0.95 // the least share of the capacity served before the loss
	)
	tests := []struct {
		name        string
		workers     int
		service     time.Duration
		exponential bool
		rate        float64       // offered load, per second
		warmUp      time.Duration // before the loss; its last 10 s are checked too
	}{
		{name: "100 workers, 100 ms, 1.5x offered", workers: 100, service: 100 * time.Millisecond, rate: 1500, warmUp: 30 * time.Second},
		{name: "60 workers, 20 ms, 2x offered", workers: 60, service: 20 * time.Millisecond, rate: 6000, warmUp: 30 * time.Second},
		{name: "200 workers, 250 ms, 1.2x offered", workers: 200, service: 250 * time.Millisecond, rate: 960, warmUp: 60 * time.Second},
		{name: "100 workers, 100 ms exponential, 1.5x offered", workers: 100, service: 100 * time.Millisecond, exponential: true, rate: 1500, warmUp: 60 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				var wg sync.WaitGroup
				r := retry.New(retry.WithConcurrency(retry.Concurrency{}), once)
				d := newDepModel(ctx, &wg, tt.workers, tt.service, tt.exponential)
				d.offer(ctx, &wg, r, tt.rate)
				drop, n := int(tt.warmUp/every), int((tt.warmUp+after)/every)
				samples := make([]depSample, 0, n+1)
				for i := range n + 1 {
					if i == drop {
						d.active.Store(int64(tt.workers / 2))
					}
					s := r.Stats()
					samples = append(samples, depSample{inflight: s.InFlight[""], limit: s.ConcurrencyLimit[""], served: d.served.Load()})
					time.Sleep(every)
				}
				cancel()
				wg.Wait()

				// Before the loss: its last 10 s, against the Little's-law
				// limit of the dependency's capacity.
				span := int(10 * time.Second / every)
				limit := float64(tt.workers)
				capacity := float64(tt.workers) / tt.service.Seconds()
				rate := float64(samples[drop].served-samples[drop-span].served) / (float64(span) * every.Seconds())
				inflight := func(ss []depSample) []int {
					xs := make([]int, len(ss))
					for i, s := range ss {
						xs[i] = s.inflight
					}
					return xs
				}
				before := inflight(samples[drop-span : drop])
				lo, hi := minMax(before)
				t.Logf("before the loss: Little's-law limit %.0f; in flight %d..%d; served %.0f/s of %.0f/s", limit, lo, hi, rate, capacity)
				if far := within(before, limit, band); far >= 0 {
					t.Errorf("before the loss, in flight %d is outside ±%.0f%% of %.0f", before[far], 100*band, limit)
				}
				if rate < served*capacity {
					t.Errorf("before the loss, served %.0f/s, want at least %.0f%% of %.0f/s", rate, 100*served, capacity)
				}
				// After it: half the workers.
				limit = float64(tt.workers / 2)
				rest := inflight(samples[drop+1:])
				settled := len(rest)
				for i := len(rest) - 1; i >= 0 && math.Abs(float64(rest[i])-limit) <= band*limit; i-- {
					settled = i
				}
				took := time.Duration(settled+1) * every
				rest = rest[settled:]
				mean, stray := meanSwing(rest)
				lo, hi = minMax(rest)
				t.Logf("after the loss: Little's-law limit %.0f; in flight within ±%.0f%% after %v, then %d..%d, mean %.1f (%+.1f%%), swing ±%.1f%%; limit at the end %d",
					limit, 100*band, took, lo, hi, mean, 100*(mean/limit-1), 100*stray, samples[n].limit)
				if took > settle {
					t.Errorf("in flight settled after %v, want within %v", took, settle)
				}
				if stray >= swing {
					t.Errorf("in flight swings ±%.1f%% after settling, want less than ±%.0f%%", 100*stray, 100*swing)
				}
			})
		})
	}
}

// within returns the index of the first of xs outside ±band of want, or -1.
func within(xs []int, want, band float64) int {
	for i, x := range xs {
		if math.Abs(float64(x)-want) > band*want {
			return i
		}
	}
	return -1
}

func minMax(xs []int) (lo, hi int) {
	lo, hi = math.MaxInt, math.MinInt
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

// meanSwing returns the mean of xs and their largest distance from it, as
// a fraction of it.
func meanSwing(xs []int) (mean, swing float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	for _, x := range xs {
		mean += float64(x)
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		swing = max(swing, math.Abs(float64(x)-mean)/mean)
	}
	return mean, swing
}

// TestConcurrencyLatencyCeiling: through a long incident in which the
// dependency's latency stays five times its healthy latency, the baseline
// cannot rise above MaxLatency, so the limit stays low throughout; with a
// ceiling far above the incident's latency the baseline follows the
// incident and the limit climbs back (failsafe-go #127's drift). After the
// incident the limit grows again.
func TestConcurrencyLatencyCeiling(t *testing.T) {
	const (
		workers  = 20
		healthy  = 50 * time.Millisecond
		slow     = 250 * time.Millisecond
		rate     = 200 // per second: half the healthy capacity, 2.5 times the incident's
		before   = 20 * time.Second
		incident = 3 * time.Minute
		after    = 20 * time.Second
		every    = 100 * time.Millisecond
	)
	tests := []struct {
		name       string
		maxLatency time.Duration
		// The bounds of the limit over the incident's last two minutes,
		// and its least 10 s after the incident.
		lateLo, lateHi int
		recovered      int
	}{
		{name: "ceiling 2x healthy", maxLatency: 2 * healthy, lateLo: 1, lateHi: workers / 4, recovered: workers / 2},
		// The incident's own Little's-law limit is its workers: the limit
		// climbs back to within 20% of it.
		{name: "ceiling 1 h", maxLatency: time.Hour, lateLo: workers * 4 / 5, lateHi: workers * 6 / 5, recovered: workers / 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				var wg sync.WaitGroup
				r := retry.New(retry.WithConcurrency(retry.Concurrency{MaxLatency: tt.maxLatency}), once)
				d := newDepModel(ctx, &wg, workers, healthy, false)
				d.offer(ctx, &wg, r, rate)
				start, end := int(before/every), int((before+incident)/every)
				limits := make([]int, 0, end+int(after/every))
				for i := range cap(limits) {
					switch i {
					case start:
						d.service.Store(int64(slow))
					case end:
						d.service.Store(int64(healthy))
					}
					time.Sleep(every)
					limits = append(limits, r.Stats().ConcurrencyLimit[""])
				}
				cancel()
				wg.Wait()
				// When the limit, once down, climbed back to the incident's
				// Little's-law limit (its workers) within 20%.
				low, climbed := start, "never"
				for i := start; i < end; i++ {
					if limits[i] < limits[low] {
						low = i
					}
				}
				for i := low; i < end; i++ {
					if limits[i] >= workers*4/5 {
						climbed = fmt.Sprintf("%v into the incident", time.Duration(i+1-start)*every)
						break
					}
				}
				lo, hi := minMax(limits[end-int(2*time.Minute/every) : end])
				back, _ := minMax(limits[end+int(10*time.Second/every):])
				t.Logf("MaxLatency %v: limit %d before; down to %d %v into the incident, back at %d or more: %s; %d..%d over its last 2 min; at least %d from 10 s after it",
					tt.maxLatency, limits[start-1], limits[low], time.Duration(low+1-start)*every, workers*4/5, climbed, lo, hi, back)
				if lo < tt.lateLo || hi > tt.lateHi {
					t.Errorf("limit %d..%d over the incident's last 2 min, want within [%d, %d]", lo, hi, tt.lateLo, tt.lateHi)
				}
				if back < tt.recovered {
					t.Errorf("limit %d from 10 s after the incident, want at least %d", back, tt.recovered)
				}
			})
		})
	}
}

// fixedLimit is a Concurrency whose limit stays at n.
func fixedLimit(n int) retry.Concurrency { return retry.Concurrency{Initial: n, Min: n, Max: n} }

// once is a policy of one attempt.
var once = retry.WithPolicy(retry.Policy{MaxAttempts: 1})

// holdPermit starts a call through r (with opts) whose attempt holds its
// permit for d, and returns once the attempt runs; done is closed when the
// call has returned. It runs in a synctest bubble.
func holdPermit(r *retry.Retrier, d time.Duration, opts ...retry.Option) (done chan struct{}) {
	done = holdPermitAt(r, 0, d, opts...)
	synctest.Wait()
	return done
}

// holdPermitAt is holdPermit from at on.
func holdPermitAt(r *retry.Retrier, at, d time.Duration, opts ...retry.Option) (done chan struct{}) {
	done = make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(at)
		_ = retry.Run(context.Background(), func(context.Context) error { time.Sleep(d); return nil }, append([]retry.Option{r}, opts...)...)
	}()
	return done
}

// TestConcurrencySettings: an invalid Concurrency is an error naming the
// field, its value and the rule, from Do and from the Transport, and no
// attempt runs; zero fields take their defaults one by one.
func TestConcurrencySettings(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	tests := []struct {
		name  string
		c     retry.Concurrency
		err   string // "" for a valid c
		limit int    // the limit at the start, for a valid c
	}{
		{name: "zero", c: retry.Concurrency{}, limit: 20},
		{name: "Max below the default Initial", c: retry.Concurrency{Max: 10}, limit: 10},
		{name: "Min above the default Initial", c: retry.Concurrency{Min: 50}, limit: 50},
		{name: "Initial above the default Max", c: retry.Concurrency{Initial: 2000}, limit: 2000},
		{name: "negative Initial", c: retry.Concurrency{Initial: -1}, err: "retry: option WithConcurrency: Initial = -1: must be in [0, 1000000]"},
		{name: "Initial beyond a million", c: retry.Concurrency{Initial: math.MaxInt, Min: math.MaxInt, Max: math.MaxInt}, err: "retry: option WithConcurrency: Initial = 9223372036854775807: must be in [0, 1000000]"},
		{name: "Max beyond a million", c: retry.Concurrency{Max: 1_000_001}, err: "retry: option WithConcurrency: Max = 1000001: must be in [0, 1000000]"},
		{name: "a million", c: retry.Concurrency{Initial: 1_000_000, Min: 1_000_000, Max: 1_000_000}, limit: 1_000_000},
		{name: "negative Min", c: retry.Concurrency{Min: -2}, err: "retry: option WithConcurrency: Min = -2: must be in [0, 1000000]"},
		{name: "negative Max", c: retry.Concurrency{Max: -3}, err: "retry: option WithConcurrency: Max = -3: must be in [0, 1000000]"},
		{name: "negative MaxLatency", c: retry.Concurrency{MaxLatency: -time.Second}, err: "retry: option WithConcurrency: MaxLatency = -1s: must be >= 0"},
		{name: "negative MaxWait", c: retry.Concurrency{MaxWait: -5 * time.Millisecond}, err: "retry: option WithConcurrency: MaxWait = -5ms: must be >= 0"},
		{name: "Min above Max", c: retry.Concurrency{Min: 10, Max: 5}, err: "retry: option WithConcurrency: Min = 10: must be <= Max (5)"},
		{name: "Initial above Max", c: retry.Concurrency{Initial: 50, Max: 10}, err: "retry: option WithConcurrency: Initial = 50: must be within [Min, Max] = [1, 10]"},
		{name: "Initial below Min", c: retry.Concurrency{Initial: 2, Min: 5}, err: "retry: option WithConcurrency: Initial = 2: must be within [Min, Max] = [5, 1000]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran := false
			_, err := retry.Do(t.Context(), func(context.Context) (int, error) { ran = true; return 1, nil }, retry.WithConcurrency(tt.c))
			if tt.err == "" {
				if err != nil || !ran {
					t.Fatalf("Do: %v (ran %v), want success", err, ran)
				}
				if got := retry.New(retry.WithConcurrency(tt.c)).Stats().ConcurrencyLimit[""]; got != tt.limit {
					t.Errorf("limit %d at the start, want %d", got, tt.limit)
				}
				return
			}
			if err == nil || err.Error() != tt.err || ran {
				t.Errorf("Do: %v (ran %v), want %q and no attempt", err, ran, tt.err)
			}
			before := hits.Load()
			client := &http.Client{Transport: retry.NewTransport(srv.Client().Transport, retry.WithConcurrency(tt.c))}
			resp, err := client.Get(srv.URL)
			if err == nil {
				resp.Body.Close()
			}
			var uerr *url.Error
			if !errors.As(err, &uerr) || uerr.Err.Error() != tt.err || hits.Load() != before {
				t.Errorf("Transport: %v, %d hits; want %q and none", err, hits.Load()-before, tt.err)
			}
		})
	}
}

// TestConcurrencyRefusal: an attempt that finds the limit reached is
// refused at once by default, waits for a permit up to MaxWait and the
// caller's deadline otherwise, and ends the call with ReasonThrottled and
// type "concurrency.limit"; a refused retry keeps the last failure.
func TestConcurrencyRefusal(t *testing.T) {
	tests := []struct {
		name     string
		maxWait  time.Duration
		hold     time.Duration // how long another call holds the only permit
		holdAt   time.Duration // when it takes it
		timeout  time.Duration // the caller's deadline, if any
		fail     bool          // the first attempt fails, and a retry is due 10 ms later
		reason   retry.Reason  // "" for a success
		attempts int           // run by the call
		elapsed  time.Duration // how long the call took, up to a recheck (1 ms) more
		waits    bool
	}{
		{name: "refused at once", hold: time.Second, reason: retry.ReasonThrottled},
		{name: "waits for a permit", maxWait: 100 * time.Millisecond, hold: 30 * time.Millisecond, attempts: 1, elapsed: 30 * time.Millisecond, waits: true},
		{name: "MaxWait runs out", maxWait: 100 * time.Millisecond, hold: time.Second, reason: retry.ReasonThrottled, elapsed: 100 * time.Millisecond, waits: true},
		// Rechecks of 1 ms: the call is refused once less than two rechecks
		// and 5 ms of its time are left, at 43 ms, not at its deadline.
		{name: "the deadline comes first", maxWait: time.Second, hold: time.Second, timeout: 50 * time.Millisecond, reason: retry.ReasonThrottled, elapsed: 43 * time.Millisecond, waits: true},
		{name: "retry refused", hold: time.Second, holdAt: 5 * time.Millisecond, fail: true, reason: retry.ReasonThrottled, attempts: 1, elapsed: 10 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := fixedLimit(1)
				c.MaxWait = tt.maxWait
				r := retry.New(retry.WithConcurrency(c), retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: 10 * time.Millisecond, Jitter: retry.Jitter{Kind: retry.JitterNone}}))
				held := holdPermitAt(r, tt.holdAt, tt.hold)
				synctest.Wait()
				ctx := t.Context()
				if tt.timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.timeout)
					defer cancel()
				}
				start := time.Now()
				ran := 0
				err := r.Run(ctx, func(context.Context) error {
					ran++
					if tt.fail {
						return errTransient
					}
					return nil
				})
				elapsed := time.Since(start)
				var e *retry.Error
				switch {
				case tt.reason == "" && err != nil:
					t.Errorf("error %v, want success", err)
				case tt.reason != "" && (!errors.As(err, &e) || e.Reason != tt.reason || e.Attempts != tt.attempts):
					t.Errorf("error %#v, want a *retry.Error of Reason %s after %d attempts", err, tt.reason, tt.attempts)
				case tt.reason != "" && retry.TypeOf(err) != "concurrency.limit":
					t.Errorf("type %q, want concurrency.limit", retry.TypeOf(err))
				case tt.fail && !errors.Is(err, errTransient):
					t.Errorf("error %v, want it to keep the last failure", err)
				}
				if ran != tt.attempts || elapsed < tt.elapsed || elapsed > tt.elapsed+time.Millisecond {
					t.Errorf("%d attempts after %v, want %d after %v (+1 ms)", ran, elapsed, tt.attempts, tt.elapsed)
				}
				s := r.Stats()
				if denied := tt.reason != ""; (s.ConcurrencyDenied == 1) != denied || (s.ConcurrencyWaits > 0) != tt.waits {
					t.Errorf("ConcurrencyDenied %d, ConcurrencyWaits %d; want a refusal %v, waits %v", s.ConcurrencyDenied, s.ConcurrencyWaits, denied, tt.waits)
				}
				<-held
				if n := r.Stats().InFlight[""]; n != 0 {
					t.Errorf("%d in flight at the end, want 0", n)
				}
			})
		})
	}
}

// TestConcurrencyPermitsReturned: every path an attempt can take gives its
// permit back: success, failure, panic, the caller's cancellation, the
// attempt's timeout, a retry another gate refuses, a hedge that loses or
// is refused a permit, a wait for a permit that the caller cancels.
func TestConcurrencyPermitsReturned(t *testing.T) {
	noJitter := retry.Jitter{Kind: retry.JitterNone}
	tests := []struct {
		name   string
		limit  int
		opts   []retry.Option
		call   func(ctx context.Context, r *retry.Retrier) error
		reason retry.Reason // of the call's error; "" for a success
		denied int64
	}{
		{name: "success", limit: 2, call: func(ctx context.Context, r *retry.Retrier) error {
			return r.Run(ctx, func(context.Context) error { time.Sleep(time.Millisecond); return nil })
		}},
		{name: "failures", limit: 2, opts: []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond, Jitter: noJitter})},
			call: func(ctx context.Context, r *retry.Retrier) error {
				return r.Run(ctx, func(context.Context) error { time.Sleep(time.Millisecond); return errTransient })
			}, reason: retry.ReasonExhausted},
		{name: "panic", limit: 2, call: func(ctx context.Context, r *retry.Retrier) (err error) {
			defer func() {
				if recover() == nil {
					err = errors.New("no panic")
				}
			}()
			return r.Run(ctx, func(context.Context) error { panic("boom") })
		}},
		{name: "caller cancels", limit: 2, call: func(ctx context.Context, r *retry.Retrier) error {
			ctx, cancel := context.WithCancel(ctx)
			time.AfterFunc(10*time.Millisecond, cancel)
			return r.Run(ctx, func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
		}, reason: retry.ReasonCanceled},
		{name: "attempt timeout", limit: 2, opts: []retry.Option{retry.WithAttemptTimeout(10 * time.Millisecond), retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond, Jitter: noJitter})},
			call: func(ctx context.Context, r *retry.Retrier) error {
				return r.Run(ctx, func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
			}, reason: retry.ReasonExhausted},
		{name: "retry refused by the budget", limit: 2, opts: []retry.Option{retry.WithBudget(retry.Budget{Tokens: -1, Ratio: -1}), retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond, Jitter: noJitter})},
			call: func(ctx context.Context, r *retry.Retrier) error {
				return r.Run(ctx, func(context.Context) error { return errTransient })
			}, reason: retry.ReasonBudget},
		{name: "hedge loses", limit: 2, opts: []retry.Option{retry.WithHedge(retry.Hedge{Delay: 10 * time.Millisecond})},
			call: func(ctx context.Context, r *retry.Retrier) error {
				_, err := retry.Hedged(ctx, func(ctx context.Context) (int, error) {
					if retry.AttemptFrom(ctx) == 1 {
						<-ctx.Done() // canceled once the hedge wins
						return 0, ctx.Err()
					}
					return 2, nil
				}, r)
				return err
			}},
		{name: "hedge refused a permit", limit: 1, opts: []retry.Option{retry.WithHedge(retry.Hedge{Delay: 10 * time.Millisecond})},
			call: func(ctx context.Context, r *retry.Retrier) error {
				// Hedges are due at 10, 20, 30 and 40 ms: each is refused.
				_, err := retry.Hedged(ctx, func(ctx context.Context) (int, error) { time.Sleep(45 * time.Millisecond); return 1, nil }, r)
				if s := r.Stats(); s.Hedges != 0 {
					return errors.New("a hedge started")
				}
				return err
			}, denied: 4},
		{name: "caller cancels a wait for a permit", limit: 1, call: func(ctx context.Context, r *retry.Retrier) error {
			held := holdPermit(r, 100*time.Millisecond)
			defer func() { <-held }()
			ctx, cancel := context.WithCancel(ctx)
			time.AfterFunc(20*time.Millisecond, cancel)
			return r.Run(ctx, func(context.Context) error { return nil })
		}, reason: retry.ReasonCanceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := fixedLimit(tt.limit)
				c.MaxWait = time.Second
				r := retry.New(append([]retry.Option{retry.WithConcurrency(c)}, tt.opts...)...)
				err := tt.call(t.Context(), r)
				var e *retry.Error
				switch {
				case tt.reason == "" && err != nil:
					t.Errorf("error %v, want success", err)
				case tt.reason != "" && (!errors.As(err, &e) || e.Reason != tt.reason):
					t.Errorf("error %v, want Reason %s", err, tt.reason)
				}
				synctest.Wait()
				s := r.Stats()
				if s.InFlight[""] != 0 || s.ConcurrencyDenied != tt.denied {
					t.Errorf("%d in flight, %d denied; want 0, %d", s.InFlight[""], s.ConcurrencyDenied, tt.denied)
				}
			})
		})
	}
}

// TestConcurrencyPerKey: with PerKey each key has its own limit, and a key
// at its limit does not refuse another's attempts.
func TestConcurrencyPerKey(t *testing.T) {
	tests := []struct {
		name   string
		perKey bool
		b      bool // a call on key b runs while a holds the permit
	}{
		{name: "per key", perKey: true, b: true},
		{name: "one limit", perKey: false, b: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := fixedLimit(1)
				c.PerKey = tt.perKey
				r := retry.New(retry.WithConcurrency(c), once)
				held := holdPermit(r, time.Second, retry.WithKey("a"))
				call := func(key string) error {
					return retry.Run(t.Context(), func(context.Context) error { return nil }, r, retry.WithKey(key))
				}
				if err := call("a"); retry.TypeOf(err) != "concurrency.limit" {
					t.Errorf("a second call on a: %v, want it refused", err)
				}
				if err := call("b"); (err == nil) != tt.b {
					t.Errorf("a call on b: %v, want it to run: %v", err, tt.b)
				}
				s := r.Stats()
				want := map[string]int{"": 1}
				if tt.perKey {
					want = map[string]int{"a": 1, "b": 0}
				}
				if len(s.InFlight) != len(want) || s.InFlight["a"] != want["a"] || s.InFlight[""] != want[""] || len(s.ConcurrencyLimit) != len(want) {
					t.Errorf("InFlight %v, ConcurrencyLimit %v; want in flight %v", s.InFlight, s.ConcurrencyLimit, want)
				}
				<-held
			})
		})
	}
}

// TestConcurrencyTransport: through the Transport against a server on
// loopback, a request that finds the limit reached is refused without
// reaching the server, with an *Error of Reason throttled; with PerKey a
// request to another host is not; every permit is given back.
func TestConcurrencyTransport(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var hitsA, hitsB atomic.Int64
	slow := func(hits *atomic.Int64) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			if r.URL.Path == "/slow" {
				entered <- struct{}{}
				<-release
			}
		}
	}
	srvA, srvB := httptest.NewServer(slow(&hitsA)), httptest.NewServer(slow(&hitsB))
	defer srvA.Close()
	defer srvB.Close()
	tests := []struct {
		name   string
		perKey bool
		other  int // status of a request to the other host while the first is held; 0 for a refusal
	}{
		{name: "one limit", perKey: false, other: 0},
		{name: "per host", perKey: true, other: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fixedLimit(1)
			c.PerKey = tt.perKey
			r := retry.New(retry.WithConcurrency(c), once)
			client := &http.Client{Transport: retry.NewTransport(srvA.Client().Transport, r)}
			get := func(u string) (int, error) {
				resp, err := client.Get(u)
				if err != nil {
					return 0, err
				}
				resp.Body.Close()
				return resp.StatusCode, nil
			}
			first := make(chan int)
			go func() {
				code, _ := get(srvA.URL + "/slow")
				first <- code
			}()
			<-entered
			a, b := hitsA.Load(), hitsB.Load()
			code, err := get(srvA.URL)
			var e *retry.Error
			if code != 0 || !errors.As(err, &e) || e.Reason != retry.ReasonThrottled || e.Attempts != 0 || hitsA.Load() != a {
				t.Errorf("a second request to A: status %d, error %v, %d hits; want a refusal that does not reach A", code, err, hitsA.Load()-a)
			}
			if code, err := get(srvB.URL); code != tt.other || (code == 0) != (err != nil) || hitsB.Load()-b != int64(min(tt.other, 1)) {
				t.Errorf("a request to B: status %d, error %v; want status %d (0: refused)", code, err, tt.other)
			}
			release <- struct{}{}
			if code := <-first; code != 200 {
				t.Errorf("the held request: status %d, want 200", code)
			}
			s := r.Stats()
			for key, n := range s.InFlight {
				if n != 0 {
					t.Errorf("%d in flight on %q at the end, want 0", n, key)
				}
			}
			if want := int64(2 - min(tt.other, 1)); s.ConcurrencyDenied != want {
				t.Errorf("ConcurrencyDenied %d, want %d", s.ConcurrencyDenied, want)
			}
		})
	}
}

// TestConcurrencyDeadlineShorterThanMaxWait: in real time, a call whose
// deadline comes before MaxWait and that never gets a permit ends as the
// limit's refusal, before its deadline, not as the caller's deadline.
// lateClock is the real clock (synctest's, in a bubble) whose sleeps last
// late times what they were asked: timers that fire late on a loaded
// machine, made certain.
type lateClock struct{ late time.Duration }

func (c lateClock) Now() time.Time { return time.Now() }
func (c lateClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d + c.late)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func TestConcurrencyDeadlineShorterThanMaxWait(t *testing.T) {
	tests := []struct {
		name  string
		clock retry.Clock // nil: the real clock
	}{
		{name: "timers on time"},
		// Each 1 ms recheck lasts 3 ms: a call that counted only the waits
		// it asked for would believe it had time left after its deadline.
		{name: "timers 2ms late", clock: lateClock{late: 2 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := retry.New(retry.WithClock(tt.clock), retry.WithConcurrency(retry.Concurrency{Initial: 1, Min: 1, Max: 1, MaxWait: 2 * time.Second}))
				hold, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
				go func() {
					defer close(done)
					_ = r.Run(context.Background(), func(context.Context) error { close(hold); <-release; return nil })
				}()
				<-hold
				defer func() { close(release); <-done }()
				for range 5 {
					ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
					start := time.Now()
					err := r.Run(ctx, func(context.Context) error { return nil })
					took := time.Since(start)
					cancel()
					var e *retry.Error
					if !errors.As(err, &e) || e.Reason != retry.ReasonThrottled || retry.TypeOf(err) != "concurrency.limit" {
						t.Fatalf("err = %v after %v, want the concurrency limit's refusal (throttled) before the deadline", err, took)
					}
					if took >= 50*time.Millisecond {
						t.Fatalf("refused after %v, want before the 50ms deadline", took)
					}
				}
			})
		})
	}
}
