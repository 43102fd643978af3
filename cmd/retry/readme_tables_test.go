//go:build !race

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestReadmeDefaultsTables: README's two tables of the defaults are what
// `retry sim --budgets --json` and `retry sim --metastable --clients
// 1,10,100,1000 --json` give, rebuilt here from the commands' output: for
// each budget rule, a full outage's load for one client (the most of 10,
// 100 and 1,000 requests a second) and for fleets of 10, 100 and 1,000
// clients, and the share of calls that succeed under 10%, 20% and 30%
// independent failures (the least of those rates, failing fast or timing
// out); and for each set of defences, when the metastable failure ended
// at each fleet size.
func TestReadmeDefaultsTables(t *testing.T) {
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := cli(t, "", "sim", "--budgets", "--json")
	var cells []budgetCell
	if err := json.Unmarshal([]byte(stdout), &cells); code != 0 || err != nil {
		t.Fatalf("sim --budgets: status %d, %v: %s", code, err, stderr)
	}
	var b strings.Builder
	b.WriteString("| rule | outage, 1 client | 10 clients | 100 clients | 1,000 clients | 10% failing | 20% failing | 30% failing |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, rule := range budgetRules {
		one := 0.0
		fleet := map[int]float64{}
		least := map[float64]float64{0.1: 1, 0.2: 1, 0.3: 1}
		for _, c := range cells {
			switch {
			case c.Rule != rule.Name:
			case c.Case == "outage" && c.Clients == 1:
				one = max(one, c.Amplification)
			case c.Case == "outage":
				fleet[c.Clients] = c.Amplification
			case c.Case == "fast" || c.Case == "timeouts":
				least[c.Fail] = min(least[c.Fail], c.SuccessRate)
			}
		}
		fmt.Fprintf(&b, "| %s | %.2f× | %.2f× | %.2f× | %.2f× | %.2f%% | %.2f%% | %.2f%% |\n",
			rule.Name, one, fleet[10], fleet[100], fleet[1000], 100*least[0.1], 100*least[0.2], 100*least[0.3])
	}
	if !strings.Contains(string(readme), b.String()) {
		t.Errorf("README does not give the budgets' table as `retry sim --budgets` makes it:\n%s", b.String())
	}

	stdout, stderr, code = cli(t, "", "sim", "--metastable", "--clients", "1,10,100,1000", "--json")
	var rows []metaRow
	if err := json.Unmarshal([]byte(stdout), &rows); code != 0 || err != nil {
		t.Fatalf("sim --metastable: status %d, %v: %s", code, err, stderr)
	}
	var names []string
	rec := map[string]map[int]string{}
	for _, r := range rows {
		if rec[r.Name] == nil {
			rec[r.Name] = map[int]string{}
			names = append(names, r.Name)
		}
		rec[r.Name][r.Clients] = "never"
		if r.RecoveryS != nil {
			rec[r.Name][r.Clients] = human(time.Duration(*r.RecoveryS * float64(time.Second)))
		}
	}
	b.Reset()
	b.WriteString("| defences | 1 client | 10 clients | 100 clients | 1,000 clients |\n")
	b.WriteString("|---|---:|---:|---:|---:|\n")
	for _, n := range names {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", n, rec[n][1], rec[n][10], rec[n][100], rec[n][1000])
	}
	if len(names) != 7 || !strings.Contains(string(readme), b.String()) {
		t.Errorf("README does not give the metastable failure's table as `retry sim --metastable --clients 1,10,100,1000` makes it:\n%s", b.String())
	}
}
