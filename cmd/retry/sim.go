package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/steadyhq/retry"
	"gonum.org/v1/plot/vg"
)

func newSim(e *env) *cobra.Command {
	var (
		pf       policyFlags
		rate     float64
		duration string
		clients  int
		latency  string
		outage   string
		failRate float64
		capacity float64
		timeout  string
		horizon  string
		bucketW  string
		budget   string
		seed     uint64
		asJSON   bool
		plotFile string
		contend  bool
		runs     int
		hedge    bool
		budgets  bool
		layers   int
		meta     metaFlags
	)
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Simulate an outage, failures or contention on the real engine, in virtual time",
		Long: `Run the real engine (retry.Retrier, its policy and retry budget) against a model server in
virtual time: requests arrive at --rate for --duration, spread over --clients Retriers, and each
attempt meets a server that may be down (--outage START:LENGTH), fail independently
(--fail-rate) or refuse what exceeds its --capacity. A deterministic scheduler runs one simulated
goroutine at a time, so a --seed gives the same figures every time.

It reports the load amplification (server hits per request), the success rate, the peak-to-mean
rate of hits per second, and the time the server took to recover after the outage: until no
attempt fails and the load is back within 10% of the offered rate. --plot draws them over time, and beside a run with a retry budget the same run with --budget off, on the same axes.

--hedge runs the long-tail setup of Dean and Barroso's "The Tail at Scale": 20000 requests, 200
at a time, attempts of 10 ms (+0–50%), 1% of them 100× longer, first without hedging, then with a
hedge after the p95 of recent attempt latencies (retry.Hedged). It runs in wall time (the
engine's hedges race goroutines and timers), prints the latency percentiles and the attempts of
both runs, and --plot draws their latency distributions. It takes only --seed, --json and --plot.

--contention runs the setup of the AWS Architecture Blog's "Exponential Backoff and Jitter":
--clients (100) clients each update one row once under optimistic concurrency (a write succeeds
only if no one wrote since the read), over a network of |N(10ms, 2ms)| per message, backing off
from a 5 ms base to a 2 s cap. It compares no backoff, exponential without jitter, and full,
equal and decorrelated jitter (or only --jitter), averaged over --runs. It takes no other flag
than --clients, --runs, --seed, --jitter and --json.

--metastable runs a server that can fail metastably (Bronson et al., HotOS '21; Huang et al.,
OSDI '22): --workers (10) serve --capacity (here 100) attempts a second from a FIFO queue that
holds 2 s of work, and refuse more at once with 503; requests arrive at --rate (here 70) a
second, a Poisson process, for --duration (here 3m). Each attempt times out after
--attempt-timeout (1s), and the server still serves it when its turn comes: wasted work. A
trigger (--trigger capacity: the workers divided by --factor, 2; latency: the service time
multiplied by it) lasts from --trigger-at START:LENGTH (30s:10s). The same requests run under
each defence set, on the real engine in virtual time with the policy's attempts: no defence (no
retry budget), each gate alone with its defaults (the budget, the circuit breaker, ...), the
defaults (what retry.New gives with no defence option) and, when that is more, every gate
together. It prints each set's goodput (successful calls per second) before, during and after
the trigger, the load amplification (attempts reaching the server per request), the share of
the server's work wasted, and the time it took to recover after the trigger ended: from then
on, every 5 s window to the end of the run has successful calls of at least 90% of the requests
arriving in it; "never" when that does not happen within the run. --plot draws each set's
goodput over time, the trigger shaded. Besides its own flags it takes the policy's, --rate,
--capacity, --duration, --latency, --seed, --json and --plot.

--budgets prints the retry budgets' table: on the load model, a 60 s full outage after 20 s of
health, then 60 s of 10% independent failures, at 10, 100 and 1,000 requests a second, the load
amplification of the outage and the success rate under the failures, for no budget, this
library's default budget, its old rule (15% of first attempts plus 2 a second), Finagle's
RetryBudget (20% plus 10 a second over 10 s) and the AWS SDKs' retry quota (500 tokens; a retry
costs 14, 5 after a 429; a first try's success earns 1). It takes only --seed and --json.

--layers N runs a chain of N services (1 to 6) under a full outage of the dependency at the
bottom, which fails every call at once with 503: requests arrive at service 1 at --rate (here
100) a second for --duration (here 1m); each service's handler calls the next one, and the last
one the dependency, through a client of this library, and marks its context with the attempt it
serves (retry.WithInboundAttempt), as the server's shedding does from the Retry-Attempt header.
It prints the requests each layer received, per request offered, for four configurations of
every layer's client: naive (3 attempts, no budget), rule only (retries at one layer, no
budget), budgets only (retry.New() with WithNestedRetries(true)) and the defaults (retry.New():
the retry budget, and retries at one layer). It takes only --rate, --duration, --latency, --seed
and --json.

A load simulation holds at most 1000000 requests (--rate × --duration).`,
		Example: `  retry sim --rate 100 --duration 2m --outage 30s:60s
  retry sim --rate 100 --duration 2m --outage 30s:60s --budget off --plot outage.svg
  retry sim --rate 100 --duration 1m --fail-rate 0.1 --json
  retry sim --rate 100 --duration 1m --outage 10s:20s --capacity 120
  retry sim --contention
  retry sim --hedge --plot hedge.svg
  retry sim --budgets
  retry sim --layers 3
  retry sim --metastable
  retry sim --metastable --trigger latency --factor 3 --trigger-at 30s:20s --duration 5m --plot metastable.svg`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			flags := cmd.Flags()
			if err := simFlagsApply(flags, contend, hedge, meta.on); err != nil {
				return err
			}
			if flags.Changed("layers") {
				s, err := layersSetup(flags, layers, rate, duration, latency, seed)
				if err != nil {
					return err
				}
				return runLayers(e, s, asJSON)
			}
			if budgets {
				var err error
				flags.Visit(func(f *pflag.Flag) {
					if err == nil && !slices.Contains(budgetFlags, f.Name) {
						err = usagef("flag --%s: does not apply to --budgets, which takes only --seed and --json", f.Name)
					}
				})
				if err != nil {
					return err
				}
				return runBudgetTable(e, seed, asJSON)
			}
			if meta.on {
				p, label, err := pf.policy(e.stdin)
				if err != nil {
					return err
				}
				s, err := meta.sim(flags, rate, capacity, duration, latency, seed, p)
				if err != nil {
					return err
				}
				return runMetastable(e, s, label, asJSON, plotFile)
			}
			if hedge {
				return runHedgeSim(e, defaultHedgeSim(seed), asJSON, plotFile)
			}
			if contend {
				n := 100
				if flags.Changed("clients") {
					n = clients
				}
				if n < 1 || n > 10000 {
					return usagef("flag --clients = %d: must be in [1, 10000]", n)
				}
				if runs < 1 || runs > 1000 {
					return usagef("flag --runs = %d: must be in [1, 1000]", runs)
				}
				kinds := contentionKinds
				if flags.Changed("jitter") {
					k, err := contentionKind(*pf.strFlag["jitter"])
					if err != nil {
						return err
					}
					kinds = []string{k}
				}
				return runContention(e, n, runs, seed, kinds, asJSON)
			}
			p, label, err := pf.policy(e.stdin)
			if err != nil {
				return err
			}
			format, err := simPlot(plotFile)
			if err != nil {
				return err
			}
			s := &loadSim{rate: rate, clients: clients, seed: seed}
			if !(rate > 0 && rate <= 1e6) {
				return usagef("flag --rate = %g: must be in (0, 1e6]", rate)
			}
			if clients < 1 || clients > 100000 {
				return usagef("flag --clients = %d: must be in [1, 100000]", clients)
			}
			if !(failRate >= 0 && failRate <= 1) {
				return usagef("flag --fail-rate = %g: must be in [0, 1]", failRate)
			}
			if !(capacity >= 0 && capacity <= 1e9) {
				return usagef("flag --capacity = %g: must be in [0, 1e9] (0 is unlimited)", capacity)
			}
			s.srv.failRate, s.srv.capacity = failRate, capacity
			for _, d := range []struct {
				name, v string
				dst     *time.Duration
				min     time.Duration
			}{
				{"duration", duration, &s.duration, time.Millisecond},
				{"latency", latency, &s.latency, 0},
				{"timeout", timeout, &s.timeout, 0},
				{"bucket", bucketW, &s.bucket, time.Millisecond},
			} {
				if *d.dst, err = simDuration(d.name, d.v, d.min); err != nil {
					return err
				}
			}
			if n := rate * s.duration.Seconds(); n > maxRequests {
				return usagef("flags --rate and --duration: %s/s over %s is %.0f requests: must be at most %d (lower --rate or --duration)",
					strconv.FormatFloat(rate, 'f', -1, 64), human(s.duration), n, maxRequests)
			}
			if s.srv.outageStart, s.srv.outageEnd, err = parseOutage(outage); err != nil {
				return err
			}
			s.horizon = s.duration + 10*time.Minute
			if horizon != "" {
				if s.horizon, err = simDuration("horizon", horizon, s.duration); err != nil {
					return err
				}
			}
			b, budgetLabel, err := parseBudget(budget)
			if err != nil {
				return err
			}
			s.opts = []retry.Option{retry.WithPolicy(p)}
			if b != nil {
				s.opts = append(s.opts, retry.WithBudget(*b))
			}
			res, err := s.run()
			if err != nil {
				return err
			}
			if asJSON {
				if err := writeJSON(e.stdout, res); err != nil {
					return err
				}
			} else {
				res.writeText(e.stdout, s, label, p, budgetLabel)
			}
			if plotFile != "" {
				if err := saveChart(res.chart(s, label, budget), 20*vg.Centimeter, 11*vg.Centimeter, format, plotFile, e.stdout); err != nil {
					return failed(err)
				}
				fmt.Fprintf(e.stderr, "wrote %s\n", plotFile)
			}
			return nil
		},
	}
	pf.register(cmd.Flags())
	f := cmd.Flags()
	f.Float64Var(&rate, "rate", 100, "requests per second, all clients together")
	f.StringVar(&duration, "duration", "2m", "how long requests keep arriving")
	f.IntVar(&clients, "clients", 1, "Retriers the requests are spread over (each with its own budget); 100 with --contention")
	f.StringVar(&latency, "latency", "10ms", "round trip of each attempt")
	f.StringVar(&outage, "outage", "", "a full outage, as START:LENGTH (30s:60s)")
	f.Float64Var(&failRate, "fail-rate", 0, "share of attempts that fail independently, in [0, 1]")
	f.Float64Var(&capacity, "capacity", 0, "attempts per second the server can take (excess refused with 429); 0 is unlimited")
	f.StringVar(&timeout, "timeout", "0", "bound on each call, waits included (WithMaxElapsed); 0 for none")
	f.StringVar(&horizon, "horizon", "", "stop the simulation then (default --duration + 10m)")
	f.StringVar(&bucketW, "bucket", "1s", "the time series' resolution")
	f.StringVar(&budget, "budget", "default", "retry budget: default, off, or ratio=R,reserve=N,window=D")
	f.Uint64Var(&seed, "seed", 1, "seed of every random draw")
	f.BoolVar(&asJSON, "json", false, "print the figures as JSON")
	f.StringVar(&plotFile, "plot", "", "draw the load over time to this SVG or PNG file")
	f.BoolVar(&contend, "contention", false, `the AWS "Exponential Backoff and Jitter" contention setup`)
	f.IntVar(&runs, "runs", 10, "with --contention: runs to average")
	f.BoolVar(&hedge, "hedge", false, `the long-tail setup of "The Tail at Scale", without and with hedging`)
	f.BoolVar(&budgets, "budgets", false, "the retry budgets' table: full-outage load and success under 10% failures at 10, 100 and 1,000 req/s")
	f.IntVar(&layers, "layers", 0, "a chain of `N` services, N in [1, 6], under a full outage at the bottom: the load there, naive and with the defaults")
	meta.register(f)
	return cmd
}

// maxRequests bounds the requests of a load simulation, rate × duration:
// each one waiting at the same time holds a few kilobytes.
const maxRequests = 1_000_000

// contentionFlags are the flags --contention takes (and --progress, which
// every command takes).
var contentionFlags = []string{"clients", "runs", "seed", "jitter", "json"}

// budgetFlags are the flags --budgets takes.
var budgetFlags = []string{"budgets", "seed", "json", "progress"}

// hedgeFlags are the flags --hedge takes.
var hedgeFlags = []string{"seed", "json", "plot"}

// simFlagsApply rejects a flag given where it has no effect: with
// --contention, any but contentionFlags; with --hedge, any but hedgeFlags;
// with --metastable, any of metaRefused; without it, metaOnly; without
// --contention, --runs.
func simFlagsApply(fs *pflag.FlagSet, contend, hedge, meta bool) error {
	var err error
	fs.Visit(func(f *pflag.Flag) {
		if err != nil {
			return
		}
		switch {
		case contend && f.Name != "contention" && f.Name != "progress" && !slices.Contains(contentionFlags, f.Name):
			err = usagef("flag --%s: does not apply to --contention, which takes only --%s and --%s", f.Name,
				strings.Join(contentionFlags[:len(contentionFlags)-1], ", --"), contentionFlags[len(contentionFlags)-1])
		case !contend && hedge && f.Name != "hedge" && f.Name != "progress" && !slices.Contains(hedgeFlags, f.Name):
			err = usagef("flag --%s: does not apply to --hedge, which takes only --seed, --json and --plot", f.Name)
		case !contend && !hedge && meta && slices.Contains(metaRefused, f.Name):
			err = usagef("flag --%s: does not apply to --metastable, which runs its own defences, clients and trigger", f.Name)
		case !contend && !hedge && !meta && slices.Contains(metaOnly, f.Name):
			err = usagef("flag --%s: applies only with --metastable", f.Name)
		case !contend && f.Name == "runs":
			err = usagef("flag --runs: applies only with --contention")
		}
	})
	return err
}

// simDuration parses a duration flag of sim.
func simDuration(name, v string, least time.Duration) (time.Duration, error) {
	d, err := retry.ParseDuration(v)
	if err != nil {
		return 0, usagef("flag --%s = %q: must be a duration such as 90s, PT1M30S or 90000 (milliseconds)", name, v)
	}
	if d < least || d > 366*day {
		return 0, usagef("flag --%s = %q: must be in [%s, 366 days]", name, v, least)
	}
	return d, nil
}

// parseOutage reads --outage START:LENGTH.
func parseOutage(v string) (start, end time.Duration, err error) { return parseWindow("outage", v) }

// parseWindow reads a flag of the form START:LENGTH.
func parseWindow(name, v string) (start, end time.Duration, err error) {
	if v == "" {
		return 0, 0, nil
	}
	a, b, ok := strings.Cut(v, ":")
	s, err1 := parseSigned(a)
	l, err2 := parseSigned(b)
	rule := ""
	switch {
	case !ok || err1 != nil || err2 != nil:
		rule = "must be START:LENGTH, two durations such as 30s:60s"
	case s < 0:
		rule = "START must be >= 0"
	case l <= 0:
		rule = "LENGTH must be > 0"
	case s > 366*day || l > 366*day:
		rule = "START and LENGTH must be at most 366 days each"
	default:
		return s, s + l, nil
	}
	return 0, 0, usagef("flag --%s = %q: %s", name, v, rule)
}

// parseBudget reads --budget; nil means the default budget.
func parseBudget(v string) (*retry.Budget, string, error) {
	switch v {
	case "default", "":
		d := retry.Budget{}.WithDefaults()
		return nil, fmt.Sprintf("default (%g a success + %g/s over %s)", d.Ratio, d.Reserve, d.Window), nil
	case "off":
		return &retry.Budget{Off: true}, "off", nil
	}
	b := retry.Budget{}.WithDefaults()
	for kv := range strings.SplitSeq(v, ",") {
		k, val, _ := strings.Cut(kv, "=")
		var err error
		switch strings.TrimSpace(k) {
		case "ratio":
			b.Ratio, err = strconv.ParseFloat(val, 64)
			if err == nil && !(b.Ratio >= 0 && b.Ratio <= 1000) {
				err = errRange
			}
		case "reserve":
			b.Reserve, err = strconv.ParseFloat(val, 64)
			if err == nil && !(b.Reserve >= 0 && b.Reserve <= 1e9) {
				err = errRange
			}
		case "window":
			b.Window, err = retry.ParseDuration(val)
			if err == nil && b.Window <= 0 {
				err = errRange
			}
		default:
			return nil, "", usagef("flag --budget = %q: %q is not ratio, reserve or window (or give default or off)", v, k)
		}
		if err != nil {
			return nil, "", usagef("flag --budget = %q: %s = %q: ratio must be in [0, 1000], reserve in [0, 1e9], window a duration > 0", v, k, val)
		}
	}
	label := fmt.Sprintf("%g a success + %g/s over %s", b.Ratio, b.Reserve, b.Window)
	// A zero here means none; in a retry.Budget a zero field is the default.
	if b.Ratio == 0 {
		b.Ratio = -1
	}
	if b.Reserve == 0 {
		b.Reserve = -1
	}
	return &b, label, nil
}

var errRange = fmt.Errorf("out of range")

// writeText prints the figures of a load simulation.
func (r *loadResult) writeText(w io.Writer, s *loadSim, label string, p retry.Policy, budget string) {
	fmt.Fprintf(w, "%d requests at %g/s over %s from %d %s, attempts taking %s\n",
		r.Requests, s.rate, human(s.duration), s.clients, plural(s.clients, "client", "clients"), human(s.latency))
	var srv []string
	if s.srv.outageEnd > 0 {
		srv = append(srv, fmt.Sprintf("down from %s to %s", human(s.srv.outageStart), human(s.srv.outageEnd)))
	}
	if s.srv.failRate > 0 {
		srv = append(srv, fmt.Sprintf("%g%% of attempts failing", 100*s.srv.failRate))
	}
	if s.srv.capacity > 0 {
		srv = append(srv, fmt.Sprintf("capacity %g attempts/s", s.srv.capacity))
	}
	if len(srv) == 0 {
		srv = append(srv, "always up")
	}
	fmt.Fprintf(w, "server: %s\n", strings.Join(srv, ", "))
	fmt.Fprintf(w, "policy %s: %s\n", label, describe(p))
	fmt.Fprintf(w, "budget: %s; seed %d\n\n", budget, s.seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "succeeded\t%d of %d\t%.2f%%\n", r.Succeeded, r.Requests, 100*r.SuccessRate)
	fmt.Fprintf(tw, "server hits\t%d\t%.3f× the requests (load amplification)\n", r.ServerHits, r.Amplification)
	if s.srv.outageEnd > 0 {
		fmt.Fprintf(tw, "hits during the outage\t%d\t%.3f× the requests arriving in it\n", r.OutageHits, r.OutageAmp)
	}
	fmt.Fprintf(tw, "peak-to-mean\t%.2f\tpeak %g hits/s\n", r.PeakToMean, r.PeakRate)
	if r.Recovery != nil {
		fmt.Fprintf(tw, "time to recover\t%s\tafter the outage ended\n", human(time.Duration(*r.Recovery*float64(time.Second))))
	}
	fmt.Fprintf(tw, "failed calls\t%d\t%s\n", r.Requests-r.Succeeded-r.Unfinished, r.reasonList())
	if r.Unfinished > 0 {
		fmt.Fprintf(tw, "unfinished\t%d\tstill waiting at the horizon\n", r.Unfinished)
	}
	tw.Flush()
}

// The contention strategies of the study, in its order.
var contentionKinds = []string{"no-backoff", "exponential", "full", "equal", "decorrelated"}

// contentionKind maps --jitter to one of contentionKinds.
func contentionKind(v string) (string, error) {
	switch strings.ToLower(v) {
	case "none", "false", "off":
		return "exponential", nil
	case "full", "equal", "decorrelated":
		return strings.ToLower(v), nil
	case "no-backoff", "immediate":
		return "no-backoff", nil
	}
	return "", usagef("flag --jitter = %q: with --contention, must be none, full, equal, decorrelated or no-backoff", v)
}

// contentionPolicy is the study's backoff for a kind: a base of 5 ms and
// a cap of 2 s. Its exponential backoff is min(cap, base·2^n) from n = 1,
// so the policy's initial interval is 10 ms; decorrelated jitter draws from
// [base, 3·previous) and starts at the base.
func contentionPolicy(kind string) retry.Policy {
	const base, limit = 5 * time.Millisecond, 2 * time.Second
	p := retry.Policy{
		MaxAttempts:     math.MaxInt32, // until it succeeds
		InitialInterval: 2 * base,
		MaxInterval:     limit,
		Jitter:          retry.Jitter{Kind: retry.JitterNone},
	}
	switch kind {
	case "no-backoff":
		p.Backoff = retry.Immediate
	case "full":
		p.Jitter = retry.Jitter{Kind: retry.JitterFull}
	case "equal":
		p.Jitter = retry.Jitter{Kind: retry.JitterEqual}
	case "decorrelated":
		p.InitialInterval = base
		p.Jitter = retry.Jitter{Kind: retry.JitterDecorrelated}
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

// runContention runs sim --contention: runs of each of kinds, a progress
// bar of every run on stderr when progress is shown.
func runContention(e *env, clients, runs int, seed uint64, kinds []string, asJSON bool) error {
	w := e.stdout
	var rows []contentionRow
	bar := e.newProgress(len(kinds)*runs, "contention")
	defer bar.finish()
	for _, k := range kinds {
		row := contentionRow{Strategy: k, Runs: runs}
		bar.describe(k)
		for i := range runs {
			c := &contention{clients: clients, net: 10 * time.Millisecond, netSD: 2 * time.Millisecond,
				seed: seed + uint64(i), policy: contentionPolicy(k), budget: retry.Budget{Off: true}}
			res, err := c.run()
			if err != nil {
				return err
			}
			if res.Finished != clients {
				return failed(fmt.Errorf("sim: %s: %d of %d clients finished", k, res.Finished, clients))
			}
			row.Calls += float64(res.Calls)
			row.TimeMS += ms(res.Time)
			bar.add(1)
		}
		row.Calls /= float64(runs)
		row.TimeMS /= float64(runs)
		rows = append(rows, row)
	}
	bar.finish()
	if asJSON {
		return writeJSON(w, rows)
	}
	fmt.Fprintf(w, "%d clients contending for one row (optimistic concurrency), network |N(10ms, 2ms)| per message,\n", clients)
	fmt.Fprintf(w, "backoff from a 5 ms base to a 2 s cap, no retry budget; mean of %d %s from seed %d\n\n", runs, plural(runs, "run", "runs"), seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "strategy\tcalls\tcompletion\t\n")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t\n", r.Strategy, r.Calls, human(fromMS(r.TimeMS)))
	}
	return tw.Flush()
}

// simPlot checks sim's --plot before a run: its format, its directory, and
// that the file can be written, so that a run does not end in an error it
// could have said at once. It returns the format; "" without --plot.
func simPlot(plotFile string) (string, error) {
	if plotFile == "" {
		return "", nil
	}
	format, err := plotFormat(plotFile, "")
	if err != nil {
		return "", err
	}
	if err := outputDir("plot", plotFile); err != nil {
		return "", err
	}
	_, statErr := os.Stat(plotFile)
	f, err := os.OpenFile(plotFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o666)
	if err != nil {
		return "", usagef("flag --plot = %q: cannot be written: %v", plotFile, unwrapPath(err))
	}
	f.Close()
	if os.IsNotExist(statErr) {
		os.Remove(plotFile) // made only to try: the run writes it
	}
	return format, nil
}

// defaultHedgeSim is the setup of sim --hedge.
func defaultHedgeSim(seed uint64) *hedgeSim {
	return &hedgeSim{requests: 20000, workers: 200, base: 10 * time.Millisecond, slowP: 0.01, slowX: 100, pct: 95, seed: seed}
}

// runHedgeSim runs sim --hedge on s, a progress bar of each run on stderr
// when progress is shown.
func runHedgeSim(e *env, s *hedgeSim, asJSON bool, plotFile string) error {
	format, err := simPlot(plotFile)
	if err != nil {
		return err
	}
	s.progress = e.newProgress
	res, err := s.run()
	if err != nil {
		return err
	}
	if asJSON {
		if err := writeJSON(e.stdout, res); err != nil {
			return err
		}
	} else {
		res.writeText(e.stdout, s)
	}
	if plotFile != "" {
		if err := saveChart(res.latencyChart(s), 20*vg.Centimeter, 11*vg.Centimeter, format, plotFile, e.stdout); err != nil {
			return failed(err)
		}
		fmt.Fprintf(e.stderr, "wrote %s\n", plotFile)
	}
	return nil
}
