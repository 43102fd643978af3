package main

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/cmd/retry/internal/chart"
	"github.com/steadyhq/retry/sim"
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
func runContention(e *env, f *simFlags) (*simOutput, error) {
	sizes, err := f.fleetSizes(false, 100)
	if err != nil {
		return nil, err
	}
	if f.runs < 1 || f.runs > 1000 {
		return nil, usagef("flag --runs = %d: must be in [1, 1000]", f.runs)
	}
	kinds := sim.ContentionStrategies()
	if j := *f.pf.strFlag["jitter"]; f.fs.Changed("jitter") {
		if contentionNames[j] == "" {
			return nil, usagef("flag --jitter = %q: with --contention, must be none, full, equal, decorrelated or no-backoff", j)
		}
		kinds = slices.DeleteFunc(kinds, func(s sim.Strategy) bool { return s.Name != contentionNames[j] })
	}
	n := sizes[0]
	var scenarios []sim.Scenario
	for _, k := range kinds {
		for i := range f.runs {
			scenarios = append(scenarios, sim.Contention(n, k.Policy, f.seed+uint64(i)))
		}
	}
	runs, err := f.runAll(e, "contention", scenarios...)
	if err != nil {
		return nil, err
	}
	rows := make([]contentionRow, len(kinds))
	lines := [][]string{{"strategy", "calls", "completion"}}
	for k, kind := range kinds {
		rows[k] = contentionRow{Strategy: kind.Name, Runs: f.runs}
		for _, r := range runs[k*f.runs : (k+1)*f.runs] {
			if r.Total.Succeeded != n {
				return nil, failed(fmt.Errorf("sim: %s: %d of %d clients finished", kind.Name, r.Total.Succeeded, n))
			}
			rows[k].Calls += float64(r.Total.Attempts) / float64(f.runs)
			rows[k].TimeMS += ms(r.End) / float64(f.runs)
		}
		lines = append(lines, []string{kind.Name, fmt.Sprintf("%.0f", rows[k].Calls), human(fromMS(rows[k].TimeMS))})
	}
	return &simOutput{rows: rows, text: []any{fmt.Sprintf("%d clients contending for one row (optimistic concurrency), network |N(10ms, 2ms)| per message,\n"+
		"backoff from a 5 ms base to a 2 s cap, no retry budget; mean of %d %s from seed %d\n\n", n, f.runs, plural(f.runs, "run", "runs"), f.seed), lines}}, nil
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

// hedgeResult is what sim --hedge prints as JSON: its rows, how many
// times lower p99.9 is with the hedge, and the share of attempts it adds.
type hedgeResult struct {
	Rows      []hedgeRow `json:"rows"`
	TailDrop  float64    `json:"p999_drop"`
	ExtraLoad float64    `json:"extra_attempts"`
}

// hedgeNote is the line under the hedge chart's title.
const hedgeNote = "20000 requests; attempts take 10-15ms, 1% of them 100× longer; hedge delay at p95 of recent latencies"

// runHedge runs sim --hedge (sim.TailAtScale) without and with a hedge
// at the 95th percentile of recent latencies: a row each, what the hedge
// does to the tail, and a chart for --plot.
func runHedge(e *env, f *simFlags) (*simOutput, error) {
	hedges := []retry.Hedge{{Max: 1}, {Percentile: 95, Floor: time.Millisecond, Ceiling: 100 * time.Millisecond}}
	reps, err := f.runAll(e, "hedge", sim.TailAtScale(hedges[0], f.seed), sim.TailAtScale(hedges[1], f.seed))
	if err != nil {
		return nil, err
	}
	rows := make([]hedgeRow, 2)
	lines := [][]string{{"", "p50", "p95", "p99", "p99.9", "max", "attempts/request", "hedges", "won"}}
	for i, rep := range reps {
		q := func(p float64) float64 { return ms(rep.Latency(p)) }
		rows[i] = hedgeRow{Mode: []string{"no hedging", "hedging at p95"}[i], P50: q(0.5), P95: q(0.95), P99: q(0.99), P999: q(0.999), Max: q(1),
			Attempts: rep.Total.Amplification(), Hedges: rep.Stats[0].Hedges, HedgeWins: rep.Stats[0].HedgeWins, lat: rep.Latencies}
		r := rows[i]
		lines = append(lines, []string{r.Mode, fmt.Sprintf("%.1fms", r.P50), fmt.Sprintf("%.1fms", r.P95), fmt.Sprintf("%.1fms", r.P99),
			fmt.Sprintf("%.1fms", r.P999), fmt.Sprintf("%.1fms", r.Max), fmt.Sprintf("%.4f", r.Attempts), strconv.FormatInt(r.Hedges, 10), strconv.FormatInt(r.HedgeWins, 10)})
	}
	drop, extra := rows[0].P999/rows[1].P999, rows[1].Attempts/rows[0].Attempts-1
	return &simOutput{rows: hedgeResult{rows, drop, extra}, text: []any{fmt.Sprintf("%d requests at 16000/s; attempts take 10-15ms, 1%% of them 100× longer; seed %d\n"+
		"hedge delay: the p95 of recent attempt latencies, 2 attempts in flight at most; virtual time\n\n", len(rows[0].lat), f.seed),
		lines, fmt.Sprintf("\np99.9 falls %.1f×, for %.2f%% more attempts\n", drop, 100*extra)},
		chart: func() (*chart.Chart, error) { return latencyChart(rows), nil }}, nil
}

// latencyChart draws the runs of sim --hedge (chart.Latency).
func latencyChart(rows []hedgeRow) *chart.Chart {
	drawn := make([]chart.LatencyRow, len(rows))
	for i, r := range rows {
		drawn[i] = chart.LatencyRow{Mode: r.Mode, P999: r.P999, Latencies: r.lat}
	}
	return chart.Latency(hedgeNote, drawn)
}
