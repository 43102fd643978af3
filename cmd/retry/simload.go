package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/cmd/retry/internal/chart"
	"github.com/steadyhq/retry/shed"
	"github.com/steadyhq/retry/sim"
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
	horizon := s.Duration + 10*time.Minute
	if f.horizon != "" {
		if horizon, err = simDuration("horizon", f.horizon, s.Duration); err != nil {
			return nil, err
		}
	}
	if n := horizon / s.Resolution; n > 1_000_000 {
		return nil, usagef("flag --horizon = %s: at most 1000000 buckets of %s", human(horizon), human(s.Resolution))
	}
	s.Drain, s.Seed = horizon-s.Duration, f.seed
	s.Load = sim.Load{Rate: f.rate, Steady: true}
	s.Service.Network = sim.Fixed(*lat / 2)
	if f.outage != "" {
		start, length, err := parseWindow("outage", f.outage)
		if err != nil {
			return nil, err
		}
		l.outage = true
		s.Service.Faults = append(s.Service.Faults, sim.Fault{Start: start, Length: length, Fail: 1})
	}
	if f.failRate != 0 { // sim refuses a share out of [0, 1]
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

// scenario is the setup's scenario, with extra options for every client.
func (l *loadSetup) scenario(extra ...retry.Option) sim.Scenario {
	s := l.s
	opts := append(append([]retry.Option(nil), l.opts...), extra...)
	s.Fleet.Options = func(sim.Client) []retry.Option { return opts }
	return s
}

// result is what sim prints of rep, a run of the setup.
func (l *loadSetup) result(rep *sim.Report) *loadResult {
	t := rep.Total
	r := &loadResult{Requests: t.Requests, Succeeded: t.Succeeded, Unfinished: t.Unfinished, ServerHits: t.Attempts,
		Amplification: t.Amplification(), SuccessRate: t.SuccessRate(), PeakRate: rep.PeakRate(), PeakToMean: rep.PeakToMean(),
		Reasons: t.Failed, Refused: t.Refused, VirtualEnd: rep.End.Seconds(), rep: rep}
	if l.outage {
		r.OutageHits, r.OutageAmp = t.FaultAttempts, t.FaultAmplification()
		if t.Recovered {
			v := t.Recovery.Seconds()
			r.Recovery = &v
		}
	}
	return r
}

// runLoad runs sim's load simulation: its figures, and a chart for
// --plot of the run beside the same run with --budget off, when it has a
// budget.
func runLoad(e *env, f *simFlags) (*simOutput, error) {
	l, err := loadSetupOf(e, f)
	if err != nil {
		return nil, err
	}
	scenarios := []sim.Scenario{l.scenario()}
	if f.plot != "" && l.budgetFlag != "off" {
		scenarios = append(scenarios, l.scenario(retry.WithBudget(retry.Budget{Off: true})))
	}
	reps, err := f.runAll(e, "load", scenarios...)
	if err != nil {
		return nil, err
	}
	var runs []*loadResult
	for _, rep := range reps {
		runs = append(runs, l.result(rep))
	}
	return &simOutput{rows: runs[0], text: l.text(runs[0]), chart: func() (*chart.Chart, error) { return l.chart(runs), nil }}, nil
}

// chart draws the load over time of runs, the run and, with a retry
// budget, the same run with --budget off beside it, on the same axes;
// each panel's heading gives its hits per request, during the outage when
// there is one.
func (l *loadSetup) chart(runs []*loadResult) *chart.Chart {
	budgets := []string{l.budgetFlag, "off"}
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
	return chart.Load(strings.Join(setup, ", "), panels, outage)
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

// text is what sim prints of r, a run of the setup.
func (l *loadSetup) text(r *loadResult) []any {
	s := &l.s
	n := s.Fleet.Clients
	srv := l.service()
	if len(srv) == 0 {
		srv = append(srv, "always up")
	}
	head := fmt.Sprintf("%d requests at %g/s over %s from %d %s, attempts taking %s\nserver: %s\npolicy %s: %s\nbudget: %s; seed %d\n\n",
		r.Requests, s.Load.Rate, human(s.Duration), n, plural(n, "client", "clients"), human(l.latency),
		strings.Join(srv, ", "), l.policy, describe(l.p), l.budget, s.Seed)
	rows := list{{"succeeded", fmt.Sprintf("%d of %d", r.Succeeded, r.Requests), fmt.Sprintf("%.2f%%", 100*r.SuccessRate)},
		{"server hits", strconv.Itoa(r.ServerHits), fmt.Sprintf("%.3f× the requests (load amplification)", r.Amplification)}}
	if l.outage {
		rows = append(rows, []string{"hits during the outage", strconv.Itoa(r.OutageHits), fmt.Sprintf("%.3f× the requests arriving in it", r.OutageAmp)})
	}
	rows = append(rows, []string{"peak-to-mean", fmt.Sprintf("%.2f", r.PeakToMean), fmt.Sprintf("peak %g hits/s", r.PeakRate)})
	if l.outage {
		rec := "never"
		if r.Recovery != nil {
			rec = human(time.Duration(*r.Recovery * float64(time.Second)))
		}
		rows = append(rows, []string{"time to recover", rec, "after the outage, by the rule of recovery (docs/simulator.md)"})
	}
	rows = append(rows, []string{"failed calls", strconv.Itoa(r.Requests - r.Succeeded - r.Unfinished), reasonList(r.Reasons)})
	if len(r.Refused) > 0 {
		rows = append(rows, []string{"refused attempts", "", reasonList(r.Refused)})
	}
	if r.Unfinished > 0 {
		rows = append(rows, []string{"unfinished", strconv.Itoa(r.Unfinished), "still waiting at the horizon"})
	}
	return []any{head, rows}
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
	counts := map[string]*float64{"tokens": &b.Tokens, "timeouts": &b.TimeoutTokens, "ratio": &b.Ratio}
	for kv := range strings.SplitSeq(v, ",") {
		k, val, _ := strings.Cut(kv, "=")
		key := strings.TrimSpace(k)
		n, err := counts[key], error(nil)
		switch {
		case n != nil:
			*n, err = strconv.ParseFloat(val, 64)
			if most := map[bool]float64{true: 1000, false: 1e9}[key == "ratio"]; err == nil && !(*n >= 0 && *n <= most) {
				err = errRange
			}
		case key == "window":
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
	for _, n := range counts {
		if *n == 0 {
			*n = -1
		}
	}
	return &b, label, nil
}

// budgetLabel describes a budget's rule: "12 tokens (1 for timeouts), 0.2
// a success over 10s".
func budgetLabel(b retry.Budget) string {
	return fmt.Sprintf("%g tokens (%g for timeouts), %g a success over %s", b.Tokens, b.TimeoutTokens, b.Ratio, human(b.Window))
}

var errRange = fmt.Errorf("out of range")
