package main

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/sim"
)

// small is a quick setup of sim --metastable: 20 requests a second to 6
// workers (30 a second), a trigger of 3 s at 5 s, a run of 20 s.
var small = []string{"sim", "--metastable", "--rate", "20", "--capacity", "30", "--workers", "6", "--trigger-at", "5s:3s", "--duration", "20s"}

// TestMetastableCommand: sim --metastable's JSON has the keys the docs
// name, recovery_s null for never, and a row per defence set; without a
// defence the run never recovers, with the defaults it does; a seed gives
// the same figures every time; the text says the setup.
func TestMetastableCommand(t *testing.T) {
	// Half the default's load and capacity, a trigger of L = 5 s at 10 s,
	// and 11 L after it: without a defence, it never recovers.
	half := []string{"sim", "--metastable", "--rate", "35", "--capacity", "50", "--workers", "5", "--trigger-at", "10s:5s", "--duration", "70s", "--json"}
	stdout, stderr, code := cli(t, "", half...)
	if code != 0 {
		t.Fatalf("status %d: %s", code, stderr)
	}
	var raw []map[string]any
	if err := json.Unmarshal([]byte(stdout), &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw) != len(sim.Defences(retry.Budget{})) {
		t.Fatalf("%d rows, want %d", len(raw), len(sim.Defences(retry.Budget{})))
	}
	for _, r := range raw {
		for _, k := range []string{"name", "clients", "recovered", "recovery_s", "amplification", "goodput_before", "goodput_during", "goodput_after", "offered"} {
			if _, ok := r[k]; !ok {
				t.Errorf("row %v: no key %q", r["name"], k)
			}
		}
		if r["recovered"] == false && r["recovery_s"] != nil {
			t.Errorf("row %v: never recovered, recovery_s %v; want null", r["name"], r["recovery_s"])
		}
	}
	var rows []*metaRow
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatal(err)
	}
	if none, d := rows[0], rows[len(rows)-2]; none.Name != "no defence" || none.Recovered || d.Name != "defaults" || !d.Recovered {
		t.Errorf("%s recovered %v, %s %v; want never and recovered", none.Name, none.Recovered, d.Name, d.Recovered)
	}
	first, _, _ := cli(t, "", append(small, "--json")...)
	again, _, _ := cli(t, "", append(small, "--json")...)
	other, _, _ := cli(t, "", append(small, "--json", "--seed", "2")...)
	if again != first || other == first {
		t.Errorf("seed 1 twice, then 2:\n%s\n%s\n%s", first, again, other)
	}
	text, _, _ := cli(t, "", append(small, "--trigger", "latency", "--factor", "3")...)
	flat := strings.Join(strings.Fields(text), " ")
	for _, w := range []string{"server: 6 workers, 200ms an attempt (capacity 30/s)", "a FIFO queue of 60 (2s of work)",
		"trigger: service time ×3 (200ms → 600ms) from 5s to 8s (L = 3s)", "defences offered before during after amplification",
		"never: not within the 12s after the trigger"} {
		if !strings.Contains(flat, w) {
			t.Errorf("text lacks %q:\n%s", w, text)
		}
	}
}

// TestMetastableFleet: --clients 1,10,100,1000 prints one table, a row
// per defence set and fleet size, and with --json an object for each with
// its fleet size; --shed puts the shedder in front of every row's
// service, and sheds.
func TestMetastableFleet(t *testing.T) {
	args := append(slices.Clone(small), "--clients", "1,10,100,1000")
	stdout, stderr, code := cli(t, "", append(args, "--json")...)
	if code != 0 {
		t.Fatalf("status %d: %s", code, stderr)
	}
	var rows []*metaRow
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatal(err)
	}
	sets := sim.Defences(retry.Budget{})
	if len(rows) != 4*len(sets) {
		t.Fatalf("%d rows, want %d", len(rows), 4*len(sets))
	}
	for i, r := range rows {
		if want := []int{1, 10, 100, 1000}[i/len(sets)]; r.Clients != want || r.Name != sets[i%len(sets)].Name || r.Requests == 0 {
			t.Errorf("row %d: %s with %d clients, want %s with %d", i, r.Name, r.Clients, sets[i%len(sets)].Name, want)
		}
	}
	text, _, _ := cli(t, "", args...)
	for _, re := range []string{`(?m)^\s*defences\s+clients\s+offered`, `(?m)^\s*defaults\s+1000\s+\d+\.\d`, `(?m)^\s*no defence\s+10\s+`} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("no line matching %s in:\n%s", re, text)
		}
	}
	shed, _, code := cli(t, "", append(slices.Clone(small), "--shed", "--json")...)
	if code != 0 {
		t.Fatalf("--shed: status %d", code)
	}
	var shedRows []*metaRow
	if err := json.Unmarshal([]byte(shed), &shedRows); err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, r := range shedRows {
		for why, n := range r.Refused {
			if strings.HasPrefix(why, "shed: ") {
				refused += n
			}
		}
	}
	if refused == 0 {
		t.Errorf("with --shed no attempt was shed: %+v", shedRows[0])
	}
}

// TestMetastableChart: the chart names every row in its legend, the
// trigger and the arrivals, and labels its axes.
func TestMetastableChart(t *testing.T) {
	ch, err := simOutputOf(t, small[1:]...).chart()
	if err != nil {
		t.Fatal(err)
	}
	texts := chartTexts(t, ch)
	for _, w := range []string{"trigger", "requests arriving", "successful calls per second (5 s mean)", "time", "no defence", "budget", "breaker"} {
		if !slices.Contains(texts, w) {
			t.Errorf("no text %q in the chart: %q", w, texts)
		}
	}
}

// TestMetastableUsage: bad flags of sim --metastable, and flags that do not
// apply, are refused in the project's one shape, with status 2.
func TestMetastableUsage(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{args: []string{"--rate", "100"}, want: "flag --rate = 100: must be in (0, 100), below --capacity: the load is steady until the trigger"},
		{args: []string{"--rate", "-1"}, want: "flag --rate = -1: must be in (0, 100)"},
		{args: []string{"--capacity", "0"}, want: "flag --capacity = 0: must be in (0, 1e7] attempts a second"},
		{args: []string{"--workers", "0"}, want: "flag --workers = 0: must be in [1, 10000]"},
		{args: []string{"--clients", "1,0"}, want: `flag --clients = "1,0": must be a number of clients in [1, 100000], or a list of them (1,10,100)`},
		{args: []string{"--clients", "1,10", "--plot", "m.svg"}, want: "flag --plot: draws one fleet size: give --clients one number"},
		{args: []string{"--trigger", "outage"}, want: `flag --trigger = "outage": must be capacity or latency`},
		{args: []string{"--factor", "1"}, want: "flag --factor = 1: must be in (1, 100]"},
		{args: []string{"--trigger-at", "30s"}, want: `flag --trigger-at = "30s": must be START:LENGTH, two durations such as 30s:60s`},
		{args: []string{"--trigger-at", "30s:0s"}, want: `flag --trigger-at = "30s:0s": LENGTH must be > 0`},
		{args: []string{"--trigger-at", "0s:10s"}, want: `flag --trigger-at = "0s:10s": START must be at least 1s, so that there is a before`},
		{args: []string{"--trigger-at", "5m:10s"}, want: "flags --duration and --trigger-at: the run (3m) must last at least 10s past the trigger's end (5m10s): --duration 5m20s or more"},
		{args: []string{"--attempt-timeout", "0"}, want: `flag --attempt-timeout = "0": must be in [1ms, 366 days]`},
		{args: []string{"--duration", "-3m"}, want: `flag --duration = "-3m": must be positive (at least 1s)`},
		{args: []string{"--duration", "45s"}, want: "flags --duration and --trigger-at: the run (45s) must last at least 10s past the trigger's end (40s): --duration 50s or more"},
		{args: []string{"--rate", "9999", "--capacity", "10000", "--duration", "2m"}, want: "flags --rate and --duration: about 1199880 requests over 2m0s: must be at most 1000000"},
		{args: []string{"--attempts", "-1"}, want: `flag --attempts = "-1"`},
		{args: []string{"--budget", "off"}, want: "flag --budget = off: --metastable has its rows without a budget (no defence, and each other gate alone)"},
		{args: []string{"--budget", "timeouts=-1"}, want: `flag --budget = "timeouts=-1": timeouts = "-1": tokens and timeouts must be in [0, 1e9]`},
		{args: []string{"--fail-rate", "0.1"}, want: "flag --fail-rate: does not apply to --metastable, which runs its own defences and trigger"},
		{args: []string{"--outage", "1s:1s"}, want: "flag --outage: does not apply to --metastable"},
		{args: []string{"--runs", "3"}, want: "flag --runs: does not apply to --metastable"},
	}
	for _, c := range cases {
		stdout, stderr, code := cli(t, "", append([]string{"sim", "--metastable"}, c.args...)...)
		if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) || !strings.HasPrefix(stderr, "retry: ") || stdout != "" {
			t.Errorf("%v: status %d, stdout %q, stderr %q; want one line with %q", c.args, code, stdout, stderr, c.want)
		}
	}
}
