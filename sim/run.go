package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/steadyhq/retry"
)

// The streams of the random draws, each from Seed, so that what one part
// of a run draws does not shift another's: the arrivals of every defence
// set of a comparison are the same, and so is each client's jitter.
const (
	streamArrivals = 0xa881e  // Poisson arrivals
	streamAssign   = 0xa55167 // which client makes a Poisson arrival
	streamService  = 0x5e7e   // service times and network delays
	streamJitter   = 0x717    // client i's Retrier: + i
	streamLayers   = 0x1a7e5  // layer i's Retrier: + i
	streamShed     = 0x5ed    // shed's Retry-After spread
)

// Run runs s and reports what it measured. It returns an error naming the
// field of s that is invalid, its value and the rule, before anything
// runs; or the error of a client's or a layer's options (retry.Retrier.Err).
func Run(s Scenario) (*Report, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &run{s: &s, root: ctx, clk: newClock(ctx.Done())}
	r.attemptFn = r.attempt
	r.hedgedFn = func(ctx context.Context) (struct{}, error) { return struct{}{}, r.attempt(ctx) }
	var err error
	if r.svc, err = newService(r); err != nil {
		return nil, err
	}
	if err := r.build(); err != nil {
		return nil, err
	}
	at, clients := s.arrivals()
	r.clk.at = at
	r.clk.start = func(i int) func() { return func() { r.call(i, int(clients[i])) } }

	horizon := s.Duration + s.Drain
	if err := r.clk.run(int64(horizon), maxSteps); err != nil {
		return nil, err // its tasks stay suspended: the run is stuck
	}
	end := r.clk.now
	// The calls still running end: their contexts are canceled, and every
	// task runs to its end, time going on for those that wait on others.
	cancel()
	r.clk.poll()
	if err := r.clk.run(math.MaxInt64, maxSteps); err != nil {
		return nil, err
	}
	r.clk.close()
	return r.report(time.Duration(end)), nil
}

// RunAll runs the scenarios, as many at once as there are processors
// (GOMAXPROCS), and returns their reports in the order of the scenarios:
// the reports Run gives them one by one, since each run has its own clock
// and draws. It checks every scenario before it runs any, and returns the
// first InputError; after that, the errors of the runs, joined. Done,
// when not nil, is called once as each run ends, one call at a time.
func RunAll(scenarios []Scenario, done func()) ([]*Report, error) {
	for i := range scenarios {
		if err := scenarios[i].validate(); err != nil {
			return nil, err
		}
	}
	reps, errs := make([]*Report, len(scenarios)), make([]error, len(scenarios))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range scenarios {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			reps[i], errs[i] = Run(scenarios[i])
			if done != nil {
				mu.Lock()
				defer mu.Unlock()
				done()
			}
		})
	}
	wg.Wait()
	return reps, errors.Join(errs...)
}

// run is one run of a Scenario.
type run struct {
	s         *Scenario
	root      context.Context
	clk       *clock
	svc       *service
	clients   []member
	layers    []layer
	total     tally
	each      []tally // per client; nil for one client
	lat       []time.Duration
	fs, fe    int64 // the faults' span
	attemptFn func(context.Context) error
	hedgedFn  func(context.Context) (struct{}, error)
}

// member is a client of the fleet, or a layer's.
type member struct {
	r      *retry.Retrier
	hedged bool
}

type layer struct {
	member
	fig LayerFigures
}

// build makes the clients' and the layers' Retriers, and the tallies.
func (r *run) build() error {
	s := r.s
	n := s.Fleet.clients()
	res := int64(s.resolution())
	maxIndex := (int64(s.Duration+s.Drain)+res-1)/res - 1
	r.total = tally{f: newFigures(), res: res, maxIndex: maxIndex}
	if n > 1 {
		r.each = make([]tally, n)
		for i := range r.each {
			r.each[i] = tally{f: newFigures(), res: res, maxIndex: maxIndex}
		}
	}
	horizon := s.Duration + s.Drain
	for i, f := range s.Service.Faults {
		if i == 0 || int64(f.Start) < r.fs {
			r.fs = int64(f.Start)
		}
		r.fe = max(r.fe, int64(f.end(horizon)))
	}
	for i := range n {
		clk := r.clientClock(i)
		m, err := r.member(s.Fleet.Options, Client{Index: i, Clock: clk}, streamJitter+uint64(i))
		if err != nil {
			return fmt.Errorf("sim: Fleet.Options: client %d: %w", i, err)
		}
		r.clients = append(r.clients, m)
	}
	for i, l := range s.Layers {
		m, err := r.member(l.Options, Client{Index: i, Clock: r.clk}, streamLayers+uint64(i))
		if err != nil {
			return fmt.Errorf("sim: Layers[%d].Options: %w", i, err)
		}
		r.layers = append(r.layers, layer{member: m})
	}
	return nil
}

// member builds a Retrier from options, on c's clock and a random
// source of the stream's.
func (r *run) member(options func(Client) []retry.Option, c Client, stream uint64) (member, error) {
	var opts []retry.Option
	if options != nil {
		opts = slices.Clip(options(c))
	}
	rng := rand.New(rand.NewPCG(r.s.Seed, stream))
	rt := retry.New(append(opts, retry.WithClock(c.Clock), retry.WithRandom(rng.Float64))...)
	if err := rt.Err(); err != nil {
		return member{}, err
	}
	_, hedged := rt.Hedge()
	return member{r: rt, hedged: hedged}, nil
}

// do makes one call through m.
func (m *member) do(ctx context.Context, fn func(context.Context) error) error {
	if m.hedged {
		_, err := retry.Hedged(ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) }, m.r)
		return err
	}
	return m.r.Run(ctx, fn)
}

// call is call i, made by client c: a task of its own.
func (r *run) call(i, c int) {
	cs := &callState{Call: Call{Client: c, Index: i}}
	cs.ctx = context.WithValue(r.root, callKey{}, cs)
	t0 := r.clk.now
	r.arrived(c, t0)
	m := &r.clients[c]
	var err error
	if m.hedged {
		_, err = retry.Hedged(cs.ctx, r.hedgedFn, m.r)
	} else {
		err = m.r.Run(cs.ctx, r.attemptFn)
	}
	if r.root.Err() != nil {
		r.unfinished(c)
		return
	}
	r.ended(c, t0, err)
}

// attempt is an attempt of a fleet's call: to the first layer, or the
// service.
func (r *run) attempt(ctx context.Context) error {
	cs := ctx.Value(callKey{}).(*callState)
	err := r.send(ctx, cs, 0, retry.OutboundAttempt(ctx))
	if obs := r.s.Fleet.Observe; obs != nil {
		obs(ctx, retry.AttemptFrom(ctx), err)
	}
	return err
}

// send sends attempt n (as the wire says) of call cs to hop h: layer h,
// or the service past the last layer.
func (r *run) send(ctx context.Context, cs *callState, h, n int) error {
	if h == len(r.layers) {
		return r.svc.serve(ctx, cs, n)
	}
	if err := r.svc.travel(ctx); err != nil {
		return err
	}
	// The layer serves the request on a task of its own, so that its
	// caller may give up while it works, and it goes on; the caller
	// sleeps until the handler wakes it, or its context ends.
	var answer error
	done, waiting := false, false
	caller := r.clk.current
	r.clk.AfterFunc(0, func() {
		answer = r.handle(cs, h, n)
		done = true
		if waiting {
			r.clk.unpoll(caller)
			r.clk.wake(caller)
		}
	})
	for !done {
		waiting = true
		err := r.clk.Sleep(ctx, math.MaxInt64)
		waiting = false
		if err != nil && !done {
			return err
		}
	}
	if answer != nil {
		answer = errLayer
	}
	return r.svc.answer(ctx, answer)
}

// handle is layer h's handler for attempt n of its caller: a call
// through the layer's Retrier to the next hop.
func (r *run) handle(cs *callState, h, n int) error {
	l := &r.layers[h]
	l.fig.Received++
	ctx := retry.WithInboundAttempt(cs.ctx, n) // what the shedding middleware does
	err := l.do(ctx, func(actx context.Context) error {
		if retry.AttemptFrom(actx) > 1 {
			l.fig.Retries++
			if n > 1 {
				l.fig.NestedRetries++
			}
		}
		return r.send(actx, cs, h+1, retry.OutboundAttempt(actx)) // what the Transport sends
	})
	if re := (*retry.Error)(nil); errors.As(err, &re) && re.Reason == retry.ReasonInboundRetry {
		l.fig.HeldToOne++
	}
	return err
}

// clientClock returns client i's clock: the run's, stepped by the jumps
// that apply to it.
func (r *run) clientClock(i int) retry.Clock {
	var jumps []Jump
	for _, j := range r.s.Fleet.Jumps {
		if j.Clients == nil || slices.Contains(j.Clients, i) {
			jumps = append(jumps, j)
		}
	}
	if len(jumps) == 0 {
		return r.clk
	}
	return &jumpClock{clock: r.clk, jumps: jumps}
}

// jumpClock is the run's clock with jumps: Now is stepped, sleeps and
// timers are not.
type jumpClock struct {
	*clock
	jumps []Jump
}

func (j *jumpClock) Now() time.Time {
	now := j.clock.since()
	var by time.Duration
	for _, jp := range j.jumps {
		if jp.At <= now {
			by += jp.By
		}
	}
	return j.clock.Now().Add(by)
}
