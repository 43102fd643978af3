package main

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/steadyhq/retry/sim"
)

// TestBudgetTable: sim --budgets prints a header and a row per rule, a
// load and a success rate per rate; each rule's figures come from
// budgetRun, here at 10 requests a second, where the default budget keeps
// a full outage's load within 1.10× and the peers' rules give what their
// definitions predict.
func TestBudgetTable(t *testing.T) {
	saved := budgetRates
	budgetRates = []float64{10}
	t.Cleanup(func() { budgetRates = saved })
	stdout, stderr, code := cli(t, "", "sim", "--budgets")
	if code != 0 {
		t.Fatalf("status %d: %s", code, stderr)
	}
	want := []float64{2.9, 1.10, 1 + 0.15 + 2.0/10, 1 + 0.2 + 10.0/10, 1 + math.Floor(500.0/14)/(60*10)}
	lines := flatLines(stdout)
	for i, rule := range budgetRules {
		row := lines[len(lines)-len(budgetRules)+i]
		rest, ok := strings.CutPrefix(row, rule.Name+" ")
		f := strings.Fields(rest)
		if !ok || len(f) != 2 || !strings.HasSuffix(f[0], "×") || f[1] != "100.00%" {
			t.Fatalf("row %q, want %s, one load and one success rate", row, rule.Name)
		}
		amp, _ := strconv.ParseFloat(strings.TrimSuffix(f[0], "×"), 64)
		switch {
		case i == 0 && amp < want[0], i == 1 && amp > want[1], i >= 2 && math.Abs(amp-want[i]) > 0.01:
			t.Errorf("%s: %.3f× at 10/s, want %s %.3f×", rule.Name, amp, map[bool]string{true: "at least", false: "about"}[i == 0], want[i])
		}
	}
}

// TestBudgetDenials: the default budget denies no retry under 10%
// independent failures at 10 and 100 requests a second, nor under 12% at
// 100, and denies some under 15% at 100, where its Ratio, 0.15 a success,
// falls short of the retries asked (as Budget documents).
func TestBudgetDenials(t *testing.T) {
	for _, tt := range []struct {
		failRate, rate float64
		denies         bool
	}{{failRate: 0.1, rate: 10}, {failRate: 0.1, rate: 100}, {failRate: 0.12, rate: 100}, {failRate: 0.15, rate: 100, denies: true}} {
		rep, err := sim.Run(sim.Scenario{Duration: time.Minute, Drain: time.Minute, Seed: 1, Load: sim.Load{Rate: tt.rate, Steady: true},
			Service: sim.Service{Network: sim.Fixed(5 * time.Millisecond), Faults: []sim.Fault{{Fail: tt.failRate}}}})
		if err != nil {
			t.Fatal(err)
		}
		if denied := rep.Stats[0].BudgetDenied; (denied > 0) != tt.denies {
			t.Errorf("%g%% failures at %g/s: %d retries denied; want denials %v", 100*tt.failRate, tt.rate, denied, tt.denies)
		}
	}
}

// TestBudgetFleet: sim --budgets --clients gives a row per rule and fleet
// size; at 10 clients each with the default budget and its reserve, a
// full outage at 10 requests a second is far over 1.10×.
func TestBudgetFleet(t *testing.T) {
	saved := budgetRates
	budgetRates = []float64{10}
	t.Cleanup(func() { budgetRates = saved })
	stdout, stderr, code := cli(t, "", "sim", "--budgets", "--clients", "1,10")
	if code != 0 {
		t.Fatalf("status %d: %s", code, stderr)
	}
	var def []string
	for _, l := range flatLines(stdout) {
		if strings.HasPrefix(l, "default: ") {
			def = append(def, l)
		}
	}
	if len(def) != 2 || !strings.Contains(stdout, "clients") {
		t.Fatalf("output:\n%s", stdout)
	}
	fields := strings.Fields(strings.TrimPrefix(def[1], "default: 0.15 a success + 0.5/s over 10 s "))
	amp, _ := strconv.ParseFloat(strings.TrimSuffix(fields[1], "×"), 64)
	if fields[0] != "10" || amp < 1.3 {
		t.Errorf("the default budget at 10 clients, 10/s: %q; want far over 1.10×", def[1])
	}
}
