package shed_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steadyhq/retry/shed"
)

// sleepClock is a clock whose time moves only by what it is asked to
// sleep; a sleep ends at once when its context is done, and otherwise
// passes its whole time without waiting.
type sleepClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
	during func() // runs inside the first sleep, before it ends
}

func (c *sleepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *sleepClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	f := c.during
	c.during = nil
	c.mu.Unlock()
	if f != nil {
		f()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return nil
}

// TestClockQueue: with Options.Clock, a request waits in the queue by
// sleeping on the clock for QueueWait, and is woken early when a permit is
// handed to it; one whose sleep runs out is shed (queue timeout) without
// waiting in real time. Options.Random spreads Retry-After.
func TestClockQueue(t *testing.T) {
	tests := []struct {
		name    string
		done    bool    // a permit is given back during the queued request's sleep
		u       float64 // Options.Random's draw
		want    string  // the queued request's outcome
		retryIn time.Duration
	}{
		{name: "handed a permit", done: true, want: "admitted"},
		{name: "out of time", u: 0, want: "queue timeout", retryIn: time.Second},
		{name: "out of time, spread", u: 0.5, want: "queue timeout", retryIn: 1500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &sleepClock{now: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)}
			s, err := shed.New(shed.Options{Initial: 1, Min: 1, Max: 1, Queue: 1, QueueWait: 200 * time.Millisecond,
				Clock: clk, Random: func() float64 { return tt.u }})
			if err != nil {
				t.Fatal(err)
			}
			held, no := s.Admit(context.Background(), shed.Request{})
			if no != nil {
				t.Fatal(no)
			}
			if tt.done {
				clk.during = func() { s.Done(held) }
			}
			start := time.Now()
			got, no := s.Admit(context.Background(), shed.Request{})
			if real := time.Since(start); real > time.Second {
				t.Errorf("the queued request waited %v of real time", real)
			}
			outcome := "admitted"
			if no != nil {
				outcome = no.Reason.String()
				if no.RetryAfter != tt.retryIn {
					t.Errorf("Retry-After %v, want %v", no.RetryAfter, tt.retryIn)
				}
			} else {
				s.Done(got)
			}
			if outcome != tt.want || len(clk.sleeps) != 1 || clk.sleeps[0] != 200*time.Millisecond {
				t.Errorf("%s after sleeps %v; want %s after one sleep of QueueWait", outcome, clk.sleeps, tt.want)
			}
		})
	}
}

// TestClockTypedNil: a typed nil Clock is refused, naming the field.
func TestClockTypedNil(t *testing.T) {
	var clk *sleepClock
	if _, err := shed.New(shed.Options{Clock: clk}); err == nil || !strings.Contains(err.Error(), "shed: Options.Clock = nil: a nil *shed_test.sleepClock") {
		t.Errorf("error %v, want one naming Options.Clock", err)
	}
}
