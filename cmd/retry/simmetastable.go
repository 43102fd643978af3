package main

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/steadyhq/retry"
)

// metaSim is the setup of sim --metastable, after Bronson et al.,
// "Metastable Failures in Distributed Systems" (HotOS '21) and Huang et
// al., "Metastable Failures in the Wild" (OSDI '22): requests arrive at
// rate (a Poisson process, open loop) for duration, each a call of the real
// engine on one Retrier, against a server of finite capacity with a
// bounded queue. Each attempt gives up after timeout, but the server still
// serves it when its turn comes: wasted work. A trigger cuts the server's
// capacity or slows it for a while; what the retries do after it ends is
// what the simulation shows. Each defence set is a run of its own, on the
// same arrivals.
type metaSim struct {
	rate     float64       // requests per second
	duration time.Duration // the run: arrivals and figures in [0, duration)
	latency  time.Duration // network round trip of an attempt
	timeout  time.Duration // the client's per-attempt timeout
	workers  int           // the server's workers at full strength
	capacity float64       // attempts per second they serve: workers / service time
	queue    time.Duration // the queue holds this much work at full strength
	trig     trigger
	policy   retry.Policy // every row's
	seed     uint64
	// progress, when set, returns a bar of n steps labelled desc; nil
	// draws none.
	progress func(n int, desc string) *progress
}

// trigger is what pushes the server into overload for a while.
type trigger struct {
	kind       string        // triggerCapacity or triggerLatency
	start, end time.Duration // [start, end)
	factor     float64       // workers divided by it (rounded down), or service time multiplied by it
}

// The kinds of trigger.
const (
	triggerCapacity = "capacity" // workers divided by the factor: attempts wait for the ones left
	triggerLatency  = "latency"  // each attempt's service time multiplied by the factor
)

// recoveryWindow and recoveryShare are the rule of recovery: from the
// recovery on, every window of recoveryWindow whole seconds up to the end
// of the run has successful calls of at least recoveryShare of the
// requests that arrived in it.
const (
	recoveryWindow = 5
	recoveryShare  = 0.9
)

// service is the mean service time of an attempt at full strength.
func (s *metaSim) service() time.Duration {
	return time.Duration(float64(s.workers) / s.capacity * float64(time.Second))
}

// queueMax is the most attempts that may wait: queue's worth of work.
func (s *metaSim) queueMax() int {
	return max(1, int(math.Round(s.queue.Seconds()*s.capacity)))
}

// activeWorkers is the workers left during the trigger: divided by the
// factor, rounded down, at least one.
func (s *metaSim) activeWorkers() int {
	if s.trig.kind != triggerCapacity {
		return s.workers
	}
	return max(1, int(float64(s.workers)/s.trig.factor))
}

// metaServer is the server of sim --metastable: workers take attempts from
// a FIFO queue one at a time; an attempt arriving at a full queue is
// refused at once. Every attempt admitted is served, even when its caller
// has given up. Because the trigger is known in advance and service times
// are drawn on arrival, an attempt's start and end are known the moment it
// arrives: it waits for the first worker free, FIFO, and a worker put
// aside by a capacity drop starts nothing while the trigger lasts.
type metaServer struct {
	service  time.Duration // mean service time
	spread   float64       // each attempt's is drawn within ±spread of it
	queueMax int
	active   int // workers during the trigger
	trig     trigger
	free     []time.Duration // when each worker is next free
	waiting  []time.Duration // the start times of admitted attempts not yet started, in order
	rng      *rand.Rand
}

func (s *metaSim) newServer(rng *rand.Rand) *metaServer {
	return &metaServer{service: s.service(), spread: 0.1, queueMax: s.queueMax(), active: s.activeWorkers(), trig: s.trig,
		free: make([]time.Duration, s.workers), rng: rng}
}

// admit takes the attempt arriving at t: it returns when its service
// starts and ends, or ok false when the queue is full.
func (m *metaServer) admit(t time.Duration) (start, end time.Duration, ok bool) {
	// Starts come in arrival order (FIFO), so those not after t lead.
	i := 0
	for i < len(m.waiting) && m.waiting[i] <= t {
		i++
	}
	m.waiting = m.waiting[i:]
	if len(m.waiting) >= m.queueMax {
		return 0, 0, false
	}
	in := func(at time.Duration) bool { return at >= m.trig.start && at < m.trig.end }
	w := -1
	for j, f := range m.free {
		at := max(t, f)
		if j >= m.active && in(at) {
			at = m.trig.end // a worker put aside
		}
		if w < 0 || at < start {
			w, start = j, at
		}
	}
	d := float64(m.service) * (1 + m.spread*(2*m.rng.Float64()-1))
	if m.trig.kind == triggerLatency && in(start) {
		d *= m.trig.factor
	}
	end = start + time.Duration(d)
	m.free[w] = end
	if start > t {
		m.waiting = append(m.waiting, start)
	}
	return start, end, true
}

// errAttemptTimedOut is an attempt that the client gave up on: its
// per-attempt timeout, typed as the engine types its own.
var errAttemptTimedOut = attemptTimeoutError{}

type attemptTimeoutError struct{}

func (attemptTimeoutError) Error() string     { return "sim: attempt timed out" }
func (attemptTimeoutError) ErrorType() string { return retry.TypeAttemptTimeout }

// defence is a row of sim --metastable: a name and the options that set
// its defences up, beside the policy.
type defence struct {
	name string
	opts func() []retry.Option // fresh options for each run
}

// defenceGates are the gates sim --metastable compares, one a line, each
// with its default settings: each runs alone (the other default gates
// turned off), then all together.
var defenceGates = []struct {
	name string
	opt  func() retry.Option
}{
	{name: "budget", opt: func() retry.Option { return retry.WithBudget(retry.Budget{}) }},
	{name: "breaker", opt: func() retry.Option { return retry.WithBreaker(retry.Breaker{}) }},
	{name: "throttle", opt: func() retry.Option { return retry.WithThrottle(retry.Throttle{}) }},
	{name: "concurrency", opt: func() retry.Option { return retry.WithConcurrency(retry.Concurrency{}) }},
}

// defaultsOff turns off the gates that are on by default: the budget.
func defaultsOff() []retry.Option {
	return []retry.Option{retry.WithBudget(retry.Budget{Off: true})}
}

// defences returns the rows of sim --metastable: no defence, each gate
// alone, the defaults (retry.New with no defence option), and every gate
// together when that is more than the defaults.
func defences() []defence {
	rows := []defence{{name: "no defence", opts: defaultsOff}}
	for _, g := range defenceGates {
		rows = append(rows, defence{name: g.name, opts: func() []retry.Option { return append(defaultsOff(), g.opt()) }})
	}
	rows = append(rows, defence{name: "defaults", opts: func() []retry.Option { return nil }})
	if len(defenceGates) > 1 {
		rows = append(rows, defence{name: "all", opts: func() []retry.Option {
			var opts []retry.Option
			for _, g := range defenceGates {
				opts = append(opts, g.opt())
			}
			return opts
		}})
	}
	return rows
}

// metaRow is what one defence set did.
type metaRow struct {
	Name      string `json:"name"`
	Requests  int    `json:"requests"`
	Succeeded int    `json:"succeeded"`
	// ServerArrivals counts the attempts that reached the server, refused
	// ones included.
	ServerArrivals int     `json:"server_arrivals"`
	Amplification  float64 `json:"amplification"` // server arrivals per request
	// Goodputs are successful calls per second before, during and after
	// the trigger; Offered is the requests per second over the run.
	Before  float64 `json:"goodput_before"`
	During  float64 `json:"goodput_during"`
	After   float64 `json:"goodput_after"`
	Offered float64 `json:"offered"`
	// Wasted is the share of the server's work done for attempts whose
	// caller had given up.
	Wasted    float64        `json:"wasted_work"`
	Recovered bool           `json:"recovered"`
	RecoveryS *float64       `json:"recovery_s"` // seconds after the trigger's end; null when never
	Reasons   map[string]int `json:"failed,omitempty"`
	series    []metaBucket
}

// metaBucket is one second of a run.
type metaBucket struct{ arrivals, succeeded, hits int }

// run simulates every defence set, in parallel, each on its own clock.
func (s *metaSim) run() ([]*metaRow, error) {
	arrivals := s.arrivals()
	if len(arrivals) == 0 {
		return nil, usagef("flags --rate and --duration: give at least one request")
	}
	sets := defences()
	rows := make([]*metaRow, len(sets))
	errs := make([]error, len(sets))
	var bar *progress
	if s.progress != nil {
		bar = s.progress(len(sets)*len(arrivals), "metastable")
	}
	defer bar.finish()
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i, d := range sets {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			rows[i], errs[i] = s.runSet(d, arrivals, bar)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return rows, nil
}

// arrivals draws the requests' arrival times, the same for every set.
func (s *metaSim) arrivals() []time.Duration {
	rng := rand.New(rand.NewPCG(s.seed, 0xa881e))
	var out []time.Duration
	for t := 0.0; ; {
		t += rng.ExpFloat64() / s.rate
		at := time.Duration(t * float64(time.Second))
		if at >= s.duration {
			return out
		}
		out = append(out, at)
	}
}

// runSet runs the requests through one Retrier set up with d.
func (s *metaSim) runSet(d defence, arrivals []time.Duration, bar *progress) (*metaRow, error) {
	clk := newVClock()
	srv := s.newServer(rand.New(rand.NewPCG(s.seed, 0x5e7e)))
	jitter := rand.New(rand.NewPCG(s.seed, 0x717))
	r := retry.New(append([]retry.Option{retry.WithClock(clk), retry.WithRandom(jitter.Float64), retry.WithPolicy(s.policy)}, d.opts()...)...)
	if err := r.Err(); err != nil {
		return nil, usage(err)
	}
	row := &metaRow{Name: d.name, Requests: len(arrivals), Reasons: map[string]int{}}
	row.series = make([]metaBucket, int(math.Ceil(s.duration.Seconds())))
	at := func(t time.Duration) *metaBucket { return &row.series[min(int(t/time.Second), len(row.series)-1)] }
	since := func() time.Duration { return clk.Now().Sub(epoch) }
	var work, wasted time.Duration
	out, back := s.latency/2, s.latency-s.latency/2
	attempt := func(ctx context.Context) error {
		begin := since()
		if err := clk.Sleep(ctx, out); err != nil { // the request travels
			return err
		}
		t := since()
		at(t).hits++
		row.ServerArrivals++
		start, end, ok := srv.admit(t)
		if !ok {
			if err := clk.Sleep(ctx, back); err != nil {
				return err
			}
			return errDown
		}
		work += end - start
		answer, giveUp := end+back, begin+s.timeout
		if answer <= giveUp {
			if err := clk.Sleep(ctx, answer-t); err != nil {
				return err
			}
			return nil
		}
		wasted += end - start
		if err := clk.Sleep(ctx, giveUp-t); err != nil {
			return err
		}
		return errAttemptTimedOut
	}
	var good [3]int // successful calls before, during and after the trigger
	for i, a := range arrivals {
		clk.Go(epoch.Add(a), i, func(ctx context.Context) {
			at(a).arrivals++
			err := r.Run(ctx, attempt)
			bar.add(1)
			if ctx.Err() != nil {
				return // the run ended first
			}
			if err != nil {
				var re *retry.Error
				if errors.As(err, &re) {
					row.Reasons[re.Reason.String()]++
				} else {
					row.Reasons[retry.TypeOf(err)]++
				}
				return
			}
			t := since()
			row.Succeeded++
			at(t).succeeded++
			switch {
			case t < s.trig.start:
				good[0]++
			case t < s.trig.end:
				good[1]++
			default:
				good[2]++
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	clk.Run(ctx, cancel, epoch.Add(s.duration), math.MaxInt)
	row.Amplification = float64(row.ServerArrivals) / float64(row.Requests)
	row.Offered = float64(row.Requests) / s.duration.Seconds()
	row.Before = float64(good[0]) / s.trig.start.Seconds()
	row.During = float64(good[1]) / (s.trig.end - s.trig.start).Seconds()
	row.After = float64(good[2]) / (s.duration - s.trig.end).Seconds()
	if work > 0 {
		row.Wasted = float64(wasted) / float64(work)
	}
	row.recovery(s.trig.end)
	return row, nil
}

// recovery sets the time the row took to recover after the trigger ended
// at end: the first whole second from which every window of
// recoveryWindow seconds to the end of the run has successful calls of at
// least recoveryShare of the requests that arrived in it. A window with
// no arrivals passes.
func (r *metaRow) recovery(end time.Duration) {
	pass := func(k int) bool {
		var arr, ok int
		for _, b := range r.series[k : k+recoveryWindow] {
			arr, ok = arr+b.arrivals, ok+b.succeeded
		}
		return float64(ok) >= recoveryShare*float64(arr)
	}
	first := int(math.Ceil(end.Seconds()))
	rec := -1
	for k := len(r.series) - recoveryWindow; k >= first && pass(k); k-- {
		rec = k
	}
	if rec < 0 {
		return
	}
	v := float64(rec) - end.Seconds()
	r.Recovered, r.RecoveryS = true, &v
}
