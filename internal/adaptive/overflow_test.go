package adaptive

import (
	"math"
	"testing"
	"time"
)

// ofOutcome is what an overflow run measured from 10 s to its end (40 s).
type ofOutcome struct {
	lo, hi  int     // the limit's range
	served  float64 // the successes a second, as a share of the capacity
	dropped float64 // the attempts dropped (hung for the timeout) a second
}

// ofRun runs 40 s of a dependency of 100 workers of 100 ms (a capacity of
// 1,000 a second) whose queue holds bound attempts waiting and drops the
// rest unanswered, each hanging, taking no worker, until the attempt's
// timeout (1 s), offered rate a second from the limit's Initial, with
// Config.HungNotLoad as hung says.
func ofRun(bound int, rate float64, initial int, hung bool, seed uint64) ofOutcome {
	const from, total = 10 * time.Second, 40 * time.Second
	r := runSeeded(simCase{dep: simDep{workers: pfWorkers, service: pfService, timeout: pfTimeout, bounded: true, bound: bound}, rate: rate, initial: initial, total: total, seed: seed,
		config: func(c *Config) { c.HungNotLoad = hung }}, nil)
	o := ofOutcome{served: r.rateOf(r.ok, from, total) / (float64(pfWorkers) / pfService.Seconds()), dropped: r.rateOf(r.dropped, from, total)}
	o.lo, o.hi = r.span(r.limit, from, total)
	return o
}

// TestOverflow: a dependency overloaded whose queue is bounded and drops
// what overflows it unanswered (a full accept backlog): the attempts it
// admits are served at its usual latency, the rest hang, taking no worker,
// until they time out. With Config.HungNotLoad, as retry.Concurrency sets
// it, those timeouts say nothing of load while the successes' latency
// stays at the baseline, so that only the wait of a full queue (a latency
// above the baseline's noise) holds the limit. Each row runs 20 seeds with
// the flag and without it (as the shedder, and as before the flag), and
// judges the runs with it, from 10 s to the end (40 s): the dependency
// serves at least 95% of its capacity, the limit stays within [lo, hi],
// and at most dropped attempts a second are dropped, in at least least of
// the seeds; and over the seeds it serves at least 98% of what it serves
// without the flag (a drop costs the dependency no worker here, so that
// goodput is what a limit can lose it).
//
// The rows state what the limit does, as measured. With a queue of 10 or
// 50 and the limit started at 20, the queue's wait is a queue's latency
// and the limit holds from 10 s at most a third (10 waiting) or a tenth
// (50) over the workers, with the flag or without, few attempts dropped. A queue of 5 waits at
// most 5% of the latency, about the baseline's noise, and the limit
// drifts up, faster with the flag: at 1.5x offered up to 547 by 40 s
// (114 dropped a second from 10 s; without, up to 304 and 77 dropped),
// the dependency serving its capacity either way. With no queue the
// successes' latency never rises and the limit holds nothing back, with
// the flag or without: at 1.5x offered it lets every attempt through (about
// 600 in flight, 510 dropped a second), at 3x it stays at Max with the flag
// (900 dropped a second, 99.7% served) and swings under Max without (820
// dropped, 75% served: hung attempts fill the limit after each cut).
// Started at 1000 against a full queue of 50 at 3x, the baseline is
// measured at the queue's latency (150 ms) and never known to be no
// queue's; with the flag the limit stays at Max, 850 attempts a second
// dropped, while without it the windows of mostly timeouts cut it to
// about 130 by 40 s (110 dropped a second from 10 s); the dependency
// serves its capacity either way.
func TestOverflow(t *testing.T) {
	tests := []struct {
		name    string
		bound   int
		rate    float64
		initial int
		lo, hi  int
		dropped float64
		least   int
	}{
		{name: "no queue, 1.5x offered", bound: 0, rate: 1500, initial: 20, lo: 550, hi: 850, dropped: 520, least: 20},
		{name: "no queue, 3x offered", bound: 0, rate: 3000, initial: 20, lo: 850, hi: 1000, dropped: 910, least: 20},
		{name: "queue of 5, 1.5x offered", bound: 5, rate: 1500, initial: 20, lo: 100, hi: 600, dropped: 300, least: 20},
		{name: "queue of 5, 3x offered", bound: 5, rate: 3000, initial: 20, lo: 100, hi: 450, dropped: 220, least: 20},
		{name: "queue of 10, 1.5x offered", bound: 10, rate: 1500, initial: 20, lo: 100, hi: 140, dropped: 5, least: 20},
		{name: "queue of 10, 3x offered", bound: 10, rate: 3000, initial: 20, lo: 100, hi: 140, dropped: 5, least: 20},
		{name: "queue of 50, 1.5x offered", bound: 50, rate: 1500, initial: 20, lo: 100, hi: 115, dropped: 1, least: 20},
		{name: "queue of 50, 3x offered", bound: 50, rate: 3000, initial: 20, lo: 100, hi: 115, dropped: 1, least: 20},
		{name: "queue of 50, 3x offered, Initial 1000", bound: 50, rate: 3000, initial: 1000, lo: 950, hi: 1000, dropped: 860, least: 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			seeds, least := seedsToRun(20, tt.least)
			pass, lo, hi := 0, math.MaxInt, 0
			var with, without, dropped, droppedWithout, most float64
			for seed := range uint64(seeds) {
				o, off := ofRun(tt.bound, tt.rate, tt.initial, true, seed), ofRun(tt.bound, tt.rate, tt.initial, false, seed)
				with, without, dropped, droppedWithout = with+o.served, without+off.served, dropped+o.dropped, droppedWithout+off.dropped
				lo, hi, most = min(lo, o.lo), max(hi, o.hi), max(most, o.dropped)
				switch {
				case o.served < 0.95:
					t.Logf("seed %d: served %.1f%% of the capacity", seed, 100*o.served)
				case o.lo < tt.lo || o.hi > tt.hi:
					t.Logf("seed %d: the limit %d..%d, want within [%d, %d]", seed, o.lo, o.hi, tt.lo, tt.hi)
				case o.dropped > tt.dropped:
					t.Logf("seed %d: %.1f dropped a second, want at most %.0f", seed, o.dropped, tt.dropped)
				default:
					pass++
				}
			}
			n := float64(seeds)
			t.Logf("%d of %d seeds pass; the limit %d..%d; with the flag served %.1f%% of the capacity, %.1f dropped a second (at most %.1f); without %.1f%%, %.1f dropped",
				pass, seeds, lo, hi, 100*with/n, dropped/n, most, 100*without/n, droppedWithout/n)
			if pass < least {
				t.Errorf("%d of %d seeds pass, want at least %d", pass, seeds, least)
			}
			if with < 0.98*without {
				t.Errorf("with the flag served %.1f%% of the capacity, without %.1f%%: want at least 98%% of it", 100*with/n, 100*without/n)
			}
		})
	}
}
