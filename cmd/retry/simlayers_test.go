package main

import (
	"encoding/json"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLayersAmplification: on the real engine, a chain of N services
// under a full outage sends 3^N times the requests to the dependency at
// the bottom when every layer makes 3 attempts, layer by layer 3^i; with
// retries at one layer and no budget, what oneLayer counts (1, 3, 5, 7);
// with the defaults at every layer, at most 1.2× for N = 3, because every
// call that serves a retry makes one attempt: at each service below the
// first, the calls held to one attempt are exactly the requests marked
// retries that the service above sent, its retries and the calls it held
// to one attempt (and there are some), and no retry is sent while
// serving one.
func TestLayersAmplification(t *testing.T) {
	cases := []struct {
		name    string
		layers  int
		config  int             // index in layersConfigs
		exact   func(i int) int // the requests layer i receives per request offered
		maxLoad float64         // else the bound at the bottom
	}{
		{name: "naive, 1 layer", layers: 1, config: 0, exact: pow3},
		{name: "naive, 2 layers", layers: 2, config: 0, exact: pow3},
		{name: "naive, 3 layers", layers: 3, config: 0, exact: pow3},
		{name: "rule only, 3 layers", layers: 3, config: 1, exact: oneLayer},
		{name: "defaults, 3 layers", layers: 3, config: 3, maxLoad: 1.2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &layersSim{layers: c.layers, rate: 20, duration: 30 * time.Second, latency: 10 * time.Millisecond, seed: 1}
			cfg := layersConfigs[c.config]
			run, err := s.runConfig(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d requests, %.3f× at the bottom", cfg.name, run.Offered, run.AmplificationBottom)
			if len(run.PerLayer) != c.layers+1 || run.Offered != 600 {
				t.Fatalf("%d layers' figures for %d offered, want %d for 600", len(run.PerLayer), run.Offered, c.layers+1)
			}
			if c.exact != nil {
				for i, f := range run.PerLayer {
					if want := c.exact(i) * run.Offered; f.Received != want {
						t.Errorf("%s received %d, want %d (%d per request)", f.Layer, f.Received, want, c.exact(i))
					}
				}
				if want := float64(c.exact(c.layers)); run.AmplificationBottom != want {
					t.Errorf("%.3f× at the bottom, want %g×", run.AmplificationBottom, want)
				}
				return
			}
			if run.AmplificationBottom > c.maxLoad {
				t.Errorf("%.3f× at the bottom, want at most %g×", run.AmplificationBottom, c.maxLoad)
			}
			for i, f := range run.PerLayer[:c.layers] {
				// The requests marked retries sent to this service: the
				// retries of the service above, and the one attempt of each
				// of its calls that served a retry.
				above := 0
				if i > 0 {
					above = run.PerLayer[i-1].Retries + run.PerLayer[i-1].HeldToOne
					if above == 0 {
						t.Errorf("%s: the service above sent no retry, so the rule was not tried", f.Layer)
					}
				}
				if f.HeldToOne != above || f.NestedRetries != 0 {
					t.Errorf("%s: %d calls held to one attempt, %d retries sent while serving one; want %d and 0",
						f.Layer, f.HeldToOne, f.NestedRetries, above)
				}
			}
		})
	}
}

// pow3 returns 3^i.
func pow3(i int) int { return int(math.Pow(3, float64(i))) }

// oneLayer returns the requests layer i receives per request offered at
// layer 0 when every layer makes 3 attempts but retries at one layer: a
// call serving a first attempt sends a first attempt below and two
// retries; a call serving a retry sends one attempt, a first attempt
// below, since the attempt number on the wire is the caller's own.
func oneLayer(i int) int {
	// A first attempt is served with 3 attempts, the first of them a first
	// attempt below, the other two retries; a retry with one attempt,
	// marked a retry below too.
	firsts, retries := 1, 0
	for range i {
		retries += 2 * firsts
	}
	return firsts + retries
}

// TestLayersCommand: sim --layers prints a row per service and one for
// the dependency, with a column pair per configuration, or one JSON object
// per configuration.
func TestLayersCommand(t *testing.T) {
	args := []string{"sim", "--layers", "2", "--rate", "10", "--duration", "10s"}
	stdout, stderr, code := cli(t, "", args...)
	if code != 0 {
		t.Fatalf("status %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"A chain of 2 services", "100 requests at 10/s over 10s",
		"service 1", "service 2", "dependency", "9.000×", "5.000×", "naive", "rule only", "budgets only", "defaults", "held to one"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("no %q in the output:\n%s", want, stdout)
		}
	}
	stdout, stderr, code = cli(t, "", append(args, "--json")...)
	if code != 0 {
		t.Fatalf("--json: status %d, stderr %q", code, stderr)
	}
	var runs []layersRun
	if err := json.Unmarshal([]byte(stdout), &runs); err != nil {
		t.Fatalf("%v in %s", err, stdout)
	}
	if len(runs) != len(layersConfigs) {
		t.Fatalf("%d objects, want %d", len(runs), len(layersConfigs))
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
		{args: []string{"--layers", "-1"}, want: "flag --layers = -1: must be in [1, 6]"},
		{args: []string{"--layers", "x"}, want: `flag --layers = "x": must be an integer`},
		{args: []string{"--layers", "3", "--rate", "0"}, want: "flag --rate = 0: must be in (0, 1e6]"},
		{args: []string{"--layers", "3", "--duration", "0"}, want: `flag --duration = "0": must be in [1ms, 366 days]`},
		{args: []string{"--layers", "3", "--rate", "1", "--duration", "10ms"}, want: "flags --rate and --duration: give at least one request"},
		{args: []string{"--layers", "6", "--rate", "1000"}, want: "flags --rate, --duration and --layers: 60000 requests × 3^6 is 43740000 hits"},
		{args: []string{"--layers", "3", "--budget", "off"}, want: "flag --budget: does not apply to --layers, which takes only --rate, --duration, --latency, --seed and --json"},
		{args: []string{"--layers", "3", "--plot", "l.svg"}, want: "flag --plot: does not apply to --layers"},
		{args: []string{"--layers", "3", "--attempts", "5"}, want: "flag --attempts: does not apply to --layers"},
		{args: []string{"--layers", "3", "--metastable"}, want: "flag --metastable: does not apply to --layers"},
		{args: []string{"--layers", "3", "--budgets"}, want: "flag --budgets: does not apply to --layers"},
		{args: []string{"--layers", "3", "--contention"}, want: "flag --layers: does not apply to --contention"},
	}
	for _, c := range cases {
		stdout, stderr, code := cli(t, "", append([]string{"sim"}, c.args...)...)
		if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) || !strings.HasPrefix(stderr, "retry: ") {
			t.Errorf("%v: status %d, stderr %q, want one line with %q", c.args, code, stderr, c.want)
		}
		if stdout != "" {
			t.Errorf("%v: stdout %q", c.args, stdout)
		}
	}
}

// TestLayersGuide: the table docs/shedding.md shows for retry sim
// --layers 3 is what the command prints.
func TestLayersGuide(t *testing.T) {
	guide, err := os.ReadFile("../../docs/shedding.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(guide), "`retry sim --layers 3` runs a chain")
	if !ok {
		t.Fatal("docs/shedding.md has no paragraph on retry sim --layers 3")
	}
	_, block, _ := strings.Cut(after, "```\n")
	block, _, _ = strings.Cut(block, "```")
	stdout, stderr, code := cli(t, "", "sim", "--layers", "3")
	if code != 0 {
		t.Fatalf("status %d: %s", code, stderr)
	}
	var lines []string
	for _, l := range strings.Split(stdout, "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	rows := 0
	for _, l := range strings.Split(strings.TrimSpace(block), "\n") {
		if want := strings.Join(strings.Fields(l), " "); !slices.Contains(lines, want) {
			t.Errorf("docs/shedding.md's line %q is not in the output:\n%s", want, stdout)
		}
		rows++
	}
	if rows < 5 {
		t.Errorf("docs/shedding.md's block has %d lines, want the header and four layers", rows)
	}
}

// TestLayersLowRates: docs/shedding.md's figures for the defaults at low rates,
// where each layer's budget reserve is what remains.
func TestLayersLowRates(t *testing.T) {
	tests := []struct {
		args []string
		want string // the defaults' load at the bottom, as docs/shedding.md gives it
	}{
		{args: []string{"--rate", "10"}, want: "1.150"},
		{args: []string{"--rate", "1", "--duration", "10m"}, want: "2.49"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			stdout, stderr, code := cli(t, "", append([]string{"sim", "--layers", "3", "--json"}, tt.args...)...)
			if code != 0 {
				t.Fatalf("status %d: %s", code, stderr)
			}
			var runs []layersRun
			if err := json.Unmarshal([]byte(stdout), &runs); err != nil {
				t.Fatal(err)
			}
			for _, r := range runs {
				if r.Name != "defaults" {
					continue
				}
				prec := len(tt.want) - 2
				if got := strconv.FormatFloat(r.AmplificationBottom, 'f', prec, 64); got != tt.want {
					t.Errorf("defaults: %s× at the bottom, docs/shedding.md says %s×", got, tt.want)
				}
				return
			}
			t.Fatalf("no defaults row in %s", stdout)
		})
	}
}
