// Package shedload is a load test of server-side shedding on real loopback
// servers: a handler of fixed capacity (a pool of workers, each request
// holding one for a fixed service time), driven open loop (arrivals at a
// fixed rate, whatever the responses) through this library's client, first
// lightly, then at several times its capacity, then lightly again. Each
// server under test wraps the same handler in its own shedding, or none;
// Run measures what the clients got (goodput over time, recovery after the
// overload) and what the server saw (latency of the requests it admitted,
// attempts per logical request, retries sent before the Retry-After it
// gave).
//
// The harness does not depend on the wire: a Target starts a server and
// returns a Caller, and HTTP is one such Target; a gRPC one plugs in the
// same way.
package shedload

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Profile is the load of a run: the server's capacity (Workers workers,
// each request holding one for Service) and three phases at fixed rates,
// a multiple of that capacity each: Unloaded at LightFactor (the baseline
// latency), Overload at OverloadFactor, then After at LightFactor again.
// Each logical request has Deadline to succeed, retries included: 5 s in
// Full and Short, long enough for a retry after a Retry-After of 1 or
// 2 s, so that the run shows whether clients wait for it and what their
// retries add. A zero field takes its value in Full.
type Profile struct {
	Workers        int
	Service        time.Duration
	Deadline       time.Duration
	Unloaded       time.Duration
	Overload       time.Duration
	After          time.Duration
	OverloadFactor float64
	LightFactor    float64
}

// Full is the profile of issue 30: 3× capacity for 10 s, then 0.5× for
// 10 s, after a second at 0.5× for the unloaded baseline; a server of 4
// workers at 20 ms a request (200 requests/s: 600 arrivals a second at
// the peak, which a shared 2-core machine sends on time).
func Full() Profile {
	return Profile{
		Workers:        4,
		Service:        20 * time.Millisecond,
		Deadline:       5 * time.Second,
		Unloaded:       time.Second,
		Overload:       10 * time.Second,
		After:          10 * time.Second,
		OverloadFactor: 3,
		LightFactor:    0.5,
	}
}

// Short is the same shape in a few seconds and at a rate that a shared
// 2-core machine drives under -race: 4 workers at 20 ms (200 requests/s),
// 3× for 2 s, then 0.5× for 1.5 s.
func Short() Profile {
	return Profile{
		Workers:        4,
		Service:        20 * time.Millisecond,
		Deadline:       5 * time.Second,
		Unloaded:       time.Second,
		Overload:       2 * time.Second,
		After:          1500 * time.Millisecond,
		OverloadFactor: 3,
		LightFactor:    0.5,
	}
}

// withDefaults fills p's zero fields from Full, field by field.
func (p Profile) withDefaults() Profile {
	f := Full()
	set := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if p.Workers == 0 {
		p.Workers = f.Workers
	}
	set(&p.Service, f.Service)
	set(&p.Deadline, f.Deadline)
	set(&p.Unloaded, f.Unloaded)
	set(&p.Overload, f.Overload)
	set(&p.After, f.After)
	if p.OverloadFactor == 0 {
		p.OverloadFactor = f.OverloadFactor
	}
	if p.LightFactor == 0 {
		p.LightFactor = f.LightFactor
	}
	return p
}

// validate refuses a profile that cannot run.
func (p Profile) validate() error {
	switch {
	case p.Workers < 1:
		return fmt.Errorf("shedload: Profile.Workers = %d: must be at least 1", p.Workers)
	case p.Service <= 0 || p.Deadline <= 0 || p.Unloaded <= 0 || p.Overload <= 0 || p.After <= 0:
		return errors.New("shedload: Profile durations must be positive")
	case !(p.OverloadFactor > 0) || !(p.LightFactor > 0):
		return errors.New("shedload: Profile factors must be positive")
	}
	return nil
}

// Capacity is the server's throughput in requests per second.
func (p Profile) Capacity() float64 { return float64(p.Workers) / p.Service.Seconds() }

// Duration is the length of the whole run.
func (p Profile) Duration() time.Duration { return p.Unloaded + p.Overload + p.After }

// A Caller sends one logical request, numbered id, through this library's
// client, and reports whether it succeeded before ctx ended. It is safe for
// concurrent use.
type Caller interface {
	Call(ctx context.Context, id uint64) bool
	// Close stops the server, once every request it holds has ended.
	Close()
}

// A Target is one server under test on one wire: Start serves every
// attempt with pool, under the target's shedding, recording each attempt
// in rec, on a loopback address.
type Target struct {
	Name  string
	Start func(pool *Pool, rec *Recorder) (Caller, error)
}

// Run drives target through profile p and measures it.
func Run(ctx context.Context, p Profile, target Target) (*Result, error) {
	p = p.withDefaults()
	if err := p.validate(); err != nil {
		return nil, err
	}
	pool := NewPool(p.Workers, p.Service)
	start := time.Now()
	rec := NewRecorder(start)
	caller, err := target.Start(pool, rec)
	if err != nil {
		return nil, fmt.Errorf("shedload: %s: %w", target.Name, err)
	}
	calls := drive(ctx, p, start, caller)
	caller.Close()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return analyse(target.Name, p, calls, rec.attempts()), nil
}
