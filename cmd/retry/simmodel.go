package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"sort"
	"time"

	"github.com/steadyhq/retry"
)

// server is a model of a dependency: a synchronous function of virtual
// time that says how an attempt arriving now ends.
type server struct {
	outageStart, outageEnd time.Duration // a full outage in [start, end)
	failRate               float64       // independent failures outside it
	capacity               float64       // attempts served per second; 0 is unlimited
	rng                    *rand.Rand

	slot     int64 // the current tenth of a second, for the capacity
	slotHits int
}

// errOverloaded and errDown are the server's failures, typed as the HTTP
// statuses a real one would send.
var (
	errDown       = &retry.StatusError{StatusCode: http.StatusServiceUnavailable}
	errFlaky      = &retry.StatusError{StatusCode: http.StatusInternalServerError}
	errOverloaded = &retry.StatusError{StatusCode: http.StatusTooManyRequests}
)

// serve decides the attempt arriving at t (since the start).
func (s *server) serve(t time.Duration) error {
	if s.capacity > 0 {
		// Capacity is enforced per tenth of a second, so that a burst is
		// refused while the mean rate would still fit.
		slot := int64(t / (100 * time.Millisecond))
		if slot != s.slot {
			s.slot, s.slotHits = slot, 0
		}
		s.slotHits++
		if float64(s.slotHits) > s.capacity/10 {
			return errOverloaded
		}
	}
	if t >= s.outageStart && t < s.outageEnd {
		return errDown
	}
	if s.failRate > 0 && s.rng.Float64() < s.failRate {
		return errFlaky
	}
	return nil
}

// loadSim is an open-loop workload: requests arrive at a fixed rate, each
// a call of retry.Do on one of the clients' Retriers, against a server.
type loadSim struct {
	rate     float64       // logical requests per second
	duration time.Duration // arrivals in [0, duration)
	clients  int           // Retriers the requests are spread over
	latency  time.Duration // each attempt's round trip
	timeout  time.Duration // WithMaxElapsed of each call; 0 for none
	horizon  time.Duration // the simulation stops then
	bucket   time.Duration // the width of the time series' buckets
	seed     uint64
	srv      server
	opts     []retry.Option // the Retriers' options (policy, budget, ...)
}

// loadResult is what a load simulation measured.
type loadResult struct {
	Requests      int            `json:"requests"`
	Succeeded     int            `json:"succeeded"`
	Unfinished    int            `json:"unfinished"`
	ServerHits    int            `json:"server_hits"`
	Amplification float64        `json:"load_amplification"`
	SuccessRate   float64        `json:"success_rate"`
	PeakToMean    float64        `json:"peak_to_mean"`
	PeakRate      float64        `json:"peak_hits_per_second"`
	OutageHits    int            `json:"outage_hits,omitempty"`
	OutageAmp     float64        `json:"outage_amplification,omitempty"`
	Recovery      *float64       `json:"time_to_recover_s,omitempty"`
	Reasons       map[string]int `json:"reasons,omitempty"`
	VirtualEnd    float64        `json:"virtual_seconds"`
	series        []bucket
	bucketWidth   time.Duration
}

// bucket is one slice of the time series.
type bucket struct {
	arrivals, hits, failedHits, done, failedCalls int
}

const maxBuckets = 1_000_000

// run simulates the workload.
func (s *loadSim) run() (*loadResult, error) {
	n := int(math.Round(s.rate * s.duration.Seconds()))
	if n < 1 {
		return nil, usagef("flags --rate and --duration: give at least one request (rate × duration = %g)", s.rate*s.duration.Seconds())
	}
	if s.horizon/s.bucket >= maxBuckets {
		return nil, usagef("flag --horizon = %s: at most %d buckets of %s", s.horizon, maxBuckets, s.bucket)
	}
	clk := newVClock()
	rng := rand.New(rand.NewPCG(s.seed, 0x5eed))
	s.srv.rng = rng
	res := &loadResult{Requests: n, Reasons: map[string]int{}, bucketWidth: s.bucket}
	res.series = make([]bucket, int(s.horizon/s.bucket)+1)
	at := func(t time.Duration) *bucket { return &res.series[min(int(t/s.bucket), len(res.series)-1)] }
	since := func() time.Duration { return clk.Now().Sub(epoch) }

	clients := make([]*retry.Retrier, s.clients)
	for i := range clients {
		opts := append([]retry.Option{retry.WithClock(clk), retry.WithRandom(rng.Float64)}, s.opts...)
		clients[i] = retry.New(opts...)
		if err := clients[i].Err(); err != nil {
			return nil, usage(err)
		}
	}
	var callOpts []retry.Option
	if s.timeout > 0 {
		callOpts = append(callOpts, retry.WithMaxElapsed(s.timeout))
	}
	attempt := func(ctx context.Context) error {
		if err := clk.Sleep(ctx, s.latency/2); err != nil { // the request travels
			return err
		}
		t := since()
		b := at(t)
		b.hits++
		res.ServerHits++
		if t >= s.srv.outageStart && t < s.srv.outageEnd {
			res.OutageHits++
		}
		err := s.srv.serve(t)
		if err != nil {
			b.failedHits++
		}
		if e := clk.Sleep(ctx, s.latency-s.latency/2); e != nil { // the answer travels
			return e
		}
		return err
	}
	interval := time.Duration(float64(time.Second) / s.rate)
	for i := range n {
		start := time.Duration(i) * interval
		r := clients[i%s.clients]
		clk.Go(epoch.Add(start), i, func(ctx context.Context) {
			at(start).arrivals++
			var err error
			if len(callOpts) > 0 {
				_, err = retry.Do(ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, attempt(ctx) }, append([]retry.Option{r}, callOpts...)...)
			} else {
				err = r.Run(ctx, attempt)
			}
			b := at(since())
			b.done++
			switch {
			case err == nil:
				res.Succeeded++
			case ctx.Err() != nil:
				res.Unfinished++
			default:
				b.failedCalls++
				var re *retry.Error
				if errors.As(err, &re) {
					res.Reasons[re.Reason.String()]++
				} else {
					res.Reasons[retry.TypeOf(err)]++
				}
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	clk.Run(ctx, cancel, epoch.Add(s.horizon), math.MaxInt)
	res.VirtualEnd = since().Seconds()
	res.summarize(s)
	return res, nil
}

// summarize computes the figures from the counts.
func (r *loadResult) summarize(s *loadSim) {
	r.Amplification = float64(r.ServerHits) / float64(r.Requests)
	r.SuccessRate = float64(r.Succeeded) / float64(r.Requests)
	last := 0
	peak := 0
	for i, b := range r.series {
		if b.hits > 0 {
			last = i
		}
		peak = max(peak, b.hits)
	}
	width := r.bucketWidth.Seconds()
	r.PeakRate = float64(peak) / width
	if r.ServerHits > 0 {
		mean := float64(r.ServerHits) / float64(last+1)
		r.PeakToMean = float64(peak) / mean
	}
	if out := s.srv.outageEnd - s.srv.outageStart; out > 0 {
		if arrived := s.rate * out.Seconds(); arrived > 0 {
			r.OutageAmp = float64(r.OutageHits) / arrived
		}
		// Recovered: from the first bucket after the outage on, no attempt
		// fails and the load is back within 10% of the offered rate.
		first := int(s.srv.outageEnd / r.bucketWidth)
		rec := first
		normal := s.rate * width * 1.1
		for i := first; i <= last && i < len(r.series); i++ {
			b := r.series[i]
			if b.failedHits > 0 || float64(b.hits) > normal+1 {
				rec = i + 1
			}
		}
		v := (time.Duration(rec)*r.bucketWidth - s.srv.outageEnd).Seconds()
		r.Recovery = &v
	}
}

// reasonList renders the reasons calls failed, most frequent first.
func (r *loadResult) reasonList() string {
	type kv struct {
		k string
		v int
	}
	var list []kv
	for k, v := range r.Reasons {
		list = append(list, kv{k, v})
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].v != list[j].v {
			return list[i].v > list[j].v
		}
		return list[i].k < list[j].k
	})
	out := ""
	for i, e := range list {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%s %d", e.k, e.v)
	}
	if out == "" {
		out = "none"
	}
	return out
}

// contention is the setup of the AWS Architecture Blog's "Exponential
// Backoff and Jitter" (2015): clients each update one row once under
// optimistic concurrency: read the version, write it back, and the write
// succeeds only if no other client wrote since the read. Every message
// crosses a network of delay |N(10 ms, 2 ms)|; after a conflict the client
// backs off and reads again.
type contention struct {
	clients int
	net     time.Duration // mean one-way delay
	netSD   time.Duration
	seed    uint64
	policy  retry.Policy
	budget  retry.Budget
}

// contentionResult is one run: the writes the row received (the study's
// "calls") and when the last client finished.
type contentionResult struct {
	Calls    int           `json:"calls"`
	Finished int           `json:"finished"`
	Time     time.Duration `json:"-"`
}

var errConflict = conflictError{}

type conflictError struct{}

func (conflictError) Error() string     { return "sim: version conflict" }
func (conflictError) ErrorType() string { return "occ.conflict" }

// run simulates one round of contention.
func (c *contention) run() (contentionResult, error) {
	clk := newVClock()
	rng := rand.New(rand.NewPCG(c.seed, 0xacce55))
	r := retry.New(retry.WithClock(clk), retry.WithRandom(rng.Float64), retry.WithPolicy(c.policy), retry.WithBudget(c.budget))
	if err := r.Err(); err != nil {
		return contentionResult{}, usage(err)
	}
	delay := func() time.Duration {
		return time.Duration(math.Abs(rng.NormFloat64()*float64(c.netSD) + float64(c.net)))
	}
	var version, calls, finished int
	var end time.Time
	attempt := func(ctx context.Context) error {
		if err := clk.Sleep(ctx, delay()); err != nil { // read request
			return err
		}
		read := version
		if err := clk.Sleep(ctx, delay()); err != nil { // read response
			return err
		}
		if err := clk.Sleep(ctx, delay()); err != nil { // write request
			return err
		}
		calls++
		ok := version == read
		if ok {
			version++
		}
		if err := clk.Sleep(ctx, delay()); err != nil { // write response
			return err
		}
		if !ok {
			return errConflict
		}
		return nil
	}
	for i := range c.clients {
		clk.Go(epoch, i, func(ctx context.Context) {
			if r.Run(ctx, attempt) == nil {
				finished++
				end = clk.Now()
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	if !clk.Run(ctx, cancel, epoch.Add(24*time.Hour), 50_000_000) {
		return contentionResult{}, failed(fmt.Errorf("sim: contention did not settle within 24 h of virtual time"))
	}
	return contentionResult{Calls: calls, Finished: finished, Time: end.Sub(epoch)}, nil
}
