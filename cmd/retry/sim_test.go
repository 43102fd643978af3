package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestVClockOrder: tasks run one at a time, in order of wake-up time, ties
// broken by task id, and time advances only through Sleep.
func TestVClockOrder(t *testing.T) {
	clk := newVClock()
	var log []string
	note := func(id int) { log = append(log, clk.Now().Sub(epoch).String()+"#"+string(rune('0'+id))) }
	for _, id := range []int{3, 1, 2} {
		clk.Go(epoch, id, func(ctx context.Context) {
			note(id)
			clk.Sleep(ctx, time.Duration(4-id)*time.Second) // 3 wakes first
			note(id)
			clk.Sleep(ctx, time.Second)
			note(id)
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	if !clk.Run(ctx, cancel, epoch.Add(time.Hour), 1000) {
		t.Fatal("Run stopped early")
	}
	want := "0s#1 0s#2 0s#3 1s#3 2s#2 2s#3 3s#1 3s#2 4s#1"
	if got := strings.Join(log, " "); got != want {
		t.Errorf("order:\n got %s\nwant %s", got, want)
	}
}

// TestVClockHorizon: at the horizon the sleeping tasks get an error and end.
func TestVClockHorizon(t *testing.T) {
	clk := newVClock()
	var errs []error
	for id := range 3 {
		clk.Go(epoch, id, func(ctx context.Context) {
			for {
				if err := clk.Sleep(ctx, time.Minute); err != nil {
					errs = append(errs, err)
					return
				}
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	if clk.Run(ctx, cancel, epoch.Add(10*time.Minute), 1000) {
		t.Fatal("Run says complete, want stopped at the horizon")
	}
	if len(errs) != 3 || errs[0] != context.Canceled {
		t.Errorf("errors %v, want three context.Canceled", errs)
	}
	if got := clk.Now().Sub(epoch); got != 10*time.Minute {
		t.Errorf("stopped at %v, want 10m", got)
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
		if r.Calls < 100 {
			t.Errorf("%s: %v calls for 100 clients", r.Strategy, r.Calls)
		}
	}
	if len(calls) != 5 {
		t.Fatalf("strategies %v", calls)
	}
	if c := calls["full"]; c < 650 || c > 950 {
		t.Errorf("full jitter: %v calls, want near 800", c)
	}
	if calls["exponential"] < 1.8*calls["full"] || calls["no-backoff"] < 2*calls["full"] {
		t.Errorf("no jitter %v and no backoff %v calls, want far more than full jitter's %v", calls["exponential"], calls["no-backoff"], calls["full"])
	}
	if calls["equal"] > calls["exponential"] || calls["decorrelated"] > calls["exponential"] {
		t.Errorf("jitter worse than none: %v", calls)
	}
}

// TestContentionProgress: with --progress always, sim --contention draws a
// bar of its runs on stderr (every strategy's runs); without it, on a
// stderr that is not a terminal, nothing. Stdout is the same either way.
func TestContentionProgress(t *testing.T) {
	args := []string{"sim", "--contention", "--runs", "3", "--clients", "10"}
	cases := []struct {
		name     string
		progress string
		stderr   []string // in stderr; none means stderr is empty
	}{
		{name: "always", progress: "always", stderr: []string{"/15)", "no-backoff"}},
		{name: "auto, not a terminal", progress: "auto"},
		{name: "never", progress: "never"},
	}
	want, _, _ := cli(t, "", args...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := cli(t, "", append(args, "--progress", c.progress)...)
			if code != 0 || stdout != want {
				t.Errorf("status %d, stdout %q, want %q", code, stdout, want)
			}
			if len(c.stderr) == 0 && stderr != "" {
				t.Errorf("stderr %q, want nothing", stderr)
			}
			for _, w := range c.stderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q: %q", w, stderr)
				}
			}
		})
	}
}

// TestSimOutage: a 60 s outage at 100 requests per second. The default
// budget holds the load during the outage to at most about 1.1× the
// requests, and its peak well under the peak without it; without it, three
// attempts per request reach the server.
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
	if on.OutageAmp > 1.15 || on.OutageAmp < 1.0 {
		t.Errorf("default budget: %v× during the outage, want at most about 1.1", on.OutageAmp)
	}
	if off.OutageAmp < 2.7 || off.OutageAmp > 3.05 {
		t.Errorf("no budget: %v× during the outage, want about 3 (3 attempts)", off.OutageAmp)
	}
	for _, r := range []loadResult{on, off} {
		if r.Requests != 12000 || r.Succeeded+r.Unfinished+sum(r.Reasons) != r.Requests {
			t.Errorf("requests %d = succeeded %d + unfinished %d + failed %v?", r.Requests, r.Succeeded, r.Unfinished, r.Reasons)
		}
		// The requests outside the outage, half of them, all succeed;
		// those inside it fail unless a retry lands after it.
		if r.SuccessRate < 0.49 || r.SuccessRate > 0.56 {
			t.Errorf("success rate %v, want about 0.5", r.SuccessRate)
		}
		if r.Recovery == nil || *r.Recovery > 10 {
			t.Errorf("time to recover %v", r.Recovery)
		}
	}
	if on.Reasons["budget"] == 0 {
		t.Errorf("default budget denied nothing: %v", on.Reasons)
	}
	if on.PeakRate > 0.75*off.PeakRate {
		t.Errorf("peak without budget %v hits/s, with %v: want the budget to cut the peak", off.PeakRate, on.PeakRate)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestSimDeterministic: the same seed gives the same figures, another seed
// other draws.
func TestSimDeterministic(t *testing.T) {
	args := []string{"sim", "--json", "--rate", "50", "--duration", "20s", "--fail-rate", "0.2", "--capacity", "70", "--clients", "3"}
	a, _, _ := cli(t, "", args...)
	b, _, _ := cli(t, "", args...)
	c, _, _ := cli(t, "", append(args, "--seed", "2")...)
	if a != b {
		t.Errorf("same seed, different figures:\n%s\n%s", a, b)
	}
	if a == c {
		t.Errorf("seeds 1 and 2 gave the same figures")
	}
	var r loadResult
	if err := json.Unmarshal([]byte(a), &r); err != nil {
		t.Fatal(err)
	}
	if r.Amplification <= 1.1 || r.SuccessRate < 0.9 {
		t.Errorf("20%% failures: amplification %v, success %v", r.Amplification, r.SuccessRate)
	}
}

func TestSimText(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		args []string
		want []string
	}{
		{args: []string{"--rate", "10", "--duration", "30s", "--outage", "5s:10s", "--plot", dir + "/load.svg"},
			want: []string{"300 requests at 10/s over 30s", "server: down from 5s to 15s", "hits during the outage", "time to recover"}},
		{args: []string{"--rate", "10", "--duration", "10s", "--timeout", "1s", "--fail-rate", "1", "--budget", "ratio=0.5,reserve=0,window=5s"},
			want: []string{"100 requests", "server: 100% of attempts failing", "succeeded 0 of 100"}},
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

func TestSimUsage(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{args: []string{"--rate", "0"}, want: "flag --rate = 0: must be in (0, 1e6]"},
		{args: []string{"--outage", "30s"}, want: `flag --outage = "30s": must be START:LENGTH, two durations such as 30s:60s`},
		{args: []string{"--outage", "-5s:10s"}, want: `flag --outage = "-5s:10s": START must be >= 0`},
		{args: []string{"--outage", "5s:-10s"}, want: `flag --outage = "5s:-10s": LENGTH must be > 0`},
		{args: []string{"--outage", "5s:0s"}, want: `flag --outage = "5s:0s": LENGTH must be > 0`},
		{args: []string{"--outage", "P400D:1s"}, want: `flag --outage = "P400D:1s": START and LENGTH must be at most 366 days each`},
		{args: []string{"--budget", "ratio=x"}, want: `flag --budget = "ratio=x": ratio = "x"`},
		{args: []string{"--budget", "spare=1"}, want: `"spare" is not ratio, reserve or window`},
		{args: []string{"--fail-rate", "2"}, want: "flag --fail-rate = 2: must be in [0, 1]"},
		{args: []string{"--duration", "forever"}, want: `flag --duration = "forever": must be a duration`},
		{args: []string{"--contention", "--jitter", "proportional"}, want: `flag --jitter = "proportional": with --contention`},
		{args: []string{"--bucket", "1ms", "--horizon", "2h"}, want: "buckets"},
		{args: []string{"--plot", "load.gif", "--duration", "1s"}, want: `image format "gif"`},
		{args: []string{"--rate", "1e6", "--duration", "1h"}, want: "flags --rate and --duration: 1000000/s over 1h is 3600000000 requests: must be at most 1000000"},
		{args: []string{"--rate", "10000"}, want: "flags --rate and --duration: 10000/s over 2m is 1200000 requests: must be at most 1000000"},
		{args: []string{"--runs", "3"}, want: "flag --runs: applies only with --contention"},
		{args: []string{"--plot", "/proc/x.svg", "--duration", "1s"}, want: `flag --plot = "/proc/x.svg": cannot be written`},
		{args: []string{"--metastable", "--plot", "/proc/x.svg"}, want: `flag --plot = "/proc/x.svg": cannot be written`},
		{args: []string{"--budgets", "--rate", "5"}, want: "flag --rate: does not apply to --budgets, which takes only --seed and --json"},
		{args: []string{"--budgets", "--metastable"}, want: "flag --metastable: does not apply to --budgets"},
	}
	// --contention runs its own setup: every other flag is refused.
	refused := map[string]bool{}
	for _, f := range [][]string{
		{"--plot", "c.svg"}, {"--outage", "1s:1s"}, {"--rate", "5"}, {"--budget", "off"}, {"--fail-rate", "0.1"},
		{"--duration", "1s"}, {"--latency", "1ms"}, {"--capacity", "5"}, {"--timeout", "1s"}, {"--horizon", "1h"},
		{"--bucket", "1ms"}, {"--policy", "{}"}, {"--preset", "ojs"}, {"--param", "x=1"}, {"--attempts", "3"},
		{"--initial", "1s"}, {"--max", "1s"}, {"--offset", "1s"}, {"--coefficient", "3"}, {"--strategy", "linear"},
		{"--jitter-factor", "0.5"}, {"--jitter-amount", "1s"}, {"--on-exhaustion", "discard"}, {"--non-retryable", "x"},
		{"--hedge"}, {"--metastable"}, {"--trigger", "latency"}, {"--trigger-at", "1s:1s"}, {"--factor", "3"}, {"--workers", "3"},
		{"--attempt-timeout", "1s"}, {"--budgets"}, {"--layers", "3"},
	} {
		refused[f[0]] = true
		cases = append(cases, struct {
			args []string
			want string
		}{append([]string{"--contention", "--runs", "1", "--clients", "2"}, f...),
			"flag " + f[0] + ": does not apply to --contention, which takes only --clients, --runs, --seed, --jitter and --json"})
	}
	newSim(&env{}).Flags().VisitAll(func(f *pflag.Flag) {
		if !refused["--"+f.Name] && f.Name != "contention" && !slices.Contains(contentionFlags, f.Name) {
			t.Errorf("flag --%s: no case checks it is refused with --contention", f.Name)
		}
	})
	for _, c := range cases {
		stdout, stderr, code := cli(t, "", append([]string{"sim"}, c.args...)...)
		if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: status %d, stderr %q, want one line with %q", c.args, code, stderr, c.want)
		}
		if stdout != "" {
			t.Errorf("%v: stdout %q", c.args, stdout)
		}
	}
}
