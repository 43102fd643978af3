package main

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/cmd/retry/internal/chart"
	"github.com/steadyhq/retry/shed"
	"github.com/steadyhq/retry/sim"
)

// metaSetup is sim --metastable: its setup (package sim's), the fleet
// sizes, and what its output says.
type metaSetup struct {
	sim.Metastable
	sizes        []int
	p            retry.Policy
	policy       string
	kind         string
	factor       float64
	clientsGiven bool
	budget       *retry.Budget // --budget's, nil for the default
	budgetText   string
}

// metaRow is what one defence set did with one fleet size.
type metaRow struct {
	Name           string         `json:"name"`
	Clients        int            `json:"clients"`
	Requests       int            `json:"requests"`
	Succeeded      int            `json:"succeeded"`
	ServerArrivals int            `json:"server_arrivals"` // attempts that reached the server, refused ones included
	Amplification  float64        `json:"amplification"`   // server arrivals per request
	Before         float64        `json:"goodput_before"`  // successful calls per second before, during and after the trigger
	During         float64        `json:"goodput_during"`
	After          float64        `json:"goodput_after"`
	Offered        float64        `json:"offered"`     // requests per second
	Wasted         float64        `json:"wasted_work"` // the share of the server's work for callers that had given up
	Recovered      bool           `json:"recovered"`
	RecoveryS      *float64       `json:"recovery_s"` // seconds after the trigger's end; null when never
	Reasons        map[string]int `json:"failed,omitempty"`
	Refused        map[string]int `json:"refused,omitempty"`
	rep            *sim.Report
}

// metaSetupOf builds sim --metastable from its flags; the flags it shares
// with the load simulation take their own defaults unless given.
func metaSetupOf(e *env, f *simFlags) (*metaSetup, error) {
	p, label, err := f.pf.policy(e.stdin)
	if err != nil {
		return nil, err
	}
	m := &metaSetup{Metastable: sim.NewMetastable(), p: p, policy: label, kind: f.trigger, factor: f.factor, clientsGiven: f.fs.Changed("clients")}
	if m.sizes, err = f.fleetSizes(true, 1); err != nil {
		return nil, err
	}
	if m.budget, m.budgetText, err = parseBudget(f.budget); err != nil {
		return nil, err
	}
	if m.budget != nil && m.budget.Off {
		return nil, usagef("flag --budget = off: --metastable has its rows without a budget (no defence, and each other gate alone)")
	}
	duration := "3m"
	if f.fs.Changed("rate") {
		m.Rate = f.rate
	}
	if f.fs.Changed("capacity") {
		m.Capacity = f.capacity
	}
	if f.fs.Changed("duration") {
		duration = f.duration
	}
	switch { // sim.Metastable refuses a rate, a capacity or workers out of bounds
	case f.trigger != "capacity" && f.trigger != "latency":
		return nil, usagef("flag --trigger = %q: must be capacity or latency", f.trigger)
	case !(f.factor > 1 && f.factor <= 100):
		return nil, usagef("flag --factor = %g: must be in (1, 100]", f.factor)
	case f.plot != "" && len(m.sizes) > 1:
		return nil, usagef("flag --plot: draws one fleet size: give --clients one number")
	}
	for _, d := range []struct {
		name, v string
		dst     *time.Duration
		least   time.Duration
	}{{"duration", duration, &m.Duration, time.Second}, {"latency", f.latency, &m.RoundTrip, 0}, {"attempt-timeout", f.attemptTimeout, &m.AttemptTimeout, time.Millisecond}} {
		if *d.dst, err = simDuration(d.name, d.v, d.least); err != nil {
			return nil, err
		}
	}
	start, length, err := parseWindow("trigger-at", f.triggerAt)
	if err != nil {
		return nil, err
	}
	if start < time.Second {
		return nil, usagef("flag --trigger-at = %q: START must be at least 1s, so that there is a before", f.triggerAt)
	}
	if least := start + length + 10*time.Second; m.Duration < least {
		return nil, usagef("flags --duration and --trigger-at: the run (%s) must last at least 10s past the trigger's end (%s): --duration %s or more",
			human(m.Duration), human(start+length), human(least))
	}
	m.Trigger = sim.Fault{Start: start, Length: length, Capacity: 1 / f.factor}
	if f.trigger == "latency" {
		m.Trigger = sim.Fault{Start: start, Length: length, Slow: f.factor}
	}
	m.Workers, m.Seed = f.workers, f.seed
	if f.shed {
		m.Shed = &shed.Options{}
	}
	return m, nil
}

// row is what defence set d did with n clients in rep.
func (m *metaSetup) row(d sim.Defence, n int, rep *sim.Report) *metaRow {
	t := rep.Total
	row := &metaRow{Name: d.Name, Clients: n, Requests: t.Requests, Succeeded: t.Succeeded, ServerArrivals: t.Attempts,
		Amplification: t.Amplification(), Before: t.Goodput.Before, During: t.Goodput.During, After: t.Goodput.After,
		Offered: float64(t.Requests) / m.Duration.Seconds(), Wasted: t.WastedShare(), Recovered: t.Recovered,
		Reasons: t.Failed, Refused: t.Refused, rep: rep}
	if t.Recovered {
		v := t.Recovery.Seconds()
		row.RecoveryS = &v
	}
	return row
}

// runMetastable runs sim --metastable: every defence set at every fleet
// size, a row each, and a chart for --plot.
func runMetastable(e *env, f *simFlags) (*simOutput, error) {
	m, err := metaSetupOf(e, f)
	if err != nil {
		return nil, err
	}
	sets := sim.Defences(ptrOr(m.budget))
	var scenarios []sim.Scenario
	for _, n := range m.sizes {
		for _, d := range sets {
			s, err := m.Scenario(d, n, retry.WithPolicy(m.p))
			if err != nil {
				return nil, f.simErr(err)
			}
			scenarios = append(scenarios, s)
		}
	}
	reps, err := f.runAll(e, "metastable", scenarios...)
	if err != nil {
		return nil, err
	}
	rows := make([]*metaRow, len(reps))
	for i, rep := range reps {
		rows[i] = m.row(sets[i%len(sets)], m.sizes[i/len(sets)], rep)
	}
	return &simOutput{rows: rows, text: m.text(rows, scenarios[0]), chart: func() (*chart.Chart, error) { return m.chart(rows), nil }}, nil
}

// chart draws the goodput of each row over time, the trigger shaded.
func (m *metaSetup) chart(rows []*metaRow) *chart.Chart {
	var drawn []chart.GoodputRow
	for _, r := range rows {
		drawn = append(drawn, chart.GoodputRow{Name: r.Name, Series: r.rep.Total.Series})
	}
	return chart.Goodput(m.chartNote(), drawn, m.Duration, m.Trigger)
}

// triggerText says what the trigger does, as "capacity cut to 5 of 10
// workers" or "service time ×2 (100ms → 200ms)".
func (m *metaSetup) triggerText() string {
	w := m.Workers
	if m.kind == "capacity" {
		return fmt.Sprintf("capacity cut to %d of %d workers", max(1, int(float64(w)/m.factor)), w)
	}
	return fmt.Sprintf("service time ×%s (%s → %s)", strconv.FormatFloat(m.factor, 'f', -1, 64),
		human(m.ServiceTime()), human(time.Duration(float64(m.ServiceTime())*m.factor)))
}

// chartNote is the line under the chart's title.
func (m *metaSetup) chartNote() string {
	t := m.Trigger
	return fmt.Sprintf("%s requests/s to a server of capacity %s/s (%d workers, queue %s of work), attempts time out after %s; %s from %s to %s",
		strconv.FormatFloat(m.Rate, 'f', -1, 64), strconv.FormatFloat(m.Capacity, 'f', -1, 64), m.Workers, human(m.QueueWork),
		human(m.AttemptTimeout), m.triggerText(), human(t.Start), human(t.Start+t.Length))
}

// text is the setup of sim --metastable, s its first scenario, and its
// table of rows; a column of fleet sizes when --clients is given.
func (m *metaSetup) text(rows []*metaRow, s sim.Scenario) []any {
	t := m.Trigger
	head := fmt.Sprintf("%s requests/s (Poisson, open loop) for %s; server: %d workers, %s an attempt (capacity %s/s),\n"+
		"a FIFO queue of %d (%s of work), more refused at once with 503; attempts time out after %s\n"+
		"and the server still serves them; round trip %s\n",
		strconv.FormatFloat(m.Rate, 'f', -1, 64), human(m.Duration), m.Workers, human(m.ServiceTime()), strconv.FormatFloat(m.Capacity, 'f', -1, 64),
		s.Service.QueueLength, human(m.QueueWork), human(m.AttemptTimeout), human(m.RoundTrip))
	if m.Shed != nil {
		head += "the shedder (package shed, its defaults) in front of the workers\n"
	}
	head += fmt.Sprintf("trigger: %s from %s to %s (L = %s)\n", m.triggerText(), human(t.Start), human(t.Start+t.Length), human(t.Length))
	if m.budget != nil {
		head += fmt.Sprintf("budget: %s\n", m.budgetText)
	}
	head += fmt.Sprintf("policy %s: %s; seed %d\n\n", m.policy, describe(m.p), m.Seed)
	lines := [][]string{{"defences", "offered", "before", "during", "after", "amplification", "wasted work", "recovered after"}}
	for _, r := range rows {
		rec := "never"
		if r.RecoveryS != nil {
			rec = human(time.Duration(*r.RecoveryS * float64(time.Second)))
		}
		lines = append(lines, []string{r.Name, fmt.Sprintf("%.1f", r.Offered), fmt.Sprintf("%.1f", r.Before), fmt.Sprintf("%.1f", r.During),
			fmt.Sprintf("%.1f", r.After), fmt.Sprintf("%.2f×", r.Amplification), fmt.Sprintf("%.0f%%", 100*r.Wasted), rec})
		if m.clientsGiven {
			lines[len(lines)-1] = slices.Insert(lines[len(lines)-1], 1, strconv.Itoa(r.Clients))
		}
	}
	if m.clientsGiven {
		lines[0] = slices.Insert(lines[0], 1, "clients")
	}
	return []any{head, lines, "\noffered: requests per second; before, during, after: goodput, successful calls per second, before,\n" +
		"during and after the trigger; amplification: attempts reaching the server per request; wasted\n" +
		"work: the server's work for attempts whose caller had given up; recovered after: from then on,\n" +
		"every 5 s window to the end of the run has successful calls of at least 90% of the requests\n" +
		fmt.Sprintf("arriving in it (never: not within the %s after the trigger)\n", human(m.Duration-t.Start-t.Length))}
}

// ptrOr returns *b, the zero Budget (the default) for nil.
func ptrOr(b *retry.Budget) retry.Budget {
	if b == nil {
		return retry.Budget{}
	}
	return *b
}
