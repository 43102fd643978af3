package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/cmd/retry/internal/chart"
	"github.com/steadyhq/retry/shed"
	"github.com/steadyhq/retry/sim"
	"gonum.org/v1/plot/vg"
)

// loadSetup is sim's load simulation: a scenario, and what its output
// says of it.
type loadSetup struct {
	s             sim.Scenario
	policy        string
	p             retry.Policy
	budget        string // its label
	budgetFlag    string // --budget
	outage        bool
	latency       time.Duration
	failRate, cap float64
	opts          []retry.Option // each client's
}

// loadResult is what sim prints of a load simulation, as JSON.
type loadResult struct {
	Requests      int            `json:"requests"`
	Succeeded     int            `json:"succeeded"`
	Unfinished    int            `json:"unfinished"`
	ServerHits    int            `json:"server_hits"`
	Amplification float64        `json:"load_amplification"`
	SuccessRate   float64        `json:"success_rate"`
	PeakToMean    float64        `json:"peak_to_mean"`
	PeakRate      float64        `json:"peak_hits_per_second"`
	OutageHits    int            `json:"outage_hits,omitempty"`
	OutageAmp     float64        `json:"outage_amplification,omitempty"`
	Recovery      *float64       `json:"time_to_recover_s,omitempty"`
	Reasons       map[string]int `json:"reasons,omitempty"`
	Refused       map[string]int `json:"refused,omitempty"`
	VirtualEnd    float64        `json:"virtual_seconds"`
	rep           *sim.Report
}

// loadSetupOf builds the load simulation from sim's flags.
func loadSetupOf(e *env, f *simFlags) (*loadSetup, error) {
	p, label, err := f.pf.policy(e.stdin)
	if err != nil {
		return nil, err
	}
	sizes, err := f.fleetSizes(false, 1)
	if err != nil {
		return nil, err
	}
	l := &loadSetup{policy: label, p: p, failRate: f.failRate, cap: f.capacity}
	lat := &l.latency
	switch {
	case !(f.rate > 0 && f.rate <= 1e6):
		return nil, usagef("flag --rate = %g: must be in (0, 1e6]", f.rate)
	case !(f.failRate >= 0 && f.failRate <= 1):
		return nil, usagef("flag --fail-rate = %g: must be in [0, 1]", f.failRate)
	case !(f.capacity >= 0 && f.capacity <= 1e9):
		return nil, usagef("flag --capacity = %g: must be in [0, 1e9] (0 is unlimited)", f.capacity)
	case f.workers < 1 || f.workers > 10000:
		return nil, usagef("flag --workers = %d: must be in [1, 10000]", f.workers)
	}
	s := &l.s
	var timeout time.Duration
	for _, d := range []struct {
		name, v string
		dst     *time.Duration
		least   time.Duration
	}{{"duration", f.duration, &s.Duration, time.Millisecond}, {"latency", f.latency, lat, 0}, {"timeout", f.timeout, &timeout, 0}, {"bucket", f.bucket, &s.Resolution, time.Millisecond}} {
		if *d.dst, err = simDuration(d.name, d.v, d.least); err != nil {
			return nil, err
		}
	}
	if time.Second%s.Resolution != 0 {
		return nil, usagef("flag --bucket = %q: must divide a second (1s, 100ms, 10ms, ...)", f.bucket)
	}
	horizon := s.Duration + 10*time.Minute
	if f.horizon != "" {
		if horizon, err = simDuration("horizon", f.horizon, s.Duration); err != nil {
			return nil, err
		}
	}
	if n := horizon / s.Resolution; n > 1_000_000 {
		return nil, usagef("flag --horizon = %s: at most 1000000 buckets of %s", human(horizon), human(s.Resolution))
	}
	if n := f.rate * s.Duration.Seconds(); n > 1_000_000 {
		return nil, usagef("flags --rate and --duration: %s/s over %s is %.0f requests: must be at most 1000000 (lower --rate or --duration)",
			strconv.FormatFloat(f.rate, 'f', -1, 64), human(s.Duration), n)
	}
	s.Drain, s.Seed = horizon-s.Duration, f.seed
	s.Load = sim.Load{Rate: f.rate, Steady: true}
	s.Service.Network = sim.Fixed(*lat / 2)
	if f.outage != "" {
		start, length, err := parseWindow("outage", f.outage)
		if err != nil {
			return nil, err
		}
		if start >= s.Duration {
			return nil, usagef("flag --outage = %q: must start before the requests stop (--duration %s)", f.outage, human(s.Duration))
		}
		l.outage = true
		s.Service.Faults = append(s.Service.Faults, sim.Fault{Start: start, Length: length, Fail: 1})
	}
	if f.failRate > 0 {
		s.Service.Faults = append(s.Service.Faults, sim.Fault{Fail: f.failRate})
	}
	if f.capacity > 0 {
		s.Service.Workers, s.Service.QueueLength = f.workers, -1
		s.Service.ServiceTime = sim.Fixed(time.Duration(float64(f.workers) / f.capacity * float64(time.Second)))
	}
	if f.shed {
		s.Service.Shed = &shed.Options{}
	}
	b, budget, err := parseBudget(f.budget)
	if err != nil {
		return nil, err
	}
	l.budget, l.budgetFlag = budget, f.budget
	l.opts = []retry.Option{retry.WithPolicy(p)}
	if b != nil {
		l.opts = append(l.opts, retry.WithBudget(*b))
	}
	if timeout > 0 {
		l.opts = append(l.opts, retry.WithMaxElapsed(timeout))
	}
	s.Fleet = sim.Fleet{Clients: sizes[0], Options: func(sim.Client) []retry.Option { return l.opts }}
	return l, nil
}

// run runs the setup, with extra options for every client.
func (l *loadSetup) run(extra ...retry.Option) (*loadResult, error) {
	s := l.s
	opts := append(append([]retry.Option(nil), l.opts...), extra...)
	s.Fleet.Options = func(sim.Client) []retry.Option { return opts }
	rep, err := sim.Run(s)
	if err != nil {
		return nil, failed(err)
	}
	t := rep.Total
	r := &loadResult{Requests: t.Requests, Succeeded: t.Succeeded, Unfinished: t.Unfinished, ServerHits: t.Attempts,
		Amplification: t.Amplification(), SuccessRate: t.SuccessRate(), PeakRate: rep.PeakRate(), PeakToMean: rep.PeakToMean(),
		Reasons: t.Failed, Refused: t.Refused, VirtualEnd: rep.End.Seconds(), rep: rep}
	if l.outage {
		r.OutageHits, r.OutageAmp = t.FaultAttempts, float64(t.FaultAttempts)/float64(max(t.FaultRequests, 1))
		if t.Recovered {
			v := t.Recovery.Seconds()
			r.Recovery = &v
		}
	}
	return r, nil
}

// runLoad runs sim's load simulation and reports it: text or JSON, and a
// chart to --plot.
func runLoad(e *env, f *simFlags) error {
	l, err := loadSetupOf(e, f)
	if err != nil {
		return err
	}
	format, err := simPlot(f.plot)
	if err != nil {
		return err
	}
	res, err := l.run()
	if err != nil {
		return err
	}
	if f.asJSON {
		err = writeJSON(e.stdout, res)
	} else {
		res.writeText(e.stdout, l)
	}
	if err != nil || f.plot == "" {
		return err
	}
	ch, err := res.chart(l)
	if err != nil {
		return err
	}
	if err := chart.Save(ch, 20*vg.Centimeter, 11*vg.Centimeter, format, f.plot, e.stdout); err != nil {
		return failed(err)
	}
	fmt.Fprintf(e.stderr, "wrote %s\n", f.plot)
	return nil
}

// chart draws the load over time. With a retry budget, a second panel
// beside it draws the same run with --budget off, on the same axes; each
// panel's heading gives its hits per request, during the outage when
// there is one.
func (r *loadResult) chart(l *loadSetup) (*chart.Chart, error) {
	runs, budgets := []*loadResult{r}, []string{l.budgetFlag}
	if l.budgetFlag != "off" {
		off, err := l.run(retry.WithBudget(retry.Budget{Off: true}))
		if err != nil {
			return nil, err
		}
		runs, budgets = append(runs, off), append(budgets, "off")
	}
	s := &l.s
	setup := append([]string{strconv.FormatFloat(s.Load.Rate, 'f', -1, 64) + " requests/s for " + chart.DurationLabel(ms(s.Duration))}, l.service()...)
	if n := s.Fleet.Clients; n > 1 {
		setup = slices.Insert(setup, 1, fmt.Sprintf("%d clients", n))
	}
	setup = append(setup, "policy "+l.policy)
	if len(runs) == 1 {
		setup = append(setup, "budget off")
	}
	var panels []chart.LoadPanel
	for i, run := range runs {
		panels = append(panels, chart.LoadPanel{Report: run.rep})
		if len(runs) > 1 {
			amp, where := run.Amplification, ""
			if l.outage {
				amp, where = run.OutageAmp, " in the outage"
			}
			panels[i].Heading = fmt.Sprintf("budget %s: %.2f hits per request%s", budgets[i], amp, where)
		}
	}
	var outage sim.Fault
	if l.outage {
		outage = s.Service.Faults[0]
	}
	return chart.Load(strings.Join(setup, ", "), panels, outage), nil
}

// service describes the service of a load simulation.
func (l *loadSetup) service() []string {
	var srv []string
	if l.outage {
		o := l.s.Service.Faults[0]
		srv = append(srv, fmt.Sprintf("down from %s to %s", human(o.Start), human(o.Start+o.Length)))
	}
	if l.failRate > 0 {
		srv = append(srv, fmt.Sprintf("%g%% of attempts failing", 100*l.failRate))
	}
	if l.cap > 0 {
		srv = append(srv, fmt.Sprintf("capacity %g attempts/s", l.cap))
	}
	if l.s.Service.Shed != nil {
		srv = append(srv, "shed in front")
	}
	return srv
}

// writeText prints the figures of a load simulation.
func (r *loadResult) writeText(w io.Writer, l *loadSetup) {
	s := &l.s
	n := s.Fleet.Clients
	fmt.Fprintf(w, "%d requests at %g/s over %s from %d %s, attempts taking %s\n",
		r.Requests, s.Load.Rate, human(s.Duration), n, plural(n, "client", "clients"), human(l.latency))
	srv := l.service()
	if len(srv) == 0 {
		srv = append(srv, "always up")
	}
	fmt.Fprintf(w, "server: %s\n", strings.Join(srv, ", "))
	fmt.Fprintf(w, "policy %s: %s\n", l.policy, describe(l.p))
	fmt.Fprintf(w, "budget: %s; seed %d\n\n", l.budget, s.Seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "succeeded\t%d of %d\t%.2f%%\n", r.Succeeded, r.Requests, 100*r.SuccessRate)
	fmt.Fprintf(tw, "server hits\t%d\t%.3f× the requests (load amplification)\n", r.ServerHits, r.Amplification)
	if l.outage {
		fmt.Fprintf(tw, "hits during the outage\t%d\t%.3f× the requests arriving in it\n", r.OutageHits, r.OutageAmp)
	}
	fmt.Fprintf(tw, "peak-to-mean\t%.2f\tpeak %g hits/s\n", r.PeakToMean, r.PeakRate)
	if l.outage {
		rec := "never"
		if r.Recovery != nil {
			rec = human(time.Duration(*r.Recovery * float64(time.Second)))
		}
		fmt.Fprintf(tw, "time to recover\t%s\tafter the outage, by the rule of recovery (docs/simulator.md)\n", rec)
	}
	fmt.Fprintf(tw, "failed calls\t%d\t%s\n", r.Requests-r.Succeeded-r.Unfinished, reasonList(r.Reasons))
	if len(r.Refused) > 0 {
		fmt.Fprintf(tw, "refused attempts\t\t%s\n", reasonList(r.Refused))
	}
	if r.Unfinished > 0 {
		fmt.Fprintf(tw, "unfinished\t%d\tstill waiting at the horizon\n", r.Unfinished)
	}
	tw.Flush()
}

// parseBudget reads --budget; nil means the default budget.
func parseBudget(v string) (*retry.Budget, string, error) {
	switch v {
	case "default", "":
		return nil, "default (" + budgetLabel(retry.Budget{}.WithDefaults()) + ")", nil
	case "off":
		return &retry.Budget{Off: true}, "off", nil
	}
	b := retry.Budget{}.WithDefaults()
	for kv := range strings.SplitSeq(v, ",") {
		k, val, _ := strings.Cut(kv, "=")
		var err error
		switch strings.TrimSpace(k) {
		case "tokens":
			b.Tokens, err = strconv.ParseFloat(val, 64)
			if err == nil && !(b.Tokens >= 0 && b.Tokens <= 1e9) {
				err = errRange
			}
		case "timeouts":
			b.TimeoutTokens, err = strconv.ParseFloat(val, 64)
			if err == nil && !(b.TimeoutTokens >= 0 && b.TimeoutTokens <= 1e9) {
				err = errRange
			}
		case "ratio":
			b.Ratio, err = strconv.ParseFloat(val, 64)
			if err == nil && !(b.Ratio >= 0 && b.Ratio <= 1000) {
				err = errRange
			}
		case "window":
			b.Window, err = retry.ParseDuration(val)
			if err == nil && b.Window <= 0 {
				err = errRange
			}
		default:
			return nil, "", usagef("flag --budget = %q: %q is not tokens, timeouts, ratio or window (or give default or off)", v, k)
		}
		if err != nil {
			return nil, "", usagef("flag --budget = %q: %s = %q: tokens and timeouts must be in [0, 1e9], ratio in [0, 1000], window a duration > 0", v, k, val)
		}
	}
	label := budgetLabel(b)
	// A zero here means none; in a retry.Budget a zero field is the
	// default, and -1 is none.
	if b.Tokens == 0 {
		b.Tokens = -1
	}
	if b.TimeoutTokens == 0 {
		b.TimeoutTokens = -1
	}
	if b.Ratio == 0 {
		b.Ratio = -1
	}
	return &b, label, nil
}

// budgetLabel describes a budget's rule: "12 tokens (1 for timeouts), 0.2
// a success over 10s".
func budgetLabel(b retry.Budget) string {
	return fmt.Sprintf("%g tokens (%g for timeouts), %g a success over %s", b.Tokens, b.TimeoutTokens, b.Ratio, human(b.Window))
}

var errRange = fmt.Errorf("out of range")
