package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/sim"
)

// sim --budgets: the retry budgets' table.

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
