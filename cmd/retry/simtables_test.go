package main

import (
	"encoding/json"
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

// TestLayersCommand: sim --layers prints a row per service and one for
// the dependency, a column pair per configuration, or one JSON object per
// configuration.
func TestLayersCommand(t *testing.T) {
	args := []string{"sim", "--layers", "2", "--rate", "10", "--duration", "10s"}
	stdout, _, code := cli(t, "", append(args, "--json")...)
	var runs []layersRun
	if err := json.Unmarshal([]byte(stdout), &runs); code != 0 || err != nil || len(runs) != len(layersConfigs) {
		t.Fatalf("status %d, %v: %s", code, err, stdout)
	}
	for i, r := range runs {
		if r.Name != layersConfigs[i].name || r.Layers != 2 || r.Offered != 100 || len(r.PerLayer) != 3 ||
			r.PerLayer[2].Layer != "dependency" || r.AmplificationBottom != r.PerLayer[2].Amplification {
			t.Errorf("object %d: %+v", i, r)
		}
	}
	if runs[0].AmplificationBottom != 9 || runs[1].AmplificationBottom != 5 {
		t.Errorf("%.3f× and %.3f× at the bottom, want 9× naive and 5× with retries at one layer", runs[0].AmplificationBottom, runs[1].AmplificationBottom)
	}
	text, _, _ := cli(t, "", args...)
	for _, want := range []string{"A chain of 2 services", "100 requests at 10/s over 10s", "service 1", "service 2", "dependency", "9.000×", "5.000×", "held to one"} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in the output:\n%s", want, text)
		}
	}
}

// TestLayersUsage: a bad --layers, and flags sim --layers does not take,
// are refused in one line, with status 2 and nothing on stdout.
func TestLayersUsage(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{args: []string{"--layers", "0"}, want: "flag --layers = 0: must be in [1, 6]"},
		{args: []string{"--layers", "7"}, want: "flag --layers = 7: must be in [1, 6]"},
		{args: []string{"--layers", "x"}, want: `flag --layers = "x": must be an integer`},
		{args: []string{"--layers", "3", "--rate", "0"}, want: "flag --rate = 0: must be in (0, 1e6]"},
		{args: []string{"--layers", "3", "--duration", "0"}, want: `flag --duration = "0": must be in [1ms, 366 days]`},
		{args: []string{"--layers", "3", "--rate", "1", "--duration", "10ms"}, want: "flags --rate and --duration: give at least one request"},
		{args: []string{"--layers", "6", "--rate", "1000"}, want: "flags --rate, --duration and --layers: 60000 requests × 3^6 is 43740000 hits"},
		{args: []string{"--layers", "3", "--budget", "off"}, want: "flag --budget: does not apply to --layers, which takes only --rate, --duration, --latency, --seed and --json"},
		{args: []string{"--layers", "3", "--plot", "l.svg"}, want: "flag --plot: does not apply to --layers"},
		{args: []string{"--layers", "3", "--metastable"}, want: "flag --metastable: does not apply to --layers"},
		{args: []string{"--layers", "3", "--contention"}, want: "flag --layers: does not apply to --contention"},
	}
	for _, c := range cases {
		stdout, stderr, code := cli(t, "", append([]string{"sim"}, c.args...)...)
		if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) || !strings.HasPrefix(stderr, "retry: ") || stdout != "" {
			t.Errorf("%v: status %d, stdout %q, stderr %q; want one line with %q", c.args, code, stdout, stderr, c.want)
		}
	}
}

// TestHedge: on the long-tail model (1% of attempts 100× slower), the
// delay at p95 cuts the 99.9th percentile at least tenfold for at most 7%
// more attempts, in virtual time.
func TestHedge(t *testing.T) {
	stdout, _, code := cli(t, "", "sim", "--hedge", "--json")
	var res struct {
		TailDrop  float64 `json:"p999_drop"`
		ExtraLoad float64 `json:"extra_attempts"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); code != 0 || err != nil {
		t.Fatalf("status %d, %v", code, err)
	}
	if res.TailDrop < 10 || res.ExtraLoad > 0.07 {
		t.Errorf("p99.9 falls %.1f× for %.2f%% more attempts; want ≥ 10× for ≤ 7%%", res.TailDrop, 100*res.ExtraLoad)
	}
}
