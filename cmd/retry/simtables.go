package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/sim"
	"gonum.org/v1/plot/vg"
)

// The tables of sim --budgets, --layers, --contention and --hedge.

// budgetRule is a retry budget sim --budgets compares: a client's options
// and, for a rule that learns outcomes, its observer.
type budgetRule struct {
	Name  string
	fresh func(c sim.Client) ([]retry.Option, func(context.Context, int, error))
}

// budgetRules: none, this library's default (the zero Budget), its old
// rule, and the peers' (package sim's models), each client its own.
var budgetRules = []budgetRule{
	{"no budget (3 attempts)", func(sim.Client) ([]retry.Option, func(context.Context, int, error)) {
		return []retry.Option{retry.WithBudget(retry.Budget{Off: true})}, nil
	}},
	{"default: 0.15 a success + 0.5/s over 10 s", func(sim.Client) ([]retry.Option, func(context.Context, int, error)) { return nil, nil }},
	{"old rule: 15% of requests + 2/s over 10 s", func(c sim.Client) ([]retry.Option, func(context.Context, int, error)) {
		return []retry.Option{retry.WithBudget(retry.Budget{Shared: sim.NewWindowBudget(c.Clock, 0.15, 2)})}, nil
	}},
	{"Finagle: 20% of requests + 10/s, TTL 10 s", func(c sim.Client) ([]retry.Option, func(context.Context, int, error)) {
		return []retry.Option{retry.WithBudget(retry.Budget{Shared: sim.NewWindowBudget(c.Clock, 0.2, 10)})}, nil
	}},
	{"AWS quota: 500, retry 14 (429: 5), success +1", func(sim.Client) ([]retry.Option, func(context.Context, int, error)) {
		q := sim.NewTokenQuota()
		return []retry.Option{retry.WithBudget(retry.Budget{Shared: q})}, q.Observe
	}},
}

// budgetRates are the rates of the budget table, per second.
var budgetRates = []float64{10, 100, 1000}

// budgetRow is one rule at one rate and fleet size: the load of a full
// outage (attempts in it per request arriving in it), and the share of
// calls that succeed under independent failures.
type budgetRow struct {
	Rule          string  `json:"rule"`
	Clients       int     `json:"clients"`
	Rate          float64 `json:"rate"`
	Amplification float64 `json:"outage_amplification"`
	SuccessRate   float64 `json:"success_rate"`
}

// budgetRun runs rule at rate with n clients: a full outage of 60 s after
// 20 s of health, then 60 s of 10% independent failures; attempts of
// 10 ms, the default policy.
func budgetRun(rule budgetRule, rate float64, n int, seed uint64) (budgetRow, error) {
	row := budgetRow{Rule: rule.Name, Clients: n, Rate: rate}
	for i, f := range []sim.Fault{{Start: 20 * time.Second, Length: time.Minute, Fail: 1}, {Fail: 0.1}} {
		observe := make([]func(context.Context, int, error), n)
		rep, err := sim.Run(sim.Scenario{Duration: time.Minute + f.Start, Drain: time.Minute, Seed: seed, Load: sim.Load{Rate: rate, Steady: true},
			Service: sim.Service{Network: sim.Fixed(5 * time.Millisecond), Faults: []sim.Fault{f}},
			Fleet: sim.Fleet{Clients: n, Options: func(c sim.Client) (opts []retry.Option) {
				opts, observe[c.Index] = rule.fresh(c)
				return opts
			}, Observe: func(ctx context.Context, n int, err error) {
				if c, _ := sim.CallOf(ctx); observe[c.Client] != nil {
					observe[c.Client](ctx, n, err)
				}
			}}})
		if err != nil {
			return row, failed(err)
		}
		if t := rep.Total; i == 0 {
			row.Amplification = float64(t.FaultAttempts) / float64(t.FaultRequests)
		} else {
			row.SuccessRate = float64(t.Succeeded) / float64(t.Requests)
		}
	}
	return row, nil
}

// runBudgets prints the budget table: for each rule (and fleet size) and
// rate, the load of a full outage and the success rate under 10%
// independent failures.
func runBudgets(e *env, f *simFlags) error {
	sizes, err := f.fleetSizes(true, 1)
	if err != nil {
		return err
	}
	per := len(budgetRates) * len(sizes)
	rows := make([]budgetRow, len(budgetRules)*per)
	err = parallel(len(rows), e.newProgress(len(rows), "budgets"), func(i int) (err error) {
		rows[i], err = budgetRun(budgetRules[i/per], budgetRates[i%len(budgetRates)], sizes[i%per/len(budgetRates)], f.seed)
		return err
	})
	if err != nil || f.asJSON {
		return cmpErr(err, func() error { return writeJSON(e.stdout, rows) })
	}
	fmt.Fprintf(e.stdout, "Retry budgets on the real engine, in virtual time: each client a Retrier, the default policy (3 attempts,\n"+
		"backoff from 1s, ×2, jitter ±50%%), attempts of 10ms; seed %d.\n"+
		"load: server hits per request during a full outage of 1m after 20s of health;\n"+
		"success: calls that succeed over 1m with 10%% of attempts failing independently.\n\n", f.seed)
	head := []string{"rule"}
	if f.fs.Changed("clients") {
		head = append(head, "clients")
	}
	for _, what := range []string{"load", "success"} {
		for _, rate := range budgetRates {
			head = append(head, fmt.Sprintf("%s %g/s", what, rate))
		}
	}
	lines := [][]string{head}
	for i := 0; i < len(rows); i += len(budgetRates) {
		line := []string{rows[i].Rule}
		if len(head) > 1+2*len(budgetRates) {
			line = append(line, strconv.Itoa(rows[i].Clients))
		}
		for _, r := range rows[i : i+len(budgetRates)] {
			line = append(line, fmt.Sprintf("%.3f×", r.Amplification))
		}
		for _, r := range rows[i : i+len(budgetRates)] {
			line = append(line, fmt.Sprintf("%.2f%%", 100*r.SuccessRate))
		}
		lines = append(lines, line)
	}
	return table(e.stdout, lines)
}

// cmpErr returns err, or else what then returns.
func cmpErr(err error, then func() error) error {
	if err != nil {
		return err
	}
	return then()
}

// layersConfigs are the configurations of sim --layers: 3 attempts at
// every layer with nothing to stop them; retries at one layer without a
// retry budget; the budget at every layer with retries at every layer
// too; the defaults, the budget and the rule.
var layersConfigs = []struct {
	name string
	opts []retry.Option
}{
	{"naive", []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 3}), retry.WithBudget(retry.Budget{Off: true}), retry.WithNestedRetries(true)}},
	{"rule only", []retry.Option{retry.WithBudget(retry.Budget{Off: true})}},
	{"budgets only", []retry.Option{retry.WithNestedRetries(true)}},
	{"defaults", nil},
}

// layersRun is one configuration's run: what each service of the chain
// received, and the dependency at the bottom last.
type layersRun struct {
	Name                string         `json:"name"`
	Layers              int            `json:"layers"`
	Offered             int            `json:"offered"`
	AmplificationBottom float64        `json:"amplification_bottom"`
	PerLayer            []layerFigures `json:"per_layer"`
}

type layerFigures struct {
	Layer         string  `json:"layer"`
	Received      int     `json:"received"`
	Amplification float64 `json:"amplification"` // received per request offered
	Retries       int     `json:"retries"`
	NestedRetries int     `json:"nested_retries"`      // sent while serving a retry
	HeldToOne     int     `json:"held_to_one_attempt"` // calls serving a retry held to one attempt
}

// runLayers runs sim --layers: a chain of N services under a full outage
// of the dependency at the bottom, for each configuration.
func runLayers(e *env, f *simFlags) error {
	rate, duration := f.rate, f.duration
	if !f.fs.Changed("rate") {
		rate = 100
	}
	if !f.fs.Changed("duration") {
		duration = "1m"
	}
	if f.layers < 1 || f.layers > 6 {
		return usagef("flag --layers = %d: must be in [1, 6]", f.layers)
	}
	if !(rate > 0 && rate <= 1e6) {
		return usagef("flag --rate = %g: must be in (0, 1e6]", rate)
	}
	dur, err := simDuration("duration", duration, time.Millisecond)
	if err != nil {
		return err
	}
	lat, err := simDuration("latency", f.latency, 0)
	if err != nil {
		return err
	}
	n := int(rate * dur.Seconds())
	if n < 1 {
		return usagef("flags --rate and --duration: give at least one request")
	}
	if hits := float64(n) * math.Pow(3, float64(f.layers)); hits > 5_000_000 {
		return usagef("flags --rate, --duration and --layers: %d requests × 3^%d is %.0f hits at the bottom of the naive chain: must be at most 5000000 (lower --rate or --duration)",
			n, f.layers, hits)
	}
	runs := make([]*layersRun, len(layersConfigs))
	err = parallel(len(runs), e.newProgress(len(runs), "layers"), func(i int) error {
		c := layersConfigs[i]
		layers := make([]sim.Layer, f.layers)
		for k := range layers {
			layers[k].Options = func(sim.Client) []retry.Option { return c.opts }
		}
		rep, err := sim.Run(sim.Scenario{Duration: dur, Drain: 24 * time.Hour, Seed: f.seed, Layers: layers, Load: sim.Load{Rate: rate, Steady: true},
			Service: sim.Service{Network: sim.Fixed(lat / 2), Faults: []sim.Fault{{Fail: 1}}},
			Fleet:   sim.Fleet{Options: func(sim.Client) []retry.Option { return []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 1})} }}})
		if err != nil || rep.Total.Unfinished > 0 {
			return failed(fmt.Errorf("sim: %s with %d layers did not settle within a day of its last request: %v", c.name, f.layers, err))
		}
		run := &layersRun{Name: c.name, Layers: f.layers, Offered: rep.Total.Requests}
		for k, l := range append(rep.Layers, sim.LayerFigures{Received: rep.Total.Attempts}) {
			name := map[bool]string{true: "dependency", false: "service " + strconv.Itoa(k+1)}[k == f.layers]
			run.PerLayer = append(run.PerLayer, layerFigures{Layer: name, Received: l.Received, Amplification: float64(l.Received) / float64(run.Offered),
				Retries: l.Retries, NestedRetries: l.NestedRetries, HeldToOne: l.HeldToOne})
		}
		run.AmplificationBottom = run.PerLayer[f.layers].Amplification
		runs[i] = run
		return nil
	})
	if err != nil || f.asJSON {
		return cmpErr(err, func() error { return writeJSON(e.stdout, runs) })
	}
	fmt.Fprintf(e.stdout, "A chain of %d %s under a full outage of the dependency at the bottom (every call fails at once, 503):\n"+
		"%d requests at %g/s over %s into service 1, each hop taking %s; the real engine in virtual time, seed %d.\n"+
		"naive: 3 attempts at every layer, no budget; rule only: retries at one layer, no budget;\n"+
		"budgets only: retry.New() with WithNestedRetries(true); defaults: retry.New(), the budget and\n"+
		"retries at one layer. Every layer's client has the default policy: 3 attempts, backoff from 1s.\n"+
		"Each cell: requests received, and per request offered.\n\n",
		f.layers, plural(f.layers, "service", "services"), runs[0].Offered, rate, human(dur), human(lat), f.seed)
	lines := [][]string{{"layer"}}
	for _, r := range runs {
		lines[0] = append(lines[0], r.Name, "")
	}
	for i, l := range runs[0].PerLayer {
		line := []string{l.Layer}
		for _, r := range runs {
			line = append(line, strconv.Itoa(r.PerLayer[i].Received), fmt.Sprintf("%.3f×", r.PerLayer[i].Amplification))
		}
		lines = append(lines, line)
	}
	nested, held := []string{"nested retries"}, []string{"held to one"}
	for _, r := range runs {
		var n, h int
		for _, l := range r.PerLayer {
			n, h = n+l.NestedRetries, h+l.HeldToOne
		}
		nested, held = append(nested, strconv.Itoa(n), ""), append(held, strconv.Itoa(h), "")
	}
	if err := table(e.stdout, append(lines, nested, held)); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "\nnested retries: retries a service sent while serving a request that was itself a retry;\n"+
		"held to one: calls serving a retry that made one attempt by the rule of retries at one layer.\n")
	return nil
}

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
