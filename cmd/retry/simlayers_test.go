package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/steadyhq/retry/sim"
)

// TestLayersCommand: sim --layers prints a row per service and one for
// the dependency, a column pair per configuration, or one JSON object per
// configuration.
func TestLayersCommand(t *testing.T) {
	args := []string{"sim", "--layers", "2", "--rate", "10", "--duration", "10s"}
	stdout, _, code := cli(t, "", append(args, "--json")...)
	var runs []layersRun
	if err := json.Unmarshal([]byte(stdout), &runs); code != 0 || err != nil || len(runs) != len(sim.ChainDefences()) {
		t.Fatalf("status %d, %v: %s", code, err, stdout)
	}
	for i, r := range runs {
		if r.Name != sim.ChainDefences()[i].Name || r.Layers != 2 || r.Offered != 100 || len(r.PerLayer) != 3 ||
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
