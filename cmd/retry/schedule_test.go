package main

import (
	"encoding/json"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The seed tables of DESIGN.md, each as the delays in seconds before
// retries 1, 2, ... (nil where a case checks the cumulative total only).
var seedTables = []struct {
	golden string
	args   []string
	delays []float64
	total  float64 // cumulative seconds after the last retry; 0 to skip
}{
	{golden: "ratchet-table.json", args: []string{"--preset", "ratchet", "--param", "retries=4"},
		delays: []float64{1, 2, 4, 8}, total: 15},
	{golden: "ratchet-exponential-1s.json", args: []string{"--preset", "ratchet", "--param", "retries=20"},
		// retry 10 ≈ 8.5 min, 15 ≈ 4.5 h, 17 ≈ 18.2 h, 18 and later 24 h
		delays: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 86400, 86400, 86400}},
	{golden: "ojs-exponential.json", args: []string{"--preset", "ojs", "--jitter", "none", "--attempts", "11"},
		delays: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 300}},
	{golden: "ojs-polynomial.json", args: []string{"--preset", "ojs", "--jitter", "none", "--strategy", "polynomial", "--coefficient", "4", "--attempts", "6"},
		delays: []float64{1, 16, 81, 256, 300}},
	{golden: "ojs-polynomial-15s.json", args: []string{"--preset", "ojs", "--jitter", "none", "--strategy", "polynomial", "--coefficient", "4",
		"--initial", "PT15S", "--max", "PT1H", "--attempts", "5"},
		delays: []float64{15, 240, 1215, 3600}},
	{golden: "ojs-constant.json", args: []string{"--preset", "ojs", "--jitter", "none", "--strategy", "constant", "--attempts", "4"},
		delays: []float64{1, 1, 1}, total: 3},
	{golden: "ojs-coefficient-1.json", args: []string{"--preset", "ojs", "--jitter", "none", "--coefficient", "1", "--attempts", "4"},
		delays: []float64{1, 1, 1}, total: 3},
	{golden: "ojs-linear.json", args: []string{"--preset", "ojs", "--jitter", "none", "--strategy", "linear", "--attempts", "4"},
		delays: []float64{1, 2, 3}, total: 6},
	{golden: "daycry-2-3-20.json", args: []string{"--preset", "daycry", "--jitter", "none", "--param", "base=2s,multiplier=3,max=20s,retries=3"},
		delays: []float64{2, 6, 18}, total: 26},
	{golden: "daycry-3-4-10.json", args: []string{"--preset", "daycry", "--param", "jitter=false", "--param", "base=3s", "--param", "multiplier=4", "--param", "max=10s", "--param", "retries=3"},
		delays: []float64{3, 10, 10}, total: 23},
	{golden: "daycry-5-2.json", args: []string{"--preset", "daycry", "--jitter", "none"},
		delays: []float64{5, 10, 20, 40}, total: 75},
	{golden: "zizq-defaults.json", args: []string{"--preset", "zizq", "--jitter", "none"},
		delays: nil, total: 2154020},
	{golden: "zizq-2-100ms.json", args: []string{"--preset", "zizq", "--param", "exponent=2,base=100ms,jitter=0,retries=3"},
		delays: []float64{1.1, 4.1, 9.1}, total: 14.3},
}

// TestScheduleSeedTables: schedule --json without jitter reproduces each
// seed table of DESIGN.md, and matches its golden file.
func TestScheduleSeedTables(t *testing.T) {
	for _, c := range seedTables {
		t.Run(strings.TrimSuffix(c.golden, ".json"), func(t *testing.T) {
			stdout, stderr, code := cli(t, "", append([]string{"schedule", "--json"}, c.args...)...)
			if code != 0 || stderr != "" {
				t.Fatalf("status %d, stderr %q", code, stderr)
			}
			var rows []map[string]float64
			if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
				t.Fatal(err)
			}
			if rows[0]["attempt"] != 1 || rows[0]["retry"] != 0 || rows[0]["delay_ms"] != 0 {
				t.Errorf("first row %v, want attempt 1, retry 0, no delay", rows[0])
			}
			for i, want := range c.delays {
				r := rows[i+1]
				if r["retry"] != float64(i+1) || r["attempt"] != float64(i+2) {
					t.Errorf("row %d: %v", i+1, r)
				}
				if got := r["delay_ms"] / 1000; math.Abs(got-want) > 1e-9 {
					t.Errorf("retry %d: delay %vs, want %vs", i+1, got, want)
				}
				if _, ok := r["min_ms"]; ok {
					t.Errorf("retry %d: min_ms without jitter", i+1)
				}
			}
			if c.delays != nil && len(rows) != len(c.delays)+1 {
				t.Errorf("%d rows, want %d", len(rows), len(c.delays)+1)
			}
			if got := rows[len(rows)-1]["cumulative_ms"] / 1000; c.total != 0 && math.Abs(got-c.total) > 1e-6 {
				t.Errorf("cumulative %vs, want %vs", got, c.total)
			}
			golden(t, c.golden, []byte(stdout))
		})
	}
}

// TestScheduleJitter: with jitter, each row has min <= median <= max within
// the jitter's bounds, the same seed gives the same output, and another
// seed a different one.
func TestScheduleJitter(t *testing.T) {
	args := []string{"schedule", "--json", "--attempts", "6", "--samples", "2000"}
	run := func(seed string) []map[string]float64 {
		stdout, stderr, code := cli(t, "", append(args, "--seed", seed)...)
		if code != 0 {
			t.Fatalf("status %d: %s", code, stderr)
		}
		var rows []map[string]float64
		if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
			t.Fatal(err)
		}
		return rows
	}
	a, b, c := run("7"), run("7"), run("8")
	for i := 1; i < len(a); i++ {
		r := a[i]
		raw := 1000 * math.Pow(2, float64(i-1)) // OJS default, ×[0.5, 1.5)
		if !(r["min_ms"] >= raw/2 && r["min_ms"] <= r["delay_ms"] && r["delay_ms"] <= r["max_ms"] && r["max_ms"] < raw*1.5) {
			t.Errorf("retry %d: min %v, median %v, max %v outside [%v, %v)", i, r["min_ms"], r["delay_ms"], r["max_ms"], raw/2, raw*1.5)
		}
		// 2000 draws of a uniform spread: the median is near the middle.
		if math.Abs(r["delay_ms"]-raw) > raw*0.05 {
			t.Errorf("retry %d: median %v, want about %v", i, r["delay_ms"], raw)
		}
		if r["delay_ms"] != b[i]["delay_ms"] || r["min_ms"] != b[i]["min_ms"] {
			t.Errorf("retry %d: the same seed gave %v and %v", i, r, b[i])
		}
	}
	if a[1]["min_ms"] == c[1]["min_ms"] && a[1]["max_ms"] == c[1]["max_ms"] {
		t.Errorf("seeds 7 and 8 drew the same: %v", a[1])
	}
}

func TestScheduleText(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{args: []string{"--preset", "zizq", "--jitter", "none"}, want: []string{"# zizq (modified):", "26 25 4d12h30m40s 24d22h20m20s"}},
		{args: []string{"--preset", "ratchet", "--param", "retries=200", "--limit", "3"}, want: []string{"4 3 4s 7s", "# ... 197 more retries"}},
		{args: []string{"--attempts", "3", "--samples", "10"}, want: []string{"attempt retry min median max cumulative (median)", "# 10 draws"}},
		{args: []string{"--policy", "testdata/payment-policy.json", "--jitter", "none", "--limit", "2"}, want: []string{"# testdata/payment-policy.json (modified)", "3 2 4m 4m15s"}},
	}
	for _, c := range cases {
		stdout, stderr, code := cli(t, "", append([]string{"schedule"}, c.args...)...)
		if code != 0 {
			t.Fatalf("%v: status %d: %s", c.args, code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(strings.Join(strings.Fields(stdout), " "), w) {
				t.Errorf("%v: output lacks %q:\n%s", c.args, w, stdout)
			}
		}
	}
}

func TestHuman(t *testing.T) {
	cases := map[int64]string{
		0:                   "0s",
		1_500_000:           "1.5ms",
		335_201:             "335µs",
		1_008_123_000:       "1.008s",
		86_400_000_000_000:  "24h",
		4_140_000_000_000:   "1h9m",
		2_154_020 * 1e9:     "24d22h20m20s",
		(24*3600 + 1) * 1e9: "1d1s",
		160_015 * 1e9:       "1d20h26m55s",
		47 * 3600 * 1e9:     "1d23h",
		48 * 3600 * 1e9:     "2d",
		(48*3600 + 1) * 1e9: "2d1s",
	}
	for ns, want := range cases {
		if got := human(time.Duration(ns)); got != want {
			t.Errorf("human(%d) = %q, want %q", ns, got, want)
		}
	}
}

// TestScheduleDays: in a schedule's table, a duration past a day is
// written in days, delays and cumulative waits alike: zizq's 20th retry
// waits 1d20h26m55s, not 44h26m55s.
func TestScheduleDays(t *testing.T) {
	stdout, stderr, code := cli(t, "", "schedule", "--preset", "zizq", "--jitter", "none")
	if code != 0 {
		t.Fatalf("status %d: %s", code, stderr)
	}
	rows := map[string]string{}
	for _, l := range strings.Split(stdout, "\n") {
		if f := strings.Fields(l); len(f) == 4 {
			rows[f[0]] = strings.Join(f, " ")
		}
	}
	for attempt, want := range map[string]string{
		"14": "14 13 7h56m16s 1d51m6s",
		"18": "18 17 23h12m16s 3d19h24s",
		"21": "21 20 1d20h26m55s 8d8h49m26s",
	} {
		if rows[attempt] != want {
			t.Errorf("attempt %s: row %q, want %q", attempt, rows[attempt], want)
		}
	}
}

// TestScheduleBeyondDuration: a schedule whose total wait passes the ~292
// years a time.Duration holds keeps a cumulative that grows by each delay,
// in JSON and in text, with or without jitter; nothing wraps negative.
func TestScheduleBeyondDuration(t *testing.T) {
	poly := []string{"--strategy", "polynomial", "--coefficient", "10", "--max", "P36500D", "--attempts", "12"}
	cases := []struct {
		name string
		args []string
		last string // the text's last row, fields joined by one space
	}{
		{name: "no jitter", args: append([]string{"--jitter", "none"}, poly...), last: "12 11 36500d 126022d15h45m24s"},
		{name: "constant cap", args: []string{"--strategy", "constant", "--initial", "P36500D", "--max", "P36500D", "--attempts", "6", "--jitter", "none"},
			last: "6 5 36500d 182500d"},
		{name: "jitter", args: append([]string{"--samples", "50"}, poly...)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := cli(t, "", append([]string{"schedule", "--json"}, c.args...)...)
			if code != 0 {
				t.Fatalf("status %d: %s", code, stderr)
			}
			var rows []scheduleRow
			if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
				t.Fatal(err)
			}
			sum := 0.0
			for i, r := range rows[1:] {
				sum += r.Delay
				if r.Cumulative < rows[i].Cumulative || r.Cumulative < r.Delay {
					t.Errorf("retry %d: cumulative %v after %v, delay %v", r.Retry, r.Cumulative, rows[i].Cumulative, r.Delay)
				}
				if r.Min == nil && math.Abs(r.Cumulative-sum) > sum*1e-12 {
					t.Errorf("retry %d: cumulative %v ms, want the sum of the delays, %v ms", r.Retry, r.Cumulative, sum)
				}
			}
			if last := rows[len(rows)-1].Cumulative; last <= ms(math.MaxInt64) {
				t.Errorf("last cumulative %v ms, want past the longest duration", last)
			}
			stdout, _, _ = cli(t, "", append([]string{"schedule"}, c.args...)...)
			if regexp.MustCompile(`\s-\d`).MatchString(stdout) {
				t.Errorf("a negative duration in the text:\n%s", stdout)
			}
			lines := strings.Split(strings.TrimSpace(stdout), "\n")
			if c.last != "" && strings.Join(strings.Fields(lines[len(lines)-1]), " ") != c.last {
				t.Errorf("last row %q, want %q", lines[len(lines)-1], c.last)
			}
		})
	}
}

// TestFromMS: milliseconds past the longest duration saturate.
func TestFromMS(t *testing.T) {
	for _, c := range []struct {
		ms   float64
		want time.Duration
	}{
		{ms: 1.5, want: 1500 * time.Microsecond},
		{ms: 9223372036854.775, want: math.MaxInt64},
		{ms: 1e300, want: math.MaxInt64},
		{ms: -1e300, want: math.MinInt64},
	} {
		if got := fromMS(c.ms); got != c.want {
			t.Errorf("fromMS(%v) = %v, want %v", c.ms, got, c.want)
		}
	}
}

// TestAttemptsZero: as in JSON, --attempts 0 and 1 both mean one attempt,
// for every command that takes a policy.
func TestAttemptsZero(t *testing.T) {
	one, _, _ := cli(t, "", "schedule", "--json", "--attempts", "1")
	tests := []struct {
		name      string
		args      []string
		code      int
		stdout    string // "" for the schedule of --attempts 1
		stderrHas string
	}{
		{name: "schedule --attempts 0", args: []string{"schedule", "--json", "--attempts", "0"}},
		{name: "schedule, max_attempts 0 in JSON", args: []string{"schedule", "--json", "--policy", `{"max_attempts": 0}`}},
		{name: "run --attempts 0", args: []string{"run", "--attempts", "0", "--", "sh", "-c", "echo once; exit 3"},
			code: 3, stdout: "once\n", stderrHas: "retry: exhausted after 1 attempt: exit status 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := cli(t, "", tt.args...)
			want := tt.stdout
			if want == "" {
				want = one
			}
			if code != tt.code || stdout != want || !strings.Contains(stderr, tt.stderrHas) {
				t.Errorf("status %d, stdout %q, stderr %q; want status %d, stdout %q, stderr with %q", code, stdout, stderr, tt.code, want, tt.stderrHas)
			}
		})
	}
}
