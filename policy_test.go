package retry_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/steadyhq/retry"
)

const day = 24 * time.Hour

// seedCase is a policy built in Go and the same policy in JSON, with the
// delays (without jitter) its system documents before retries 1, 2, ...
// and at selected later retries.
type seedCase struct {
	name   string
	policy retry.Policy
	json   string
	want   []time.Duration       // before retries 1, 2, 3, ...
	at     map[int]time.Duration // before selected retries
}

func secs(s ...float64) []time.Duration {
	out := make([]time.Duration, len(s))
	for i, v := range s {
		out[i] = time.Duration(math.Round(v * float64(time.Second)))
	}
	return out
}

// ratchet maps Ratchet's EXPONENTIAL backoff: maxRetries N is N+1 attempts,
// coefficient 2, capped at min(24 h, base·2^20), no jitter.
func ratchet(base time.Duration, maxRetries int) retry.Policy {
	return retry.Policy{
		MaxAttempts:        maxRetries + 1,
		InitialInterval:    base,
		BackoffCoefficient: 2,
		MaxInterval:        min(day, base<<20),
		Jitter:             retry.Jitter{Kind: retry.JitterNone},
	}
}

// zizq maps Zizq's t = B + a^E + a·rand(0..J): polynomial with I = 1 s,
// C = E, offset B, additive jitter J, no effective cap.
func zizq(limit int, b time.Duration, e float64, j time.Duration) retry.Policy {
	p := retry.Policy{
		MaxAttempts:        limit + 1,
		InitialInterval:    time.Second,
		Backoff:            retry.Polynomial,
		BackoffCoefficient: e,
		Offset:             b,
		MaxInterval:        36500 * day,
		Jitter:             retry.Jitter{Kind: retry.JitterAdditive, Amount: j},
	}
	if j == 0 {
		p.Jitter = retry.Jitter{Kind: retry.JitterNone}
	}
	return p
}

// daycry maps Daycry's exponential strategy: first retry = base, ±15%.
func daycry(base, maxDelay time.Duration, m float64) retry.Policy {
	return retry.Policy{
		InitialInterval:    base,
		BackoffCoefficient: m,
		MaxInterval:        maxDelay,
		Jitter:             retry.Jitter{Kind: retry.JitterPercent, Factor: 0.15},
	}
}

var seedCases = []seedCase{
	{
		name:   "ratchet exponential 1s",
		policy: ratchet(time.Second, 25),
		json:   `{"max_attempts": 26, "initial_interval": "PT1S", "backoff_coefficient": 2, "max_interval": "P1D", "jitter": false}`,
		want:   secs(1, 2, 4, 8),
		at: map[int]time.Duration{
			10: 512 * time.Second,   // ≈ 8.5 min
			15: 16384 * time.Second, // ≈ 4.5 h
			17: 65536 * time.Second, // ≈ 18.2 h
			18: day, 19: day, 20: day, 21: day, 25: day, 1000: day, math.MaxInt32: day,
		},
	},
	{
		name:   "ratchet exponential 10ms: the exponent cap binds before 24 h",
		policy: ratchet(10*time.Millisecond, 30),
		json:   `{"max_attempts": 31, "initial_interval": "10ms", "max_interval": 10485760, "jitter": false}`,
		want:   secs(0.01, 0.02, 0.04),
		at:     map[int]time.Duration{21: 10 * time.Millisecond << 20, 22: 10 * time.Millisecond << 20, math.MaxInt32: 10 * time.Millisecond << 20},
	},
	{
		name:   "ratchet NONE",
		policy: retry.Policy{MaxAttempts: 4, Backoff: retry.Immediate, Jitter: retry.Jitter{Kind: retry.JitterNone}},
		json:   `{"max_attempts": 4, "backoff_strategy": "immediate", "jitter": false}`,
		want:   secs(0, 0, 0),
	},
	{
		name:   "ratchet FIXED 5s",
		policy: retry.Policy{MaxAttempts: 4, Backoff: retry.Constant, InitialInterval: 5 * time.Second, Jitter: retry.Jitter{Kind: retry.JitterNone}},
		json:   `{"max_attempts": 4, "backoff_strategy": "fixed", "initial_interval": "PT5S", "jitter": false}`,
		want:   secs(5, 5, 5),
	},
	{
		name:   "ojs exponential defaults",
		policy: retry.Policy{MaxAttempts: 11},
		json:   `{"retry": {"max_attempts": 11, "initial_interval": "PT1S", "backoff_coefficient": 2.0, "max_interval": "PT5M", "jitter": true}}`,
		want:   secs(1, 2, 4, 8, 16, 32, 64, 128, 256, 300),
	},
	{
		name:   "ojs polynomial 1s C=4",
		policy: retry.Policy{Backoff: retry.Polynomial, BackoffCoefficient: 4},
		json:   `{"backoff_strategy": "polynomial", "backoff_coefficient": 4}`,
		want:   secs(1, 16, 81, 256, 300),
	},
	{
		name:   "ojs polynomial 15s C=4 1h (payment processing)",
		policy: retry.Policy{MaxAttempts: 25, InitialInterval: 15 * time.Second, Backoff: retry.Polynomial, BackoffCoefficient: 4, MaxInterval: time.Hour},
		json:   `{"retry": {"max_attempts": 25, "initial_interval": "PT15S", "backoff_strategy": "polynomial", "backoff_coefficient": 4.0, "max_interval": "PT1H"}}`,
		want:   secs(15, 240, 1215, 3600, 3600),
	},
	{
		name:   "ojs constant by coefficient 1 (polling)",
		policy: retry.Policy{MaxAttempts: 60, InitialInterval: 10 * time.Second, BackoffCoefficient: 1, MaxInterval: 10 * time.Second, Jitter: retry.Jitter{Kind: retry.JitterNone}},
		json:   `{"retry": {"max_attempts": 60, "initial_interval": "PT10S", "backoff_coefficient": 1.0, "max_interval": "PT10S", "jitter": false}}`,
		want:   secs(10, 10, 10, 10),
		at:     map[int]time.Duration{59: 10 * time.Second},
	},
	{
		name:   "ojs none strategy is constant",
		policy: retry.Policy{Backoff: retry.Constant, InitialInterval: 2 * time.Second},
		json:   `{"backoff_strategy": "none", "initial_interval": "PT2S"}`,
		want:   secs(2, 2, 2),
	},
	{
		name:   "ojs linear",
		policy: retry.Policy{Backoff: retry.Linear},
		json:   `{"backoff_strategy": "linear"}`,
		want:   secs(1, 2, 3, 4),
		at:     map[int]time.Duration{300: 5 * time.Minute, math.MaxInt32: 5 * time.Minute},
	},
	{
		name:   "daycry base 2 m 3 max 20",
		policy: daycry(2*time.Second, 20*time.Second, 3),
		json:   `{"initial_interval": 2000, "backoff_coefficient": 3, "max_interval": 20000, "jitter": {"kind": "percent", "factor": 0.15}}`,
		want:   secs(2, 6, 18, 20),
	},
	{
		name:   "daycry base 3 m 4 max 10",
		policy: daycry(3*time.Second, 10*time.Second, 4),
		json:   `{"initial_interval": "3s", "backoff_coefficient": 4, "max_interval": "10s", "jitter": {"kind": "percent"}}`,
		want:   secs(3, 10, 10),
	},
	{
		name:   "daycry base 5 m 2 max 300",
		policy: daycry(5*time.Second, 300*time.Second, 2),
		json:   `{"initial_interval": "PT5S", "max_interval": "PT300S", "jitter": {"kind": "percent", "factor": 0.15}}`,
		want:   secs(5, 10, 20, 40),
	},
	{
		name:   "daycry none is immediate",
		policy: retry.Policy{Backoff: retry.Immediate, Jitter: retry.Jitter{Kind: retry.JitterPercent}},
		json:   `{"backoff_strategy": "immediate", "jitter": {"kind": "percent"}}`,
		want:   secs(0, 0),
	},
	{
		name:   "zizq E=2 B=100ms J=0",
		policy: zizq(25, 100*time.Millisecond, 2, 0),
		json:   `{"max_attempts": 26, "initial_interval": "PT1S", "backoff_strategy": "polynomial", "backoff_coefficient": 2, "delay_offset": "PT0.1S", "max_interval": "P36500D", "jitter": false}`,
		want:   secs(1.1, 4.1, 9.1, 16.1),
	},
	{
		name:   "zizq defaults 25 / 15s / 4 / 30s",
		policy: zizq(25, 15*time.Second, 4, 30*time.Second),
		json:   `{"max_attempts": 26, "initial_interval": 1000, "backoff_strategy": "polynomial", "backoff_coefficient": 4, "delay_offset": "15s", "max_interval": "P36500D", "jitter": {"kind": "additive", "amount": "PT30S"}}`,
		want:   secs(16, 31, 96, 271),
		at:     map[int]time.Duration{25: (15 + 390625) * time.Second},
	},
}

// TestSeedSystems reproduces each seed system's table with the policy built
// in Go and parsed from JSON.
func TestSeedSystems(t *testing.T) {
	for _, tc := range seedCases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.policy.Validate(); err != nil {
				t.Fatalf("Go policy invalid: %v", err)
			}
			parsed, err := retry.ParsePolicy([]byte(tc.json))
			if err != nil {
				t.Fatalf("JSON policy: %v", err)
			}
			if !equalPolicies(parsed, withDefaults(tc.policy)) {
				t.Errorf("JSON policy %+v\n   Go policy %+v", parsed, withDefaults(tc.policy))
			}
			for name, p := range map[string]retry.Policy{"go": tc.policy, "json": parsed} {
				for i, want := range tc.want {
					if got := p.Delay(i + 1); got != want {
						t.Errorf("%s: Delay(%d) = %v, want %v", name, i+1, got, want)
					}
				}
				for n, want := range tc.at {
					if got := p.Delay(n); got != want {
						t.Errorf("%s: Delay(%d) = %v, want %v", name, n, got, want)
					}
				}
			}
		})
	}
}

func equalPolicies(a, b retry.Policy) bool {
	ja, errA := a.MarshalJSON()
	jb, errB := b.MarshalJSON()
	return errA == nil && errB == nil && string(ja) == string(jb)
}

// TestRatchetFormula compares the exponential mapping with Ratchet's own
// computation, transcribed: base · (1 << min(n−1, 20)), capped at 24 h.
func TestRatchetFormula(t *testing.T) {
	for _, base := range []time.Duration{time.Millisecond, 10 * time.Millisecond, 250 * time.Millisecond, time.Second, 5 * time.Second, time.Minute, time.Hour} {
		p := ratchet(base, 100)
		for n := 1; n <= 100; n++ {
			want := min(base*time.Duration(int64(1)<<min(n-1, 20)), day)
			if got := p.Delay(n); got != want {
				t.Fatalf("base %v: Delay(%d) = %v, Ratchet gives %v", base, n, got, want)
			}
		}
	}
}

// TestZizqTotal: the defaults add up to about 24.9 days, 2,154,020 s
// without jitter, and the jitter adds at most 30 s · n per retry.
func TestZizqTotal(t *testing.T) {
	p := zizq(25, 15*time.Second, 4, 30*time.Second)
	var low, high, mean time.Duration
	for n := 1; n <= 25; n++ {
		low += p.Sample(n, 0, 0)
		high += p.Sample(n, 0, math.Nextafter(1, 0))
		mean += p.Delay(n) + time.Duration(n)*15*time.Second
	}
	if low != 2154020*time.Second {
		t.Errorf("total without jitter %v (%d s), want 2,154,020 s", low, low/time.Second)
	}
	if maxJitter := 30 * time.Second * (25 * 26 / 2); high-low < maxJitter-time.Second || high-low > maxJitter {
		t.Errorf("jitter adds %v in all, want just under %v", high-low, maxJitter)
	}
	if days := mean.Hours() / 24; days < 24.9 || days > 25.0 {
		t.Errorf("mean total %.2f days, want about 24.9", days)
	}
}

// TestOJSJitterBounds: a 10 s delay with OJS jitter lands in [5 s, 15 s),
// and the cap applies again after jitter.
func TestOJSJitterBounds(t *testing.T) {
	p := retry.Policy{InitialInterval: 10 * time.Second}
	tests := []struct {
		u    float64
		want time.Duration
	}{
		{want: 5 * time.Second},
		{u: 0.5, want: 10 * time.Second},
		{u: 0.75, want: 12500 * time.Millisecond},
		{u: math.Nextafter(1, 0), want: 15 * time.Second},
	}
	for _, tt := range tests {
		if got := p.Sample(1, 0, tt.u); got.Round(time.Microsecond) != tt.want {
			t.Errorf("Sample(1, u=%v) = %v, want %v", tt.u, got, tt.want)
		}
	}
	capped := retry.Policy{InitialInterval: 10 * time.Second, MaxInterval: 12 * time.Second}
	if got := capped.Sample(1, 0, 0.9); got != 12*time.Second {
		t.Errorf("jitter above the cap gave %v, want the cap 12s", got)
	}
}

// TestJitterDistribution draws 10,000 samples of each kind: every one stays
// within the kind's bounds and under the final cap, and the mean is within
// 2% of the expected value.
func TestJitterDistribution(t *testing.T) {
	base := retry.Policy{InitialInterval: time.Second, MaxInterval: time.Hour, Backoff: retry.Exponential}
	with := func(j retry.Jitter) retry.Policy { p := base; p.Jitter = j; return p }
	const n = 4 // d = 8 s
	d := 8 * time.Second
	tests := []struct {
		name     string
		p        retry.Policy
		prev     time.Duration
		lo, hi   time.Duration // [lo, hi)
		wantMean time.Duration
	}{
		{name: "none", p: with(retry.Jitter{Kind: retry.JitterNone}), lo: d, hi: d + 1, wantMean: d},
		{name: "proportional 0.5", p: with(retry.Jitter{}), lo: d / 2, hi: d * 3 / 2, wantMean: d},
		{name: "proportional 0.2", p: with(retry.Jitter{Kind: retry.JitterProportional, Factor: 0.2}), lo: d * 8 / 10, hi: d * 12 / 10, wantMean: d},
		{name: "percent 0.15", p: with(retry.Jitter{Kind: retry.JitterPercent}), lo: d * 85 / 100, hi: d * 115 / 100, wantMean: d},
		{name: "additive 500ms", p: with(retry.Jitter{Kind: retry.JitterAdditive, Amount: 500 * time.Millisecond}), lo: d, hi: d + n*500*time.Millisecond, wantMean: d + n*250*time.Millisecond},
		{name: "full", p: with(retry.Jitter{Kind: retry.JitterFull}), hi: d, wantMean: d / 2},
		{name: "equal", p: with(retry.Jitter{Kind: retry.JitterEqual}), lo: d / 2, hi: d, wantMean: d * 3 / 4},
		{name: "decorrelated first", p: with(retry.Jitter{Kind: retry.JitterDecorrelated}), lo: time.Second, hi: 3 * time.Second, wantMean: 2 * time.Second},
		{name: "decorrelated after 4s", p: with(retry.Jitter{Kind: retry.JitterDecorrelated}), prev: 4 * time.Second, lo: time.Second, hi: 12 * time.Second, wantMean: 6500 * time.Millisecond},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sum float64
			for range 10000 {
				got := tt.p.Sample(n, tt.prev, rng.Float64())
				if got < tt.lo || got >= tt.hi {
					t.Fatalf("sample %v outside [%v, %v)", got, tt.lo, tt.hi)
				}
				sum += float64(got)
			}
			mean := sum / 10000
			if dev := math.Abs(mean-float64(tt.wantMean)) / float64(tt.wantMean); dev > 0.02 {
				t.Errorf("mean %v, want %v ±2%% (off by %.2f%%)", time.Duration(mean), tt.wantMean, 100*dev)
			}
		})
		t.Run(tt.name+" under the cap", func(t *testing.T) {
			p := tt.p
			p.MaxInterval = 9 * time.Second
			for range 10000 {
				if got := p.Sample(n, tt.prev, rng.Float64()); got > p.MaxInterval || got < 0 {
					t.Fatalf("sample %v above the cap %v", got, p.MaxInterval)
				}
			}
		})
	}
}

// monotonePolicies span the strategies, coefficients near 1 and huge, tiny
// and huge intervals, offsets and caps.
var monotonePolicies = []retry.Policy{
	{},
	{Backoff: retry.Constant},
	{Backoff: retry.Linear, InitialInterval: time.Nanosecond, MaxInterval: 1<<63 - 1},
	{Backoff: retry.Linear, InitialInterval: time.Hour, MaxInterval: 1<<63 - 1},
	{Backoff: retry.Exponential, BackoffCoefficient: 1.000000001, InitialInterval: time.Nanosecond, MaxInterval: 1<<63 - 1},
	{Backoff: retry.Exponential, BackoffCoefficient: 1.0000000001, InitialInterval: time.Second, MaxInterval: 1<<63 - 1},
	{Backoff: retry.Exponential, BackoffCoefficient: 1.5, InitialInterval: time.Nanosecond, MaxInterval: 1<<63 - 1},
	{Backoff: retry.Exponential, BackoffCoefficient: 1e300, MaxInterval: 1<<63 - 1},
	{Backoff: retry.Exponential, BackoffCoefficient: 3, Offset: 1<<62 - 1, MaxInterval: 1<<63 - 1},
	{Backoff: retry.Polynomial, BackoffCoefficient: 1, InitialInterval: time.Nanosecond, MaxInterval: 1<<63 - 1},
	{Backoff: retry.Polynomial, BackoffCoefficient: 1.0001, InitialInterval: time.Nanosecond, MaxInterval: 1<<63 - 1},
	{Backoff: retry.Polynomial, BackoffCoefficient: 2.5, InitialInterval: time.Nanosecond, MaxInterval: 1<<63 - 1},
	{Backoff: retry.Polynomial, BackoffCoefficient: 4, InitialInterval: 15 * time.Second, MaxInterval: 1<<63 - 1},
	{Backoff: retry.Polynomial, BackoffCoefficient: 1e9, MaxInterval: 1<<63 - 1},
	{Backoff: retry.Immediate, Offset: time.Second},
}

// checkpoints are retry numbers up to math.MaxInt32 and beyond.
func checkpoints() []int {
	var ns []int
	for n := 1; n <= 2000; n++ {
		ns = append(ns, n)
	}
	for n := 2048; n > 0 && n < math.MaxInt; n *= 2 {
		ns = append(ns, n-1, n, n+1)
	}
	ns = append(ns, math.MaxInt32-1, math.MaxInt32, math.MaxInt-1, math.MaxInt)
	slices.Sort(ns)
	return ns
}

// TestDelayMonotone: Delay never overflows, goes negative or above the cap,
// and never decreases with n.
func TestDelayMonotone(t *testing.T) {
	ns := checkpoints()
	for i, p := range monotonePolicies {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
			checkMonotone(t, p, ns)
		})
	}
}

func checkMonotone(t *testing.T, p retry.Policy, ns []int) {
	t.Helper()
	cap := withDefaults(p).MaxInterval
	prev := time.Duration(0)
	prevN := 0
	for _, n := range ns {
		d := p.Delay(n)
		switch {
		case d < 0 || d > cap:
			t.Fatalf("%+v: Delay(%d) = %v outside [0, %v]", p, n, d, cap)
		case d < prev && n <= math.MaxInt32:
			t.Fatalf("%+v: Delay(%d) = %v < Delay(%d) = %v", p, n, d, prevN, prev)
		}
		for _, u := range []float64{0, 0.5, math.Nextafter(1, 0)} {
			if s := p.Sample(n, d, u); s < 0 || s > cap {
				t.Fatalf("%+v: Sample(%d, u=%v) = %v outside [0, %v]", p, n, u, s, cap)
			}
		}
		prev, prevN = d, n
	}
}

// FuzzDelay checks Delay and Sample over random valid policies.
func FuzzDelay(f *testing.F) {
	f.Add(uint8(3), int64(time.Second), int64(5*time.Minute), int64(0), 2.0, uint8(1), 10, 20, 0.5)
	f.Add(uint8(4), int64(time.Nanosecond), int64(1<<63-1), int64(0), 1.000000001, uint8(6), math.MaxInt32-1, math.MaxInt32, 0.99)
	f.Add(uint8(2), int64(time.Hour), int64(1<<63-1), int64(1<<62), 1e300, uint8(7), 1, math.MaxInt, 0.0)
	f.Fuzz(func(t *testing.T, strategy uint8, initial, maxInt, offset int64, coef float64, jitter uint8, n1, n2 int, u float64) {
		p := retry.Policy{
			Backoff:            retry.Strategy(strategy % 6),
			InitialInterval:    time.Duration(initial),
			MaxInterval:        time.Duration(maxInt),
			Offset:             time.Duration(offset),
			BackoffCoefficient: coef,
			Jitter:             retry.Jitter{Kind: retry.JitterKind(jitter % 8)},
		}
		if p.Jitter.Kind == retry.JitterAdditive {
			p.Jitter.Amount = time.Duration(initial)
		}
		if p.Validate() != nil {
			return
		}
		if n1 > n2 {
			n1, n2 = n2, n1
		}
		cap := withDefaults(p).MaxInterval
		d1, d2 := p.Delay(n1), p.Delay(n2)
		if d1 < 0 || d2 > cap || (n1 >= 1 && n2 <= math.MaxInt32 && d1 > d2) {
			t.Fatalf("%+v: Delay(%d) = %v, Delay(%d) = %v, cap %v", p, n1, d1, n2, d2, cap)
		}
		if s := p.Sample(n2, d1, u); s < 0 || s > cap {
			t.Fatalf("%+v: Sample(%d, %v, %v) = %v outside [0, %v]", p, n2, d1, u, s, cap)
		}
	})
}

// TestPolicyValidation: each bad policy, in Go or JSON, is rejected with an
// error naming the field, the value and the rule.
func TestPolicyValidation(t *testing.T) {
	goCases := []struct {
		name  string
		p     retry.Policy
		field string
		value string
	}{
		{name: "negative attempts", p: retry.Policy{MaxAttempts: -1}, field: "max_attempts", value: "-1"},
		{name: "negative initial interval", p: retry.Policy{InitialInterval: -time.Second}, field: "initial_interval", value: "-1s"},
		{name: "negative max interval", p: retry.Policy{MaxInterval: -time.Second}, field: "max_interval", value: "-1s"},
		{name: "max below initial", p: retry.Policy{InitialInterval: time.Minute, MaxInterval: time.Second}, field: "max_interval", value: "1s"},
		{name: "negative offset", p: retry.Policy{Offset: -1}, field: "delay_offset", value: "-1ns"},
		{name: "coefficient below 1", p: retry.Policy{BackoffCoefficient: 0.5}, field: "backoff_coefficient", value: "0.5"},
		{name: "negative coefficient", p: retry.Policy{BackoffCoefficient: -2}, field: "backoff_coefficient", value: "-2"},
		{name: "NaN coefficient", p: retry.Policy{BackoffCoefficient: math.NaN()}, field: "backoff_coefficient", value: "NaN"},
		{name: "infinite coefficient", p: retry.Policy{BackoffCoefficient: math.Inf(1)}, field: "backoff_coefficient", value: "+Inf"},
		{name: "unknown strategy", p: retry.Policy{Backoff: "exponentail"}, field: "backoff_strategy", value: `"exponentail"`},
		{name: "unknown jitter kind", p: retry.Policy{Jitter: retry.Jitter{Kind: "gaussian"}}, field: "jitter.kind", value: `"gaussian"`},
		{name: "jitter factor above 1", p: retry.Policy{Jitter: retry.Jitter{Kind: retry.JitterProportional, Factor: 1.5}}, field: "jitter.factor", value: "1.5"},
		{name: "negative jitter factor", p: retry.Policy{Jitter: retry.Jitter{Kind: retry.JitterPercent, Factor: -0.1}}, field: "jitter.factor", value: "-0.1"},
		{name: "factor on full jitter", p: retry.Policy{Jitter: retry.Jitter{Kind: retry.JitterFull, Factor: 0.3}}, field: "jitter.factor", value: "0.3"},
		{name: "additive without amount", p: retry.Policy{Jitter: retry.Jitter{Kind: retry.JitterAdditive}}, field: "jitter.amount", value: "0s"},
		{name: "amount on equal jitter", p: retry.Policy{Jitter: retry.Jitter{Kind: retry.JitterEqual, Amount: time.Second}}, field: "jitter.amount", value: "1s"},
		{name: "unknown exhaustion", p: retry.Policy{OnExhaustion: "retry"}, field: "on_exhaustion", value: `"retry"`},
		{name: "empty pattern", p: retry.Policy{NonRetryableErrors: []string{"a", ""}}, field: "non_retryable_errors[1]", value: `""`},
		{name: "bare star", p: retry.Policy{NonRetryableErrors: []string{"*"}}, field: "non_retryable_errors[0]", value: `"*"`},
		{name: "star inside", p: retry.Policy{NonRetryableErrors: []string{"auth*"}}, field: "non_retryable_errors[0]", value: `"auth*"`},
		{name: "pattern with space", p: retry.Policy{NonRetryableErrors: []string{"auth failed"}}, field: "non_retryable_errors[0]", value: `"auth failed"`},
		{name: "empty part", p: retry.Policy{NonRetryableErrors: []string{"auth..token"}}, field: "non_retryable_errors[0]", value: `"auth..token"`},
		{name: "repeated pattern", p: retry.Policy{NonRetryableErrors: []string{"auth.*", "db.timeout", "auth.*"}}, field: "non_retryable_errors[2]", value: `"auth.*"`},
		{name: "pattern not UTF-8", p: retry.Policy{NonRetryableErrors: []string{"auth.\xff"}}, field: "non_retryable_errors[0]", value: `"auth.\xff"`},
	}
	for _, tc := range goCases {
		t.Run("go/"+tc.name, func(t *testing.T) {
			checkPolicyError(t, tc.p.Validate(), tc.field, tc.value)
		})
	}
	jsonCases := []struct {
		name, json, field, value string
	}{
		{name: "unknown field", json: `{"max_attempt": 3}`, field: "max_attempt", value: "3"},
		{name: "unknown field in wrapper", json: `{"retry": {"maxAttempts": 3}}`, field: "maxAttempts", value: "3"},
		{name: "unknown jitter field", json: `{"jitter": {"kind": "full", "spread": 1}}`, field: "jitter.spread", value: "1"},
		{name: "repeated field", json: `{"max_attempts": 3, "max_attempts": 4}`, field: "max_attempts", value: "4"},
		{name: "negative attempts", json: `{"max_attempts": -1}`, field: "max_attempts", value: "-1"},
		{name: "fractional attempts", json: `{"max_attempts": 2.5}`, field: "max_attempts", value: "2.5"},
		{name: "attempts as string", json: `{"max_attempts": "3"}`, field: "max_attempts", value: `"3"`},
		{name: "bad duration", json: `{"initial_interval": "1 second"}`, field: "initial_interval", value: `"1 second"`},
		{name: "ISO months", json: `{"max_interval": "P1M"}`, field: "max_interval", value: `"P1M"`},
		{name: "negative duration", json: `{"initial_interval": "-1s"}`, field: "initial_interval", value: `"-1s"`},
		{name: "zero initial interval", json: `{"initial_interval": "PT0S"}`, field: "initial_interval", value: `"PT0S"`},
		{name: "zero max interval", json: `{"max_interval": 0}`, field: "max_interval", value: "0"},
		{name: "fractional milliseconds", json: `{"initial_interval": 1.5}`, field: "initial_interval", value: "1.5"},
		{name: "max below initial", json: `{"initial_interval": "PT10S", "max_interval": "PT5S"}`, field: "max_interval", value: "5s"},
		{name: "coefficient below 1", json: `{"backoff_coefficient": 0.9}`, field: "backoff_coefficient", value: "0.9"},
		{name: "coefficient as string", json: `{"backoff_coefficient": "2"}`, field: "backoff_coefficient", value: `"2"`},
		{name: "unknown strategy", json: `{"backoff_strategy": "fibonacci"}`, field: "backoff_strategy", value: `"fibonacci"`},
		{name: "jitter as number", json: `{"jitter": 0.5}`, field: "jitter", value: "0.5"},
		{name: "unknown jitter kind", json: `{"jitter": {"kind": "gaussian"}}`, field: "jitter.kind", value: `"gaussian"`},
		{name: "jitter factor zero", json: `{"jitter": {"kind": "proportional", "factor": 0}}`, field: "jitter.factor", value: "0"},
		{name: "additive without amount", json: `{"jitter": {"kind": "additive"}}`, field: "jitter.amount", value: "0s"},
		{name: "patterns not an array", json: `{"non_retryable_errors": "auth.*"}`, field: "non_retryable_errors", value: `"auth.*"`},
		{name: "bad pattern", json: `{"non_retryable_errors": ["auth.*", "*.timeout"]}`, field: "non_retryable_errors[1]", value: `"*.timeout"`},
		{name: "repeated pattern", json: `{"non_retryable_errors": ["FatalError", "FatalError"]}`, field: "non_retryable_errors[1]", value: `"FatalError"`},
		{name: "unknown exhaustion", json: `{"on_exhaustion": "retry_forever"}`, field: "on_exhaustion", value: `"retry_forever"`},
		{name: "not an object", json: `[1, 2]`, field: "JSON", value: "[1, 2]"},
		{name: "wrapper not an object", json: `{"retry": 5}`, field: "retry", value: "5"},
		{name: "trailing data", json: `{"max_attempts": 3} {}`, field: "JSON", value: `{"max_attempts": 3} {}`},
		{name: "broken JSON", json: `{"max_attempts": 3`, field: "JSON", value: `{"max_attempts": 3`},
	}
	for _, tc := range jsonCases {
		t.Run("json/"+tc.name, func(t *testing.T) {
			_, err := retry.ParsePolicy([]byte(tc.json))
			checkPolicyError(t, err, tc.field, tc.value)
		})
	}
}

func checkPolicyError(t *testing.T, err error, field, value string) {
	t.Helper()
	var pe *retry.PolicyError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want a *PolicyError", err)
	}
	if pe.Field != field || pe.Value != value || pe.Rule == "" {
		t.Errorf("error %q: field %q value %q rule %q; want field %q value %q and a rule", err, pe.Field, pe.Value, pe.Rule, field, value)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "retry: ") || !strings.Contains(msg, field) || !strings.Contains(msg, value) || !strings.Contains(msg, pe.Rule) {
		t.Errorf("message %q does not name the field, the value and the rule", msg)
	}
}

// roundTrip checks that p marshals to JSON that parses back to p, and that
// the canonical form is stable.
func roundTrip(t *testing.T, p retry.Policy) {
	t.Helper()
	b, err := p.MarshalJSON()
	if err != nil {
		t.Fatalf("marshal %+v: %v", p, err)
	}
	q, err := retry.ParsePolicy(b)
	if err != nil {
		t.Fatalf("parse %s: %v", b, err)
	}
	b2, err := q.MarshalJSON()
	if err != nil || string(b) != string(b2) {
		t.Fatalf("round trip changed %s into %s (%v)", b, b2, err)
	}
	for n := 1; n <= 30; n++ {
		if p.Delay(n) != q.Delay(n) || p.Sample(n, time.Second, 0.3) != q.Sample(n, time.Second, 0.3) {
			t.Fatalf("round trip of %s changed the delay before retry %d", b, n)
		}
	}
}

// withDefaults returns p with its zero fields set to their defaults, as a
// Retrier resolves it.
func withDefaults(p retry.Policy) retry.Policy { return retry.New(retry.WithPolicy(p)).Policy() }

// TestJitterKinds: every kind JitterKinds returns is one policy JSON reads
// and Validate accepts, and the error for an unknown kind names them all.
func TestJitterKinds(t *testing.T) {
	kinds := retry.JitterKinds()
	if len(kinds) != 7 || kinds[0] != retry.JitterNone || kinds[len(kinds)-1] != retry.JitterDecorrelated {
		t.Fatalf("JitterKinds() = %v, want none first and decorrelated last, 7 in all", kinds)
	}
	for _, k := range kinds {
		extra := ""
		if k == retry.JitterAdditive {
			extra = `, "amount": "PT1S"`
		}
		p, err := retry.ParsePolicy([]byte(`{"jitter": {"kind": "` + string(k) + `"` + extra + `}}`))
		if err != nil || p.Jitter.Kind != k {
			t.Errorf("kind %q: %v, kind %q", k, err, p.Jitter.Kind)
		}
	}
	err := retry.Policy{Jitter: retry.Jitter{Kind: "gaussian"}}.Validate()
	for _, k := range kinds {
		if err == nil || !strings.Contains(err.Error(), string(k)) {
			t.Errorf("Validate of an unknown kind: %v, want it to name %q", err, k)
		}
	}
}

// TestRetrierPolicy: Policy reports the policy a Retrier applies, with its
// defaults, and the zero Policy for a Retrier that applies none because a
// policy or another option is invalid.
func TestRetrierPolicy(t *testing.T) {
	tests := []struct {
		name    string
		opts    []retry.Option
		want    retry.Policy
		invalid bool
	}{
		{name: "none given", want: retry.DefaultPolicy()},
		{name: "partial", opts: []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 5})},
			want: func() retry.Policy { p := retry.DefaultPolicy(); p.MaxAttempts = 5; return p }()},
		{name: "invalid policy", opts: []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: -1})}, invalid: true},
		{name: "valid policy, invalid option", opts: []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 5}), retry.WithMaxElapsed(-1)}, invalid: true},
		{name: "valid Retrier, invalid policy", opts: []retry.Option{retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 5})), retry.WithPolicy(retry.Policy{MaxAttempts: -1})}, invalid: true},
		{name: "valid Retrier, invalid option", opts: []retry.Option{retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 5})), retry.WithMaxElapsed(-1)}, invalid: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := retry.New(tt.opts...)
			if (r.Err() != nil) != tt.invalid {
				t.Fatalf("Err() = %v, want an error: %v", r.Err(), tt.invalid)
			}
			got := r.Policy()
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Policy() = %+v, want %+v", got, tt.want)
			}
			if tt.invalid {
				ran := false
				if err := r.Run(t.Context(), func(context.Context) error { ran = true; return nil }); err == nil || ran {
					t.Errorf("an invalid Retrier ran fn (%v) or returned no error (%v)", ran, err)
				}
			}
		})
	}
}

// TestMaxAttemptsZero: in Go a zero MaxAttempts takes the default (3
// attempts); in JSON, as OJS says, "max_attempts": 0 is one attempt; a
// negative count is refused with the Go rule.
func TestMaxAttemptsZero(t *testing.T) {
	fromJSON, err := retry.ParsePolicy([]byte(`{"max_attempts": 0, "initial_interval": "1ms"}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		policy retry.Policy
		want   int
	}{
		{name: "Go zero", policy: retry.Policy{InitialInterval: time.Microsecond}, want: 3},
		{name: "JSON zero", policy: fromJSON, want: 1},
		{name: "Go one", policy: retry.Policy{MaxAttempts: 1}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			_ = retry.Run(t.Context(), func(context.Context) error { calls++; return errTransient }, retry.WithPolicy(tt.policy))
			if calls != tt.want {
				t.Errorf("%d attempts, want %d", calls, tt.want)
			}
		})
	}
	err = retry.Policy{MaxAttempts: -1}.Validate()
	if want := "retry: policy: max_attempts = -1: must be in [0, 2147483647] (0 takes the default, 3; 1 is one attempt, no retry)"; err == nil || err.Error() != want {
		t.Errorf("Validate = %v, want %s", err, want)
	}
}
