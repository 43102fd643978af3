package shed_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry/shed"
)

// pool is a handler of workers that serve one request each for service,
// the others waiting their turn in FIFO order, as bench/shedload's
// handler does; on synctest's virtual clock.
type pool struct {
	workers chan struct{}
	service time.Duration
}

func newPool(workers int, service time.Duration) *pool {
	return &pool{workers: make(chan struct{}, workers), service: service}
}

func (p *pool) serve() {
	p.workers <- struct{}{}
	time.Sleep(p.service)
	<-p.workers
}

// phase is a stretch of a load run: requests arriving every so often, for
// so long.
type phase struct {
	every, length time.Duration
}

// arrival is what happened to one request of a load run.
type arrival struct {
	at      time.Duration // since the start of the run
	latency time.Duration // from arrival to the end of its handler; 0 when shed
	shed    bool
}

// drive sends requests through s to p, open loop, through the phases, and
// returns each request's fate, in the order they arrived, and the
// Shedder's limit read every 10 ms. It runs in a synctest bubble.
func drive(s *shed.Shedder, p *pool, phases []phase) (arrivals []arrival, limits []int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	done := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
				mu.Lock()
				limits = append(limits, s.Stats().Limit)
				mu.Unlock()
			}
		}
	})
	for _, ph := range phases {
		for end := time.Since(start) + ph.length; time.Since(start) < end; {
			time.Sleep(ph.every)
			wg.Go(func() {
				at := time.Since(start)
				t, refusal := s.Admit(context.Background(), shed.Request{})
				a := arrival{at: at, shed: refusal != nil}
				if refusal == nil {
					p.serve()
					s.Done(t)
					a.latency = time.Since(start) - at
				}
				mu.Lock()
				arrivals = append(arrivals, a)
				mu.Unlock()
			})
		}
	}
	close(done)
	wg.Wait()
	slices.SortFunc(arrivals, func(a, b arrival) int { return int(a.at - b.at) })
	return arrivals, limits
}

// TestLimitHoldsAtHalfLoad: with Initial at a handler's four workers, as
// Options.Initial's doc advises, half the handler's capacity for a minute
// leaves the limit near the four workers (it does not grow a limit it
// never reaches), so the first half second of an overload that follows
// queues little in the handler: admitted requests take at most twice the
// service time. Nothing is shed at half load.
func TestLimitHoldsAtHalfLoad(t *testing.T) {
	const (
		workers = 4
		service = 20 * time.Millisecond
		half    = time.Minute
	)
	tests := []struct {
		name    string
		initial int
		maxHeld int // the most the limit may reach at half load
	}{
		{name: "Initial at the workers", initial: workers, maxHeld: workers + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, err := shed.New(shed.Options{Initial: tt.initial})
				if err != nil {
					t.Fatal(err)
				}
				p := newPool(workers, service)
				every := service / workers // capacity: a request every 5 ms
				arrivals, limits := drive(s, p, []phase{{every: 2 * every, length: half}, {every: every / 3, length: time.Second}})
				held := limits[:int(half/(10*time.Millisecond))-1]
				_, most := minMax(held)
				var shedHalf int
				var first []time.Duration
				for _, a := range arrivals {
					switch {
					case a.at < half && a.shed:
						shedHalf++
					case a.at >= half && a.at < half+500*time.Millisecond && !a.shed:
						first = append(first, a.latency)
					}
				}
				slices.Sort(first)
				p99 := first[len(first)*99/100]
				t.Logf("Initial %d: limit at most %d over a minute at half load, %d shed; the first 500 ms at 3x: %d admitted, p99 %v",
					tt.initial, most, shedHalf, len(first), p99)
				if most > tt.maxHeld {
					t.Errorf("the limit reached %d at half load, want at most %d (the handler serves %d at once)", most, tt.maxHeld, workers)
				}
				if shedHalf > 0 {
					t.Errorf("%d requests shed at half load, want none", shedHalf)
				}
				if p99 > 2*service {
					t.Errorf("p99 %v in the first 500 ms of the overload, want at most %v", p99, 2*service)
				}
			})
		})
	}
}

// TestLimitGrowsThroughClientShare: one client over its share of the
// permits (Options.ClientShare, three quarters by default) never reaches
// the limit itself, yet the limit, through the share, holds it back: while
// the handler's latency stays at its baseline, the limit grows to what the
// handler serves. So a limit cut while the handler was slow (Initial 4
// against 16 workers here) comes back once it is fast again.
func TestLimitGrowsThroughClientShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const workers, service = 16, 20 * time.Millisecond
		s, err := shed.New(shed.Options{Initial: 4})
		if err != nil {
			t.Fatal(err)
		}
		p := newPool(workers, service)
		var wg sync.WaitGroup
		ctx, cancel := context.WithCancel(t.Context())
		var served atomic.Int64
		for range 2 * workers { // more than the handler serves, always waiting
			wg.Go(func() {
				for ctx.Err() == nil {
					tk, refusal := s.Admit(ctx, shed.Request{Key: "one client"})
					if refusal != nil {
						time.Sleep(time.Millisecond)
						continue
					}
					p.serve()
					s.Done(tk)
					served.Add(1)
				}
			})
		}
		time.Sleep(5 * time.Second)
		limit := s.Stats().Limit
		before := served.Load()
		time.Sleep(time.Second)
		rate := served.Load() - before
		cancel()
		wg.Wait()
		t.Logf("limit %d after 5 s; %d served in the next second (the handler serves %d)", limit, rate, int(workers*time.Second/service))
		if limit < workers {
			t.Errorf("limit %d after 5 s, want at least the handler's %d workers: one client's share held it back", limit, workers)
		}
	})
}

func minMax(xs []int) (lo, hi int) {
	lo, hi = xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}
