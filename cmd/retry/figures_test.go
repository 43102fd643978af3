//go:build !race

package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
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
// a second, with the default budget and without; and of independent
// failures at 100 requests a second, where the default budget denies no
// retry at 20% and starts denying by 25%.
func TestOutageFigures(t *testing.T) {
	outage := []string{"--rate", "100", "--duration", "2m", "--outage", "30s:60s"}
	on, off := loadRun(t, outage...), loadRun(t, append(outage, "--budget", "off")...)
	said(t, fmt.Sprintf("the server sees %.2f hits per request during the outage with the default budget and %.2f with `--budget off`", on.OutageAmp, off.OutageAmp))
	said(t, fmt.Sprintf("a peak of %.0f hits per second", on.PeakRate))
	said(t, fmt.Sprintf("peak at %.0f", off.PeakRate))
	fail := func(rate string) []string { return []string{"--rate", "100", "--duration", "1m", "--fail-rate", rate} }
	if r := loadRun(t, fail("0.2")...); r.Reasons["budget"] != 0 {
		t.Errorf("20%% failures at 100/s: %d retries denied, want none", r.Reasons["budget"])
	}
	denied := loadRun(t, fail("0.25")...)
	if denied.Reasons["budget"] == 0 {
		t.Errorf("25%% failures at 100/s: no retry denied, want some")
	}
	said(t, fmt.Sprintf("%.2f%% of calls succeed instead of %.2f%%", 100*denied.SuccessRate, 100*loadRun(t, append(fail("0.25"), "--budget", "off")...).SuccessRate))
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
	if err := json.Unmarshal([]byte(stdout), &cells); code != 0 || err != nil || len(cells) != len(budgetTable.Cases())*len(budgetRules) {
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
	// The figures the docs and Budget's doc draw from the tables: the
	// worst of each kind of case for the default budget.
	var one, fleet, below, at30, worst float64
	var worst30 budgetCell
	for i, c := range cells {
		none := cells[i%per]
		switch rule := i / per; {
		case rule == 1 && c.Case == "outage" && c.Clients == 1:
			one = max(one, c.Amplification)
		case rule == 1 && c.Case == "outage":
			fleet = max(fleet, c.Amplification)
		case rule == 1 && c.Fail < 0.25 && c.Case != "restart":
			below = max(below, none.SuccessRate-c.SuccessRate)
		case rule == 1 && c.Case != "restart" && none.SuccessRate-c.SuccessRate > at30:
			at30, worst30 = none.SuccessRate-c.SuccessRate, c
		case rule >= 2 && c.Case != "restart" && c.Case != "outage":
			worst = max(worst, none.SuccessRate-c.SuccessRate)
		}
	}
	said(t, fmt.Sprintf("A full outage loads the dependency with %.2f× the requests for one client at 10, 100 and 1,000 requests a second, and %.2f× for fleets of 10, 100 and 1,000 clients", one, fleet))
	said(t, fmt.Sprintf("within %.2f points at 10%% and 20%%, and %.2f at 30%% (%.2f%% instead of %.2f%%", 100*below, 100*at30, 100*worst30.SuccessRate, 100*(worst30.SuccessRate+at30)))
	said(t, fmt.Sprintf("where the others lose up to %.2f points", 100*worst))
	said(t, fmt.Sprintf("keeps a full outage at %.2f× for one client and %.2f× for fleets", one, fleet))
	said(t, fmt.Sprintf("costs at most %.2f points of success", 100*at30))
	said(t, fmt.Sprintf("a full outage loads the dependency with %.2f times the requests for one client and %.2f times for fleets of 10 to 1,000 clients", one, fleet))
	budgetDoc := budgetDoc(t)
	for _, want := range []string{
		fmt.Sprintf("%.2f times the requests for one client at 10, 100 and 1,000 requests a second", one),
		fmt.Sprintf("%.2f times for fleets of 10, 100 and 1,000 clients at 1 request a second each", fleet),
		fmt.Sprintf("within %.2f points at 10%% and 20%%, and %.2f at 30%%", 100*below, 100*at30),
	} {
		if !strings.Contains(budgetDoc, want) {
			t.Errorf("Budget's doc does not say %q", want)
		}
	}
}

// budgetDoc returns Budget's doc comment, its lines joined by spaces.
func budgetDoc(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "budget.go"))
	if err != nil {
		t.Fatal(err)
	}
	_, doc, _ := strings.Cut(string(src), "\n// Budget ")
	doc, _, _ = strings.Cut(doc, "\ntype Budget struct")
	return strings.Join(strings.Fields(strings.ReplaceAll(doc, "\n//", " ")), " ")
}

// TestMetastableFigures: the docs' tables of sim --metastable, of its
// fleets and of the shedder in front, are what the commands print, and
// so are the figures they draw from larger fleets, from the budget that
// retries timeouts only from successes, and from 95% of capacity.
func TestMetastableFigures(t *testing.T) {
	checkBlock(t, "`retry sim --metastable` shows one", 8, "sim", "--metastable")
	checkBlock(t, "### At every fleet size", 29, "sim", "--metastable", "--clients", "1,10,100,1000")
	checkBlock(t, "With the shedder in front of the same service", 29, "sim", "--metastable", "--shed", "--clients", "1,10,100,1000")
	rows := func(args ...string) map[string]map[int]*metaRow {
		stdout, stderr, code := cli(t, "", append([]string{"sim", "--metastable", "--json"}, args...)...)
		var rs []*metaRow
		if err := json.Unmarshal([]byte(stdout), &rs); code != 0 || err != nil {
			t.Fatalf("%v: status %d, %v: %s", args, code, err, stderr)
		}
		m := map[string]map[int]*metaRow{}
		for _, r := range rs {
			if m[r.Name] == nil {
				m[r.Name] = map[int]*metaRow{}
			}
			m[r.Name][r.Clients] = r
		}
		return m
	}
	rec := func(r *metaRow) string {
		if r.RecoveryS == nil {
			return "never"
		}
		return human(time.Duration(*r.RecoveryS * float64(time.Second)))
	}
	secs := func(r *metaRow) string { return strings.TrimSuffix(rec(r), "s") }
	fleet := rows("--clients", "1,10,100,1000")["defaults"]
	said(t, fmt.Sprintf("%s, %s, %s and %s s after the trigger at 1, 10, 100 and 1,000 clients", secs(fleet[1]), secs(fleet[10]), secs(fleet[100]), secs(fleet[1000])))
	said(t, fmt.Sprintf("at 1,000 clients those single retries are %.2f attempts a request", fleet[1000].Amplification))
	slowest := 0.0
	for n, r := range fleet {
		if r.RecoveryS == nil {
			t.Fatalf("the defaults at %d clients never recover", n)
		}
		slowest = max(slowest, *r.RecoveryS)
	}
	said(t, fmt.Sprintf("ends within %.0f s of its 10 s trigger at every one of those sizes", slowest))
	big := rows("--clients", "1000,2000,5000,10000")["defaults"]
	said(t, fmt.Sprintf("at 2,000 clients the defaults take %s, at 5,000 %s, and at 10,000 they %s recover", rec(big[2000]), rec(big[5000]), map[bool]string{true: "never", false: "do"}[big[10000].RecoveryS == nil]))
	none := rows("--clients", "1000,2000,5000,10000", "--budget", "timeouts=0")["defaults"]
	for _, n := range []int{1000, 2000, 5000, 10000} {
		if rec(none[n]) != rec(none[1000]) {
			t.Errorf("--budget timeouts=0 at %d clients: %s, at 1,000: %s; the docs say the same at each size", n, rec(none[n]), rec(none[1000]))
		}
	}
	said(t, fmt.Sprintf("the failure ends %s after the trigger at each of those sizes", strings.TrimSuffix(rec(none[1000]), "s")+" s"))
	at95 := rows("--rate", "95")
	said(t, fmt.Sprintf("the budget alone takes %s to recover, the breaker %s and adaptive throttling %s", secs(at95["budget"][1])+" s", secs(at95["breaker"][1])+" s", secs(at95["throttle"][1])+" s"))
	half := []string{"--rate", "100", "--duration", "1m", "--fail-rate", "0.5"}
	on, off := loadRun(t, half...), loadRun(t, append(half, "--budget", "off")...)
	said(t, fmt.Sprintf("gets %.2f times its requests instead of %.2f, at a price: %.2f%% of calls succeed instead of %.2f%%", on.Amplification, off.Amplification, 100*on.SuccessRate, 100*off.SuccessRate))
}

// TestLayersFigures: the docs' table of sim --layers 3 is what it
// prints, and their figures at low rates what those print.
func TestLayersFigures(t *testing.T) {
	checkBlock(t, "`retry sim --layers 3` runs a chain", 5, "sim", "--layers", "3")
	for _, tt := range []struct{ rate, duration, want string }{{"10", "1m", "1.06× at 10/s"}, {"1", "10m", "1.06× at 1 request a second"}} {
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
