package sim

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// runTasks runs fns as arrivals at the given times (task ids in order) on
// a fresh clock until until, then ends them as Run does, and returns when
// the run stopped, before its tasks ended.
func runTasks(t *testing.T, at []time.Duration, until time.Duration, fn func(c *clock, ctx context.Context, i int)) time.Duration {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := newClock(ctx.Done())
	for _, a := range at {
		c.at = append(c.at, int64(a))
	}
	c.start = func(i int) func() { return func() { fn(c, ctx, i) } }
	if err := c.run(int64(until), 1000); err != nil {
		t.Fatal(err)
	}
	end := c.since()
	cancel()
	c.poll()
	if err := c.run(math.MaxInt64, 1000); err != nil {
		t.Fatal(err)
	}
	c.close()
	return end
}

// TestClockOrder: tasks run one at a time, in order of wake-up time, ties
// broken by task id, then by order of scheduling; time moves only when
// tasks sleep.
func TestClockOrder(t *testing.T) {
	var log []string
	runTasks(t, []time.Duration{0, 0, 0}, time.Hour, func(c *clock, ctx context.Context, i int) {
		note := func() { log = append(log, fmt.Sprintf("%v#%d", c.since(), i)) }
		note()
		c.Sleep(ctx, time.Duration(3-i)*time.Second) // 2 wakes first
		note()
		c.Sleep(ctx, time.Second)
		note()
	})
	want := "0s#0 0s#1 0s#2 1s#2 2s#1 2s#2 3s#0 3s#1 4s#0"
	if got := strings.Join(log, " "); got != want {
		t.Errorf("order:\n got %s\nwant %s", got, want)
	}
}

// TestClockEnd: the run stops at its end, its last event; then the tasks
// asleep on the run's context get its error and end.
func TestClockEnd(t *testing.T) {
	var errs []error
	end := runTasks(t, []time.Duration{0, 0, 0}, 10*time.Minute, func(c *clock, ctx context.Context, _ int) {
		for {
			if err := c.Sleep(ctx, time.Minute); err != nil {
				errs = append(errs, err)
				return
			}
		}
	})
	if len(errs) != 3 || errs[0] != context.Canceled {
		t.Errorf("errors %v, want three context.Canceled", errs)
	}
	if end != 10*time.Minute {
		t.Errorf("stopped at %v, want 10m", end)
	}
}

// TestClockAfterFunc: a function runs as a task of its own when due; a
// stopped one never runs, and stop reports whether it stopped it.
func TestClockAfterFunc(t *testing.T) {
	var log []string
	var stops []bool
	runTasks(t, []time.Duration{0}, time.Hour, func(c *clock, ctx context.Context, _ int) {
		c.AfterFunc(2*time.Second, func() { log = append(log, fmt.Sprintf("a at %v", c.since())) })
		stop := c.AfterFunc(time.Second, func() { log = append(log, "b") })
		c.AfterFunc(0, func() {
			log = append(log, fmt.Sprintf("c at %v", c.since()))
			c.Sleep(ctx, 3*time.Second)
			log = append(log, fmt.Sprintf("c again at %v", c.since()))
		})
		stops = append(stops, stop())
		stops = append(stops, stop())
	})
	if got, want := strings.Join(log, ", "), "c at 0s, a at 2s, c again at 3s"; got != want {
		t.Errorf("ran %q, want %q", got, want)
	}
	if len(stops) != 2 || !stops[0] || stops[1] {
		t.Errorf("stop reported %v, want true then false", stops)
	}
}

// TestClockPoll: a task asleep on a context of its own wakes at the
// instant another task cancels it, in order.
func TestClockPoll(t *testing.T) {
	var log []string
	var cancel context.CancelFunc
	runTasks(t, []time.Duration{0, time.Second}, time.Hour, func(c *clock, ctx context.Context, i int) {
		if i == 0 {
			var wctx context.Context
			wctx, cancel = context.WithCancel(ctx)
			err := c.Sleep(wctx, time.Hour)
			log = append(log, fmt.Sprintf("woken at %v: %v", c.since(), err))
			return
		}
		c.Sleep(ctx, 500*time.Millisecond)
		cancel()
		log = append(log, fmt.Sprintf("canceled at %v", c.since()))
	})
	if got, want := strings.Join(log, "; "), "canceled at 1.5s; woken at 1.5s: context canceled"; got != want {
		t.Errorf("%s, want %s", got, want)
	}
}

// TestClockSleepOutsideTask: Sleep outside a task of the run returns an
// error that says so, and sleeps nothing.
func TestClockSleepOutsideTask(t *testing.T) {
	c := newClock(nil)
	if err := c.Sleep(context.Background(), time.Second); err != errNotTask || c.since() != 0 {
		t.Errorf("Sleep = %v at %v, want %v at 0", err, c.since(), errNotTask)
	}
}

// TestClockSaturates: a sleep past the end of time wakes at its end, not
// at a time wrapped below now.
func TestClockSaturates(t *testing.T) {
	var at time.Duration
	runTasks(t, []time.Duration{time.Hour}, math.MaxInt64, func(c *clock, _ context.Context, _ int) {
		c.Sleep(context.Background(), math.MaxInt64)
		at = c.since()
	})
	if at != math.MaxInt64 {
		t.Errorf("woke at %v, want the end of time", at)
	}
}
