package shedload

import (
	"context"
	"math"
	"sync"
	"time"
)

// call is what a client saw of one logical request; times are offsets
// from the start of the run.
type call struct {
	at   time.Duration // when it was due
	sent time.Duration // when it was sent, at or after at
	done time.Duration // when it ended
	ok   bool
}

// arrivals returns the due times of p's logical requests: evenly spaced at
// each phase's rate, one phase after the other.
func arrivals(p Profile) []time.Duration {
	var at []time.Duration
	start := time.Duration(0)
	for _, ph := range []struct {
		length time.Duration
		factor float64
	}{{p.Unloaded, p.LightFactor}, {p.Overload, p.OverloadFactor}, {p.After, p.LightFactor}} {
		n := int(math.Round(ph.length.Seconds() * ph.factor * p.Capacity()))
		for k := range n {
			at = append(at, start+time.Duration(k)*ph.length/time.Duration(n))
		}
		start += ph.length
	}
	return at
}

// drive sends p's logical requests through c open loop: each at its due
// time whatever became of those before, each with p.Deadline to succeed.
// It returns once every request has ended (or ctx has), request i being
// the i-th of arrivals(p).
func drive(ctx context.Context, p Profile, start time.Time, c Caller) []call {
	at := arrivals(p)
	calls := make([]call, len(at))
	var wg sync.WaitGroup
	for i, due := range at {
		if wait := time.Until(start.Add(due)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, p.Deadline)
			defer cancel()
			sent := time.Since(start)
			ok := c.Call(cctx, uint64(i))
			calls[i] = call{at: due, sent: sent, done: time.Since(start), ok: ok}
		}()
	}
	wg.Wait()
	return calls
}
