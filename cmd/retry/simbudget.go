package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/sim"
)

// sim --budgets: the retry budgets' tables.

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
	{"default: 12 tokens, 0.2 a success", func(sim.Client) ([]retry.Option, func(context.Context, int, error)) { return nil, nil }},
	{"old rule: 15% of requests + 2/s over 10 s", func(c sim.Client) ([]retry.Option, func(context.Context, int, error)) {
		b := sim.NewWindowBudget(c.Clock, 0.15, 2)
		return []retry.Option{retry.WithBudget(retry.Budget{Shared: b})}, b.Observe
	}},
	{"Finagle: 20% of requests + 10/s, TTL 10 s", func(c sim.Client) ([]retry.Option, func(context.Context, int, error)) {
		b := sim.NewWindowBudget(c.Clock, 0.2, 10)
		return []retry.Option{retry.WithBudget(retry.Budget{Shared: b})}, b.Observe
	}},
	{"AWS quota: 500, retry 14 (429: 5), success +1", func(sim.Client) ([]retry.Option, func(context.Context, int, error)) {
		q := sim.NewTokenQuota()
		return []retry.Option{retry.WithBudget(retry.Budget{Shared: q})}, q.Observe
	}},
}

// The cases of the tables: the rates of one client's outage and of the
// independent failures, the shares failing, and the quiet client's
// restarts (calls at once, and how long the dependency is down).
var (
	budgetRates    = []float64{10, 100, 1000}
	budgetFails    = []float64{0.1, 0.2, 0.3}
	budgetRestarts = []struct {
		calls int
		down  time.Duration
	}{{10, 400 * time.Millisecond}, {5, time.Second}}
)

// budgetCell is one rule in one case: a quiet client's restart (the calls
// that failed), a full outage (its load: attempts in it per request
// arriving in it) for one client at Rate or a fleet of Clients at 1
// request a second each, or independent failures of a share Fail, fast or
// timing out (the calls that succeeded).
type budgetCell struct {
	Rule          string  `json:"rule"`
	Case          string  `json:"case"` // restart, outage, fast or timeouts
	Clients       int     `json:"clients"`
	Rate          float64 `json:"rate"` // requests a second, all clients together
	Fail          float64 `json:"fail,omitempty"`
	Down          float64 `json:"down_s,omitempty"` // a restart's, in seconds
	Burst         int     `json:"burst,omitempty"`  // a restart's calls at once
	Calls         int     `json:"calls"`
	Failed        int     `json:"failed"`
	Amplification float64 `json:"outage_amplification,omitempty"`
	SuccessRate   float64 `json:"success_rate"`
}

// run runs c's case under rule: attempts of 10 ms, the default policy,
// and an attempt timeout of 1 s.
func (c *budgetCell) run(rule budgetRule, seed uint64) error {
	s := sim.Scenario{Seed: seed, Drain: time.Minute, Load: sim.Load{Rate: c.Rate, Steady: true},
		Service: sim.Service{Network: sim.Fixed(5 * time.Millisecond)}}
	switch c.Case {
	case "restart":
		// A call every 10 s for 55 s, then c.Calls at once as the
		// dependency goes down for c.Down.
		at := 55 * time.Second
		s.Duration = time.Minute
		s.Load.Bursts = []sim.Burst{{At: at, Calls: c.Burst}}
		s.Service.Faults = []sim.Fault{{Start: at, Length: time.Duration(c.Down * float64(time.Second)), Fail: 1}}
	case "outage":
		s.Duration = 80 * time.Second
		s.Service.Faults = []sim.Fault{{Start: 20 * time.Second, Length: time.Minute, Fail: 1}}
	default:
		s.Duration = time.Minute
		s.Service.Faults = []sim.Fault{{Fail: c.Fail, Hang: c.Case == "timeouts"}}
	}
	observe := make([]func(context.Context, int, error), c.Clients)
	s.Fleet = sim.Fleet{Clients: c.Clients, Options: func(cl sim.Client) []retry.Option {
		opts, o := rule.fresh(cl)
		observe[cl.Index] = o
		return append(opts, retry.WithAttemptTimeout(time.Second))
	}, Observe: func(ctx context.Context, n int, err error) {
		if call, _ := sim.CallOf(ctx); observe[call.Client] != nil {
			observe[call.Client](ctx, n, err)
		}
	}}
	rep, err := sim.Run(s)
	if err != nil {
		return failed(err)
	}
	t := rep.Total
	c.Calls, c.Failed = t.Requests, t.Requests-t.Succeeded
	c.SuccessRate = float64(t.Succeeded) / float64(t.Requests)
	if c.Case == "outage" {
		c.Amplification = float64(t.FaultAttempts) / float64(t.FaultRequests)
	}
	return nil
}

// budgetCases returns the cases of every rule, in the order of the
// tables: the restarts, one client's outages, the fleets' outages (sizes
// of 1 request a second each), then the independent failures, fast and
// timing out, by share and rate.
func budgetCases(sizes []int) []budgetCell {
	var cells []budgetCell
	for _, rule := range budgetRules {
		for _, r := range budgetRestarts {
			cells = append(cells, budgetCell{Rule: rule.Name, Case: "restart", Clients: 1, Rate: 0.1, Down: r.down.Seconds(), Burst: r.calls})
		}
		for _, rate := range budgetRates {
			cells = append(cells, budgetCell{Rule: rule.Name, Case: "outage", Clients: 1, Rate: rate})
		}
		for _, n := range sizes {
			cells = append(cells, budgetCell{Rule: rule.Name, Case: "outage", Clients: n, Rate: float64(n)})
		}
		for _, kind := range []string{"fast", "timeouts"} {
			for _, fail := range budgetFails {
				for _, rate := range budgetRates {
					cells = append(cells, budgetCell{Rule: rule.Name, Case: kind, Clients: 1, Rate: rate, Fail: fail})
				}
			}
		}
	}
	return cells
}

// runBudgets prints the budget tables: for each rule, a quiet client's
// restarts and full outages, one client's and fleets'; then the success
// rates under independent failures.
func runBudgets(e *env, f *simFlags) error {
	sizes := []int{10, 100, 1000}
	if f.fs.Changed("clients") {
		var err error
		if sizes, err = f.fleetSizes(true, 1); err != nil {
			return err
		}
	}
	cells := budgetCases(sizes)
	per := len(cells) / len(budgetRules)
	err := parallel(len(cells), e.newProgress(len(cells), "budgets"), func(i int) error {
		return cells[i].run(budgetRules[i/per], f.seed)
	})
	if err != nil || f.asJSON {
		return cmpErr(err, func() error { return writeJSON(e.stdout, cells) })
	}
	fmt.Fprintf(e.stdout, "Retry budgets on the real engine, in virtual time: each client a Retrier of its own, the default policy\n"+
		"(3 attempts, backoff from 1s, ×2, jitter ±50%%), attempts of 10ms timing out after 1s; seed %d.\n\n", f.seed)
	fmt.Fprintf(e.stdout, "Outages. failed: the calls that failed of a client that calls every 10s, then makes 10 calls at once\n"+
		"as its dependency restarts for 400ms, or 5 for 1s; load: server hits per request during a full outage\n"+
		"of 1m after 20s of health, of one client at 10, 100 and 1,000 requests/s, and of fleets of clients at\n"+
		"1 request/s each.\n\n")
	head := []string{"rule"}
	for i, r := range budgetRestarts {
		head = append(head, fmt.Sprintf("%s%d in %s", map[bool]string{true: "failed: "}[i == 0], r.calls, human(r.down)))
	}
	for i, rate := range budgetRates {
		head = append(head, fmt.Sprintf("%s%g/s", map[bool]string{true: "load 1 client "}[i == 0], rate))
	}
	for _, n := range sizes {
		head = append(head, fmt.Sprintf("%d clients", n))
	}
	outages := [][]string{head}
	nOut := len(budgetRestarts) + len(budgetRates) + len(sizes)
	for i := 0; i < len(cells); i += per {
		line := []string{cells[i].Rule}
		for _, c := range cells[i : i+nOut] {
			if c.Case == "restart" {
				line = append(line, strconv.Itoa(c.Failed))
			} else {
				line = append(line, fmt.Sprintf("%.3f×", c.Amplification))
			}
		}
		outages = append(outages, line)
	}
	if err := table(e.stdout, outages); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "\nIndependent failures: calls that succeed over 1m, one client, with a share of attempts failing\n"+
		"at once with 503 (fast) or never answered (timeouts).\n\n")
	head = []string{"rule", "failures"}
	for _, fail := range budgetFails {
		for i, rate := range budgetRates {
			head = append(head, fmt.Sprintf("%s%g/s", map[bool]string{true: strconv.FormatFloat(100*fail, 'f', -1, 64) + "% at "}[i == 0], rate))
		}
	}
	fails := [][]string{head}
	for i := 0; i < len(cells); i += per {
		rest := cells[i+nOut : i+per]
		for k := 0; k < len(rest); k += len(rest) / 2 {
			line := []string{cells[i].Rule, rest[k].Case}
			for _, c := range rest[k : k+len(rest)/2] {
				line = append(line, fmt.Sprintf("%.2f%%", 100*c.SuccessRate))
			}
			fails = append(fails, line)
		}
	}
	return table(e.stdout, fails)
}

// cmpErr returns err, or else what then returns.
func cmpErr(err error, then func() error) error {
	if err != nil {
		return err
	}
	return then()
}
