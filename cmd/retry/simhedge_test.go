package main

import (
	"strings"
	"testing"
	"time"
)

// TestHedgeSim: on the long-tail model (1% of attempts 100× slower), the
// delay at p95 cuts the 99.9th percentile at least tenfold for at most 5%
// more attempts. It runs in wall time, scaled down: 4000 requests of 10 ms,
// 50 at a time, so that the race detector's load leaves the figures whole.
// The figures are statistical and measured in wall time on a shared
// machine, where a busy spell delays many attempts at once past the
// delay; the delay's percentile is taken so that a new latency exceeds it
// 4.7% of the time on average, which keeps the extra attempts under 5%.
func TestHedgeSim(t *testing.T) {
	if testing.Short() {
		t.Skip("wall time")
	}
	s := &hedgeSim{requests: 4000, workers: 50, base: 10 * time.Millisecond, slowP: 0.01, slowX: 100, pct: 95, seed: 1}
	res, err := s.run()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("p99.9 falls %.1f× for %.2f%% more attempts", res.TailDrop, 100*res.ExtraLoad)
	if res.TailDrop < 10 || res.ExtraLoad > 0.05 {
		var b strings.Builder
		res.writeText(&b, s)
		t.Errorf("p99.9 falls %.1f× for %.2f%% more attempts; want ≥ 10× for ≤ 5%%\n%s", res.TailDrop, 100*res.ExtraLoad, b.String())
	}
}

// TestHedgeSimProgress: sim --hedge draws a bar of each run's calls (the
// warm-up's included) on stderr when progress is shown, and nothing when it
// is not; scaled down to 300 calls.
func TestHedgeSimProgress(t *testing.T) {
	for _, c := range []struct {
		progress string
		want     []string
	}{
		{progress: "always", want: []string{"no hedging", "hedging at p95", "/310)"}},
		{progress: "never"},
	} {
		var out, errb strings.Builder
		e := &env{stdout: &out, stderr: &errb, progress: c.progress}
		s := &hedgeSim{requests: 300, workers: 10, base: time.Millisecond, slowP: 0.01, slowX: 10, pct: 95, seed: 1}
		if err := runHedgeSim(e, s, false, ""); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "300 requests, 10 at a time") {
			t.Errorf("progress %s: stdout %q", c.progress, out.String())
		}
		if len(c.want) == 0 && errb.Len() > 0 {
			t.Errorf("progress %s: stderr %q, want nothing", c.progress, errb.String())
		}
		for _, w := range c.want {
			if !strings.Contains(errb.String(), w) {
				t.Errorf("progress %s: stderr lacks %q: %q", c.progress, w, errb.String())
			}
		}
	}
}

// TestHedgeSimFlags: --hedge takes only --seed, --json and --plot.
func TestHedgeSimFlags(t *testing.T) {
	_, stderr, code := cli(t, "", "sim", "--hedge", "--rate", "5")
	if code == 0 || !strings.Contains(stderr, "flag --rate: does not apply to --hedge") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}
