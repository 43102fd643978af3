package shedload

import (
	"math"
	"slices"
	"time"
)

// Bucket is the traffic of one tick of a run.
type Bucket struct {
	AtS       float64 `json:"at_s"`      // the tick's start, seconds into the run
	Offered   int     `json:"offered"`   // logical requests due in the tick
	Succeeded int     `json:"succeeded"` // logical requests that succeeded in the tick
	Served    int     `json:"served"`    // logical requests due in the tick that succeeded within recoveryWithin
	// P99MS is the server-side latency (99th percentile) of the attempts
	// admitted that arrived in the tick, 0 when none.
	P99MS float64 `json:"admitted_p99_ms"`
}

// Result is what Run measured of one server. The overload's figures count
// the logical requests due during it (goodput: those that succeeded while
// it lasted), and the attempts that reached the server during it.
type Result struct {
	Server   string  `json:"server"`
	Capacity float64 `json:"capacity_rps"` // the server's, requests per second
	Offered  int     `json:"offered"`      // logical requests due during the overload and after it

	Goodput      float64 `json:"overload_goodput_rps"` // successes per second during the overload
	GoodputShare float64 `json:"goodput_share"`        // Goodput / Capacity

	// Server-side latency of the attempts admitted past the shedding, from
	// arrival to the end of the handler: during the unloaded phase, and
	// during the overload.
	UnloadedP99MS float64 `json:"unloaded_p99_ms"`
	P50MS         float64 `json:"overload_p50_ms"`
	P99MS         float64 `json:"overload_p99_ms"`

	Attempts      int     `json:"attempts"`      // attempts of the Offered requests that reached the server
	Amplification float64 `json:"amplification"` // Attempts / Offered
	Refused       int     `json:"refused"`       // of those, answered without being admitted
	Retries       int     `json:"retries"`       // Attempts - requests with at least one attempt
	EarlyRetries  int     `json:"early_retries"` // retries arriving before the Retry-After of the attempt before them

	// RecoveryS is how long after the overload's end the goodput started
	// to track the load offered (see recovery); nil: not within the run.
	RecoveryS *float64 `json:"recovery_s"`

	MaxLagMS float64  `json:"max_send_lag_ms"` // the load generator's latest send past a due time
	Buckets  []Bucket `json:"buckets"`
}

// Tick is the width of a Bucket.
const Tick = 100 * time.Millisecond

// The rule of recovery: the first tick from which, in every window of
// recoveryTicks ticks to the end of the run, at least recoveryShare of the
// requests due succeed within recoveryWithin of being due. Requests count
// by when they were due, not by when they ended, so that a pause of the
// machine that moves a few responses to the next tick moves no request
// out of its window; and only those that succeeded in time, so that a
// server still working through the overload's queue, answering each
// request seconds late, has not recovered.
const (
	recoveryTicks  = 3
	recoveryShare  = 0.9
	recoveryWithin = time.Second
)

// analyse measures a run of p on server from its client-side calls (call
// i being request i) and the server's attempts.
func analyse(server string, p Profile, calls []call, attempts []*Attempt) *Result {
	r := &Result{Server: server, Capacity: p.Capacity()}
	overStart, overEnd := p.Unloaded, p.Unloaded+p.Overload
	n := int(p.Duration() / Tick)
	r.Buckets = make([]Bucket, n)
	for k := range r.Buckets {
		r.Buckets[k].AtS = (time.Duration(k) * Tick).Seconds()
	}
	late := make(map[uint64]bool) // requests due during the overload or after
	var goodput int
	for i, c := range calls {
		r.MaxLagMS = math.Max(r.MaxLagMS, ms(c.sent-c.at))
		k := int(c.at / Tick)
		if k < n {
			r.Buckets[k].Offered++
		}
		if c.ok {
			if k < n && c.done-c.at <= recoveryWithin {
				r.Buckets[k].Served++
			}
			if k := int(c.done / Tick); k < n {
				r.Buckets[k].Succeeded++
			}
			if c.done >= overStart && c.done < overEnd {
				goodput++
			}
		}
		if c.at >= overStart {
			late[uint64(i)] = true
			r.Offered++
		}
	}
	r.Goodput = float64(goodput) / p.Overload.Seconds()
	r.GoodputShare = r.Goodput / r.Capacity

	var unloaded, loaded []time.Duration
	byID := make(map[uint64][]*Attempt)
	perTick := make([][]time.Duration, n)
	for _, a := range attempts {
		if a.Admitted {
			if k := int(a.Arrived / Tick); k < n {
				perTick[k] = append(perTick[k], a.Ended-a.Arrived)
			}
			switch {
			case a.Arrived < overStart:
				unloaded = append(unloaded, a.Ended-a.Arrived)
			case a.Arrived < overEnd:
				loaded = append(loaded, a.Ended-a.Arrived)
			}
		}
		if late[a.ID] {
			byID[a.ID] = append(byID[a.ID], a)
			r.Attempts++
			if !a.Admitted {
				r.Refused++
			}
		}
	}
	for k, ds := range perTick {
		r.Buckets[k].P99MS = ms(quantile(ds, 0.99))
	}
	r.UnloadedP99MS = ms(quantile(unloaded, 0.99))
	r.P50MS, r.P99MS = ms(quantile(loaded, 0.5)), ms(quantile(loaded, 0.99))
	if r.Offered > 0 {
		r.Amplification = float64(r.Attempts) / float64(r.Offered)
	}
	for _, as := range byID {
		r.Retries += len(as) - 1
		r.EarlyRetries += early(as)
	}
	if k, ok := recovery(r.Buckets, int(overEnd/Tick)); ok {
		s := (time.Duration(k)*Tick - overEnd).Seconds()
		r.RecoveryS = &s
	}
	return r
}

// early counts the attempts of one request that arrived before the
// Retry-After sent with the attempt before them.
func early(as []*Attempt) int {
	slices.SortFunc(as, func(a, b *Attempt) int { return int(a.Arrived - b.Arrived) })
	n := 0
	for i := 1; i < len(as); i++ {
		prev := as[i-1]
		if prev.RetryAfter > 0 && as[i].Arrived < prev.Answered+prev.RetryAfter {
			n++
		}
	}
	return n
}

// recovery returns the first tick k at or after from such that in every
// window of recoveryTicks ticks from k to the end at least recoveryShare of
// the requests due succeeded, and false when there is none.
func recovery(b []Bucket, from int) (int, bool) {
	last := len(b) - recoveryTicks // the last window's first tick
	if from > last {
		return 0, false
	}
	k := last + 1 // no failing window yet: every window from here on holds
	for w := last; w >= from; w-- {
		due, ok := 0, 0
		for _, x := range b[w : w+recoveryTicks] {
			due += x.Offered
			ok += x.Served
		}
		if float64(ok) < recoveryShare*float64(due) {
			break
		}
		k = w
	}
	return k, k <= last
}

// quantile returns the q-quantile of ds (nearest rank), 0 for none.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	i := int(math.Ceil(q*float64(len(ds)))) - 1
	return ds[max(i, 0)]
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
