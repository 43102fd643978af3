package retry

import (
	"context"
	"time"
)

// A hedged turn's timers and waits. On the real clock the timers are
// time.Timers, hedges are goroutines, and the coordinator and the caller
// wait on channels. On a Clock that runs the engine's timers (timerClock),
// they run on that clock: the timers through AfterFunc, hedges through
// AfterFunc(0, ...), and a wait is a Sleep on a context that the goroutine
// it waits for cancels (poke), so that a virtual clock knows every
// goroutine of the call and when each may run.

// arm starts the turn's coordinator once the delay has passed.
func (tn *turn) arm() {
	if clk := tn.cfg.timers; clk != nil {
		tn.stop = clk.AfterFunc(tn.delay, tn.fire)
		return
	}
	if tn.timer == nil {
		tn.timer = time.AfterFunc(tn.delay, tn.fire)
	} else {
		tn.timer.Reset(tn.delay)
	}
}

// disarm keeps the coordinator from starting and reports whether it did.
func (tn *turn) disarm() bool {
	if tn.cfg.timers != nil {
		return tn.stop()
	}
	return tn.timer.Stop()
}

// now reads the clock the turn's timers run on.
func (tn *turn) now() time.Time {
	if clk := tn.cfg.timers; clk != nil {
		return clk.Now()
	}
	return time.Now()
}

// spawn runs hedge t on a goroutine of its own.
func (tn *turn) spawn(actx context.Context, t *try) {
	if clk := tn.cfg.timers; clk != nil {
		clk.AfterFunc(0, func() { tn.hedge(actx, t) })
		return
	}
	go tn.hedge(actx, t)
}

// alarm is the coordinator's timer for the next hedge: a time.Timer, or on
// a timerClock the time it is due (zero when stopped).
type alarm struct {
	t   *time.Timer
	due time.Time
	tn  *turn
}

// newAlarm returns a stopped alarm.
func (tn *turn) newAlarm() *alarm {
	if tn.cfg.timers != nil {
		return &alarm{tn: tn}
	}
	t := time.NewTimer(tn.delay)
	t.Stop()
	return &alarm{t: t}
}

func (a *alarm) Reset(d time.Duration) {
	if a.t == nil {
		a.due = a.tn.now().Add(d)
		return
	}
	a.t.Reset(d)
}

func (a *alarm) Stop() {
	if a.t == nil {
		a.due = time.Time{}
		return
	}
	a.t.Stop()
}

// What the coordinator waits for.
type turnEvent int8

const (
	turnResult turnEvent = iota // an attempt ended
	turnTimer                   // the alarm is due
	turnDone                    // the caller's context ended (when ctxDone is not nil)
)

// await returns the next of the coordinator's events: an attempt's end,
// the alarm, or the end of the caller's context when ctxDone is not nil.
func (tn *turn) await(a *alarm, ctxDone <-chan struct{}) (*try, turnEvent) {
	clk := tn.cfg.timers
	if clk == nil {
		select {
		case t := <-tn.results:
			return t, turnResult
		case <-a.t.C:
			return nil, turnTimer
		case <-ctxDone:
			return nil, turnDone
		}
	}
	for {
		select {
		case t := <-tn.results:
			return t, turnResult
		default:
		}
		wait := maxDuration
		if !a.due.IsZero() {
			if wait = a.due.Sub(clk.Now()); wait <= 0 {
				a.due = time.Time{}
				return nil, turnTimer
			}
		}
		parent := context.Background()
		if ctxDone != nil {
			if tn.ctx.Err() != nil {
				return nil, turnDone
			}
			parent = tn.ctx
		}
		tn.park(&tn.coordWake, parent, wait)
	}
}

// awaitAnswer returns the coordinator's answer to the caller.
func (tn *turn) awaitAnswer() *try {
	if tn.cfg.timers != nil {
		for len(tn.answer) == 0 {
			tn.park(&tn.callerWake, context.Background(), maxDuration)
		}
	}
	return <-tn.answer
}

// waker wakes a goroutine of a turn that sleeps on a timerClock; the
// turn's mu guards it.
type waker struct {
	wake  context.CancelFunc // cancels the context it sleeps on
	poked bool               // poked while not asleep: its next park returns at once
}

// park sleeps on the clock until d passes, parent ends or w is poked.
func (tn *turn) park(w *waker, parent context.Context, d time.Duration) {
	tn.mu.Lock()
	if w.poked {
		w.poked = false
		tn.mu.Unlock()
		return
	}
	ctx, wake := context.WithCancel(parent)
	w.wake = wake
	tn.mu.Unlock()
	tn.cfg.timers.Sleep(ctx, d)
	tn.mu.Lock()
	w.wake, w.poked = nil, false
	tn.mu.Unlock()
	wake()
}

// poke wakes w's goroutine if it sleeps, or its next park; nothing on
// the real clock, where the waits are on channels.
func (tn *turn) poke(w *waker) {
	if tn.cfg.timers == nil {
		return
	}
	tn.mu.Lock()
	if w.wake != nil {
		w.wake()
		w.wake = nil
	} else {
		w.poked = true
	}
	tn.mu.Unlock()
}
