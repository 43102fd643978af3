package adaptive

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

// The dependency of the partial-failure runs: 100 workers of 100 ms (a
// capacity of 1,000 a second), whose attempts that fail by timing out
// hang for 1 s.
const (
	pfWorkers = 100
	pfService = 100 * time.Millisecond
	pfTimeout = time.Second
)

// pfOutcome is what a partial-failure run measured, and what failed of
// its rules ("" when none did).
type pfOutcome struct {
	fail     string
	want     float64       // the Little's-law limit the limit is judged against
	took     time.Duration // how long the limit took to settle within ±20% of want, from the start or the episode's end
	lo, hi   int           // the limit's range once settled
	served   float64       // the share of the dependency's capacity (or of what was offered) it served once settled
	refusals float64       // the share of attempts refused once settled
}

// pfLittlesLaw is the dependency's Little's-law limit for attempts in
// flight, from its capacity and not from what a limit let through, while
// a share of attempts fail as mode says and the offered load fills it:
// its workers, which serve successes (and, with failServed, the failures
// too) at capacity; with failTimeout, also the attempts that hang, which
// arrive at share/(1-share) times the capacity and stay for the timeout;
// the fast failures in flight (1 ms each) are fewer than one.
func pfLittlesLaw(mode simFailure, share float64) float64 {
	want := float64(pfWorkers)
	if mode == failTimeout {
		want += float64(pfWorkers) / pfService.Seconds() * share / (1 - share) * pfTimeout.Seconds()
	}
	return want
}

// pfNeeds is the attempts in flight that rate a second needs, by
// Little's law, when share of them fail as mode says and none queue.
func pfNeeds(mode simFailure, share, rate float64) float64 {
	failed := pfService.Seconds()
	switch mode {
	case failFast:
		failed = time.Millisecond.Seconds()
	case failTimeout:
		failed = pfTimeout.Seconds()
	}
	return rate * ((1-share)*pfService.Seconds() + share*failed)
}

// pfSteady runs 40 s of a dependency that fails share of attempts as mode
// says, from the limit's Initial, offered rate a second, and judges it:
// when the load fills the dependency, the limit and the attempts in
// flight are within ±20% of its Little's-law limit from 10 s on, and it
// serves at least 95% of its capacity from 15 s; when it does not, from
// 10 s on the limit refuses under 1% of the attempts and the dependency
// serves at least 95% of the successes offered.
func pfSteady(mode simFailure, share, rate float64, initial int) func(seed uint64) pfOutcome {
	return func(seed uint64) pfOutcome {
		const settle, band, total, steady = 10 * time.Second, 0.2, 40 * time.Second, 15 * time.Second
		r := runSeeded(simCase{dep: simDep{workers: pfWorkers, service: pfService, failShare: share, failMode: mode, timeout: pfTimeout}, rate: rate, initial: initial, total: total, seed: seed}, nil)
		capacity := float64(pfWorkers) / pfService.Seconds()
		o := pfOutcome{want: pfLittlesLaw(mode, share)}
		o.refusals = r.share(r.refused, settle, total, rate)
		if ok := (1 - share) * rate; ok < capacity { // the load does not fill it: the attempts in flight it needs
			o.want = pfNeeds(mode, share, rate)
			o.took, o.served = 0, r.rateOf(r.ok, settle, total)/ok
			o.lo, o.hi = r.span(r.limit, settle, total)
			switch {
			case o.refusals > 0.01:
				o.fail = fmt.Sprintf("refused %.2f%% of the attempts", 100*o.refusals)
			case o.served < 0.95:
				o.fail = fmt.Sprintf("served %.1f%% of the successes offered", 100*o.served)
			}
			return o
		}
		o.took = r.settled(r.limit, 0, o.want, band)
		o.lo, o.hi = r.span(r.limit, settle, total)
		o.served = r.rateOf(r.served, steady, total) / capacity
		switch tookF := r.settled(r.inflight, 0, o.want, band); {
		case o.took < 0 || o.took > settle:
			o.fail = fmt.Sprintf("the limit within ±20%% of %.0f after %v", o.want, o.took)
		case tookF < 0 || tookF > settle:
			o.fail = fmt.Sprintf("in flight within ±20%% of %.0f after %v", o.want, tookF)
		case o.served < 0.95:
			o.fail = fmt.Sprintf("served %.1f%% of the capacity", 100*o.served)
		}
		return o
	}
}

// pfEpisode runs 30 s of a healthy dependency offered rate a second, then
// length in which share of its attempts fail as mode says, then 30 s
// healthy again, and judges the last: the limit and the attempts in
// flight are within ±20% of its Little's-law limit (its workers) from 5 s
// after the episode to the end, and it serves at least 95% of its
// capacity from 10 s after.
func pfEpisode(mode simFailure, share, rate float64, length time.Duration) func(seed uint64) pfOutcome {
	return func(seed uint64) pfOutcome {
		const before, after, back, band = 30 * time.Second, 30 * time.Second, 5 * time.Second, 0.2
		end := before + length
		r := runSeeded(simCase{dep: simDep{workers: pfWorkers, service: pfService, failMode: mode, timeout: pfTimeout}, rate: rate, initial: 20, total: end + after, seed: seed},
			func(at time.Duration, d *simDep) {
				switch at {
				case before:
					d.failShare = share
				case end:
					d.failShare = 0
				}
			})
		capacity := float64(pfWorkers) / pfService.Seconds()
		o := pfOutcome{want: pfWorkers}
		o.took = r.settled(r.limit, end, o.want, band)
		o.lo, o.hi = r.span(r.limit, end+back, end+after)
		o.served = r.rateOf(r.served, end+2*back, end+after) / capacity
		switch tookF := r.settled(r.inflight, end, o.want, band); {
		case o.took < 0 || o.took > back:
			o.fail = fmt.Sprintf("the limit within ±20%% of %.0f %v after the episode", o.want, o.took)
		case tookF < 0 || tookF > back:
			o.fail = fmt.Sprintf("in flight within ±20%% of %.0f %v after the episode", o.want, tookF)
		case o.served < 0.95:
			o.fail = fmt.Sprintf("served %.1f%% of the capacity", 100*o.served)
		}
		return o
	}
}

// span returns the least and the most of xs from from to to.
func (r *seededRun) span(xs []int, from, to time.Duration) (lo, hi int) {
	s := xs[r.at(from) : r.at(to)+1]
	return slices.Min(s), slices.Max(s)
}

// rateOf returns how fast xs, a count, grew from from to to, a second.
func (r *seededRun) rateOf(xs []int, from, to time.Duration) float64 {
	i, j := r.at(from), r.at(to)
	return float64(xs[j]-xs[i]) / (float64(j-i) * 0.1)
}

// share returns the count xs grew by from from to to, as a share of the
// attempts offered meanwhile at rate a second.
func (r *seededRun) share(xs []int, from, to time.Duration, rate float64) float64 {
	return r.rateOf(xs, from, to) / rate
}

// TestPartialFailure: a dependency that fails a share of its attempts
// independently of load: fast (a 503 in 1 ms, before its queue), by
// timing out (a hang of 1 s that takes no worker) or as slowly as a
// success (served by a worker, then failed). When the load fills it, the
// limit and the attempts in flight are within ±20% of its Little's-law
// limit, computed from its capacity (its workers, and with timeouts the
// attempts that hang, which take no worker), from 10 s on, and it serves
// at least 95% of its capacity; when the load does not fill it, the limit
// refuses under 1% of the attempts. After two minutes in which half its
// attempts fail, the limit is back within ±20% of its workers within 5 s
// and it serves at least 95% from 10 s after. Each case runs over fixed
// seeds (service times, arrivals and which attempts fail), and every case
// must pass at least least of them: the counts measured, exact since the
// runs are the same every time, so a change that loses a run fails.
//
// Fast failures, and failures as slow as a success, hold it in every
// run. Timeouts of 20% and 30% of the attempts need 350 and 529 attempts
// in flight (250 and 429 of them hanging); with Config.HungNotLoad, as
// retry.Concurrency sets it, the limit reaches them in 19 of 20 runs
// (without, 18 and 7, and 16 of 20 at 0.7x offered: windows that by
// chance ended more hung attempts than successes cut the limit by a
// tenth, a baseline measured a few percent low from windows of few
// successes made windows at the latency look queued, and above its knee
// the limit grew by a share of the allowance a window). In the run that
// fails (seed 3) the baseline is set 4% low (96 ms) in the first two
// seconds, while the limit grows by a quarter a window (the attempts the
// growth adds end within a window only when quick), and is taken as no
// queue's at once; windows at the latency then look queued, the knee
// follows the limit, and it grows by the allowance a window, to 177 and
// 259 at 40 s. Under the race detector a case
// runs a fifth of its seeds and may fail no more of them than the whole
// set does.
func TestPartialFailure(t *testing.T) {
	tests := []struct {
		name  string
		judge func(seed uint64) pfOutcome
		seeds int
		least int
	}{
		{name: "10% fast, 1.5x offered", judge: pfSteady(failFast, 0.1, 1500, 20), seeds: 20, least: 20},
		{name: "20% fast, 1.5x offered", judge: pfSteady(failFast, 0.2, 1500, 20), seeds: 20, least: 20},
		{name: "30% fast, 1.5x offered", judge: pfSteady(failFast, 0.3, 1500, 20), seeds: 20, least: 20},
		{name: "30% fast, 1.5x offered, Initial 200", judge: pfSteady(failFast, 0.3, 1500, 200), seeds: 20, least: 20},
		{name: "30% fast, 0.7x offered", judge: pfSteady(failFast, 0.3, 700, 20), seeds: 20, least: 20},
		{name: "10% time out, 1.5x offered", judge: pfSteady(failTimeout, 0.1, 1500, 20), seeds: 20, least: 20},
		{name: "20% time out, 1.5x offered", judge: pfSteady(failTimeout, 0.2, 1500, 20), seeds: 20, least: 19},
		{name: "30% time out, 1.5x offered", judge: pfSteady(failTimeout, 0.3, 1500, 20), seeds: 20, least: 19},
		{name: "10% time out, 0.7x offered", judge: pfSteady(failTimeout, 0.1, 700, 20), seeds: 20, least: 20},
		{name: "30% time out, 0.7x offered", judge: pfSteady(failTimeout, 0.3, 700, 20), seeds: 20, least: 19},
		{name: "10% slow as a success, 1.5x offered", judge: pfSteady(failServed, 0.1, 1500, 20), seeds: 20, least: 20},
		{name: "20% slow as a success, 1.5x offered", judge: pfSteady(failServed, 0.2, 1500, 20), seeds: 20, least: 20},
		{name: "30% slow as a success, 1.5x offered", judge: pfSteady(failServed, 0.3, 1500, 20), seeds: 20, least: 20},
		{name: "30% slow as a success, 0.7x offered", judge: pfSteady(failServed, 0.3, 700, 20), seeds: 20, least: 20},
		{name: "50% fast for 2 min", judge: pfEpisode(failFast, 0.5, 1500, 2*time.Minute), seeds: 20, least: 20},
		{name: "50% time out for 2 min", judge: pfEpisode(failTimeout, 0.5, 1500, 2*time.Minute), seeds: 20, least: 20},
		{name: "50% slow as a success for 2 min", judge: pfEpisode(failServed, 0.5, 1500, 2*time.Minute), seeds: 20, least: 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			seeds, least := seedsToRun(tt.seeds, tt.least)
			// Over the seeds that pass: the limit's range once settled,
			// the longest it took to settle, the least share served.
			pass, lo, hi, served, want := 0, math.MaxInt, 0, math.Inf(1), 0.0
			var took time.Duration
			for seed := range uint64(seeds) {
				o := tt.judge(seed)
				want = o.want
				if o.fail != "" {
					t.Logf("seed %d: %s (limit %d..%d, served %.1f%%)", seed, o.fail, o.lo, o.hi, 100*o.served)
					continue
				}
				pass++
				lo, hi, served, took = min(lo, o.lo), max(hi, o.hi), min(served, o.served), max(took, o.took)
			}
			t.Logf("%d of %d seeds pass; over them, the limit %d..%d once settled (Little's-law limit %.0f), settled within %v, served at least %.1f%%",
				pass, seeds, lo, hi, want, took, 100*served)
			if pass < least {
				t.Errorf("%d of %d seeds pass, want at least %d", pass, seeds, least)
			}
		})
	}
}
