package shed_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry/shed"
)

// TestQueueDefaults: with Queue and QueueWait at their defaults, the queue
// holds a quarter of the limit, and a request waits 25 ms before the
// limit has measured a baseline, a quarter of the baseline after.
func TestQueueDefaults(t *testing.T) {
	tests := []struct {
		name     string
		warm     time.Duration // each of the warm-up requests' latency; 0: none
		wantWait time.Duration
	}{
		{name: "no baseline yet", wantWait: 25 * time.Millisecond},
		{name: "baseline 40ms", warm: 40 * time.Millisecond, wantWait: 10 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, err := shed.New(shed.Options{Initial: 8, Min: 8, Max: 8})
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				// Requests one after another, each taking warm: windows
				// close and the limit learns its baseline.
				for i := 0; tt.warm > 0 && i < 40; i++ {
					tk, no := s.Admit(ctx, shed.Request{})
					if no != nil {
						t.Fatalf("warm-up request refused: %v", no)
					}
					time.Sleep(tt.warm)
					s.Done(tk)
				}
				// Take every permit.
				var held []shed.Ticket
				for range 8 {
					tk, no := s.Admit(ctx, shed.Request{})
					if no != nil {
						t.Fatalf("a free permit was refused: %v", no)
					}
					held = append(held, tk)
				}
				// Five more: two fit the queue (8/4), three are shed.
				var wg sync.WaitGroup
				var mu sync.Mutex
				reasons := map[shed.Reason]int{}
				var waited []time.Duration
				for range 5 {
					wg.Go(func() {
						start := time.Now()
						_, no := s.Admit(ctx, shed.Request{})
						mu.Lock()
						defer mu.Unlock()
						if no == nil {
							t.Error("admitted with every permit held")
							return
						}
						reasons[no.Reason]++
						if no.Reason == shed.ReasonQueueTimeout {
							waited = append(waited, time.Since(start))
						}
					})
				}
				wg.Wait()
				for _, tk := range held {
					s.Done(tk)
				}
				if reasons[shed.ReasonQueueFull] != 3 || reasons[shed.ReasonQueueTimeout] != 2 {
					t.Errorf("refusals %v, want 3 for a full queue and 2 timed out in it", reasons)
				}
				for _, w := range waited {
					if w != tt.wantWait {
						t.Errorf("a queued request waited %v, want %v", w, tt.wantWait)
					}
				}
			})
		})
	}
}
