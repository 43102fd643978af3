package main

import (
	"container/heap"
	"context"
	"time"
)

// vclock is a virtual clock and the deterministic discrete-event scheduler
// that drives it. Each simulated task is a goroutine whose only blocking
// points are calls of Sleep; the scheduler releases exactly one task at a
// time (the earliest wake-up, ties broken by task id, then by order of
// arrival) and waits until that task blocks again or ends. Time jumps from
// one wake-up to the next, so hours of backoff take milliseconds, and a run
// with the same inputs and seed is the same run.
//
// It implements retry.Clock. Now and Sleep may be called only by the task
// that is running (or before Run by the goroutine that builds the
// simulation); the hand-offs between the scheduler and the tasks order
// every access, so no lock is needed.
type vclock struct {
	now     time.Time
	queue   eventQueue
	seq     uint64
	yield   chan struct{} // a task blocked or ended
	current *task
	events  int // wake-ups processed
}

// task is one simulated goroutine.
type task struct {
	id   int
	wake chan struct{}
	fn   func(ctx context.Context) // nil once started
}

// event is a wake-up of a task at a time; a task not yet started starts.
type event struct {
	at  time.Time
	id  int
	seq uint64
	t   *task
}

// epoch is the virtual time at which a simulation begins.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func newVClock() *vclock {
	return &vclock{now: epoch, yield: make(chan struct{})}
}

// Now returns the virtual time.
func (v *vclock) Now() time.Time { return v.now }

// Sleep blocks the running task for d of virtual time. It returns ctx's
// error at once when ctx is done: a simulation cancels its tasks' context
// when it stops, and they then run to their end without blocking.
func (v *vclock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t := v.current
	v.schedule(t, v.now.Add(max(d, 0)))
	v.yield <- struct{}{}
	<-t.wake
	return ctx.Err()
}

// Go adds a task that starts at virtual time at.
func (v *vclock) Go(at time.Time, id int, fn func(ctx context.Context)) {
	v.schedule(&task{id: id, wake: make(chan struct{}), fn: fn}, at)
}

func (v *vclock) schedule(t *task, at time.Time) {
	v.seq++
	heap.Push(&v.queue, event{at: at, id: t.id, seq: v.seq, t: t})
}

// Run processes wake-ups in order until none is left or the next one is
// past until, or maxEvents have been processed; then it cancels ctx's tasks
// (cancel must cancel ctx) and lets each remaining one run to its end. It
// returns false when it stopped early.
func (v *vclock) Run(ctx context.Context, cancel context.CancelFunc, until time.Time, maxEvents int) bool {
	complete := true
	for v.queue.Len() > 0 {
		ev := v.queue[0]
		if ev.at.After(until) || v.events >= maxEvents {
			complete = false
			break
		}
		heap.Pop(&v.queue)
		v.events++
		v.now = ev.at
		v.release(ctx, ev.t)
	}
	cancel()
	for v.queue.Len() > 0 {
		ev := heap.Pop(&v.queue).(event)
		if ev.t.fn != nil {
			continue // never started
		}
		v.release(ctx, ev.t)
	}
	v.current = nil
	return complete
}

// release runs t until it blocks or ends.
func (v *vclock) release(ctx context.Context, t *task) {
	v.current = t
	if fn := t.fn; fn != nil {
		t.fn = nil
		go func() {
			fn(ctx)
			v.yield <- struct{}{}
		}()
	} else {
		t.wake <- struct{}{}
	}
	<-v.yield
}

// eventQueue is a heap of events: earliest first, then by task id, then
// by order of scheduling.
type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	a, b := q[i], q[j]
	if !a.at.Equal(b.at) {
		return a.at.Before(b.at)
	}
	if a.id != b.id {
		return a.id < b.id
	}
	return a.seq < b.seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	ev := old[len(old)-1]
	*q = old[:len(old)-1]
	return ev
}
