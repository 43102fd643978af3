package adaptive

import (
	"math"
	"testing"
	"time"
)

// TestBaselineMeasuredLow: a limit whose first probe under the
// dependency's capacity measures the baseline too low (by a tenth, as a
// probe that met a run of quick attempts did) while it finds the capacity
// of a dependency it started far above, under load that fills it,
// recovers: the probe that confirms the baseline measures the latency as
// it is, beyond its sampling error above the baseline, and its mean
// replaces it. From 10 s the limit is within ±20% of the dependency's
// Little's-law limit (its workers) and it serves at least 95% of its
// capacity. A baseline kept as the lower of the two holds the limit where
// its gradient and its allowance balance, far under what the dependency
// serves (24..36 of 60, 46..76 of 100 in these runs).
func TestBaselineMeasuredLow(t *testing.T) {
	const (
		settle = 10 * time.Second
		total  = 40 * time.Second
		band   = 0.2
	)
	tests := []struct {
		name    string
		dep     simDep
		rate    float64
		initial int
		low     float64       // the share of the latency the bad probes measure
		until   time.Duration // probes that start before this measure low
	}{
		// The second probe, the first under capacity, measures low; the
		// third, which confirms it, measures the latency as it is.
		{name: "60 workers, 20 ms, one probe low", dep: simDep{workers: 60, service: 20 * time.Millisecond}, rate: 6000, initial: 300, low: 0.9, until: 1500 * time.Millisecond},
		{name: "100 workers, 100 ms, one probe low", dep: simDep{workers: 100, service: 100 * time.Millisecond}, rate: 1500, initial: 200, low: 0.9, until: 2500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for seed := range uint64(5) {
				want := float64(tt.dep.workers)
				var lo, hi = math.MaxInt, 0
				var servedFrom, servedTo int
				c := simCase{dep: tt.dep, rate: tt.rate, initial: tt.initial, total: total, seed: seed,
					skew: func(at time.Duration, probing bool) float64 {
						if probing && at < tt.until {
							return tt.low
						}
						return 1
					},
					every: func(at time.Duration, l *Limit, d *simDep) {
						if at == settle {
							servedFrom = d.served
						}
						servedTo = d.served
						if at >= settle {
							lo, hi = min(lo, l.Limit()), max(hi, l.Limit())
						}
					},
				}
				l := simulate(c)
				served := float64(servedTo-servedFrom) / (total - settle).Seconds()
				capacity := want / tt.dep.service.Seconds()
				t.Logf("seed %d: limit %d..%d from %v, baseline %v at the end; served %.0f/s of %.0f/s", seed, lo, hi, settle, l.Baseline(), served, capacity)
				if math.Abs(float64(lo)-want) > band*want || math.Abs(float64(hi)-want) > band*want {
					t.Errorf("seed %d: the limit was %d..%d from %v, want within ±%.0f%% of %.0f", seed, lo, hi, settle, 100*band, want)
				}
				if served < 0.95*capacity {
					t.Errorf("seed %d: served %.0f/s from %v, want at least 95%% of %.0f/s", seed, served, settle, capacity)
				}
			}
		})
	}
}

// TestKeepFreeBaseline: a limit that holds no attempt back, at 70% of a
// dependency's capacity, measures its baseline in windows whose latency
// holds; with KeepFreeBaseline that baseline is known to be no queue's.
// When the dependency loses half its workers for 10 s, a queue forms and
// stays while the gradient cuts the limit: with KeepFreeBaseline the
// dependency serves at least 92% of its halved capacity over the loss
// (about 47 a second of 50, over 10 seeds); without it a probe looks under
// the baseline in every seed, holding the limit at a quarter while the
// loss lasts, and it serves less (about 44).
func TestKeepFreeBaseline(t *testing.T) {
	const (
		workers = 10
		service = 100 * time.Millisecond
		rate    = 70
		from    = 30 * time.Second
		length  = 10 * time.Second
		seeds   = 10
		least   = 0.92
	)
	tests := []struct {
		name string
		keep bool
		more bool // whether the limit serves more than least of the halved capacity
	}{
		{name: "kept", keep: true, more: true},
		{name: "not kept", keep: false, more: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var probed int
			var served float64
			for seed := range uint64(seeds) {
				var before, after int
				probing := false
				c := simCase{dep: simDep{workers: workers, service: service}, rate: rate, initial: 20, total: from + length + 5*time.Second, seed: seed, jitter: true,
					config: func(c *Config) { c.KeepFreeBaseline = tt.keep },
					every: func(now time.Duration, l *Limit, d *simDep) {
						switch now {
						case from:
							d.workers, before = workers/2, d.served
						case from + length:
							d.workers, after = workers, d.served
						}
						if now >= from && now < from+length && l.algo.probing() {
							probing = true
						}
					},
				}
				simulate(c)
				if probing {
					probed++
				}
				served += float64(after-before) / length.Seconds() / seeds
			}
			capacity := float64(workers/2) / service.Seconds()
			t.Logf("KeepFreeBaseline %v: %d of %d seeds probed during the loss; served %.1f/s of %.0f/s, on average", tt.keep, probed, seeds, served, capacity)
			if got := served >= least*capacity; got != tt.more {
				t.Errorf("served %.1f/s of %.0f/s during the loss: at least %.0f%%: %v, want %v", served, capacity, 100*least, got, tt.more)
			}
		})
	}
}

// TestKeepUncrowdedProbe: a probe under a limit of 200, whose latency was
// 200 ms, measures 100 ms: the baseline was a queue's, and the limit
// becomes the Little's-law limit, about 103 (100 with the allowance), more
// than a quarter above the probe's 50, so the probe met no queue itself.
// With KeepUncrowdedProbe, a latency the next windows see within the
// allowance's queue (3.3%) and their noise (3%) makes the baseline known,
// and no second probe follows; one above that (the probe measured a tenth
// low) starts the second probe that corrects it, as does any queue without
// KeepUncrowdedProbe.
func TestKeepUncrowdedProbe(t *testing.T) {
	tests := []struct {
		name      string
		keep      bool
		latency   time.Duration // every attempt's after the probe
		wantSure  bool
		wantProbe bool
	}{
		{name: "kept, within the allowance's queue", keep: true, latency: 104 * time.Millisecond, wantSure: true},
		{name: "kept, no queue", keep: true, latency: 100 * time.Millisecond, wantSure: true},
		{name: "kept, the probe measured low", keep: true, latency: 111 * time.Millisecond, wantProbe: true},
		{name: "not kept, within the allowance's queue", keep: false, latency: 104 * time.Millisecond, wantProbe: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newAlgo(Config{Initial: 200, Min: 1, Max: 1000, MaxLatency: 10 * time.Second, KeepUncrowdedProbe: tt.keep})
			l.base, l.basePeak = 200*time.Millisecond, 200
			l.startProbe(false, 200*time.Millisecond)
			if got := l.current(); got != 50 {
				t.Fatalf("probe limit %d, want 50", got)
			}
			t0 := time.Unix(0, 0)
			l.probe.began, l.probe.drained, l.probe.longest = t0, t0, 100*time.Millisecond
			for i := range 100 {
				l.probe.timed = append(l.probe.timed, timing{start: time.Duration(i) * time.Millisecond, rtt: 100 * time.Millisecond})
			}
			now := t0.Add(2 * time.Second)
			l.endProbe(now, true)
			if l.base != 100*time.Millisecond || l.current() != 103 || l.sure || l.uncrowded != tt.keep {
				t.Fatalf("after the probe: baseline %v, limit %d, sure %v, uncrowded %v; want 100ms, 103, false, %v", l.base, l.current(), l.sure, l.uncrowded, tt.keep)
			}
			// Two windows (the first after a probe only sets the latency
			// the next is compared with) of 20 attempts 20 ms apart, each
			// with the limit's attempts in flight.
			for range 40 {
				now = now.Add(20 * time.Millisecond)
				l.sample(tt.latency, l.current(), false, now)
				if l.probing() {
					break
				}
			}
			if l.sure != tt.wantSure || l.probing() != tt.wantProbe {
				t.Errorf("sure %v, probing %v; want %v, %v", l.sure, l.probing(), tt.wantSure, tt.wantProbe)
			}
		})
	}
}

// TestFailingKnee: a run of windows of mostly slow failures sets the knee
// (under which the limit doubles back) where the limit was when they
// began; failures that begin again before the limit is back there keep
// that knee, unless two windows that saw a queue moved the knee since (the
// dependency's capacity may have changed), after which they start from
// where they begin.
func TestFailingKnee(t *testing.T) {
	const base = 100 * time.Millisecond
	type step int
	const (
		failing step = iota // a window of slow failures, the limit in use
		clear               // a window of successes at the baseline
		queued              // a window of successes at 1.5× the baseline
	)
	tests := []struct {
		name  string
		steps []step
		knee  float64 // want, as a share of the limit the first failures began at
		now   bool    // want the knee at the limit the last failures began at instead
	}{
		{name: "one run of failures", steps: []step{failing, failing}, knee: 1},
		{name: "failures again after a window of none", steps: []step{failing, failing, clear, failing}, knee: 1},
		// The first window after failures sets the latency the next is
		// compared with; the knee moves at the second that sees a queue
		// after that.
		{name: "failures again after a queue moved the knee", steps: []step{failing, failing, queued, queued, queued, failing}, now: true},
		{name: "failures again after one window of a queue", steps: []step{failing, failing, queued, queued, failing}, knee: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newAlgo(Config{Initial: 200, Min: 1, Max: 1000, MaxLatency: 10 * time.Second})
			l.base, l.sure = base, true
			began, last := l.limit, 0.0
			for i, s := range tt.steps {
				w := window{peak: int(l.limit)}
				switch s {
				case failing:
					if i == 0 || tt.steps[i-1] != failing {
						last = l.limit
					}
					w.drops = 20
				case clear, queued:
					lat := base
					if s == queued {
						lat = base * 3 / 2
					}
					for range 100 {
						w.add(lat.Seconds())
					}
				}
				l.w = w
				l.update(time.Second)
			}
			want := tt.knee * began
			if tt.now {
				want = last
			}
			if math.Abs(l.knee-want) > 1e-9 {
				t.Errorf("knee %.1f, want %.1f (the first failures began at %.1f, the last at %.1f)", l.knee, want, began, last)
			}
		})
	}
}

// TestHungNotLoad: with Config.HungNotLoad, failures slower than twice
// the baseline (1 s timeouts against 100 ms) are taken as attempts that
// hung apart from the dependency's queue. A window of more of them than
// successes cuts the limit by a tenth only when its successes' latency
// says load (above the baseline beyond the window's noise) or it has no
// successes; a window of successes in a queue scales only their share of
// the attempts in flight, so the limit falls less than without; and the
// baseline falls only to windows of at least ten successes.
func TestHungNotLoad(t *testing.T) {
	const base = 100 * time.Millisecond
	tests := []struct {
		name      string
		hungApart bool
		ok        int           // successes in each window
		lat       time.Duration // their latency
		hung      int           // 1 s failures in each window
		windows   int
		wantCut   bool    // want the limit cut by a tenth
		wantLimit float64 // want the limit after, when not cut by a tenth (0: at least the limit before)
		wantBase  time.Duration
	}{
		{name: "timeouts outnumber successes at the baseline", hungApart: true, ok: 10, lat: base, hung: 15, windows: 1, wantBase: base},
		{name: "timeouts outnumber successes at the baseline, without", ok: 10, lat: base, hung: 15, windows: 1, wantCut: true, wantBase: base},
		{name: "timeouts outnumber successes in a queue", hungApart: true, ok: 10, lat: base * 3 / 2, hung: 15, windows: 1, wantCut: true, wantBase: base},
		{name: "timeouts only", hungApart: true, hung: 15, windows: 1, wantCut: true, wantBase: base},
		// 50 successes of 150 ms and 10 failures of 1 s: 4/7 of the
		// attempts in flight hung, and the gradient (0.68) scales the
		// rest: the target is 175 rather than 140, and the limit moves
		// 32% of the way (1 - the gradient) from 200.
		{name: "a queue with timeouts", hungApart: true, ok: 50, lat: base * 3 / 2, hung: 10, windows: 1, wantLimit: 192.0, wantBase: base},
		{name: "a queue with timeouts, without", ok: 50, lat: base * 3 / 2, hung: 10, windows: 1, wantLimit: 180.6, wantBase: base},
		{name: "few successes under the baseline", hungApart: true, ok: 9, lat: base * 9 / 10, hung: 5, windows: 2, wantBase: base},
		{name: "few successes under the baseline, without", ok: 9, lat: base * 9 / 10, hung: 5, windows: 2, wantBase: base * 9 / 10},
		{name: "ten successes under the baseline", hungApart: true, ok: 10, lat: base * 9 / 10, hung: 5, windows: 2, wantBase: base * 9 / 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newAlgo(Config{Initial: 200, Min: 1, Max: 1000, MaxLatency: 10 * time.Second, HungNotLoad: tt.hungApart})
			l.base, l.sure, l.prev = base, true, base
			before := l.limit
			for range tt.windows {
				w := window{peak: int(l.limit), wanted: true}
				for range tt.ok {
					l.count(&w, tt.lat, false)
				}
				for range tt.hung {
					l.count(&w, time.Second, true)
				}
				w.n = tt.ok + tt.hung
				l.w = w
				l.update(time.Second)
			}
			switch {
			case tt.wantCut:
				if math.Abs(l.limit-before*dropBackoff) > 1e-9 {
					t.Errorf("limit %.1f, want %.1f (cut by a tenth from %.1f)", l.limit, before*dropBackoff, before)
				}
			case tt.wantLimit == 0:
				if l.limit < before {
					t.Errorf("limit %.1f, want at least %.1f", l.limit, before)
				}
			case math.Abs(l.limit-tt.wantLimit) > 0.5:
				t.Errorf("limit %.1f, want %.1f", l.limit, tt.wantLimit)
			}
			if l.base != tt.wantBase {
				t.Errorf("baseline %v, want %v", l.base, tt.wantBase)
			}
		})
	}
}
