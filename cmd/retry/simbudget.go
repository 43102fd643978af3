package main

import (
	"fmt"
	"strconv"

	"github.com/steadyhq/retry/sim"
)

// sim --budgets: the retry budgets' tables.

// The rules and cases of the tables (package sim's), a variable so that
// a test can cut the cases.
var (
	budgetRules = sim.BudgetRules()
	budgetTable = sim.NewBudgetTable()
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

// runBudgets prints the budget tables: for each rule, a quiet client's
// restarts and full outages, one client's and fleets'; then the success
// rates under independent failures.
func runBudgets(e *env, f *simFlags) (*simOutput, error) {
	bt := budgetTable
	if f.fs.Changed("clients") {
		var err error
		if bt.Fleets, err = f.fleetSizes(true, 1); err != nil {
			return nil, err
		}
	}
	cases := bt.Cases()
	per := len(cases)
	var cells []budgetCell
	var scenarios []sim.Scenario
	for _, rule := range budgetRules {
		for _, c := range cases {
			cells = append(cells, budgetCell{Rule: rule.Name, Case: c.Kind, Clients: c.Clients, Rate: c.Rate, Fail: c.Fail, Down: c.Down.Seconds(), Burst: c.Burst})
			scenarios = append(scenarios, c.Scenario(rule, f.seed))
		}
	}
	reps, err := f.runAll(e, "budgets", scenarios...)
	if err != nil {
		return nil, err
	}
	for i, rep := range reps {
		c, t := &cells[i], rep.Total
		c.Calls, c.Failed, c.SuccessRate = t.Requests, t.Requests-t.Succeeded, t.SuccessRate()
		if c.Case == "outage" {
			c.Amplification = t.FaultAmplification()
		}
	}
	head := []string{"rule"}
	for i, r := range bt.Restarts {
		head = append(head, fmt.Sprintf("%s%d in %s", map[bool]string{true: "failed: "}[i == 0], r.Calls, human(r.Down)))
	}
	for i, rate := range bt.Rates {
		head = append(head, fmt.Sprintf("%s%g/s", map[bool]string{true: "load 1 client "}[i == 0], rate))
	}
	for _, n := range bt.Fleets {
		head = append(head, fmt.Sprintf("%d clients", n))
	}
	outages := [][]string{head}
	nOut := len(bt.Restarts) + len(bt.Rates) + len(bt.Fleets)
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
	head = []string{"rule", "failures"}
	for _, fail := range bt.Fails {
		for i, rate := range bt.Rates {
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
	return &simOutput{rows: cells, text: []any{fmt.Sprintf("Retry budgets on the real engine, in virtual time: each client a Retrier of its own, the default policy\n"+
		"(3 attempts, backoff from 1s, ×2, jitter ±50%%), attempts of 10ms timing out after 1s; seed %d.\n\n", f.seed),
		"Outages. failed: the calls that failed of a client that calls every 10s, then makes 10 calls at once\n" +
			"as its dependency restarts for 400ms, or 5 for 1s; load: server hits per request during a full outage\n" +
			"of 1m after 20s of health, of one client at 10, 100 and 1,000 requests/s, and of fleets of clients at\n" +
			"1 request/s each.\n\n", outages,
		"\nIndependent failures: calls that succeed over 1m, one client, with a share of attempts failing\n" +
			"at once with 503 (fast) or never answered (timeouts).\n\n", fails}}, nil
}
