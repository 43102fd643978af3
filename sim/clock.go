package sim

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"time"
)

// epoch is the virtual time at which every run begins.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// clock is a run's virtual clock and the deterministic scheduler that
// drives it. Every simulated goroutine (a call, a hedge, a timer's
// function, the service's work for a caller that gave up) is a task: a
// coroutine that runs until it sleeps or ends. The clock runs one task at
// a time, the earliest wake-up first, ties broken by task id and then by
// order of scheduling, so a run with the same inputs is the same run; time
// jumps from one wake-up to the next, so hours of backoff take
// milliseconds.
//
// A task that sleeps on a context the clock does not cancel itself (an
// attempt's timeout, a hedge the engine cancels when another wins) is
// polled after each step: once its context is done, it wakes at that
// instant, so a goroutine waiting for another's cancel wakes in order too.
//
// It is a retry.Clock with AfterFunc, so that the engine runs its own
// timers on it (see retry.Clock). Only the run's tasks may call Sleep; the
// hand-offs between the clock and its tasks order every access to the
// run's state, so nothing in a run needs a lock.
type clock struct {
	now     int64 // nanoseconds since epoch
	events  eventHeap
	seq     uint64
	current *task
	root    <-chan struct{} // the run's context: its sleepers are not polled
	asleep  []*task         // tasks asleep on a context the clock does not cancel
	idle    []*worker       // coroutines whose task ended, for the next tasks
	steps   int

	// Arrivals are tasks of their own, started in order: at[i] is when
	// arrival i (task id i) starts, and start(i) is what it runs.
	at    []int64
	next  int
	start func(i int) func()
}

// task is one simulated goroutine.
type task struct {
	id      int
	fn      func()          // what it runs, until it starts
	w       *worker         // the coroutine that runs it, from its start to its end
	gen     uint64          // its pending wake-up's generation; others are stale
	ctx     context.Context // the polled context it sleeps on
	slot    int             // its index in asleep, or -1
	started bool
	stopped bool // an AfterFunc's task stopped before it started
}

// event is a wake-up of a task; a task not yet started starts.
type event struct {
	at  int64
	id  int
	seq uint64
	gen uint64
	t   *task
}

func newClock(root <-chan struct{}) *clock { return &clock{root: root} }

// Now returns the virtual time.
func (c *clock) Now() time.Time { return epoch.Add(time.Duration(c.now)) }

// since returns the time since the run began.
func (c *clock) since() time.Duration { return time.Duration(c.now) }

// errNotTask is Sleep's answer outside a task of the run.
var errNotTask = errors.New("sim: Sleep called outside a task of the run (a goroutine of your own cannot sleep on the run's clock)")

// Sleep parks the running task for d of virtual time, or until ctx is
// done; it returns ctx's error in the latter case. It returns at once when
// ctx is done already, and errNotTask outside the run's tasks (before the
// run, or from Run's goroutine).
func (c *clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t := c.current
	if t == nil {
		return errNotTask
	}
	t.gen++
	c.push(c.after(d), t)
	if done := ctx.Done(); done != nil && done != c.root {
		t.ctx, t.slot = ctx, len(c.asleep)
		c.asleep = append(c.asleep, t)
	}
	t.w.yield(false)
	c.unpoll(t)
	return ctx.Err()
}

// AfterFunc runs f as a task of its own once d has passed; stop keeps it
// from starting and reports whether it did.
func (c *clock) AfterFunc(d time.Duration, f func()) (stop func() bool) {
	t := c.spawn(c.after(d), f)
	return func() bool {
		if t.started || t.stopped {
			return false
		}
		t.stopped = true
		return true
	}
}

// spawn schedules a task that runs fn from at, with the id of the task
// that spawns it (0 outside any).
func (c *clock) spawn(at int64, fn func()) *task {
	id := 0
	if c.current != nil {
		id = c.current.id
	}
	t := &task{id: id, fn: fn, slot: -1}
	c.push(at, t)
	return t
}

// after returns the time d from now, saturated.
func (c *clock) after(d time.Duration) int64 {
	d = max(d, 0)
	if int64(d) > math.MaxInt64-c.now {
		return math.MaxInt64
	}
	return c.now + int64(d)
}

func (c *clock) push(at int64, t *task) {
	c.seq++
	c.events.push(event{at: at, id: t.id, seq: c.seq, gen: t.gen, t: t})
}

// run processes wake-ups and arrivals in order until none is left at or
// before until; it fails after maxSteps.
func (c *clock) run(until int64, maxSteps int) error {
	for {
		t, at, ok := c.pop(until)
		if !ok {
			return nil
		}
		if c.steps++; c.steps > maxSteps {
			return fmt.Errorf("sim: the run did not end within %d steps", maxSteps)
		}
		c.now = at
		c.release(t)
		c.poll()
	}
}

// pop returns the next task to run and its time, or false when the next
// is after until or there is none. Stale wake-ups and stopped timers are
// dropped on the way. An arrival goes before a wake-up of the same time
// and id: it was scheduled first.
func (c *clock) pop(until int64) (*task, int64, bool) {
	for {
		arrival := c.next < len(c.at)
		if c.events.len() > 0 {
			ev := c.events.min()
			if !arrival || ev.at < c.at[c.next] || ev.at == c.at[c.next] && ev.id < c.next {
				if ev.at > until {
					return nil, 0, false
				}
				c.events.pop()
				if ev.gen != ev.t.gen || ev.t.stopped {
					continue
				}
				return ev.t, ev.at, true
			}
		}
		if !arrival || c.at[c.next] > until {
			return nil, 0, false
		}
		i := c.next
		c.next++
		return &task{id: i, fn: c.start(i), slot: -1}, c.at[i], true
	}
}

// release runs t until it sleeps or ends.
func (c *clock) release(t *task) {
	c.current = t
	if !t.started {
		t.started = true
		if n := len(c.idle); n > 0 {
			t.w, c.idle = c.idle[n-1], c.idle[:n-1]
		} else {
			t.w = newWorker()
		}
		t.w.fn, t.fn = t.fn, nil
	}
	if ended, _ := t.w.resume(); ended {
		c.idle = append(c.idle, t.w)
		t.w = nil
	}
	c.current = nil
}

// worker is a coroutine that runs tasks, one after the other: a task's
// Sleep suspends it, its end hands the coroutine to the next task, so that
// a run makes as many goroutines as it has tasks at once, not one a task
// (each costs, the race detector's most).
type worker struct {
	fn     func() // the task to run next
	resume func() (ended, ok bool)
	stop   func()
	yield  func(ended bool) bool
}

func newWorker() *worker {
	w := &worker{}
	w.resume, w.stop = iter.Pull(func(yield func(bool) bool) {
		w.yield = yield
		for {
			fn := w.fn
			w.fn = nil
			fn()
			if !yield(true) {
				return
			}
		}
	})
	return w
}

// close ends the idle coroutines, once the run is over.
func (c *clock) close() {
	for _, w := range c.idle {
		w.stop()
	}
	c.idle = nil
}

// poll wakes now the tasks asleep on a context that is done. It reads
// Err, an atomic load for the standard contexts, not Done: under the race
// detector a receive costs far more, and poll runs after every step.
func (c *clock) poll() {
	for i := 0; i < len(c.asleep); {
		if t := c.asleep[i]; t.ctx.Err() != nil {
			c.unpoll(t) // moves another task into slot i
			c.wake(t)
			continue
		}
		i++
	}
}

// wake wakes t now, its pending wake-up made stale.
func (c *clock) wake(t *task) {
	t.gen++
	c.push(c.now, t)
}

// unpoll takes t off the polled tasks.
func (c *clock) unpoll(t *task) {
	i := t.slot
	if i < 0 {
		return
	}
	last := len(c.asleep) - 1
	c.asleep[i] = c.asleep[last]
	c.asleep[i].slot = i
	c.asleep[last] = nil
	c.asleep = c.asleep[:last]
	t.slot, t.ctx = -1, nil
}

// eventHeap is a binary min-heap of events: earliest first, then by task
// id, then by order of scheduling.
type eventHeap struct{ e []event }

func (h *eventHeap) len() int   { return len(h.e) }
func (h *eventHeap) min() event { return h.e[0] }
func (h *eventHeap) less(i, j int) bool {
	a, b := &h.e[i], &h.e[j]
	if a.at != b.at {
		return a.at < b.at
	}
	if a.id != b.id {
		return a.id < b.id
	}
	return a.seq < b.seq
}

func (h *eventHeap) push(ev event) {
	h.e = append(h.e, ev)
	for i := len(h.e) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h.e[i], h.e[p] = h.e[p], h.e[i]
		i = p
	}
}

func (h *eventHeap) pop() {
	last := len(h.e) - 1
	h.e[0] = h.e[last]
	h.e[last] = event{}
	h.e = h.e[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h.e) && h.less(l, m) {
			m = l
		}
		if r < len(h.e) && h.less(r, m) {
			m = r
		}
		if m == i {
			return
		}
		h.e[i], h.e[m] = h.e[m], h.e[i]
		i = m
	}
}
