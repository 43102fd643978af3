package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestBudgetTableBounds: on the simulator's model, the default budget (the
// zero Budget every Retrier has) keeps the load of a full outage of 60 s
// within 1.10× the requests at 10, 100 and 1,000 requests a second, and
// under 10% independent failures denies no retry, so that as many calls
// succeed as without a budget, at least 99.8% within the sample's
// tolerance (three standard errors of a 99.9% rate over the run's calls).
func TestBudgetTableBounds(t *testing.T) {
	rows, err := budgetTable(budgetRules[:2], budgetRates, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, rate := range budgetRates {
		none, def := rows[i], rows[len(budgetRates)+i]
		t.Logf("%g/s: outage load %.3f× (%.3f× without a budget); success %.2f%% (%.2f%% without)",
			rate, def.Amplification, none.Amplification, 100*def.SuccessRate, 100*none.SuccessRate)
		n := rate * budgetSpan.Seconds()
		tolerance := 3 * math.Sqrt(0.999*0.001/n)
		switch {
		case def.Amplification > 1.10:
			t.Errorf("%g/s: outage load %.3f× with the default budget, want at most 1.10×", rate, def.Amplification)
		case none.Amplification < 2.9:
			t.Errorf("%g/s: outage load %.3f× without a budget, want about 3× (the model lost its outage)", rate, none.Amplification)
		case def.SuccessRate < 0.998-tolerance:
			t.Errorf("%g/s: success %.3f%% with the default budget, want at least 99.8%% (less %.2f%% for the sample)", rate, 100*def.SuccessRate, 100*tolerance)
		case def.SuccessRate != none.SuccessRate:
			t.Errorf("%g/s: success %.3f%% with the default budget, %.3f%% without: it denied retries", rate, 100*def.SuccessRate, 100*none.SuccessRate)
		}
	}
}

// TestBudgetTableDenials: the default budget denies no retry under 10%
// independent failures at 10 and 100 requests a second, nor under 12% at
// 100, and denies some under 15% at 100, where its Ratio, 0.15 a success,
// falls short of the retries asked (as Budget documents).
func TestBudgetTableDenials(t *testing.T) {
	for _, tt := range []struct {
		failRate, rate float64
		denies         bool
	}{
		{failRate: 0.1, rate: 10},
		{failRate: 0.1, rate: 100},
		{failRate: 0.12, rate: 100},
		{failRate: 0.15, rate: 100, denies: true},
	} {
		s := &budgetSim{rule: budgetRules[1], rate: tt.rate, dur: budgetSpan, failRate: tt.failRate, seed: 1}
		res, err := s.run()
		if err != nil {
			t.Fatal(err)
		}
		if (res.denied > 0) != tt.denies {
			t.Errorf("%g%% failures at %g/s: %d retries denied; want denials %v", 100*tt.failRate, tt.rate, res.denied, tt.denies)
		}
	}
}

// TestBudgetPeers: the peers' rules, kept in the simulation, give the
// figures their definitions predict for a full outage of 60 s (all in
// requests' worth): the old rule 1 + 0.15 + 2/rate, Finagle's
// 1 + 0.2 + 10/rate, and the AWS quota's 500 tokens at 14 a retry spent
// once, 1 + 35/(60·rate); and none of them costs a success under 10%
// independent failures at these rates.
func TestBudgetPeers(t *testing.T) {
	rates := budgetRates[:2]
	rows, err := budgetTable(budgetRules[2:], rates, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []func(rate float64) float64{
		func(rate float64) float64 { return 1 + 0.15 + 2/rate },
		func(rate float64) float64 { return 1 + 0.2 + 10/rate },
		func(rate float64) float64 {
			return 1 + math.Floor(awsCapacity/awsRetryCost)/(budgetOutage.Seconds()*rate)
		},
	}
	for i, row := range rows {
		w := want[i/len(rates)](row.Rate)
		if math.Abs(row.Amplification-w) > 0.01 {
			t.Errorf("%s at %g/s: outage load %.3f×, want %.3f×", row.Rule, row.Rate, row.Amplification, w)
		}
		if row.SuccessRate < 0.998 {
			t.Errorf("%s at %g/s: success %.3f%%, want at least 99.8%%", row.Rule, row.Rate, 100*row.SuccessRate)
		}
	}
}

// TestRunBudgetTable: the table prints a header and a row per rule with
// a load and a success rate per rate, or the same rows as JSON; scaled
// down to one rate.
func TestRunBudgetTable(t *testing.T) {
	saved := budgetRates
	budgetRates = []float64{10}
	t.Cleanup(func() { budgetRates = saved })
	for _, asJSON := range []bool{false, true} {
		var out, errb strings.Builder
		if err := runBudgetTable(&env{stdout: &out, stderr: &errb, progress: "never"}, 1, asJSON); err != nil {
			t.Fatal(err)
		}
		if asJSON {
			var rows []budgetRow
			if err := json.Unmarshal([]byte(out.String()), &rows); err != nil {
				t.Fatalf("%v in %s", err, out.String())
			}
			if len(rows) != len(budgetRules) || rows[1].Rule != budgetRules[1].Name || rows[1].Rate != 10 || rows[1].Amplification == 0 || rows[1].SuccessRate == 0 {
				t.Errorf("rows %+v", rows)
			}
			continue
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) < len(budgetRules)+1 || !strings.Contains(out.String(), "load 10/s") || !strings.Contains(out.String(), "success 10/s") {
			t.Fatalf("output:\n%s", out.String())
		}
		for i, rule := range budgetRules {
			row := lines[len(lines)-len(budgetRules)+i]
			_, figures, ok := strings.Cut(row, rule.Name)
			if !ok || strings.Count(figures, "×") != 1 || strings.Count(figures, "%") != 1 {
				t.Errorf("row %q, want %s, one load and one success rate", row, rule.Name)
			}
		}
	}
}
