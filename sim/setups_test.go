package sim_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/sim"
)

// run runs s, failing the test on an error.
func run(t *testing.T, s sim.Scenario) *sim.Report {
	t.Helper()
	rep, err := sim.Run(s)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// names returns the names of defence sets.
func names(ds []sim.Defence) []string {
	var n []string
	for _, d := range ds {
		n = append(n, d.Name)
	}
	return n
}

// smallMetastable is NewMetastable at half the load and capacity, with a
// trigger of 5 s at 10 s and a run of 70 s, so that it runs in seconds
// under the race detector.
func smallMetastable() sim.Metastable {
	m := sim.NewMetastable()
	m.Rate, m.Capacity, m.Workers, m.Duration = 35, 50, 5, 70*time.Second
	m.Trigger.Start, m.Trigger.Length = 10*time.Second, 5*time.Second
	return m
}

// TestMetastableDefences: the defence sets come in their order; without a
// defence the metastable failure outlasts the run (11 L after the
// trigger), with the defaults or the budget alone it ends within 2 L, at
// 1 and 10 clients. The budget given reaches the sets that have one: a
// budget of a billion tokens denies no retry, and the failure lasts.
func TestMetastableDefences(t *testing.T) {
	if got, want := names(sim.Defences(retry.Budget{})), []string{"no defence", "budget", "breaker", "throttle", "concurrency", "defaults", "all"}; !slices.Equal(got, want) {
		t.Fatalf("defence sets %q, want %q", got, want)
	}
	m := smallMetastable()
	if m.ServiceTime() != 100*time.Millisecond {
		t.Errorf("service time %v, want 100ms (5 workers, 50 a second)", m.ServiceTime())
	}
	for _, clients := range []int{1, 10} {
		for _, d := range sim.Defences(retry.Budget{}) {
			if d.Name != "no defence" && d.Name != "defaults" && d.Name != "budget" {
				continue
			}
			s, err := m.Scenario(d, clients, retry.WithPolicy(retry.Policy{MaxAttempts: 3}))
			if err != nil {
				t.Fatal(err)
			}
			if s.Service.QueueLength != 100 || s.Fleet.Clients != clients {
				t.Errorf("queue %d, %d clients; want 2s of work (100) and %d", s.Service.QueueLength, s.Fleet.Clients, clients)
			}
			f := run(t, s).Total
			t.Logf("%s, %d clients: recovered %v after %v, %.2f×", d.Name, clients, f.Recovered, f.Recovery, f.Amplification())
			if want := d.Name != "no defence"; f.Recovered != want || want && f.Recovery > 10*time.Second {
				t.Errorf("%s, %d clients: recovered %v after %v; want %v, within 10s", d.Name, clients, f.Recovered, f.Recovery, want)
			}
		}
	}
	for _, d := range sim.Defences(retry.Budget{Tokens: 1e9, TimeoutTokens: 1e9}) {
		if d.Name == "defaults" || d.Name == "budget" {
			s, err := m.Scenario(d, 1)
			if err != nil {
				t.Fatal(err)
			}
			if f := run(t, s).Total; f.Recovered || f.Failed["budget"] != 0 {
				t.Errorf("%s with a budget of 1e9 tokens: recovered %v, failed %v; want the budget given, which denies nothing and cures nothing", d.Name, f.Recovered, f.Failed)
			}
		}
	}
}

// TestBudgetTable: the cases come in the order of the docs' tables, and
// each rule does what its definition predicts in one client's full
// outage at 100 requests a second: about 3 attempts a request without a
// budget, at most 1.10 with the default, 1 + 0.15 + 2/rate with the old
// rule, 1 + 0.2 + 10/rate with Finagle's, and 1 + ⌊500/14⌋/(60·rate)
// with the AWS quota; the default budget loses no call of a quiet
// client's restart.
func TestBudgetTable(t *testing.T) {
	table := sim.NewBudgetTable()
	cases := table.Cases()
	var kinds []string
	for _, c := range cases {
		kinds = append(kinds, fmt.Sprintf("%s/%d", c.Kind, c.Clients))
	}
	want := []string{"restart/1", "restart/1", "outage/1", "outage/1", "outage/1", "outage/10", "outage/100", "outage/1000"}
	for range 2 * 3 * 3 {
		want = append(want, "fast/1")
	}
	for i := 8 + 9; i < len(want); i++ {
		want[i] = "timeouts/1"
	}
	if !slices.Equal(kinds, want) {
		t.Fatalf("cases %q, want %q", kinds, want)
	}
	outage := sim.BudgetCase{Kind: "outage", Clients: 1, Rate: 100}
	predict := []float64{3, 1.10, 1 + 0.15 + 2.0/100, 1 + 0.2 + 10.0/100, 1 + math.Floor(500.0/14)/(60*100)}
	rules := sim.BudgetRules()
	if len(rules) != len(predict) {
		t.Fatalf("%d rules, want %d", len(rules), len(predict))
	}
	for i, rule := range rules {
		amp := run(t, outage.Scenario(rule, 1)).Total.FaultAmplification()
		t.Logf("%s: %.3f×", rule.Name, amp)
		switch {
		case i == 0 && amp < 2.9, i == 1 && amp > predict[1], i >= 2 && math.Abs(amp-predict[i]) > 0.01:
			t.Errorf("%s: %.3f× in a full outage, want %.3f×", rule.Name, amp, predict[i])
		}
	}
	restart := cases[0]
	if f := run(t, restart.Scenario(rules[1], 1)).Total; f.Succeeded != f.Requests || f.Requests != 6+restart.Burst {
		t.Errorf("a restart of %d calls in %v: %d of %d succeeded, want all of 6 + %d", restart.Burst, restart.Down, f.Succeeded, f.Requests, restart.Burst)
	}
}

// TestChainOutage: under a full outage at the bottom of 2 layers, 3
// attempts at every layer send 9 times the requests to the dependency,
// retries at one layer 5 times, and every call ends.
func TestChainOutage(t *testing.T) {
	ds := sim.ChainDefences()
	if got, want := names(ds), []string{"naive", "rule only", "budgets only", "defaults"}; !slices.Equal(got, want) {
		t.Fatalf("configurations %q, want %q", got, want)
	}
	for i, want := range []float64{9, 5} {
		rep := run(t, sim.ChainOutage(2, ds[i], 10, 10*time.Second, 10*time.Millisecond, 1))
		if f := rep.Total; f.Unfinished != 0 || f.Amplification() != want || len(rep.Layers) != 2 {
			t.Errorf("%s: %d unfinished, %.3f× at the bottom, %d layers; want none, %g×, 2", ds[i].Name, f.Unfinished, f.Amplification(), len(rep.Layers), want)
		}
	}
}

// TestContention: 100 clients each finish their write with every
// strategy; full jitter takes far fewer calls than exponential backoff
// without jitter, and no backoff the most.
func TestContention(t *testing.T) {
	calls := map[string]int{}
	for _, st := range sim.ContentionStrategies() {
		f := run(t, sim.Contention(100, st.Policy, 1)).Total
		if f.Succeeded != 100 {
			t.Errorf("%s: %d of 100 writes succeeded", st.Name, f.Succeeded)
		}
		calls[st.Name] = f.Attempts
	}
	t.Logf("calls %v", calls)
	if len(calls) != 5 || calls["full"] > calls["exponential"]/2 || calls["no-backoff"] < calls["exponential"] {
		t.Errorf("calls %v: want full jitter under half of exponential, no backoff the most", calls)
	}
}

// TestTailAtScale: 20,000 calls; a hedge at p95 cuts the 99.9th
// percentile at least tenfold for at most 6% more attempts: a hedge for
// about 5% of calls, as the 95th percentile promises. Without hedging 1%
// of calls take over a second; with it, 2 (those whose hedge was slow too),
// as the picture of `retry sim --hedge` says for seed 1.
func TestTailAtScale(t *testing.T) {
	plain := run(t, sim.TailAtScale(retry.Hedge{Max: 1}, 1))
	hedged := run(t, sim.TailAtScale(retry.Hedge{Percentile: 95, Floor: time.Millisecond, Ceiling: 100 * time.Millisecond}, 1))
	drop, extra := float64(plain.Latency(0.999))/float64(hedged.Latency(0.999)), hedged.Total.Amplification()/plain.Total.Amplification()-1
	if plain.Total.Requests != 20000 || drop < 10 || extra > 0.06 {
		t.Errorf("%d calls; p99.9 falls %.1f× for %.2f%% more attempts, want 20000, ≥ 10×, ≤ 6%%", plain.Total.Requests, drop, 100*extra)
	}
	if share := float64(hedged.Stats[0].Hedges) / 20000; share < 0.04 || share > 0.06 {
		t.Errorf("%.2f%% of calls hedged, want 4–6%% for a delay at the 95th percentile", 100*share)
	}
	slow := func(r *sim.Report) int {
		n := 0
		for _, d := range r.Latencies {
			if d > time.Second {
				n++
			}
		}
		return n
	}
	if p, h := slow(plain), slow(hedged); p < 180 || p > 230 || h != 2 {
		t.Errorf("calls over a second: %d without hedging, %d with; want about 200 (1%%) and 2", p, h)
	}
}

// TestFiguresRates: SuccessRate and FaultAmplification are shares of
// what was counted, 0 with nothing to count.
func TestFiguresRates(t *testing.T) {
	cases := []struct {
		name          string
		f             sim.Figures
		success, load float64
	}{
		{name: "empty"},
		{name: "counted", f: sim.Figures{Requests: 10, Succeeded: 4, FaultRequests: 5, FaultAttempts: 6}, success: 0.4, load: 1.2},
		{name: "attempts in a fault but no call arriving in it", f: sim.Figures{FaultAttempts: 3}},
	}
	for _, c := range cases {
		if s, l := c.f.SuccessRate(), c.f.FaultAmplification(); s != c.success || l != c.load {
			t.Errorf("%s: success %v, load %v; want %v, %v", c.name, s, l, c.success, c.load)
		}
	}
}

// TestPeaks: the peak is the busiest bucket's attempts per second, and
// the mean it is compared with runs to the last bucket with an attempt.
func TestPeaks(t *testing.T) {
	cases := []struct {
		name        string
		series      []sim.Bucket
		resolution  time.Duration
		rate, ratio float64
	}{
		{name: "no attempts", series: []sim.Bucket{{}, {}}, resolution: time.Second},
		{name: "a peak of 6 in seconds, 10 over 3 buckets", series: []sim.Bucket{{Attempts: 2}, {Attempts: 6}, {Attempts: 2}, {}, {}},
			resolution: time.Second, rate: 6, ratio: 6 / (10.0 / 3)},
		{name: "buckets of 100ms", series: []sim.Bucket{{Attempts: 3}, {Attempts: 1}}, resolution: 100 * time.Millisecond, rate: 30, ratio: 1.5},
	}
	for _, c := range cases {
		rep := &sim.Report{Total: sim.Figures{Series: c.series}, Resolution: c.resolution}
		for _, b := range c.series {
			rep.Total.Attempts += b.Attempts
		}
		if rate, ratio := rep.PeakRate(), rep.PeakToMean(); math.Abs(rate-c.rate) > 1e-9 || math.Abs(ratio-c.ratio) > 1e-9 {
			t.Errorf("%s: peak %v/s, peak-to-mean %v; want %v, %v", c.name, rate, ratio, c.rate, c.ratio)
		}
	}
}

// TestMetastableRefuses: a setup the model cannot serve is refused with
// the field, its value and the rule, before anything runs; what Run
// checks, Run refuses.
func TestMetastableRefuses(t *testing.T) {
	ok := sim.NewMetastable()
	cases := []struct {
		name    string
		change  func(m *sim.Metastable)
		clients int
		want    string
	}{
		{name: "no capacity", change: func(m *sim.Metastable) { m.Capacity = 0 }, clients: 1, want: "sim: Metastable.Capacity = 0: must be in (0, 1e7] attempts a second"},
		{name: "negative capacity", change: func(m *sim.Metastable) { m.Capacity = -5 }, clients: 1, want: "sim: Metastable.Capacity = -5: must be in (0, 1e7]"},
		{name: "a service time of over a year", change: func(m *sim.Metastable) { m.Capacity = 1e-9 }, clients: 1, want: "sim: Metastable.Capacity = 1e-09: must be in (0, 1e7] attempts a second, and Workers/Capacity at most 366 days"},
		{name: "NaN capacity", change: func(m *sim.Metastable) { m.Capacity = math.NaN() }, clients: 1, want: "sim: Metastable.Capacity = NaN"},
		{name: "no workers", change: func(m *sim.Metastable) { m.Workers = 0 }, clients: 1, want: "sim: Metastable.Workers = 0: must be in [1, 10000]"},
		{name: "a negative queue", change: func(m *sim.Metastable) { m.QueueWork = -time.Second }, clients: 1, want: "sim: Metastable.QueueWork = -1s: must be in [0, 366 days]"},
		{name: "no clients", change: func(*sim.Metastable) {}, clients: -1, want: "sim: Fleet.Clients = -1"},
		{name: "a negative rate", change: func(m *sim.Metastable) { m.Rate = -1 }, clients: 1, want: "sim: Metastable.Rate = -1: must be in (0, 100), below Capacity"},
		{name: "a rate at capacity", change: func(m *sim.Metastable) { m.Rate = 100 }, clients: 1, want: "sim: Metastable.Rate = 100: must be in (0, 100), below Capacity: the load is steady until the trigger"},
		{name: "no duration", change: func(m *sim.Metastable) { m.Duration = 0 }, clients: 1, want: "sim: Duration = 0s"},
	}
	for _, c := range cases {
		m := ok
		c.change(&m)
		s, err := m.Scenario(sim.Defence{}, c.clients)
		if err == nil {
			_, err = sim.Run(s)
		}
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// TestSetupsZero: the zero values and extremes of the other setups run
// or are refused by Run, and none panics: a rule without options is the
// default budget, a fleet too large is Run's to refuse, a case run twice
// gives the same figures, a chain of no layers calls the dependency, a
// contention of no clients has one.
func TestSetupsZero(t *testing.T) {
	if f := run(t, sim.BudgetCase{Kind: "outage", Rate: 10}.Scenario(sim.BudgetRule{}, 1)).Total; f.FaultAmplification() > 1.10 {
		t.Errorf("a rule without options: %.3f× in a full outage, want the default budget's (at most 1.10×)", f.FaultAmplification())
	}
	if _, err := sim.Run(sim.BudgetCase{Kind: "outage", Clients: 1 << 40, Rate: 1}.Scenario(sim.BudgetRules()[2], 1)); err == nil || !strings.Contains(err.Error(), "Fleet.Clients") {
		t.Errorf("a fleet of 2^40 clients: %v, want Run's refusal, before any client is built", err)
	}
	s := sim.NewBudgetTable().Cases()[2].Scenario(sim.BudgetRules()[2], 1) // the old rule, one client at 10/s
	first, again := run(t, s).Total.FaultAmplification(), run(t, s).Total.FaultAmplification()
	if first != again || math.Abs(first-(1+0.15+2.0/10)) > 0.01 {
		t.Errorf("one case run twice: %.3f× then %.3f×, want 1.35× both times (each run observes its own clients)", first, again)
	}
	if rep := run(t, sim.ChainOutage(-1, sim.Defence{}, 10, time.Second, 0, 1)); len(rep.Layers) != 0 || rep.Total.Attempts != 10 {
		t.Errorf("no layers: %d layers, %d attempts at the dependency; want none and 10", len(rep.Layers), rep.Total.Attempts)
	}
	if f := run(t, sim.Contention(0, retry.Policy{}, 1)).Total; f.Requests != 1 || f.Succeeded != 1 {
		t.Errorf("no clients: %d writes, %d succeeded; want one client's", f.Requests, f.Succeeded)
	}
	if _, err := sim.Run(sim.TailAtScale(retry.Hedge{Max: -1}, 1)); err == nil || !strings.Contains(err.Error(), "Max = -1") {
		t.Errorf("a bad hedge: %v, want the option's error", err)
	}
}
