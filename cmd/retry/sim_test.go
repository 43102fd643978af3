package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// README and the guides and pictures in docs/, from this package's
// directory.
const (
	readmePath = "../../README.md"
	docsDir    = "../../docs"
)

// docs returns README and the guides in docs/, where the simulator's
// figures are shown with their commands.
func docs(t *testing.T) string {
	t.Helper()
	text, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	guides, _ := filepath.Glob(filepath.Join(docsDir, "*.md"))
	for _, g := range guides {
		b, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		text = append(text, b...)
	}
	return string(text)
}

// docBlock returns the lines of the first code block after marker in the
// docs, each with its runs of spaces made one.
func docBlock(t *testing.T, marker string) []string {
	t.Helper()
	_, after, ok := strings.Cut(docs(t), marker)
	if !ok {
		t.Fatalf("the docs do not give %q", marker)
	}
	_, block, _ := strings.Cut(after, "```")
	_, block, _ = strings.Cut(block, "\n")
	block, _, _ = strings.Cut(block, "```")
	return flatLines(block)
}

// flatLines returns s's non-empty lines with their runs of spaces made one.
func flatLines(s string) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if f := strings.Join(strings.Fields(l), " "); f != "" {
			lines = append(lines, f)
		}
	}
	return lines
}

// checkBlock: every line of the docs' block after marker is a line of
// what `retry args...` prints, and there are at least min of them.
func checkBlock(t *testing.T, marker string, least int, args ...string) {
	t.Helper()
	stdout, stderr, code := cli(t, "", args...)
	if code != 0 {
		t.Fatalf("retry %s: status %d: %s", strings.Join(args, " "), code, stderr)
	}
	got := flatLines(stdout)
	block := docBlock(t, marker)
	if len(block) > 0 && block[0] == strings.Join(append([]string{"retry"}, args...), " ") {
		block = block[1:] // the command itself
	}
	for _, l := range block {
		if !slices.Contains(got, l) {
			t.Errorf("the docs' line %q is not what `retry %s` prints:\n%s", l, strings.Join(args, " "), stdout)
		}
	}
	if len(block) < least {
		t.Errorf("the docs' block after %q has %d lines, want %d at least", marker, len(block), least)
	}
}

// TestSimOutage: a 60 s outage at 100 requests per second. The default
// budget holds the load during the outage to at most about 1.1× the
// requests, and its peak well under the peak without it; without it, three
// attempts per request reach the server. The docs' figures are the
// command's.
func TestSimOutage(t *testing.T) {
	run := func(args ...string) loadResult {
		stdout, stderr, code := cli(t, "", append([]string{"sim", "--json", "--rate", "100", "--duration", "2m", "--outage", "30s:60s"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: status %d: %s", args, code, stderr)
		}
		var r loadResult
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	on, off := run(), run("--budget", "off")
	if on.OutageAmp > 1.15 || on.OutageAmp < 1.0 || off.OutageAmp < 2.7 || off.OutageAmp > 3.05 {
		t.Errorf("%.3f× during the outage with the default budget, %.3f× without; want at most about 1.1 and about 3", on.OutageAmp, off.OutageAmp)
	}
	for _, r := range []loadResult{on, off} {
		failed := 0
		for _, n := range r.Reasons {
			failed += n
		}
		if r.Requests != 12000 || r.Succeeded+r.Unfinished+failed != r.Requests || r.SuccessRate < 0.49 || r.SuccessRate > 0.56 {
			t.Errorf("requests %d = succeeded %d + unfinished %d + failed %v, success %v: want 12000 in all, about half succeeding",
				r.Requests, r.Succeeded, r.Unfinished, r.Reasons, r.SuccessRate)
		}
		if r.Recovery == nil || *r.Recovery > 10 {
			t.Errorf("time to recover %v", r.Recovery)
		}
	}
	if on.Reasons["budget"] == 0 || on.PeakRate > 0.75*off.PeakRate {
		t.Errorf("failed %v; peak %v hits/s with the budget, %v without: want denials and a lower peak", on.Reasons, on.PeakRate, off.PeakRate)
	}
}

// TestSimDeterministic: the same seed gives the same figures, another seed
// other draws; a fleet's clients each have their own Retrier.
func TestSimDeterministic(t *testing.T) {
	args := []string{"sim", "--json", "--rate", "50", "--duration", "20s", "--fail-rate", "0.2", "--capacity", "70", "--clients", "3"}
	a, _, _ := cli(t, "", args...)
	b, _, _ := cli(t, "", args...)
	c, _, _ := cli(t, "", append(args, "--seed", "2")...)
	if a != b || a == c {
		t.Errorf("seed 1 twice, then seed 2:\n%s\n%s\n%s", a, b, c)
	}
	var r loadResult
	if err := json.Unmarshal([]byte(a), &r); err != nil {
		t.Fatal(err)
	}
	if r.Amplification <= 1.1 || r.SuccessRate < 0.9 {
		t.Errorf("20%% failures: amplification %v, success %v", r.Amplification, r.SuccessRate)
	}
}

// TestSimText: the load simulation's text, and --shed's refusals.
func TestSimText(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		args []string
		want []string
	}{
		{args: []string{"--rate", "10", "--duration", "30s", "--outage", "5s:10s", "--plot", dir + "/load.svg"},
			want: []string{"300 requests at 10/s over 30s", "server: down from 5s to 15s", "hits during the outage", "time to recover"}},
		{args: []string{"--rate", "10", "--duration", "10s", "--timeout", "1s", "--fail-rate", "1", "--budget", "tokens=0,ratio=0.5,window=5s"},
			want: []string{"100 requests", "server: 100% of attempts failing", "succeeded 0 of 100"}},
		{args: []string{"--rate", "200", "--duration", "10s", "--capacity", "100", "--shed", "--clients", "4"},
			want: []string{"from 4 clients", "capacity 100 attempts/s, shed in front", "refused attempts queue full"}},
		{args: []string{"--contention", "--runs", "1", "--jitter", "full", "--clients", "10"},
			want: []string{"10 clients contending", "full"}},
	}
	for _, c := range cases {
		stdout, stderr, code := cli(t, "", append([]string{"sim"}, c.args...)...)
		if code != 0 {
			t.Fatalf("%v: status %d: %s", c.args, code, stderr)
		}
		flat := strings.Join(strings.Fields(stdout), " ")
		for _, w := range c.want {
			if !strings.Contains(flat, w) {
				t.Errorf("%v: output lacks %q:\n%s", c.args, w, stdout)
			}
		}
	}
}

// TestContention: the AWS study's setup. Full jitter comes out near 800
// calls for 100 clients, exponential backoff without jitter far worse.
func TestContention(t *testing.T) {
	stdout, stderr, code := cli(t, "", "sim", "--contention", "--runs", "4", "--json")
	if code != 0 {
		t.Fatalf("status %d: %s", code, stderr)
	}
	var rows []contentionRow
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatal(err)
	}
	calls := map[string]float64{}
	for _, r := range rows {
		calls[r.Strategy] = r.Calls
	}
	if c := calls["full"]; len(calls) != 5 || c < 650 || c > 950 || calls["exponential"] < 1.8*c || calls["no-backoff"] < 2*c ||
		calls["equal"] > calls["exponential"] || calls["decorrelated"] > calls["exponential"] {
		t.Errorf("calls %v: want full jitter near 800, no jitter and no backoff far more", calls)
	}
}

// TestContentionProgress: with --progress always, sim --contention draws a
// bar of its runs on stderr; without it, on a stderr that is not a
// terminal, nothing. Stdout is the same either way.
func TestContentionProgress(t *testing.T) {
	args := []string{"sim", "--contention", "--runs", "3", "--clients", "10"}
	want, _, _ := cli(t, "", args...)
	for _, c := range []struct {
		progress string
		stderr   string // in stderr; "" means stderr is empty
	}{{progress: "always", stderr: "/15)"}, {progress: "auto"}, {progress: "never"}} {
		stdout, stderr, code := cli(t, "", append(args, "--progress", c.progress)...)
		if code != 0 || stdout != want || c.stderr == "" && stderr != "" || !strings.Contains(stderr, c.stderr) {
			t.Errorf("--progress %s: status %d, stdout %q, stderr %q; want %q, stderr with %q", c.progress, code, stdout, stderr, want, c.stderr)
		}
	}
}

// TestSimUsage: bad input, and flags that do not apply to a mode, are one
// line on stderr naming the flag, the value and the rule, with status 2
// and nothing run.
func TestSimUsage(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{args: []string{"--rate", "0"}, want: "flag --rate = 0: must be in (0, 1e6]"},
		{args: []string{"--rate", "-5"}, want: "flag --rate = -5: must be in (0, 1e6]"},
		{args: []string{"--duration", "-1m"}, want: `flag --duration = "-1m": must be positive (at least 1ms)`},
		{args: []string{"--duration", "forever"}, want: `flag --duration = "forever": must be a duration`},
		{args: []string{"--clients", "0"}, want: `flag --clients = "0": must be a number of clients in [1, 100000]`},
		{args: []string{"--clients", "-3"}, want: `flag --clients = "-3": must be a number of clients in [1, 100000]`},
		{args: []string{"--clients", "1,10"}, want: `flag --clients = "1,10": must be one number of clients here; a list applies to --metastable and --budgets`},
		{args: []string{"--outage", "30s"}, want: `flag --outage = "30s": must be START:LENGTH, two durations such as 30s:60s (from 30s for 60s)`},
		{args: []string{"--outage", "-5s:10s"}, want: `flag --outage = "-5s:10s": START must be >= 0`},
		{args: []string{"--outage", "5s:0s"}, want: `flag --outage = "5s:0s": LENGTH must be > 0`},
		{args: []string{"--outage", "3m:10s"}, want: `flag --outage = "3m:10s": must be in [0, --duration) = [0, 2m0s): a fault past the run's end never happens`},
		{args: []string{"--outage", "P400D:1s"}, want: `flag --outage = "P400D:1s": START and LENGTH must be at most 366 days each`},
		{args: []string{"--budget", "ratio=x"}, want: `flag --budget = "ratio=x": ratio = "x"`},
		{args: []string{"--budget", "spare=1"}, want: `"spare" is not tokens, timeouts, ratio or window`},
		{args: []string{"--fail-rate", "2"}, want: "flag --fail-rate = 2: must be in [0, 1]"},
		{args: []string{"--fail-rate", "-0.5"}, want: "flag --fail-rate = -0.5: must be in [0, 1]"},
		{args: []string{"--clients", "100000", "--bucket", "10ms"}, want: "flag --clients = 100000: with a series of 10ms over 2m0s"},
		{args: []string{"--capacity", "-1"}, want: "flag --capacity = -1: must be in [0, 1e9] (0 is unlimited)"},
		{args: []string{"--bucket", "3s"}, want: `flag --bucket = "3s": must divide a second`},
		{args: []string{"--bucket", "1ms", "--horizon", "2h"}, want: "buckets"},
		{args: []string{"--plot", "load.gif", "--duration", "1s"}, want: `image format "gif"`},
		{args: []string{"--plot", "/proc/x.svg", "--duration", "1s"}, want: `flag --plot = "/proc/x.svg": cannot be written`},
		{args: []string{"--rate", "10000"}, want: "flags --rate and --duration: about 1200000 requests over 2m0s: must be at most 1000000 (a lower rate or a shorter --duration)"},
		{args: []string{"--runs", "3"}, want: "flag --runs: applies only with --contention"},
		{args: []string{"--trigger", "latency"}, want: "flag --trigger: applies only with --metastable"},
		{args: []string{"--trigger", "latency", "--metastable=false"}, want: "flag --trigger: applies only with --metastable"},
		{args: []string{"--budgets", "--rate", "5"}, want: "flag --rate: does not apply to --budgets, which takes only --clients, --seed and --json"},
		{args: []string{"--budgets", "--metastable"}, want: "flag --metastable: does not apply to --budgets"},
		{args: []string{"--budgets", "--clients", "0,5"}, want: `flag --clients = "0,5": must be a number of clients in [1, 100000], or a list of them (1,10,100)`},
		{args: []string{"--hedge", "--rate", "5"}, want: "flag --rate: does not apply to --hedge, which takes only --seed, --json and --plot"},
		{args: []string{"--contention", "--runs", "0"}, want: "flag --runs = 0: must be in [1, 1000]"},
		{args: []string{"--contention", "--jitter", "proportional"}, want: `flag --jitter = "proportional": with --contention`},
	}
	// --contention runs its own setup: every other flag is refused.
	var takes []string
	for _, m := range simModes {
		if m.name == "contention" {
			takes = strings.Fields(m.takes)
		}
	}
	newSim(&env{}).Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "contention" || slices.Contains(takes, f.Name) {
			return
		}
		v := map[string]string{"bool": "true"}[f.Value.Type()]
		if v == "" {
			v = map[bool]string{true: "x=1", false: "1"}[f.Name == "param"]
		}
		cases = append(cases, struct {
			args []string
			want string
		}{append([]string{"--contention", "--runs", "1", "--clients", "2"}, "--"+f.Name+"="+v),
			"flag --" + f.Name + ": does not apply to --contention, which takes only --clients, --runs, --seed, --jitter and --json"})
	})
	for _, c := range cases {
		stdout, stderr, code := cli(t, "", append([]string{"sim"}, c.args...)...)
		if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) || !strings.HasPrefix(stderr, "retry: ") || stdout != "" {
			t.Errorf("%v: status %d, stdout %q, stderr %q; want one line with %q", c.args, code, stdout, stderr, c.want)
		}
	}
}
