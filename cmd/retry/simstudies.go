package main

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/cmd/retry/internal/chart"
	"github.com/steadyhq/retry/sim"
	"gonum.org/v1/plot/vg"
)

// sim --contention and sim --hedge: the setups of two studies, the AWS
// Architecture Blog's "Exponential Backoff and Jitter" and Dean and
// Barroso's "The Tail at Scale".

// contentionNames are --jitter's names for the study's strategies
// (sim.ContentionStrategies).
var contentionNames = map[string]string{"none": "exponential", "false": "exponential", "off": "exponential", "full": "full", "equal": "equal",
	"decorrelated": "decorrelated", "no-backoff": "no-backoff", "immediate": "no-backoff"}

// contentionRow is the mean of a strategy's runs.
type contentionRow struct {
	Strategy string  `json:"strategy"`
	Calls    float64 `json:"calls"`
	TimeMS   float64 `json:"completion_ms"`
	Runs     int     `json:"runs"`
}

// runContention runs sim --contention (sim.Contention): runs of each
// strategy from seeds seed, seed+1, ...
func runContention(e *env, f *simFlags) error {
	sizes, err := f.fleetSizes(false, 100)
	if err != nil {
		return err
	}
	if f.runs < 1 || f.runs > 1000 {
		return usagef("flag --runs = %d: must be in [1, 1000]", f.runs)
	}
	kinds := sim.ContentionStrategies()
	if j := *f.pf.strFlag["jitter"]; f.fs.Changed("jitter") {
		if contentionNames[j] == "" {
			return usagef("flag --jitter = %q: with --contention, must be none, full, equal, decorrelated or no-backoff", j)
		}
		kinds = slices.DeleteFunc(kinds, func(s sim.Strategy) bool { return s.Name != contentionNames[j] })
	}
	n := sizes[0]
	rows := make([]contentionRow, len(kinds))
	runs := make([]*sim.Report, len(kinds)*f.runs)
	err = parallel(len(runs), e.newProgress(len(runs), "contention"), func(i int) (err error) {
		k := kinds[i/f.runs]
		runs[i], err = sim.Run(sim.Contention(n, k.Policy, f.seed+uint64(i%f.runs)))
		if err == nil && runs[i].Total.Succeeded != n {
			err = fmt.Errorf("sim: %s: %d of %d clients finished", k.Name, runs[i].Total.Succeeded, n)
		}
		return err
	})
	if err != nil {
		return failed(err)
	}
	lines := [][]string{{"strategy", "calls", "completion"}}
	for k, kind := range kinds {
		rows[k] = contentionRow{Strategy: kind.Name, Runs: f.runs}
		for _, r := range runs[k*f.runs : (k+1)*f.runs] {
			rows[k].Calls += float64(r.Total.Attempts) / float64(f.runs)
			rows[k].TimeMS += ms(r.End) / float64(f.runs)
		}
		lines = append(lines, []string{kind.Name, fmt.Sprintf("%.0f", rows[k].Calls), human(fromMS(rows[k].TimeMS))})
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

// hedgeRuns runs sim --hedge (sim.TailAtScale) without and with a hedge
// at the 95th percentile of recent latencies.
func hedgeRuns(seed uint64, bar *progress) ([]hedgeRow, error) {
	rows := make([]hedgeRow, 2)
	err := parallel(2, bar, func(i int) error {
		h, mode := retry.Hedge{Max: 1}, "no hedging"
		if i == 1 {
			h, mode = retry.Hedge{Percentile: 95, Floor: time.Millisecond, Ceiling: 100 * time.Millisecond}, "hedging at p95"
		}
		rep, err := sim.Run(sim.TailAtScale(h, seed))
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
	if err := chart.Save(latencyChart(rows), 20*vg.Centimeter, 11*vg.Centimeter, format, f.plot, e.stdout); err != nil {
		return failed(err)
	}
	fmt.Fprintf(e.stderr, "wrote %s\n", f.plot)
	return nil
}

// latencyChart draws the runs of sim --hedge (chart.Latency).
func latencyChart(rows []hedgeRow) *chart.Chart {
	drawn := make([]chart.LatencyRow, len(rows))
	for i, r := range rows {
		drawn[i] = chart.LatencyRow{Mode: r.Mode, P999: r.P999, Latencies: r.lat}
	}
	return chart.Latency(hedgeNote, drawn)
}
