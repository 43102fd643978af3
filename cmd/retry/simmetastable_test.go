package main

import (
	"encoding/json"
	"html"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	"gonum.org/v1/plot/vg"
)

// TestMetaServer: attempts wait FIFO for the first worker free, a full
// queue refuses at once, a capacity drop puts workers aside until the
// trigger ends, and a latency spike slows what starts in it.
func TestMetaServer(t *testing.T) {
	const ms100 = 100 * time.Millisecond
	type arrival struct {
		at, start, end time.Duration
		refused        bool
	}
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	cases := []struct {
		name     string
		workers  int
		active   int
		queueMax int
		trig     trigger
		arrivals []arrival
	}{
		{name: "two workers, a queue of two", workers: 2, active: 2, queueMax: 2, arrivals: []arrival{
			{at: 0, start: 0, end: ms(100)},
			{at: 0, start: 0, end: ms(100)},
			{at: 0, start: ms(100), end: ms(200)},
			{at: 0, start: ms(100), end: ms(200)},
			{at: 0, refused: true},
			{at: ms(50), refused: true},
			{at: ms(150), start: ms(200), end: ms(300)}, // the two waiting have started
		}},
		{name: "a capacity drop puts a worker aside until it ends", workers: 2, active: 1, queueMax: 10,
			trig: trigger{kind: triggerCapacity, start: ms(50), end: ms(500), factor: 2}, arrivals: []arrival{
				{at: 0, start: 0, end: ms(100)},
				{at: ms(60), start: ms(100), end: ms(200)},
				{at: ms(70), start: ms(200), end: ms(300)},
				{at: ms(450), start: ms(450), end: ms(550)},
				{at: ms(460), start: ms(500), end: ms(600)}, // the worker back at the trigger's end
			}},
		{name: "a latency spike slows what starts in it", workers: 1, active: 1, queueMax: 10,
			trig: trigger{kind: triggerLatency, start: ms(100), end: ms(400), factor: 3}, arrivals: []arrival{
				{at: 0, start: 0, end: ms(100)},
				{at: 0, start: ms(100), end: ms(400)},
				{at: 0, start: ms(400), end: ms(500)},
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := &metaServer{service: ms100, queueMax: c.queueMax, active: c.active, trig: c.trig,
				free: make([]time.Duration, c.workers), rng: rand.New(rand.NewPCG(1, 2))}
			for i, a := range c.arrivals {
				start, end, ok := m.admit(a.at)
				if ok == a.refused || (ok && (start != a.start || end != a.end)) {
					t.Errorf("arrival %d at %v: start %v, end %v, admitted %v; want %v, %v, refused %v",
						i, a.at, start, end, ok, a.start, a.end, a.refused)
				}
			}
		})
	}
}

// TestMetaRecovery: recovery is the first whole second after the trigger
// from which every 5 s window to the end of the run has successful calls
// of at least 90% of its arrivals.
func TestMetaRecovery(t *testing.T) {
	series := func(good func(i int) int) []metaBucket {
		s := make([]metaBucket, 30)
		for i := range s {
			s[i] = metaBucket{arrivals: 10, succeeded: good(i)}
		}
		return s
	}
	cases := []struct {
		name string
		end  time.Duration
		good func(i int) int
		want float64 // seconds; -1 for never
	}{
		{name: "never down", end: 10 * time.Second, good: func(int) int { return 10 }, want: 0},
		{name: "back at 14s", end: 10 * time.Second, good: func(i int) int { return map[bool]int{true: 10}[i >= 14] }, want: 4},
		{name: "a backlog served at once counts", end: 10 * time.Second,
			good: func(i int) int { return map[bool]int{true: 10}[i >= 14] + map[bool]int{true: 20}[i == 14] }, want: 2},
		{name: "a second at half does not break it", end: 10 * time.Second,
			good: func(i int) int { return 10 - map[bool]int{true: 5}[i == 20] }, want: 0},
		{name: "a second at nothing does", end: 10 * time.Second,
			good: func(i int) int { return 10 - map[bool]int{true: 10}[i == 20] }, want: 11},
		{name: "down again in the last window: never", end: 10 * time.Second,
			good: func(i int) int { return map[bool]int{true: 10}[i < 27] }, want: -1},
		{name: "never back", end: 10 * time.Second, good: func(int) int { return 0 }, want: -1},
		{name: "a trigger ending within a second", end: 10500 * time.Millisecond, good: func(int) int { return 10 }, want: 0.5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &metaRow{series: series(c.good)}
			r.recovery(c.end)
			switch {
			case c.want < 0 && (r.Recovered || r.RecoveryS != nil):
				t.Errorf("recovered %v after %v, want never", r.Recovered, *r.RecoveryS)
			case c.want >= 0 && (!r.Recovered || r.RecoveryS == nil || *r.RecoveryS != c.want):
				t.Errorf("recovered %v after %v, want after %vs", r.Recovered, r.RecoveryS, c.want)
			}
		})
	}
}

// smallMeta is a quick setup of sim --metastable: half the default's
// capacity, a trigger of L = 5 s at 10 s, and 11 L after it.
func smallMeta(kind string, timeout time.Duration) *metaSim {
	return &metaSim{rate: 35, capacity: 50, workers: 5, queue: 2 * time.Second, duration: 70 * time.Second,
		latency: 10 * time.Millisecond, timeout: timeout, policy: retry.DefaultPolicy(), seed: 1,
		trig: trigger{kind: kind, start: 10 * time.Second, end: 15 * time.Second, factor: 2}}
}

// byName returns the row of rows named name.
func byName(t *testing.T, rows []*metaRow, name string) *metaRow {
	t.Helper()
	i := slices.IndexFunc(rows, func(r *metaRow) bool { return r.Name == name })
	if i < 0 {
		t.Fatalf("no row %q", name)
	}
	return rows[i]
}

// TestMetastable: the requirement of sim --metastable on each trigger.
// Without a defence, the retries of attempts that time out keep the
// server's queue full after the trigger ends: goodput stays near zero in
// every window to the end of the run, 11 L later. The defaults recover
// within 2 L. With a timeout longer than the queue's wait, nothing
// sustains itself and no defence recovers too.
func TestMetastable(t *testing.T) {
	cases := []struct {
		name       string
		sim        *metaSim
		metastable bool
		chart      bool // check the chart of the run too
	}{
		{name: "capacity halved", sim: smallMeta(triggerCapacity, time.Second), metastable: true, chart: true},
		{name: "service time doubled", sim: smallMeta(triggerLatency, time.Second), metastable: true},
		{name: "a timeout past the queue's wait", sim: smallMeta(triggerCapacity, 3*time.Second), metastable: false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.sim
			rows, err := s.run()
			if err != nil {
				t.Fatal(err)
			}
			L := (s.trig.end - s.trig.start).Seconds()
			for _, r := range rows {
				t.Logf("%-12s before %.1f during %.1f after %.1f, %.2f×, wasted %.0f%%, recovered after %s",
					r.Name, r.Before, r.During, r.After, r.Amplification, 100*r.Wasted, r.recoveryText())
				if r.Before < 0.85*s.rate {
					t.Errorf("%s: goodput before the trigger %.1f/s, want about %g", r.Name, r.Before, s.rate)
				}
			}
			none, defaults := byName(t, rows, "no defence"), byName(t, rows, "defaults")
			if c.metastable {
				if none.Recovered || none.After > 0.05*s.rate || none.Amplification < 2.3 {
					t.Errorf("no defence: recovered %v, goodput after %.1f/s, amplification %.2f; want it down to the end (3 attempts a request)",
						none.Recovered, none.After, none.Amplification)
				}
				end := int(s.trig.end / time.Second)
				for k := end; k+recoveryWindow <= len(none.series); k++ {
					var arr, ok int
					for _, b := range none.series[k : k+recoveryWindow] {
						arr, ok = arr+b.arrivals, ok+b.succeeded
					}
					if float64(ok) > 0.1*float64(arr) {
						t.Errorf("no defence: %d of %d calls succeed in the %d s from %ds", ok, arr, recoveryWindow, k)
					}
				}
			} else if !none.Recovered || *none.RecoveryS > 2*L {
				t.Errorf("no defence: recovered %v after %s, want within 2 L (%gs)", none.Recovered, none.recoveryText(), 2*L)
			}
			if !defaults.Recovered || *defaults.RecoveryS > 2*L || defaults.After < 0.85*s.rate || defaults.Amplification > 1.2 {
				t.Errorf("defaults: recovered %v after %s, goodput after %.1f/s, amplification %.2f; want within 2 L (%gs), about %g/s, at most 1.2",
					defaults.Recovered, defaults.recoveryText(), defaults.After, defaults.Amplification, 2*L, s.rate)
			}
			if c.chart {
				checkMetaChart(t, s, rows)
			}
		})
	}
}

// checkMetaChart: the chart of a run names every row in its legend, the
// trigger and the arrivals, and labels its axes.
func checkMetaChart(t *testing.T, s *metaSim, rows []*metaRow) {
	t.Helper()
	svg, err := metaChart(s, rows).render(20*vg.Centimeter, 11*vg.Centimeter, "svg")
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range regexp.MustCompile(`>([^<]+)</text>`).FindAllStringSubmatch(string(svg), -1) {
		texts = append(texts, html.UnescapeString(m[1]))
	}
	want := []string{"trigger", "requests arriving", "successful calls per second (5 s mean)", "time"}
	for _, r := range rows {
		want = append(want, r.Name)
	}
	for _, w := range want {
		if !slices.Contains(texts, w) {
			t.Errorf("no text %q in the chart: %q", w, texts)
		}
	}
}

// TestMetastableCommand: the default run of sim --metastable meets the
// requirement (the run lasts 14 L past the trigger), its JSON has the
// keys docs/outages.md names, a seed gives the same figures every time, and the
// table names every row.
func TestMetastableCommand(t *testing.T) {
	stdout, stderr, code := cli(t, "", "sim", "--metastable", "--json")
	if code != 0 {
		t.Fatalf("status %d: %s", code, stderr)
	}
	var raw []map[string]any
	if err := json.Unmarshal([]byte(stdout), &raw); err != nil {
		t.Fatal(err)
	}
	want := []string{"no defence", "defaults"}
	for _, g := range defenceGates {
		want = append(want, g.name)
	}
	if len(raw) != len(defences()) || len(raw) < len(want) {
		t.Fatalf("%d rows, want %d", len(raw), len(defences()))
	}
	for _, r := range raw {
		for _, k := range []string{"name", "recovered", "recovery_s", "amplification", "goodput_before", "goodput_during", "goodput_after", "offered"} {
			if _, ok := r[k]; !ok {
				t.Errorf("row %v: no key %q", r["name"], k)
			}
		}
	}
	var rows []*metaRow
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatal(err)
	}
	for _, name := range want {
		byName(t, rows, name)
	}
	const L, after = 10, 140 // the default trigger, 30s:10s, in a run of 3m
	if none := byName(t, rows, "no defence"); none.Recovered || none.RecoveryS != nil || none.After > 0.05*metaRate {
		t.Errorf("no defence: recovered %v after %s, goodput after %.1f/s; want never, 14 L past the trigger", none.Recovered, none.recoveryText(), none.After)
	}
	if d := byName(t, rows, "defaults"); !d.Recovered || *d.RecoveryS > 2*L {
		t.Errorf("defaults: recovered %v after %s, want within 2 L (%ds)", d.Recovered, d.recoveryText(), 2*L)
	}
	// The rest on a quicker setup.
	small := []string{"sim", "--metastable", "--rate", "20", "--capacity", "30", "--workers", "6", "--trigger-at", "5s:3s", "--duration", "20s"}
	first, _, _ := cli(t, "", append(small, "--json")...)
	if again, _, _ := cli(t, "", append(small, "--json")...); again != first {
		t.Errorf("the same seed gave other figures:\n%s\n%s", first, again)
	}
	if other, _, _ := cli(t, "", append(small, "--json", "--seed", "2")...); other == first {
		t.Errorf("seeds 1 and 2 gave the same figures")
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
	for _, r := range rows {
		if !regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(r.Name) + `\s+[0-9.]+ `).MatchString(text) {
			t.Errorf("no row %q in the table:\n%s", r.Name, text)
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
		{args: []string{"--rate", "100"}, want: "flag --rate = 100: must be in (0, 100), under --capacity: the load is steady below capacity"},
		{args: []string{"--capacity", "0"}, want: "flag --capacity = 0: must be in (0, 1e6] with --metastable"},
		{args: []string{"--workers", "0"}, want: "flag --workers = 0: must be in [1, 10000]"},
		{args: []string{"--trigger", "outage"}, want: `flag --trigger = "outage": must be capacity or latency`},
		{args: []string{"--factor", "1"}, want: "flag --factor = 1: must be in (1, 100]"},
		{args: []string{"--trigger-at", "30s"}, want: `flag --trigger-at = "30s": must be START:LENGTH, two durations such as 30s:60s`},
		{args: []string{"--trigger-at", "30s:0s"}, want: `flag --trigger-at = "30s:0s": LENGTH must be > 0`},
		{args: []string{"--trigger-at", "0s:10s"}, want: `flag --trigger-at = "0s:10s": START must be at least 1s, so that there is a before`},
		{args: []string{"--attempt-timeout", "0"}, want: `flag --attempt-timeout = "0": must be in [1ms, 366 days]`},
		{args: []string{"--duration", "45s"}, want: "flags --duration and --trigger-at: the run (45s) must last at least 10s past the trigger's end (40s): --duration 50s or more"},
		{args: []string{"--rate", "9999", "--capacity", "10000", "--duration", "2m"}, want: "flags --rate and --duration: 9999/s over 2m is 1199880 requests: must be at most 1000000"},
		{args: []string{"--attempts", "-1"}, want: `flag --attempts = "-1"`},
		{args: []string{"--budget", "off"}, want: "flag --budget: does not apply to --metastable"},
		{args: []string{"--outage", "1s:1s"}, want: "flag --outage: does not apply to --metastable"},
		{args: []string{"--clients", "3"}, want: "flag --clients: does not apply to --metastable"},
		{args: []string{"--runs", "3"}, want: "flag --runs: does not apply to --metastable"},
	}
	for _, f := range metaOnly {
		cases = append(cases, struct {
			args []string
			want string
		}{args: []string{"--" + f, "1", "--metastable=false"}, want: "flag --" + f + ": applies only with --metastable"})
	}
	for _, c := range cases {
		args := append([]string{"sim", "--metastable"}, c.args...)
		stdout, stderr, code := cli(t, "", args...)
		if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) || !strings.HasPrefix(stderr, "retry: ") {
			t.Errorf("%v: status %d, stderr %q, want one line with %q", c.args, code, stderr, c.want)
		}
		if stdout != "" {
			t.Errorf("%v: stdout %q", c.args, stdout)
		}
	}
}
