package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/steadyhq/retry/sim"
)

// smallBudgets cuts the budget tables to one rate, one share failing
// and one restart, so that they run in seconds under the race detector.
func smallBudgets(t *testing.T) {
	saved := budgetTable
	budgetTable = sim.BudgetTable{Restarts: saved.Restarts[:1], Rates: []float64{10}, Fleets: saved.Fleets, Fails: []float64{0.3}}
	t.Cleanup(func() { budgetTable = saved })
}

// TestBudgetTable: sim --budgets prints two tables, each with a header
// and a row per rule (in the second, one for fast failures and one for
// timeouts): a quiet client's failed calls in a restart, the loads of full
// outages for one client and for each fleet size of --clients; then the
// success rates under independent failures.
func TestBudgetTable(t *testing.T) {
	smallBudgets(t)
	stdout, stderr, code := cli(t, "", "sim", "--budgets", "--clients", "10")
	if code != 0 {
		t.Fatalf("status %d: %s", code, stderr)
	}
	lines := flatLines(stdout)
	var outage, fails []string
	for _, l := range lines {
		for _, r := range budgetRules {
			if rest, ok := strings.CutPrefix(l, r.Name+" "); ok {
				if f := strings.Fields(rest); len(f) == 3 {
					outage = append(outage, l)
				} else if len(f) == 2 && (f[0] == "fast" || f[0] == "timeouts") {
					fails = append(fails, l)
				} else {
					t.Errorf("row %q: want 3 figures, or a kind and a success rate", l)
				}
			}
		}
	}
	if len(outage) != len(budgetRules) || len(fails) != 2*len(budgetRules) {
		t.Fatalf("%d outage rows and %d failure rows, want %d and %d:\n%s", len(outage), len(fails), len(budgetRules), 2*len(budgetRules), stdout)
	}
	for _, head := range []string{"failed: 10 in 400ms", "load 1 client 10/s", "10 clients", "failures", "30% at 10/s"} {
		if !strings.Contains(stdout, head) {
			t.Errorf("no column %q:\n%s", head, stdout)
		}
	}
	if def := strings.Fields(strings.TrimPrefix(outage[1], budgetRules[1].Name)); def[0] != "0" {
		t.Errorf("the default budget in a quiet client's restart: %q failed, want 0", def[0])
	}
}

// TestBudgetJSON: sim --budgets --json gives one object per rule and case,
// with the case's figures.
func TestBudgetJSON(t *testing.T) {
	smallBudgets(t)
	stdout, stderr, code := cli(t, "", "sim", "--budgets", "--clients", "10", "--json")
	var cells []budgetCell
	if err := json.Unmarshal([]byte(stdout), &cells); code != 0 || err != nil {
		t.Fatalf("status %d, %v: %s", code, err, stderr)
	}
	if per := 1 + 1 + 1 + 2; len(cells) != per*len(budgetRules) {
		t.Fatalf("%d cells, want %d", len(cells), per*len(budgetRules))
	}
	for _, c := range cells[:5] { // no budget
		switch {
		case c.Case == "restart" && (c.Burst != 10 || c.Down != (400*time.Millisecond).Seconds() || c.Failed != 0),
			c.Case == "outage" && c.Amplification < 2.8,
			(c.Case == "fast" || c.Case == "timeouts") && (c.Fail != 0.3 || c.SuccessRate < 0.95):
			t.Errorf("no budget: %+v", c)
		}
	}
}
