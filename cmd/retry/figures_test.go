//go:build !race

package main

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
)

// The figures the docs show, each beside its command, computed by the
// command. They take minutes under the race detector and seconds without,
// so they build without it only; make test runs them apart (the race
// tests of package sim cover the model). A change to the model that
// changes a figure fails here until the docs say the new one.

// said reports whether the docs say want, whatever their line breaks.
func said(t *testing.T, want string) {
	t.Helper()
	if !strings.Contains(strings.Join(strings.Fields(docs(t)), " "), want) {
		t.Errorf("the docs do not say %q", want)
	}
}

// loadRun runs the load simulation with args and returns its JSON.
func loadRun(t *testing.T, args ...string) loadResult {
	t.Helper()
	stdout, stderr, code := cli(t, "", append([]string{"sim", "--json"}, args...)...)
	var r loadResult
	if err := json.Unmarshal([]byte(stdout), &r); code != 0 || err != nil {
		t.Fatalf("%v: status %d, %v: %s", args, code, err, stderr)
	}
	return r
}

// TestOutageFigures: the docs' figures of a 60 s outage at 100 requests
// a second, and of 15% independent failures, with the default budget and
// without.
func TestOutageFigures(t *testing.T) {
	outage := []string{"--rate", "100", "--duration", "2m", "--outage", "30s:60s"}
	on, off := loadRun(t, outage...), loadRun(t, append(outage, "--budget", "off")...)
	said(t, fmt.Sprintf("the server sees %.2f hits per request during the outage with the default budget and %.2f with `--budget off`", on.OutageAmp, off.OutageAmp))
	said(t, fmt.Sprintf("a peak of %.0f hits per second", on.PeakRate))
	said(t, fmt.Sprintf("peak at %.0f", off.PeakRate))
	fail := []string{"--rate", "100", "--duration", "1m", "--fail-rate", "0.15"}
	said(t, fmt.Sprintf("%.2f%% of calls succeed instead of %.2f%%", 100*loadRun(t, fail...).SuccessRate, 100*loadRun(t, append(fail, "--budget", "off")...).SuccessRate))
}

// TestContentionFigures: the docs' figures of the AWS study's setup are
// what --runs 100 prints.
func TestContentionFigures(t *testing.T) {
	stdout, _, code := cli(t, "", "sim", "--contention", "--runs", "100", "--json")
	var rows []contentionRow
	if err := json.Unmarshal([]byte(stdout), &rows); code != 0 || err != nil {
		t.Fatalf("status %d, %v", code, err)
	}
	calls := map[string]string{}
	for _, r := range rows {
		s := fmt.Sprintf("%.0f", r.Calls)
		if len(s) > 3 {
			s = s[:len(s)-3] + "," + s[len(s)-3:]
		}
		calls[r.Strategy] = s
	}
	said(t, fmt.Sprintf("full jitter completes the work in %s calls, equal jitter %s, decorrelated %s, exponential without jitter %s and no backoff %s",
		calls["full"], calls["equal"], calls["decorrelated"], calls["exponential"], calls["no-backoff"]))
}

// TestBudgetFigures: the docs' budget tables are what sim --budgets
// prints. The default budget lets a quiet client ride out its restarts,
// keeps a full outage's load within 1.10× the requests for one client at
// 10, 100 and 1,000 requests a second and within 1.25× for fleets of 10,
// 100 and 1,000 clients at 1 request a second each, and under
// independent failures keeps the success rate of no budget within half a
// point at 10% and 20% and 1.5 points at 30%, fast or timing out; the
// peers' rules give what their definitions predict for one client (the
// old rule 1 + 0.15 + 2/rate, Finagle's 1 + 0.2 + 10/rate, the AWS
// quota's 500 tokens at 14 a retry, 1 + 35/(60·rate)).
func TestBudgetFigures(t *testing.T) {
	checkBlock(t, "(`retry sim --budgets`):", 16, "sim", "--budgets")
	stdout, _, code := cli(t, "", "sim", "--budgets", "--json")
	var cells []budgetCell
	if err := json.Unmarshal([]byte(stdout), &cells); code != 0 || err != nil || len(cells) != len(budgetCases([]int{10, 100, 1000})) {
		t.Fatalf("status %d, %v, %d cells", code, err, len(cells))
	}
	want := []func(rate float64) float64{nil, nil,
		func(rate float64) float64 { return 1 + 0.15 + 2/rate },
		func(rate float64) float64 { return 1 + 0.2 + 10/rate },
		func(rate float64) float64 { return 1 + math.Floor(500.0/14)/(60*rate) }}
	per := len(cells) / len(budgetRules)
	for i, c := range cells {
		rule, none := i/per, cells[i%per]
		switch {
		case rule == 0 && c.Case == "outage" && c.Amplification < 2.9:
			t.Errorf("%s at %g/s: %.3f×, want about 3× (the model lost its outage)", c.Rule, c.Rate, c.Amplification)
		case rule == 1 && c.Case == "restart" && c.Failed != 0:
			t.Errorf("%s: %d calls failed in a restart of %gs, want none", c.Rule, c.Failed, c.Down)
		case rule == 1 && c.Case == "outage" && c.Clients == 1 && c.Amplification > 1.10:
			t.Errorf("%s at %g/s: %.3f×, want at most 1.10×", c.Rule, c.Rate, c.Amplification)
		case rule == 1 && c.Case == "outage" && c.Amplification > 1.25:
			t.Errorf("%s, %d clients: %.3f×, want at most 1.25×", c.Rule, c.Clients, c.Amplification)
		case rule == 1 && (c.Case == "fast" || c.Case == "timeouts") && none.SuccessRate-c.SuccessRate > map[bool]float64{true: 0.015, false: 0.005}[c.Fail > 0.25]:
			t.Errorf("%s, %g%% %s at %g/s: %.2f%% succeed, %.2f%% without a budget", c.Rule, 100*c.Fail, c.Case, c.Rate, 100*c.SuccessRate, 100*none.SuccessRate)
		case rule >= 2 && c.Case == "outage" && c.Clients == 1 && math.Abs(c.Amplification-want[rule](c.Rate)) > 0.01:
			t.Errorf("%s at %g/s: %.3f×, want %.3f×", c.Rule, c.Rate, c.Amplification, want[rule](c.Rate))
		}
	}
}

// TestMetastableFigures: the docs' tables of sim --metastable, of its
// fleets and of the shedder in front, are what the commands print.
func TestMetastableFigures(t *testing.T) {
	checkBlock(t, "`retry sim --metastable` shows one", 8, "sim", "--metastable")
	checkBlock(t, "## Fleets", 29, "sim", "--metastable", "--clients", "1,10,100,1000")
	checkBlock(t, "With the shedder in front of the same service", 8, "sim", "--metastable", "--shed")
}

// TestLayersFigures: the docs' table of sim --layers 3 is what it
// prints, and their figures at low rates what those print.
func TestLayersFigures(t *testing.T) {
	checkBlock(t, "`retry sim --layers 3` runs a chain", 5, "sim", "--layers", "3")
	for _, tt := range []struct{ rate, duration, want string }{{"10", "1m", "1.150× at 10/s"}, {"1", "10m", "2.49× at 1 request a second"}} {
		stdout, _, _ := cli(t, "", "sim", "--layers", "3", "--json", "--rate", tt.rate, "--duration", tt.duration)
		var runs []layersRun
		if err := json.Unmarshal([]byte(stdout), &runs); err != nil {
			t.Fatal(err)
		}
		num, _, _ := strings.Cut(tt.want, "×")
		_, decimals, _ := strings.Cut(num, ".")
		if got := strconv.FormatFloat(runs[3].AmplificationBottom, 'f', len(decimals), 64); got != num {
			t.Errorf("defaults at %s/s: %s× at the bottom, the docs say %q", tt.rate, got, tt.want)
		}
		said(t, tt.want)
	}
}

// TestHedgeFigures: the docs' table of sim --hedge is what it prints.
func TestHedgeFigures(t *testing.T) {
	checkBlock(t, "`retry sim --hedge` runs the long-tail setup", 5, "sim", "--hedge")
}
