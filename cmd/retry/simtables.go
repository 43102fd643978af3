package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/sim"
	"gonum.org/v1/plot/vg"
)

// The tables of sim --budgets, --layers, --contention and --hedge, each a
// set of scenarios of package sim.

// budgetRule is a retry budget sim --budgets compares: the options of a
// client's Retrier, and, for a rule kept in the table, what learns the
// outcome of every attempt.
type budgetRule struct {
	Name  string
	fresh func(c sim.Client) ([]retry.Option, func(ctx context.Context, n int, err error))
}

// budgetRules: none, this library's default (the zero Budget), its old
// rule, and the peers', kept here as retry.SharedBudget implementations,
// each client its own.
var budgetRules = []budgetRule{
	{Name: "no budget (3 attempts)", fresh: func(sim.Client) ([]retry.Option, func(context.Context, int, error)) {
		return []retry.Option{retry.WithBudget(retry.Budget{Off: true})}, nil
	}},
	{Name: "default: 0.15 a success + 0.5/s over 10 s", fresh: func(sim.Client) ([]retry.Option, func(context.Context, int, error)) { return nil, nil }},
	{Name: "old rule: 15% of requests + 2/s over 10 s", fresh: windowRule(0.15, 2)},
	{Name: "Finagle: 20% of requests + 10/s, TTL 10 s", fresh: windowRule(0.2, 10)},
	{Name: "AWS quota: 500, retry 14 (429: 5), success +1", fresh: func(sim.Client) ([]retry.Option, func(context.Context, int, error)) {
		q := &awsQuota{tokens: 500, calls: map[int]*awsCall{}}
		return []retry.Option{retry.WithBudget(retry.Budget{Shared: q})}, q.observe
	}},
}

// windowRule is the rule of Finagle's RetryBudget and of this library's
// budget before it counted successes: over a sliding window of 10 s,
// retries may reach ratio times the first attempts plus perSec a second.
func windowRule(ratio, perSec float64) func(sim.Client) ([]retry.Option, func(context.Context, int, error)) {
	return func(c sim.Client) ([]retry.Option, func(context.Context, int, error)) {
		return []retry.Option{retry.WithBudget(retry.Budget{Shared: &windowBudget{clk: c.Clock, ratio: ratio, perSec: perSec}})}, nil
	}
}

// windowBudget keeps a window of ten slices of a second; a run's clock
// runs one goroutine at a time, so it needs no lock.
type windowBudget struct {
	clk           retry.Clock
	ratio, perSec float64
	ring          [10]struct{ start, firsts, retries int64 }
}

func (b *windowBudget) First(string) { b.slice(b.clk.Now()).firsts++ }

func (b *windowBudget) Retry(_ context.Context, _ string, now time.Time) bool {
	cur := b.slice(now)
	var firsts, retries int64
	for _, s := range b.ring {
		if s.start > cur.start-int64(len(b.ring)) {
			firsts, retries = firsts+s.firsts, retries+s.retries
		}
	}
	if float64(retries+1) > b.ratio*float64(firsts)+b.perSec*10 {
		return false
	}
	cur.retries++
	return true
}

func (b *windowBudget) slice(now time.Time) *struct{ start, firsts, retries int64 } {
	n := now.UnixNano()/int64(time.Second) + 1
	s := &b.ring[n%int64(len(b.ring))]
	if s.start != n {
		*s = struct{ start, firsts, retries int64 }{start: n}
	}
	return s
}

// awsQuota is the AWS SDKs' retry quota (standard mode, as revised in
// 2026): 500 tokens; a retry takes 14, or 5 after a throttling error; a
// first attempt that succeeds puts 1 back, a retry that succeeds what it
// took. It keeps what it knows of each call in flight by the call's index.
type awsQuota struct {
	tokens int
	calls  map[int]*awsCall
}

type awsCall struct {
	last error // the call's last failure
	held int   // what its retry in flight took
}

func (q *awsQuota) First(string) {}

func (q *awsQuota) Retry(ctx context.Context, _ string, _ time.Time) bool {
	call, _ := sim.CallOf(ctx)
	c := q.calls[call.Index]
	if c == nil {
		return false
	}
	cost := 14
	if se, ok := c.last.(*retry.StatusError); ok && se.StatusCode == 429 {
		cost = 5
	}
	if q.tokens < cost {
		return false
	}
	q.tokens -= cost
	c.held = cost
	return true
}

func (q *awsQuota) observe(ctx context.Context, n int, err error) {
	call, _ := sim.CallOf(ctx)
	c := q.calls[call.Index]
	switch {
	case err != nil && c == nil:
		q.calls[call.Index] = &awsCall{last: err}
	case err != nil:
		c.last, c.held = err, 0 // a failed retry keeps what it took
	case n == 1:
		q.tokens = min(q.tokens+1, 500)
	case c != nil:
		q.tokens = min(q.tokens+c.held, 500)
	}
	if err == nil || n >= 3 {
		delete(q.calls, call.Index)
	}
}

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

// budgetRates are the rates of the budget table, per second.
var budgetRates = []float64{10, 100, 1000}

// budgetRun runs rule at rate with n clients: a full outage of 60 s after
// 20 s of health, then 60 s of 10% independent failures; attempts of
// 10 ms, the default policy.
func budgetRun(rule budgetRule, rate float64, n int, seed uint64) (budgetRow, error) {
	row := budgetRow{Rule: rule.Name, Clients: n, Rate: rate}
	for i, run := range []struct {
		dur   time.Duration
		fault sim.Fault
	}{{80 * time.Second, sim.Fault{Start: 20 * time.Second, Length: time.Minute, Fail: 1}}, {time.Minute, sim.Fault{Fail: 0.1}}} {
		var observes []func(context.Context, int, error)
		s := sim.Scenario{Duration: run.dur, Drain: time.Minute, Seed: seed,
			Load:    sim.Load{Rate: rate, Steady: true},
			Service: sim.Service{Network: sim.Fixed(5 * time.Millisecond), Faults: []sim.Fault{run.fault}},
			Fleet: sim.Fleet{Clients: n, Options: func(c sim.Client) []retry.Option {
				opts, obs := rule.fresh(c)
				observes = append(observes, obs)
				return opts
			}, Observe: func(ctx context.Context, n int, err error) {
				if c, _ := sim.CallOf(ctx); observes[c.Client] != nil {
					observes[c.Client](ctx, n, err)
				}
			}}}
		rep, err := sim.Run(s)
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
	perRule := len(budgetRates) * len(sizes)
	rows := make([]budgetRow, len(budgetRules)*perRule)
	err = parallel(len(rows), e.newProgress(len(rows), "budgets"), func(i int) (err error) {
		rows[i], err = budgetRun(budgetRules[i/perRule], budgetRates[i%len(budgetRates)], sizes[i%perRule/len(budgetRates)], f.seed)
		return err
	})
	if err != nil || f.asJSON {
		return cmpErr(err, func() error { return writeJSON(e.stdout, rows) })
	}
	w := e.stdout
	fmt.Fprintf(w, "Retry budgets on the real engine, in virtual time: each client a Retrier, the default policy (3 attempts,\n")
	fmt.Fprintf(w, "backoff from 1s, ×2, jitter ±50%%), attempts of 10ms; seed %d.\n", f.seed)
	fmt.Fprintf(w, "load: server hits per request during a full outage of 1m after 20s of health;\n")
	fmt.Fprintf(w, "success: calls that succeed over 1m with 10%% of attempts failing independently.\n\n")
	width := 0 // the rules' column is aligned left, the figures right
	for _, r := range rows {
		width = max(width, utf8.RuneCountInString(r.Rule))
	}
	clients := map[bool]string{true: "clients\t"}[f.fs.Changed("clients")]
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\t%s", width, "rule", clients)
	for _, what := range []string{"load", "success"} {
		for _, rate := range budgetRates {
			fmt.Fprintf(tw, "%s %g/s\t", what, rate)
		}
	}
	fmt.Fprintf(tw, "\n")
	for i := 0; i < len(rows); i += len(budgetRates) {
		fmt.Fprintf(tw, "%-*s\t", width, rows[i].Rule)
		if clients != "" {
			fmt.Fprintf(tw, "%d\t", rows[i].Clients)
		}
		for _, r := range rows[i : i+len(budgetRates)] {
			fmt.Fprintf(tw, "%.3f×\t", r.Amplification)
		}
		for _, r := range rows[i : i+len(budgetRates)] {
			fmt.Fprintf(tw, "%.2f%%\t", 100*r.SuccessRate)
		}
		fmt.Fprintf(tw, "\n")
	}
	return tw.Flush()
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
// too (WithNestedRetries); the defaults, the budget and the rule.
var layersConfigs = []struct {
	name string
	opts []retry.Option
}{
	{name: "naive", opts: []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 3}), retry.WithBudget(retry.Budget{Off: true}), retry.WithNestedRetries(true)}},
	{name: "rule only", opts: []retry.Option{retry.WithBudget(retry.Budget{Off: true})}},
	{name: "budgets only", opts: []retry.Option{retry.WithNestedRetries(true)}},
	{name: "defaults"},
}

// layersRun is one configuration's run.
type layersRun struct {
	Name                string         `json:"name"`
	Layers              int            `json:"layers"`
	Offered             int            `json:"offered"`
	AmplificationBottom float64        `json:"amplification_bottom"`
	PerLayer            []layerFigures `json:"per_layer"` // the services from the top, then the dependency
}

// layerFigures is what one layer of the chain saw.
type layerFigures struct {
	Layer         string  `json:"layer"`
	Received      int     `json:"received"`
	Amplification float64 `json:"amplification"`
	Retries       int     `json:"retries"`
	NestedRetries int     `json:"nested_retries"`
	HeldToOne     int     `json:"held_to_one_attempt"`
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
		rep, err := sim.Run(sim.Scenario{Duration: dur, Drain: 24 * time.Hour, Seed: f.seed, Layers: layers,
			Load:    sim.Load{Rate: rate, Steady: true},
			Service: sim.Service{Network: sim.Fixed(lat / 2), Faults: []sim.Fault{{Fail: 1}}},
			Fleet:   sim.Fleet{Options: func(sim.Client) []retry.Option { return []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 1})} }}})
		if err != nil || rep.Total.Unfinished > 0 {
			return failed(fmt.Errorf("sim: %s with %d layers did not settle within a day of its last request: %v", c.name, f.layers, err))
		}
		run := &layersRun{Name: c.name, Layers: f.layers, Offered: rep.Total.Requests}
		for k, l := range append(rep.Layers, sim.LayerFigures{Received: rep.Total.Attempts}) {
			name := "service " + strconv.Itoa(k+1)
			if k == f.layers {
				name = "dependency"
			}
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
	w := e.stdout
	fmt.Fprintf(w, "A chain of %d %s under a full outage of the dependency at the bottom (every call fails at once, 503):\n",
		f.layers, plural(f.layers, "service", "services"))
	fmt.Fprintf(w, "%d requests at %g/s over %s into service 1, each hop taking %s; the real engine in virtual time, seed %d.\n",
		runs[0].Offered, rate, human(dur), human(lat), f.seed)
	fmt.Fprintf(w, "naive: 3 attempts at every layer, no budget; rule only: retries at one layer, no budget;\n")
	fmt.Fprintf(w, "budgets only: retry.New() with WithNestedRetries(true); defaults: retry.New(), the budget and\n")
	fmt.Fprintf(w, "retries at one layer. Every layer's client has the default policy: 3 attempts, backoff from 1s.\n")
	fmt.Fprintf(w, "Each cell: requests received, and per request offered.\n\n")
	const width = len("nested retries") // the labels' column is aligned left, the figures right
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\t", width, "layer")
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t\t", r.Name)
	}
	fmt.Fprintf(tw, "\n")
	for i := range runs[0].PerLayer {
		fmt.Fprintf(tw, "%-*s\t", width, runs[0].PerLayer[i].Layer)
		for _, r := range runs {
			fmt.Fprintf(tw, "%d\t%.3f×\t", r.PerLayer[i].Received, r.PerLayer[i].Amplification)
		}
		fmt.Fprintf(tw, "\n")
	}
	for _, row := range []struct {
		name string
		v    func(layerFigures) int
	}{{"nested retries", func(l layerFigures) int { return l.NestedRetries }}, {"held to one", func(l layerFigures) int { return l.HeldToOne }}} {
		fmt.Fprintf(tw, "%-*s\t", width, row.name)
		for _, r := range runs {
			sum := 0
			for _, l := range r.PerLayer {
				sum += row.v(l)
			}
			fmt.Fprintf(tw, "%d\t\t", sum)
		}
		fmt.Fprintf(tw, "\n")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nnested retries: retries a service sent while serving a request that was itself a retry;\n")
	fmt.Fprintf(w, "held to one: calls serving a retry that made one attempt by the rule of retries at one layer.\n")
	return nil
}

// The contention strategies of the study, in its order.
var contentionKinds = []string{"no-backoff", "exponential", "full", "equal", "decorrelated"}

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

// runContention runs sim --contention: the setup of the AWS Architecture
// Blog's "Exponential Backoff and Jitter": clients each write one row
// once under optimistic concurrency, over a network of |N(10ms, 2ms)| per
// message, no retry budget; runs of each strategy, from seeds seed,
// seed+1, ...
func runContention(e *env, f *simFlags) error {
	sizes, err := f.fleetSizes(false, 100)
	if err != nil {
		return err
	}
	if f.runs < 1 || f.runs > 1000 {
		return usagef("flag --runs = %d: must be in [1, 1000]", f.runs)
	}
	kinds := contentionKinds
	if f.fs.Changed("jitter") {
		k, ok := map[string]string{"none": "exponential", "false": "exponential", "off": "exponential", "full": "full", "equal": "equal",
			"decorrelated": "decorrelated", "no-backoff": "no-backoff", "immediate": "no-backoff"}[*f.pf.strFlag["jitter"]]
		if !ok {
			return usagef("flag --jitter = %q: with --contention, must be none, full, equal, decorrelated or no-backoff", *f.pf.strFlag["jitter"])
		}
		kinds = []string{k}
	}
	n := sizes[0]
	type run struct{ calls, ms float64 }
	out := make([]run, len(kinds)*f.runs)
	err = parallel(len(out), e.newProgress(len(out), "contention"), func(i int) error {
		p := contentionPolicy(kinds[i/f.runs])
		rep, err := sim.Run(sim.Scenario{Duration: time.Millisecond, Drain: 24 * time.Hour, Seed: f.seed + uint64(i%f.runs),
			Load:    sim.Load{Bursts: []sim.Burst{{Calls: 1}}},
			Service: sim.Service{Conflicts: true, Network: sim.Normal(10*time.Millisecond, 2*time.Millisecond)},
			Fleet: sim.Fleet{Clients: n, Options: func(sim.Client) []retry.Option {
				return []retry.Option{retry.WithPolicy(p), retry.WithBudget(retry.Budget{Off: true})}
			}}})
		if err != nil || rep.Total.Succeeded != n {
			return failed(fmt.Errorf("sim: %s: clients finished: %v, %v", kinds[i/f.runs], rep, err))
		}
		out[i] = run{float64(rep.Total.Attempts), ms(rep.End)}
		return nil
	})
	if err != nil {
		return err
	}
	var rows []contentionRow
	for k, kind := range kinds {
		row := contentionRow{Strategy: kind, Runs: f.runs}
		for _, r := range out[k*f.runs : (k+1)*f.runs] {
			row.Calls += r.calls / float64(f.runs)
			row.TimeMS += r.ms / float64(f.runs)
		}
		rows = append(rows, row)
	}
	if f.asJSON {
		return writeJSON(e.stdout, rows)
	}
	w := e.stdout
	fmt.Fprintf(w, "%d clients contending for one row (optimistic concurrency), network |N(10ms, 2ms)| per message,\n", n)
	fmt.Fprintf(w, "backoff from a 5 ms base to a 2 s cap, no retry budget; mean of %d %s from seed %d\n\n", f.runs, plural(f.runs, "run", "runs"), f.seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "strategy\tcalls\tcompletion\t\n")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t\n", r.Strategy, r.Calls, human(fromMS(r.TimeMS)))
	}
	return tw.Flush()
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

// runHedge runs sim --hedge: the long-tail setup of Dean and Barroso's
// "The Tail at Scale" (CACM 2013), 20,000 calls at 16,000 a second whose
// attempts take 10-15 ms and 1% of them 100 times longer, without and
// with a hedge at the 95th percentile of recent latencies.
func runHedge(e *env, f *simFlags) error {
	format, err := simPlot(f.plot)
	if err != nil {
		return err
	}
	rows, err := hedgeRuns(f.seed, e.newProgress(2, "hedge"))
	if err != nil {
		return err
	}
	return writeHedge(e, f, format, rows)
}

// hedgeRuns runs both runs of sim --hedge, in parallel.
func hedgeRuns(seed uint64, bar *progress) ([]hedgeRow, error) {
	rows := make([]hedgeRow, 2)
	err := parallel(2, bar, func(i int) error {
		h, mode := retry.Hedge{Max: 1}, "no hedging"
		if i == 1 {
			h, mode = retry.Hedge{Percentile: 95, Floor: time.Millisecond, Ceiling: 100 * time.Millisecond}, "hedging at p95"
		}
		rep, err := sim.Run(sim.Scenario{Duration: 1250 * time.Millisecond, Drain: time.Minute, Seed: seed,
			Load:    sim.Load{Rate: 16000, Steady: true},
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

// hedgeNote is the line under the hedge chart's title.
const hedgeNote = "20000 requests; attempts take 10-15ms, 1% of them 100× longer; hedge delay at p95 of recent latencies"

// writeHedge prints sim --hedge's rows, and draws them to --plot.
func writeHedge(e *env, f *simFlags, format string, rows []hedgeRow) error {
	var err error
	drop, extra := rows[0].P999/rows[1].P999, rows[1].Attempts/rows[0].Attempts-1
	if f.asJSON {
		err = writeJSON(e.stdout, struct {
			Rows      []hedgeRow `json:"rows"`
			TailDrop  float64    `json:"p999_drop"`
			ExtraLoad float64    `json:"extra_attempts"`
		}{rows, drop, extra})
	} else {
		w := e.stdout
		fmt.Fprintf(w, "%d requests at 16000/s; attempts take 10-15ms, 1%% of them 100× longer; seed %d\n", len(rows[0].lat), f.seed)
		fmt.Fprintf(w, "hedge delay: the p95 of recent attempt latencies, 2 attempts in flight at most; virtual time\n\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "\tp50\tp95\tp99\tp99.9\tmax\tattempts/request\thedges\twon\t\n")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%.1fms\t%.1fms\t%.1fms\t%.1fms\t%.1fms\t%.4f\t%d\t%d\t\n", r.Mode, r.P50, r.P95, r.P99, r.P999, r.Max, r.Attempts, r.Hedges, r.HedgeWins)
		}
		tw.Flush()
		fmt.Fprintf(w, "\np99.9 falls %.1f×, for %.2f%% more attempts\n", drop, 100*extra)
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
