package sim

import (
	"math"
	"slices"
	"time"

	"github.com/steadyhq/retry"
)

// Report is what a run measured: the fleet's figures in Total, each
// client's in Clients, each layer's in Layers.
type Report struct {
	Total Figures
	// Clients has each client's figures, in order; with one client, its
	// figures are Total.
	Clients []Figures
	// Stats has each client's Retrier's Stats at the end of the run.
	Stats  []retry.Stats
	Layers []LayerFigures
	// End is when the run ended: its last event, at Duration + Drain at
	// the latest. Calls still running then are unfinished.
	End time.Duration
	// Latencies are the times the calls that ended took, from arrival to
	// end, in increasing order.
	Latencies []time.Duration
	// Resolution is the width of every Series' buckets.
	Resolution time.Duration
	// FaultsStart and FaultsEnd span the Service's faults: the first
	// start and the last end (Duration + Drain for a fault to the end);
	// both 0 without faults.
	FaultsStart, FaultsEnd time.Duration
}

// Figures are the figures of a client, or of the fleet.
type Figures struct {
	Requests   int // calls that arrived
	Succeeded  int
	Unfinished int // calls still running when the run ended
	// Failed counts the calls that failed, by the reason that ended them
	// (retry.Error's Reason: "exhausted", "budget", "breaker_open", ...),
	// or by the error's type (retry.TypeOf) when it is not a retry.Error.
	Failed map[string]int
	// Attempts counts the attempts that reached the Service, refused ones
	// included (for a chain, the Service at its end).
	Attempts int
	// Errors counts the attempts the Service failed: refused, failed by a
	// fault, or in conflict.
	Errors int
	// Refused counts the attempts the Service refused, by reason: "queue
	// full", "queue wait", or shed's ("shed: low priority", ...).
	Refused map[string]int
	// FaultRequests counts the calls that arrived while a fault was on;
	// FaultAttempts, the attempts that reached the Service then.
	FaultRequests, FaultAttempts int
	// Work is the time workers spent serving attempts; Wasted, the part of
	// it for attempts whose caller had stopped waiting (it timed out, a
	// hedge won) before the answer came.
	Work, Wasted time.Duration
	// Goodput is successful calls per second before, during and after the
	// faults, within Duration.
	Goodput Goodput
	// Recovered says whether the calls recovered after the faults by the
	// rule of recovery: from Recovery after the faults' end on, every
	// window of 5 whole seconds up to the end of the run has successful
	// calls of at least 90% of the calls that arrived in it (a window
	// without arrivals passes). A fault that lasts to the end leaves no
	// window: never recovered. Without faults it is measured from 0.
	Recovered bool
	Recovery  time.Duration
	// Series is the run's figures over time, a Bucket of Resolution each.
	Series []Bucket
}

// Goodput is successful calls per second before, during and after the
// faults (by the time each call ended), within Duration; a span of no
// time gives 0. Without faults, After is over the whole of Duration.
type Goodput struct {
	Before, During, After float64
}

// Bucket is a span of Resolution of a run: Arrivals and the calls that
// Succeeded and Failed by when they arrived and ended; Attempts reaching
// the Service and the Errors among them by when they reached it.
type Bucket struct {
	Arrivals, Succeeded, Failed, Attempts, Errors int
}

// LayerFigures are a layer's: the requests it received (retries
// included), the retries its client sent below, those of them sent while
// serving a request that was itself a retry (NestedRetries), and the calls
// that served a retry and made one attempt by the rule of retries at one
// layer (HeldToOne); its Retrier's Stats at the end.
type LayerFigures struct {
	Received, Retries, NestedRetries, HeldToOne int
	Stats                                       retry.Stats
}

// Amplification returns the attempts that reached the Service per
// request; 0 without requests.
func (f *Figures) Amplification() float64 {
	if f.Requests == 0 {
		return 0
	}
	return float64(f.Attempts) / float64(f.Requests)
}

// SuccessRate returns the share of the requests that succeeded; 0
// without requests.
func (f *Figures) SuccessRate() float64 {
	if f.Requests == 0 {
		return 0
	}
	return float64(f.Succeeded) / float64(f.Requests)
}

// FaultAmplification returns the attempts that reached the Service while
// a fault was on per call arriving then: a fault's load amplification; 0
// without such calls.
func (f *Figures) FaultAmplification() float64 {
	if f.FaultRequests == 0 {
		return 0
	}
	return float64(f.FaultAttempts) / float64(f.FaultRequests)
}

// WastedShare returns the share of the work that was wasted; 0 without
// work.
func (f *Figures) WastedShare() float64 {
	if f.Work == 0 {
		return 0
	}
	return float64(f.Wasted) / float64(f.Work)
}

// PeakRate returns the most attempts that reached the Service in one
// bucket of the fleet's series, per second.
func (r *Report) PeakRate() float64 {
	peak := 0
	for _, b := range r.Total.Series {
		peak = max(peak, b.Attempts)
	}
	return float64(peak) / r.Resolution.Seconds()
}

// PeakToMean returns the most attempts in one bucket of the fleet's series
// over their mean per bucket, up to the last bucket with an attempt; 0
// without attempts.
func (r *Report) PeakToMean() float64 {
	last, peak := -1, 0
	for i, b := range r.Total.Series {
		if b.Attempts > 0 {
			last = i
		}
		peak = max(peak, b.Attempts)
	}
	if last < 0 {
		return 0
	}
	return float64(peak) / (float64(r.Total.Attempts) / float64(last+1))
}

// Latency returns the q-quantile of the calls' latencies, q in (0, 1]:
// the latency of rank ⌈q·n⌉; 0 without calls.
func (r *Report) Latency(q float64) time.Duration {
	n := len(r.Latencies)
	if n == 0 {
		return 0
	}
	return r.Latencies[max(min(int(math.Ceil(q*float64(n)))-1, n-1), 0)]
}

// The rule of recovery: every window of recoveryWindow whole seconds has
// successful calls of at least recoveryShare of its arrivals.
const (
	recoveryWindow = 5
	recoveryShare  = 0.9
)

// recovery sets f's recovery after the faults ended at end, by the rule
// of recovery, over the series in whole seconds.
func (f *Figures) recovery(end, res time.Duration) {
	per := int(time.Second / res)
	secs := (len(f.Series) + per - 1) / per
	arr, ok := make([]int, secs), make([]int, secs)
	for i, b := range f.Series {
		arr[i/per] += b.Arrivals
		ok[i/per] += b.Succeeded
	}
	pass := func(k int) bool {
		var a, s int
		for i := k; i < k+recoveryWindow; i++ {
			a, s = a+arr[i], s+ok[i]
		}
		return float64(s) >= recoveryShare*float64(a)
	}
	first := int(math.Ceil(end.Seconds()))
	rec := -1
	for k := secs - recoveryWindow; k >= first && pass(k); k-- {
		rec = k
	}
	f.Recovered = rec >= 0
	if f.Recovered {
		f.Recovery = time.Duration(rec)*time.Second - end
	}
}

// tally is what a run counts of one Figures as it goes.
type tally struct {
	f             *Figures
	good          [3]int // successes before, during and after the faults
	res, maxIndex int64
}

// bucket returns the bucket of time t (since the start), growing the
// series; times past the run's last bucket count in it.
func (t *tally) bucket(at int64) *Bucket {
	i := int(min(at/t.res, t.maxIndex))
	if i >= len(t.f.Series) {
		t.f.Series = append(t.f.Series, make([]Bucket, i+1-len(t.f.Series))...)
	}
	return &t.f.Series[i]
}

// finish computes f's goodput and recovery once the run is over; the
// series covers Duration at least.
func (t *tally) finish(s *Scenario, fs, fe time.Duration) {
	t.bucket(int64(s.Duration) - 1)
	span := func(from, to time.Duration) float64 { return max(min(to, s.Duration)-from, 0).Seconds() }
	rate := func(n int, secs float64) float64 {
		if secs <= 0 {
			return 0
		}
		return float64(n) / secs
	}
	t.f.Goodput = Goodput{
		Before: rate(t.good[0], span(0, fs)),
		During: rate(t.good[1], span(fs, fe)),
		After:  rate(t.good[2], span(fe, s.Duration)),
	}
	t.f.recovery(fe, s.resolution())
}

// newFigures returns Figures with its maps made.
func newFigures() *Figures {
	return &Figures{Failed: map[string]int{}, Refused: map[string]int{}}
}

// sortLatencies sorts the report's latencies.
func (r *Report) sortLatencies() { slices.Sort(r.Latencies) }
