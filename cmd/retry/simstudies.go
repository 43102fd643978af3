package main

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/sim"
	"gonum.org/v1/plot/vg"
)

// sim --contention and sim --hedge: the setups of two studies, the AWS
// Architecture Blog's "Exponential Backoff and Jitter" and Dean and
// Barroso's "The Tail at Scale".

// The contention strategies of the study, in its order, and --jitter's
// names for them.
var (
	contentionKinds = []string{"no-backoff", "exponential", "full", "equal", "decorrelated"}
	contentionNames = map[string]string{"none": "exponential", "false": "exponential", "off": "exponential", "full": "full", "equal": "equal",
		"decorrelated": "decorrelated", "no-backoff": "no-backoff", "immediate": "no-backoff"}
)

// contentionPolicy is the study's backoff for a kind: a base of 5 ms and
// a cap of 2 s. Its exponential backoff is min(cap, base·2^n) from n = 1,
// so the policy's initial interval is 10 ms; decorrelated jitter draws from
// [base, 3·previous) and starts at the base.
func contentionPolicy(kind string) retry.Policy {
	p := retry.Policy{MaxAttempts: math.MaxInt32, InitialInterval: 10 * time.Millisecond, MaxInterval: 2 * time.Second,
		Jitter: retry.Jitter{Kind: retry.JitterNone}}
	switch kind {
	case "no-backoff":
		p.Backoff = retry.Immediate
	case "full":
		p.Jitter = retry.Jitter{Kind: retry.JitterFull}
	case "equal":
		p.Jitter = retry.Jitter{Kind: retry.JitterEqual}
	case "decorrelated":
		p.InitialInterval, p.Jitter = 5*time.Millisecond, retry.Jitter{Kind: retry.JitterDecorrelated}
	}
	return p
}

// contentionRow is the mean of a strategy's runs.
type contentionRow struct {
	Strategy string  `json:"strategy"`
	Calls    float64 `json:"calls"`
	TimeMS   float64 `json:"completion_ms"`
	Runs     int     `json:"runs"`
}

// runContention runs sim --contention: the AWS Architecture Blog's
// "Exponential Backoff and Jitter": clients each write one row once under
// optimistic concurrency, over a network of |N(10ms, 2ms)| per message,
// no retry budget; runs of each strategy from seeds seed, seed+1, ...
func runContention(e *env, f *simFlags) error {
	sizes, err := f.fleetSizes(false, 100)
	if err != nil {
		return err
	}
	if f.runs < 1 || f.runs > 1000 {
		return usagef("flag --runs = %d: must be in [1, 1000]", f.runs)
	}
	kinds := contentionKinds
	if j := *f.pf.strFlag["jitter"]; f.fs.Changed("jitter") {
		if contentionNames[j] == "" {
			return usagef("flag --jitter = %q: with --contention, must be none, full, equal, decorrelated or no-backoff", j)
		}
		kinds = []string{contentionNames[j]}
	}
	n := sizes[0]
	rows := make([]contentionRow, len(kinds))
	runs := make([]*sim.Report, len(kinds)*f.runs)
	err = parallel(len(runs), e.newProgress(len(runs), "contention"), func(i int) (err error) {
		p := contentionPolicy(kinds[i/f.runs])
		runs[i], err = sim.Run(sim.Scenario{Duration: time.Millisecond, Drain: 24 * time.Hour, Seed: f.seed + uint64(i%f.runs),
			Load:    sim.Load{Bursts: []sim.Burst{{Calls: 1}}},
			Service: sim.Service{Conflicts: true, Network: sim.Normal(10*time.Millisecond, 2*time.Millisecond)},
			Fleet: sim.Fleet{Clients: n, Options: func(sim.Client) []retry.Option {
				return []retry.Option{retry.WithPolicy(p), retry.WithBudget(retry.Budget{Off: true})}
			}}})
		if err == nil && runs[i].Total.Succeeded != n {
			err = fmt.Errorf("sim: %s: %d of %d clients finished", kinds[i/f.runs], runs[i].Total.Succeeded, n)
		}
		return err
	})
	if err != nil {
		return failed(err)
	}
	lines := [][]string{{"strategy", "calls", "completion"}}
	for k, kind := range kinds {
		rows[k] = contentionRow{Strategy: kind, Runs: f.runs}
		for _, r := range runs[k*f.runs : (k+1)*f.runs] {
			rows[k].Calls += float64(r.Total.Attempts) / float64(f.runs)
			rows[k].TimeMS += ms(r.End) / float64(f.runs)
		}
		lines = append(lines, []string{kind, fmt.Sprintf("%.0f", rows[k].Calls), human(fromMS(rows[k].TimeMS))})
	}
	if f.asJSON {
		return writeJSON(e.stdout, rows)
	}
	fmt.Fprintf(e.stdout, "%d clients contending for one row (optimistic concurrency), network |N(10ms, 2ms)| per message,\n"+
		"backoff from a 5 ms base to a 2 s cap, no retry budget; mean of %d %s from seed %d\n\n", n, f.runs, plural(f.runs, "run", "runs"), f.seed)
	return table(e.stdout, lines)
}

// hedgeRow is one run of sim --hedge: its latencies, in milliseconds, and
// its attempts.
type hedgeRow struct {
	Mode      string  `json:"mode"`
	P50       float64 `json:"p50_ms"`
	P95       float64 `json:"p95_ms"`
	P99       float64 `json:"p99_ms"`
	P999      float64 `json:"p999_ms"`
	Max       float64 `json:"max_ms"`
	Attempts  float64 `json:"attempts_per_request"`
	Hedges    int64   `json:"hedges"`
	HedgeWins int64   `json:"hedge_wins"`
	lat       []time.Duration
}

// hedgeNote is the line under the hedge chart's title.
const hedgeNote = "20000 requests; attempts take 10-15ms, 1% of them 100× longer; hedge delay at p95 of recent latencies"

// hedgeRuns runs sim --hedge: the long-tail setup of Dean and Barroso's
// "The Tail at Scale" (CACM 2013), 20,000 calls at 16,000 a second whose
// attempts take 10-15 ms and 1% of them 100 times longer, without and
// with a hedge at the 95th percentile of recent latencies.
func hedgeRuns(seed uint64, bar *progress) ([]hedgeRow, error) {
	rows := make([]hedgeRow, 2)
	err := parallel(2, bar, func(i int) error {
		h, mode := retry.Hedge{Max: 1}, "no hedging"
		if i == 1 {
			h, mode = retry.Hedge{Percentile: 95, Floor: time.Millisecond, Ceiling: 100 * time.Millisecond}, "hedging at p95"
		}
		rep, err := sim.Run(sim.Scenario{Duration: 1250 * time.Millisecond, Drain: time.Minute, Seed: seed, Load: sim.Load{Rate: 16000, Steady: true},
			Service: sim.Service{ServiceTime: sim.Spread(12500*time.Microsecond, 0.2).Tail(0.01, 100)},
			Fleet: sim.Fleet{Options: func(sim.Client) []retry.Option {
				return []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 3}), retry.WithHedge(h)}
			}}})
		if err != nil {
			return failed(err)
		}
		q := func(p float64) float64 { return ms(rep.Latency(p)) }
		rows[i] = hedgeRow{Mode: mode, P50: q(0.5), P95: q(0.95), P99: q(0.99), P999: q(0.999), Max: q(1), Attempts: rep.Total.Amplification(),
			Hedges: rep.Stats[0].Hedges, HedgeWins: rep.Stats[0].HedgeWins, lat: rep.Latencies}
		return nil
	})
	return rows, err
}

// runHedge runs sim --hedge, prints its rows and draws them to --plot.
func runHedge(e *env, f *simFlags) error {
	format, err := simPlot(f.plot)
	if err != nil {
		return err
	}
	rows, err := hedgeRuns(f.seed, e.newProgress(2, "hedge"))
	if err != nil {
		return err
	}
	drop, extra := rows[0].P999/rows[1].P999, rows[1].Attempts/rows[0].Attempts-1
	if f.asJSON {
		err = writeJSON(e.stdout, struct {
			Rows      []hedgeRow `json:"rows"`
			TailDrop  float64    `json:"p999_drop"`
			ExtraLoad float64    `json:"extra_attempts"`
		}{rows, drop, extra})
	} else {
		fmt.Fprintf(e.stdout, "%d requests at 16000/s; attempts take 10-15ms, 1%% of them 100× longer; seed %d\n"+
			"hedge delay: the p95 of recent attempt latencies, 2 attempts in flight at most; virtual time\n\n", len(rows[0].lat), f.seed)
		lines := [][]string{{"", "p50", "p95", "p99", "p99.9", "max", "attempts/request", "hedges", "won"}}
		for _, r := range rows {
			lines = append(lines, []string{r.Mode, fmt.Sprintf("%.1fms", r.P50), fmt.Sprintf("%.1fms", r.P95), fmt.Sprintf("%.1fms", r.P99),
				fmt.Sprintf("%.1fms", r.P999), fmt.Sprintf("%.1fms", r.Max), fmt.Sprintf("%.4f", r.Attempts), strconv.FormatInt(r.Hedges, 10), strconv.FormatInt(r.HedgeWins, 10)})
		}
		err = table(e.stdout, lines)
		fmt.Fprintf(e.stdout, "\np99.9 falls %.1f×, for %.2f%% more attempts\n", drop, 100*extra)
	}
	if err != nil || f.plot == "" {
		return err
	}
	if err := saveChart(latencyChart(hedgeNote, rows), 20*vg.Centimeter, 11*vg.Centimeter, format, f.plot, e.stdout); err != nil {
		return failed(err)
	}
	fmt.Fprintf(e.stderr, "wrote %s\n", f.plot)
	return nil
}
