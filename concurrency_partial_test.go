package retry_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry"
)

// TestConcurrencyPartialFailure: a dependency that fails a share of its
// requests fast (a 503 in 1 ms, before its queue), drawn at random and so
// independently of load, neither pulls the limit down nor lets it hold
// healthy traffic back: offered more than it serves, the limit and the
// attempts in flight are within ±20% of its Little's-law limit (its
// workers, from its capacity; the fast failures in flight are fewer than
// one) from 10 s on, and it serves at least 95% of its capacity from 15
// s; offered less, the limit lets through at least 98% of the requests
// that do not fail. A failure that came back in under half the baseline
// says nothing of load and is left out.
func TestConcurrencyPartialFailure(t *testing.T) {
	const (
		workers = 100
		service = 100 * time.Millisecond
		settle  = 10 * time.Second
		steady  = 15 * time.Second
		total   = 40 * time.Second
		band    = 0.2
	)
	tests := []struct {
		name    string
		share   float64
		rate    float64
		initial int
	}{
		{name: "10% fail fast, 1.5x offered", share: 0.1, rate: 1500},
		{name: "20% fail fast, 1.5x offered", share: 0.2, rate: 1500},
		{name: "30% fail fast, 1.5x offered", share: 0.3, rate: 1500},
		{name: "30% fail fast, 1.5x offered, Initial 200", share: 0.3, rate: 1500, initial: 200},
		{name: "30% fail fast, 0.7x offered", share: 0.3, rate: 700},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				client := capacityClient{rate: tt.rate, c: retry.Concurrency{Initial: tt.initial}}
				run := runCapacity(t, workers, service, false, total, []capacityClient{client}, func(elapsed time.Duration, d *depModel) {
					if elapsed == 0 {
						d.failShare(tt.share)
					}
				})
				capacity := float64(workers) / service.Seconds()
				lo, hi := run.span(settle, total, sampleLimit)
				flo, fhi := run.span(settle, total, sampleInflight)
				got := run.throughput(steady, total)
				if ok := (1 - tt.share) * tt.rate; ok < capacity { // the load does not fill it
					t.Logf("offered %.0f/s that do not fail: served %.0f/s (%.1f%%); the limit %d..%d, in flight %d..%d from %v",
						ok, got, 100*got/ok, lo, hi, flo, fhi, settle)
					if got < 0.98*ok {
						t.Errorf("served %.0f/s from %v, want at least 98%% of the %.0f/s that do not fail", got, steady, ok)
					}
					return
				}
				tookL := run.settled(0, total, workers, band, sampleLimit)
				tookF := run.settled(0, total, workers, band, sampleInflight)
				t.Logf("Little's-law limit %d: the limit within ±%.0f%% after %v (%d..%d from %v), in flight after %v (%d..%d); served %.0f/s of %.0f/s (%.1f%%)",
					workers, 100*band, tookL, lo, hi, settle, tookF, flo, fhi, got, capacity, 100*got/capacity)
				if tookL < 0 || tookL > settle {
					t.Errorf("the limit settled within ±%.0f%% of %d after %v, want within %v", 100*band, workers, tookL, settle)
				}
				if tookF < 0 || tookF > settle {
					t.Errorf("the attempts in flight settled within ±%.0f%% of %d after %v, want within %v", 100*band, workers, tookF, settle)
				}
				if got < 0.95*capacity {
					t.Errorf("served %.0f/s from %v, want at least 95%% of the capacity %.0f/s", got, steady, capacity)
				}
			})
		})
	}
}
