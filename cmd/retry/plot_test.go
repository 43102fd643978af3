package main

import (
	"fmt"
	"html"
	"image"
	_ "image/png"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/cmd/retry/internal/chart"
)

// TestPlotLog: a log axis draws any policy with a delay above 0, even one
// whose delays are all equal and small, and refuses on one line, with
// status 2 and no file, when every delay drawn is 0.
func TestPlotLog(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{name: "immediate", args: []string{"--strategy", "immediate"}, code: exitUsage, want: "flag --log: every delay drawn is 0"},
		{name: "one attempt", args: []string{"--attempts", "1"}, code: exitUsage, want: `flag --attempts = "1": must be >= 2 with plot`},
		{name: "ratchet NONE", args: []string{"--preset", "ratchet", "--param", "backoff=none"}, code: exitUsage, want: "flag --log: every delay drawn is 0"},
		{name: "immediate, cumulative", args: []string{"--strategy", "immediate", "--cumulative"}, code: exitUsage, want: "flag --log: every delay drawn is 0"},
		{name: "constant 1ms", args: []string{"--strategy", "constant", "--initial", "1ms", "--jitter", "none"}, want: "wrote"},
		{name: "constant 400us", args: []string{"--strategy", "constant", "--initial", "400us", "--jitter", "none"}, want: "wrote"},
		{name: "immediate beside exponential", args: []string{`{"backoff_strategy": "immediate"}`, "--compare", "ojs"}, want: "(2 curves)"},
		{name: "exponential", args: []string{"--attempts", "8"}, want: "wrote"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "c.svg")
			stdout, stderr, code := cli(t, "", append([]string{"plot", "--log", "--samples", "20", "-o", out}, c.args...)...)
			if code != c.code || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
				t.Errorf("status %d (want %d), stdout %q, stderr %q, want one line with %q", code, c.code, stdout, stderr, c.want)
			}
			_, err := os.Stat(out)
			if wrote := err == nil; wrote != (c.code == 0) {
				t.Errorf("file written: %v, want %v", wrote, c.code == 0)
			}
		})
	}
}

// TestOutputDir: plot -o and sim --plot write into an existing directory
// and create none: a missing one is a one-line usage error, given before
// any work, that leaves the parent as it was.
func TestOutputDir(t *testing.T) {
	cases := []struct {
		name string
		args func(dir string) []string
		code int
		want string
	}{
		{name: "plot, missing directory", args: func(d string) []string { return []string{"plot", "-o", d + "/missing/c.svg"} },
			code: exitUsage, want: `/missing": no such file or directory`},
		{name: "plot, missing directories", args: func(d string) []string { return []string{"plot", "-o", d + "/a/b/c.png"} },
			code: exitUsage, want: `/a/b": no such file or directory`},
		{name: "plot, a file as the directory", args: func(d string) []string { return []string{"plot", "-o", d + "/file/c.svg"} },
			code: exitUsage, want: `/file" is not a directory`},
		{name: "sim, missing directory", args: func(d string) []string {
			return []string{"sim", "--duration", "1s", "--plot", d + "/missing/load.svg"}
		}, code: exitUsage, want: `flag --plot = "` + "DIR" + `/missing/load.svg": directory`},
		{name: "plot, existing directory", args: func(d string) []string { return []string{"plot", "--samples", "10", "-o", d + "/c.svg"} },
			code: 0, want: "wrote"},
		{name: "sim, existing directory", args: func(d string) []string { return []string{"sim", "--duration", "1s", "--plot", d + "/load.svg"} },
			code: 0, want: "wrote"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			stdout, stderr, code := cli(t, "", c.args(dir)...)
			want := strings.ReplaceAll(c.want, "DIR", dir)
			if code != c.code || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, want) {
				t.Errorf("status %d (want %d), stderr %q, want one line with %q", code, c.code, stderr, want)
			}
			entries, _ := os.ReadDir(dir)
			if c.code != 0 && (stdout != "" || len(entries) != 1) {
				t.Errorf("stdout %q, %d entries in the directory: want nothing written", stdout, len(entries))
			}
			if c.code == 0 && len(entries) != 2 {
				t.Errorf("%d entries in the directory, want the image beside the file", len(entries))
			}
		})
	}
}

// flagCurves returns the curves plot draws for the command line args,
// and its --limit.
func flagCurves(t *testing.T, args ...string) ([]curve, int) {
	t.Helper()
	var pf policyFlags
	fs := pflag.NewFlagSet("plot", pflag.ContinueOnError)
	pf.register(fs)
	limit := fs.Int("limit", 30, "")
	compare := fs.StringArray("compare", nil, "")
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	curves, err := plotCurves(&pf, strings.NewReader(""), append(fs.Args(), *compare...))
	if err != nil {
		t.Fatal(err)
	}
	return curves, *limit
}

// TestPlotCurves: plot draws the curves asked for and no other, each
// with every field flag applied, and says so in its legend.
func TestPlotCurves(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		legend  []string // each entry's start
		retries []int    // each curve's points
		jitter  []bool   // each curve's band
	}{
		{name: "arguments only, --attempts on each", args: []string{"--attempts", "11", "ojs", "zizq"},
			legend: []string{"ojs: exponential 1s ×2", "zizq: polynomial 1s·n^4"}, retries: []int{10, 10}, jitter: []bool{true, true}},
		{name: "no argument: the defaults", args: nil,
			legend: []string{"default: exponential 1s ×2"}, retries: []int{2}, jitter: []bool{true}},
		{name: "--compare as an argument", args: []string{"--attempts", "4", "daycry", "--compare", "ratchet"},
			legend: []string{"daycry: exponential 5s ×2", "ratchet: exponential 1s ×2"}, retries: []int{3, 3}, jitter: []bool{true, false}},
		{name: "--preset is a curve before the arguments", args: []string{"--preset", "zizq", "ojs"},
			legend: []string{"zizq: polynomial", "ojs: exponential"}, retries: []int{25, 2}, jitter: []bool{true, true}},
		{name: "shape flags on each, marked modified", args: []string{"--attempts", "5", "--jitter", "none", "ojs", "daycry"},
			legend:  []string{"ojs (modified): exponential 1s ×2, cap 5min, no jitter, 4 retries", "daycry (modified): exponential 5s ×2, cap 5min, no jitter, 4 retries"},
			retries: []int{4, 4}, jitter: []bool{false, false}},
		{name: "--limit cuts each", args: []string{"--limit", "5", "zizq", "ratchet:retries=20"},
			legend:  []string{"zizq: polynomial 1s·n^4 +15s, jitter +30s·n, 25 retries (first 5 drawn)", "ratchet:retries=20: exponential 1s ×2, cap 1d, no jitter, 20 retries (first 5 drawn)"},
			retries: []int{5, 5}, jitter: []bool{true, false}},
		{name: "inline JSON is named by its summary", args: []string{`{"backoff_strategy": "linear", "max_attempts": 4}`},
			legend: []string{"linear 1s·n, cap 5min, jitter ±50%, 3 retries"}, retries: []int{3}, jitter: []bool{true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			curves, limit := flagCurves(t, c.args...)
			ch, err := curveChart(curves, curveOptions{limit: limit, samples: 100, seed: 1, scale: scaleAuto})
			if err != nil {
				t.Fatal(err)
			}
			labels := ch.Labels()
			if len(labels) != len(c.legend) {
				t.Fatalf("legend %q, want %d entries starting %q", labels, len(c.legend), c.legend)
			}
			for i, label := range labels {
				if !strings.HasPrefix(label, c.legend[i]) {
					t.Errorf("legend entry %d %q, want it to start %q", i, label, c.legend[i])
				}
				pts := curvePoints(curves[i].policy, limit, 100, 1, false)
				if len(pts) != c.retries[i] || pts[len(pts)-1].retry != c.retries[i] {
					t.Errorf("curve %q: %d points, want retries 1 to %d", curves[i].label, len(pts), c.retries[i])
				}
				band := slices.ContainsFunc(pts, func(p point) bool { return p.lo != p.hi })
				if band != c.jitter[i] {
					t.Errorf("curve %q: band %v, want %v", curves[i].label, band, c.jitter[i])
				}
			}
		})
	}
}

// TestPlotLegendSVG: the image README draws has one legend entry per
// policy named on the command line, --attempts applied to each, and
// delay ticks in human units on a log axis.
func TestPlotLegendSVG(t *testing.T) {
	stdout, stderr, code := cli(t, "", "plot", "--attempts", "11", "--samples", "200", "-o", "-", "--format", "svg", "ojs", "zizq")
	if code != 0 {
		t.Fatalf("status %d: %s", code, stderr)
	}
	var texts []string
	for _, m := range regexp.MustCompile(`>([^<]+)</text>`).FindAllStringSubmatch(stdout, -1) {
		texts = append(texts, html.UnescapeString(m[1]))
	}
	var legend []string
	for _, s := range texts {
		if strings.Contains(s, ": ") && strings.Contains(s, "retr") {
			legend = append(legend, s)
		}
	}
	want := []string{"ojs: exponential 1s ×2, cap 5min, jitter ±50%, 10 retries", "zizq: polynomial 1s·n^4 +15s, jitter +30s·n, 10 retries"}
	if !slices.Equal(legend, want) {
		t.Errorf("legend %q, want %q", legend, want)
	}
	for _, tick := range []string{"1s", "10s", "1min", "10min", "1h", "delay (log scale)"} {
		if !slices.Contains(texts, tick) {
			t.Errorf("no text %q in %q", tick, texts)
		}
	}
}

// TestSummary: a legend writes the strategy's formula as the library's
// doc does (n the retry's number, ^ an exponent) and every duration in the
// units of the delay axis (min, not m).
func TestSummary(t *testing.T) {
	cases := []struct {
		name   string
		policy retry.Policy
		want   string
	}{
		{name: "polynomial: the coefficient an exponent", policy: retry.Policy{Backoff: retry.Polynomial, BackoffCoefficient: 2.5, MaxInterval: time.Hour},
			want: "polynomial 1s·n^2.5, cap 1h, jitter ±50%"},
		{name: "exponential: a factor a retry", policy: retry.Policy{InitialInterval: 250 * time.Millisecond, BackoffCoefficient: 3},
			want: "exponential 250ms ×3, cap 5min, jitter ±50%"},
		{name: "linear", policy: retry.Policy{Backoff: retry.Linear, InitialInterval: 90 * time.Second, MaxInterval: 36 * time.Hour},
			want: "linear 1.5min·n, cap 1.5d, jitter ±50%"},
		{name: "constant, durations not round in one unit", policy: retry.Policy{Backoff: retry.Constant, InitialInterval: 1234 * time.Millisecond,
			Offset: 2*time.Hour + 3*time.Minute + 4*time.Second, MaxInterval: 2 * time.Hour, Jitter: retry.Jitter{Kind: retry.JitterNone}},
			want: "constant 1.234s +2h3min4s, cap 2h, no jitter"},
		{name: "additive jitter", policy: retry.Policy{MaxInterval: 10 * time.Minute, Jitter: retry.Jitter{Kind: retry.JitterAdditive, Amount: 45 * time.Second}},
			want: "exponential 1s ×2, cap 10min, jitter +45s·n"},
	}
	for _, c := range cases {
		if got := summary(c.policy); got != c.want {
			t.Errorf("%s: summary %q, want %q", c.name, got, c.want)
		}
	}
}

// TestDelayScale: the delay axis is logarithmic when the values drawn
// span more than two decades, linear otherwise, and --log or --linear
// overrides that.
func TestDelayScale(t *testing.T) {
	linear := func(n int) string { // 1s, 2s, ..., n s: a span of n
		return fmt.Sprintf(`{"backoff_strategy": "linear", "jitter": false, "max_attempts": %d, "max_interval": "P1D"}`, n+1)
	}
	cases := []struct {
		name  string
		args  []string
		scale string
		log   bool
	}{
		{name: "ojs and zizq, 10 retries: 0.5s to 3h", args: []string{"--attempts", "11", "ojs", "zizq"}, scale: scaleAuto, log: true},
		{name: "ojs defaults: 0.5s to 3s", args: []string{"ojs"}, scale: scaleAuto},
		{name: "a span of exactly 100", args: []string{linear(100)}, scale: scaleAuto},
		{name: "a span of 101", args: []string{linear(101)}, scale: scaleAuto, log: true},
		{name: "full jitter: the band's 5th percentile counts", args: []string{"--attempts", "6", "--jitter", "full", "ojs"}, scale: scaleAuto, log: true},
		{name: "immediate beside exponential: zeros left out", args: []string{`{"backoff_strategy": "immediate"}`, "ojs"}, scale: scaleAuto},
		{name: "--linear", args: []string{"--attempts", "11", "ojs", "zizq"}, scale: scaleLinear},
		{name: "--log", args: []string{"ojs"}, scale: scaleLog, log: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			curves, _ := flagCurves(t, c.args...)
			ch, err := curveChart(curves, curveOptions{limit: 200, samples: 200, seed: 1, scale: c.scale})
			if err != nil {
				t.Fatal(err)
			}
			dt, ok := ch.Y.Tick.Marker.(chart.DurationTicks)
			if !ok {
				t.Fatalf("delay ticks %T, want chart.DurationTicks", ch.Y.Tick.Marker)
			}
			if dt.Log != c.log || strings.Contains(ch.Y.Label.Text, "log scale") != c.log {
				t.Errorf("log axis %v, label %q; want log %v", dt.Log, ch.Y.Label.Text, c.log)
			}
		})
	}
}

// TestBand: the band spans the 5th to 95th percentile of the jittered
// delay and the line is its median; without jitter the three are the
// policy's exact delay.
func TestBand(t *testing.T) {
	d := func(s float64) float64 { return s * 1000 }
	cases := []struct {
		name        string
		policy      retry.Policy
		retry       int
		lo, mid, hi float64 // milliseconds
	}{
		{name: "proportional ±50%", policy: retry.Policy{MaxAttempts: 6}, retry: 4, lo: d(8 * 0.55), mid: d(8), hi: d(8 * 1.45)},
		{name: "percent ±15%", policy: retry.Policy{MaxAttempts: 6, Jitter: retry.Jitter{Kind: retry.JitterPercent}}, retry: 3,
			lo: d(4 * 0.865), mid: d(4), hi: d(4 * 1.135)},
		{name: "full", policy: retry.Policy{MaxAttempts: 6, Jitter: retry.Jitter{Kind: retry.JitterFull}}, retry: 5, lo: d(16 * 0.05), mid: d(8), hi: d(16 * 0.95)},
		{name: "additive, zizq", policy: retry.Policy{MaxAttempts: 6, Backoff: retry.Polynomial, BackoffCoefficient: 4, Offset: 15 * time.Second,
			MaxInterval: 100 * day, Jitter: retry.Jitter{Kind: retry.JitterAdditive, Amount: 30 * time.Second}}, retry: 2,
			lo: d(16 + 15 + 3), mid: d(16 + 15 + 30), hi: d(16 + 15 + 57)},
		{name: "none", policy: retry.Policy{MaxAttempts: 6, Jitter: retry.Jitter{Kind: retry.JitterNone}}, retry: 5, lo: d(16), mid: d(16), hi: d(16)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pts := curvePoints(c.policy, 30, 20000, 7, false)
			p := pts[c.retry-1]
			if p.retry != c.retry {
				t.Fatalf("point %d is retry %d", c.retry-1, p.retry)
			}
			tol := 0.02 * (c.hi - c.lo) // 20000 draws: within 2% of the band's width
			for _, v := range []struct {
				name      string
				got, want float64
			}{{name: "5th percentile", got: p.lo, want: c.lo}, {name: "median", got: p.mid, want: c.mid}, {name: "95th percentile", got: p.hi, want: c.hi}} {
				if math.Abs(v.got-v.want) > tol {
					t.Errorf("retry %d: %s %.1fms, want %.1fms ± %.1f", c.retry, v.name, v.got, v.want, tol)
				}
			}
		})
	}
}

// TestPNGSize: a PNG is the SVG of the same size at twice the 96 pixels
// an inch a browser shows it at: 16cm × 10cm, plot's default, is
// 1209 × 756; sim --plot's 20cm × 11cm is 1512 × 831.
func TestPNGSize(t *testing.T) {
	cases := []struct {
		name string
		args []string
		w, h int
	}{
		{name: "plot", args: []string{"plot", "--samples", "20", "-o", "c.png"}, w: 1209, h: 756},
		{name: "plot --width 8cm --height 4in", args: []string{"plot", "--samples", "20", "--width", "8cm", "--height", "4in", "-o", "c.png"}, w: 605, h: 768},
		{name: "sim --plot", args: []string{"sim", "--duration", "5s", "--plot", "c.png"}, w: 1512, h: 831},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			args := slices.Clone(c.args)
			args[len(args)-1] = filepath.Join(dir, "c.png")
			if _, stderr, code := cli(t, "", args...); code != 0 {
				t.Fatalf("status %d: %s", code, stderr)
			}
			f, err := os.Open(args[len(args)-1])
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			cfg, format, err := image.DecodeConfig(f)
			if err != nil || format != "png" || cfg.Width != c.w || cfg.Height != c.h {
				t.Errorf("%s %d×%d (%v), want png %d×%d", format, cfg.Width, cfg.Height, err, c.w, c.h)
			}
		})
	}
}

// TestPlotNoRetry: plot refuses, on one line with status 2 and no file, a
// chart with no retry to draw: --attempts 0 or 1 (one attempt), or
// policies that all make one attempt.
func TestPlotNoRetry(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string // stderr
	}{
		{name: "--attempts 0", args: []string{"--attempts", "0"}, want: `retry: flag --attempts = "0": must be >= 2 with plot, which draws the delays before retries`},
		{name: "--attempts 1, a preset", args: []string{"--attempts", "1", "ojs"}, want: `retry: flag --attempts = "1": must be >= 2 with plot, which draws the delays before retries`},
		{name: "a preset of no retry", args: []string{"--preset", "ratchet", "--param", "retries=0"},
			want: `retry: policy "ratchet": max_attempts = 1: must be >= 2 with plot, which draws the delays before retries`},
		{name: "inline JSON", args: []string{"--policy", `{"max_attempts": 1}`},
			want: `retry: policy: max_attempts = 1: must be >= 2 with plot, which draws the delays before retries`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "c.svg")
			stdout, stderr, code := cli(t, "", append([]string{"plot", "-o", out}, c.args...)...)
			if code != exitUsage || stdout != "" || stderr != c.want+"\n" {
				t.Errorf("status %d, stdout %q, stderr %q; want status %d and %q", code, stdout, stderr, exitUsage, c.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s written", out)
			}
		})
	}
	// One policy of several with a retry is drawn.
	if _, stderr, code := cli(t, "", "plot", "--samples", "20", "-o", filepath.Join(t.TempDir(), "c.svg"), `{"max_attempts": 1}`, "ojs"); code != 0 {
		t.Errorf("a policy of one attempt beside ojs: status %d, %s", code, stderr)
	}
}
