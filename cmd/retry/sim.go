package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/steadyhq/retry/cmd/retry/internal/chart"
	"github.com/steadyhq/retry/sim"
	"gonum.org/v1/plot/vg"
)

// simFlags are the flags of sim; each mode reads those it takes.
type simFlags struct {
	pf                                              policyFlags
	rate, failRate, capacity, factor                float64
	duration, latency, outage, timeout              string
	horizon, bucket, budget, clients, plot          string
	trigger, triggerAt, attemptTimeout              string
	workers, runs, layers                           int
	seed                                            uint64
	asJSON, shed, contend, hedge, budgets, metaMode bool
	fs                                              *pflag.FlagSet
}

func newSim(e *env) *cobra.Command {
	var f simFlags
	return f.command(e)
}

// command is sim with its flags in f.
func (f *simFlags) command(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Simulate an outage, failures, overload or contention on the real engine, in virtual time",
		Long: `Run the real engine (a Retrier for each of --clients clients) against a model service in
virtual time, on the simulator of package github.com/steadyhq/retry/sim; docs/simulator.md
documents it and every flag. Without a mode, requests arrive evenly at --rate for --duration,
each attempt taking --latency there and back, against a service that is down for a window
(--outage START:LENGTH: from START for LENGTH, as 30s:60s), fails a share of attempts
(--fail-rate), or serves at most --capacity attempts a second; it prints the load amplification,
the success rate and the time to recover, and --plot draws the load over time. The modes:
--metastable (each defence set against a metastable failure; --clients 1,10,100,1000 for fleets),
--budgets (the retry budgets' table), --layers N (a chain of N services), --contention (the AWS
"Exponential Backoff and Jitter" setup) and --hedge ("The Tail at Scale"). --shed puts the real
shedder in front of the service. A run holds at most 1,000,000 requests.`,
		Example: `  retry sim --rate 100 --duration 2m --outage 30s:60s
  retry sim --rate 100 --duration 2m --outage 30s:60s --budget off --plot outage.svg
  retry sim --rate 100 --duration 1m --fail-rate 0.1 --clients 10 --json
  retry sim --metastable
  retry sim --metastable --clients 1,10,100,1000 --json
  retry sim --metastable --shed
  retry sim --metastable --clients 1000,10000 --budget timeouts=0
  retry sim --budgets --clients 10,100
  retry sim --layers 3
  retry sim --contention
  retry sim --hedge --plot hedge.svg`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mode, err := f.mode()
			if err != nil {
				return err
			}
			format, err := simPlot(f.plot)
			if err != nil {
				return err
			}
			out, err := mode.run(e, f)
			if err != nil {
				return err
			}
			return out.write(e, f, format)
		},
	}
	fs := cmd.Flags()
	f.fs = fs
	f.pf.register(fs)
	fs.Float64Var(&f.rate, "rate", 100, "requests per second, all clients together (70 with --metastable)")
	fs.StringVar(&f.duration, "duration", "2m", "how long requests keep arriving (3m with --metastable)")
	fs.StringVar(&f.clients, "clients", "1", "clients the requests are spread over, each a Retrier of its own; a list (1,10,100) with --metastable and --budgets; 100 with --contention")
	fs.StringVar(&f.latency, "latency", "10ms", "the network's time for each attempt, there and back")
	fs.StringVar(&f.outage, "outage", "", "a full outage from START for LENGTH, as START:LENGTH (30s:60s)")
	fs.Float64Var(&f.failRate, "fail-rate", 0, "share of attempts that fail independently, in [0, 1]")
	fs.Float64Var(&f.capacity, "capacity", 0, "attempts per second the service serves (100 with --metastable); 0 is unlimited")
	fs.IntVar(&f.workers, "workers", 10, "the service's workers; each attempt takes workers/capacity seconds")
	fs.StringVar(&f.timeout, "timeout", "0", "bound on each call, waits included (WithMaxElapsed); 0 for none")
	fs.StringVar(&f.horizon, "horizon", "", "stop the simulation then (default --duration + 10m)")
	fs.StringVar(&f.bucket, "bucket", "1s", "the time series' resolution; it divides a second")
	fs.StringVar(&f.budget, "budget", "default", "retry budget: default, off, or tokens=N,timeouts=N,ratio=R,window=D (with --metastable, the budget of the rows that have one)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of every random draw")
	fs.BoolVar(&f.asJSON, "json", false, "print the figures as JSON")
	fs.StringVar(&f.plot, "plot", "", "draw the run to this SVG or PNG file")
	fs.BoolVar(&f.shed, "shed", false, "put the real shedder (package shed, its defaults) in front of the service")
	fs.BoolVar(&f.contend, "contention", false, `the AWS "Exponential Backoff and Jitter" contention setup`)
	fs.IntVar(&f.runs, "runs", 10, "with --contention: runs to average")
	fs.BoolVar(&f.hedge, "hedge", false, `the long-tail setup of "The Tail at Scale", without and with hedging`)
	fs.BoolVar(&f.budgets, "budgets", false, "the retry budgets' tables: a quiet client's restarts, full outages for one client and fleets (--clients), success under independent failures")
	fs.IntVar(&f.layers, "layers", 0, "a chain of `N` services, N in [1, 6], under a full outage at the bottom: the load there, naive and with the defaults")
	fs.BoolVar(&f.metaMode, "metastable", false, "a service of finite capacity that can fail metastably, under each defence")
	fs.StringVar(&f.trigger, "trigger", "capacity", "with --metastable: what the trigger does: capacity (workers divided by --factor) or latency (service time multiplied by it)")
	fs.StringVar(&f.triggerAt, "trigger-at", "30s:10s", "with --metastable: when the trigger starts and how long it lasts (L), as START:LENGTH")
	fs.Float64Var(&f.factor, "factor", 2, "with --metastable: the trigger's strength, in (1, 100]")
	fs.StringVar(&f.attemptTimeout, "attempt-timeout", "1s", "with --metastable: the client's per-attempt timeout (WithAttemptTimeout)")
	return cmd
}

// simMode is a mode of sim: the flag that asks for it ("" for the load
// simulation), the flags it takes, what the others are not for (for those
// that take the policy's flags too), and its run.
type simMode struct {
	name, takes, not string
	run              func(e *env, f *simFlags) (*simOutput, error)
}

// simModes are sim's modes, the first given wins; the load simulation
// last.
var simModes = []simMode{
	{name: "contention", takes: "clients runs seed jitter json", run: runContention},
	{name: "hedge", takes: "seed json plot", run: runHedge},
	{name: "layers", takes: "rate duration latency seed json", run: runLayers},
	{name: "budgets", takes: "clients seed json", run: runBudgets},
	{name: "metastable", takes: "rate capacity duration latency seed json plot trigger trigger-at factor workers attempt-timeout clients shed budget",
		not: "which runs its own defences and trigger", run: runMetastable},
	{name: "", takes: "rate duration clients latency outage fail-rate capacity workers timeout horizon bucket budget seed json plot shed", run: runLoad},
}

// isMode reports whether flag name asks for a mode.
func isMode(name string) bool {
	return slices.ContainsFunc(simModes, func(m simMode) bool { return m.name == name })
}

// mode returns the mode the flags ask for, refusing a flag the mode does
// not take.
func (f *simFlags) mode() (simMode, error) {
	on := map[string]bool{"contention": f.contend, "hedge": f.hedge, "layers": f.fs.Changed("layers"), "budgets": f.budgets, "metastable": f.metaMode, "": true}
	m := simModes[slices.IndexFunc(simModes, func(m simMode) bool { return on[m.name] })]
	takes := strings.Fields(m.takes)
	if m.name == "" || m.name == "metastable" {
		takes = append(takes, policyNames()...)
	}
	var err error
	f.fs.Visit(func(fl *pflag.Flag) {
		switch {
		case err != nil || fl.Name == m.name || fl.Name == "progress" || slices.Contains(takes, fl.Name):
		case fl.Value.Type() == "bool" && !on[fl.Name] && isMode(fl.Name):
			// a mode turned off: --metastable=false
		case m.name == "": // a flag of another mode, or the mode's own
			o := slices.IndexFunc(simModes, func(o simMode) bool { return slices.Contains(strings.Fields(o.takes), fl.Name) })
			err = usagef("flag --%s: applies only with --%s", fl.Name, simModes[o].name)
		case m.not != "":
			err = usagef("flag --%s: does not apply to --%s, %s", fl.Name, m.name, m.not)
		default:
			err = usagef("flag --%s: does not apply to --%s, which takes only --%s and --%s", fl.Name, m.name,
				strings.Join(takes[:len(takes)-1], ", --"), takes[len(takes)-1])
		}
	})
	return m, err
}

// policyNames are the policy's flags (policyFlags.register).
func policyNames() []string {
	var pf policyFlags
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	pf.register(fs)
	var names []string
	fs.VisitAll(func(fl *pflag.Flag) { names = append(names, fl.Name) })
	return names
}

// simDuration parses a duration flag of sim, at least least.
func simDuration(name, v string, least time.Duration) (time.Duration, error) {
	d, err := parseSigned(v)
	switch {
	case err != nil:
		return 0, usagef("flag --%s = %q: must be a duration such as 90s, PT1M30S or 90000 (milliseconds)", name, v)
	case d < 0 && least > 0:
		return 0, usagef("flag --%s = %q: must be positive (at least %s)", name, v, least)
	case d < least || d > 366*day:
		return 0, usagef("flag --%s = %q: must be in [%s, 366 days]", name, v, least)
	}
	return d, nil
}

// parseWindow reads a flag of the form START:LENGTH: from START for
// LENGTH.
func parseWindow(name, v string) (start, length time.Duration, err error) {
	a, b, ok := strings.Cut(v, ":")
	s, err1 := parseSigned(a)
	l, err2 := parseSigned(b)
	rule := ""
	switch {
	case !ok || err1 != nil || err2 != nil:
		rule = "must be START:LENGTH, two durations such as 30s:60s (from 30s for 60s)"
	case s < 0:
		rule = "START must be >= 0"
	case l <= 0:
		rule = "LENGTH must be > 0"
	case s > 366*day || l > 366*day:
		rule = "START and LENGTH must be at most 366 days each"
	default:
		return s, l, nil
	}
	return 0, 0, usagef("flag --%s = %q: %s", name, v, rule)
}

// fleetSizes reads --clients: one size, or a list when many is true;
// def when the flag is not given.
func (f *simFlags) fleetSizes(many bool, def int) ([]int, error) {
	if !f.fs.Changed("clients") {
		return []int{def}, nil
	}
	var sizes []int
	for _, s := range strings.Split(f.clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 100000 {
			return nil, usagef("flag --clients = %q: must be a number of clients in [1, 100000]%s", f.clients, map[bool]string{true: ", or a list of them (1,10,100)"}[many])
		}
		sizes = append(sizes, n)
	}
	if len(sizes) > 1 && !many {
		return nil, usagef("flag --clients = %q: must be one number of clients here; a list applies to --metastable and --budgets", f.clients)
	}
	if len(sizes) > 8 {
		return nil, usagef("flag --clients = %q: at most 8 fleet sizes", f.clients)
	}
	return sizes, nil
}

// simPlot checks --plot before a run: its format, its directory, and
// that the file can be written. It returns the format; "" without --plot.
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
	file, err := os.OpenFile(plotFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o666)
	if err != nil {
		return "", usagef("flag --plot = %q: cannot be written: %v", plotFile, unwrapPath(err))
	}
	file.Close()
	if os.IsNotExist(statErr) {
		os.Remove(plotFile) // made only to try: the run writes it
	}
	return format, nil
}

// table writes rows, the first the header: the first column aligned
// left, the others right, two spaces apart.
func table(w io.Writer, rows [][]string) error {
	width := 0
	for _, r := range rows {
		width = max(width, utf8.RuneCountInString(r[0]))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, r := range rows {
		fmt.Fprintf(tw, "%-*s\t%s\t\n", width, r[0], strings.Join(r[1:], "\t"))
	}
	return tw.Flush()
}

// reasonList renders counts by reason, most first: "budget 12, exhausted 3".
func reasonList(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.SortedFunc(maps.Keys(m), func(a, b string) int { return cmp.Or(m[b]-m[a], strings.Compare(a, b)) }) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// simOutput is what a mode prints: rows, as JSON with --json; else its
// text, each part a string printed as it is, a [][]string printed by
// table, or a list printed by list; and the chart --plot draws, nil for a
// mode that draws none.
type simOutput struct {
	rows  any
	text  []any
	chart func() (*chart.Chart, error)
}

// list is lines of cells, aligned left in columns, the last not padded.
type list [][]string

// write prints o, and draws its chart to --plot in format.
func (o *simOutput) write(e *env, f *simFlags, format string) error {
	var err error
	text := o.text
	if f.asJSON {
		err, text = writeJSON(e.stdout, o.rows), nil
	}
	for _, part := range text {
		if err != nil {
			break
		}
		switch p := part.(type) {
		case [][]string:
			err = table(e.stdout, p)
		case list:
			tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
			for _, l := range p {
				fmt.Fprintln(tw, strings.Join(l, "\t"))
			}
			err = tw.Flush()
		default:
			_, err = fmt.Fprint(e.stdout, p)
		}
	}
	if err != nil || f.plot == "" {
		return err
	}
	if f.plot == "" {
		return nil
	}
	ch, err := o.chart()
	if err != nil {
		return err
	}
	if err := chart.Save(ch, 20*vg.Centimeter, 11*vg.Centimeter, format, f.plot, e.stdout); err != nil {
		return failed(err)
	}
	fmt.Fprintf(e.stderr, "wrote %s\n", f.plot)
	return nil
}

// runAll runs the scenarios on every processor (sim.RunAll), a bar
// labelled desc showing their progress. A scenario sim refuses is a usage
// error naming the flag that set the field (simErr).
func (f *simFlags) runAll(e *env, desc string, scenarios ...sim.Scenario) ([]*sim.Report, error) {
	bar := e.newProgress(len(scenarios), desc)
	reps, err := sim.RunAll(scenarios, func() { bar.add(1) })
	bar.finish()
	return reps, f.simErr(err)
}

// simFields are the flags that set the fields of package sim's setups
// that sim, not sim's flags, checks; a fault's fields whatever its index
// (simIndex).
var (
	simFields = map[string]string{"Metastable.Rate": "rate", "Metastable.Capacity": "capacity", "Metastable.Workers": "workers",
		"Resolution": "bucket", "Fleet.Clients": "clients", "Service.Faults[].Start": "outage", "Service.Faults[].Fail": "fail-rate",
		"Load": "rate and --duration"}
	simIndex = regexp.MustCompile(`\[\d+\]`)
	// simRuleWords are the fields sim's rules name, as the flags that set them.
	simRuleWords = strings.NewReplacer("Duration", "--duration", "Capacity", "--capacity")
)

// simErr returns err as the CLI gives it: a sim.InputError of a field a
// flag sets, as a usage error naming the flag, its value (as given, for a
// duration) and the rule; any other, as a failure.
func (f *simFlags) simErr(err error) error {
	var in *sim.InputError
	if !errors.As(err, &in) {
		return failed(err)
	}
	name, ok := simFields[simIndex.ReplaceAllString(in.Field, "[]")]
	fl := f.fs.Lookup(name)
	in.Rule = simRuleWords.Replace(in.Rule)
	switch _, isDuration := in.Value.(time.Duration); {
	case !ok:
		return failed(err)
	case fl == nil:
		return usagef("flags --%s: %v: %s", name, in.Value, in.Rule)
	case isDuration:
		return usagef("flag --%s = %q: %s", name, fl.Value, in.Rule)
	}
	return usagef("flag --%s = %v: %s", name, in.Value, in.Rule)
}
