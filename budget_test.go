package retry_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry"
)

// TestBudgetSettings: an invalid Budget is an error naming the field, its
// value and the rule; Off and Shared skip the rule's fields.
func TestBudgetSettings(t *testing.T) {
	tests := []struct {
		name   string
		budget retry.Budget
		want   string // error; "" for none
	}{
		{name: "zero", budget: retry.Budget{}},
		{name: "none", budget: retry.Budget{Ratio: -1, Reserve: -1}},
		{name: "ratio too high", budget: retry.Budget{Ratio: 1001}, want: "retry: option WithBudget: Ratio = 1001: must be at most 1000 (negative for none)"},
		{name: "reserve too high", budget: retry.Budget{Reserve: 2e9}, want: "retry: option WithBudget: Reserve = 2e+09: must be at most 1e9 (negative for none)"},
		{name: "negative window", budget: retry.Budget{Window: -time.Second}, want: "retry: option WithBudget: Window = -1s: must be >= 0"},
		{name: "off", budget: retry.Budget{Off: true, Window: -time.Second}},
		{name: "shared", budget: retry.Budget{Shared: &tokenBudget{}, Window: -time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := retry.New(retry.WithBudget(tt.budget)).Err()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}

// TestBudgetDefaults: zero fields take DefaultBudget's, one by one, and a
// negative Ratio or Reserve means none.
func TestBudgetDefaults(t *testing.T) {
	d := retry.Budget{}.WithDefaults()
	tests := []struct {
		name string
		in   retry.Budget
		want retry.Budget
	}{
		{name: "zero", in: retry.Budget{}, want: d},
		{name: "ratio only", in: retry.Budget{Ratio: 0.5}, want: retry.Budget{Ratio: 0.5, Reserve: d.Reserve, Window: d.Window}},
		{name: "none", in: retry.Budget{Ratio: -1, Reserve: -1, Window: time.Minute}, want: retry.Budget{Window: time.Minute}},
		{name: "per key kept", in: retry.Budget{PerKey: true}, want: retry.Budget{Ratio: d.Ratio, Reserve: d.Reserve, Window: d.Window, PerKey: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.WithDefaults(); got != tt.want {
				t.Errorf("WithDefaults() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestBudgetDenies: a retry the budget refuses stops the call with reason
// budget and keeps the last error; Off disables the budget.
func TestBudgetDenies(t *testing.T) {
	tests := []struct {
		name     string
		budget   retry.Budget
		calls    int
		retries  int64 // granted in all
		denied   int64
		balance0 bool // the balance reaches zero
	}{
		{name: "reserve only", budget: retry.Budget{Ratio: -1, Reserve: 0.5, Window: 10 * time.Second}, calls: 10, retries: 5, denied: 5, balance0: true},
		{name: "ratio and reserve", budget: retry.Budget{Ratio: 0.5, Reserve: 0.1, Window: 10 * time.Second}, calls: 10, retries: 6, denied: 4, balance0: true},
		{name: "zero fields take the defaults", budget: retry.Budget{Ratio: -1, Reserve: 0.5}, calls: 10, retries: 5, denied: 5, balance0: true},
		{name: "off", budget: retry.Budget{Off: true}, calls: 10, retries: 10},
		{name: "off overrides Shared", budget: retry.Budget{Off: true, Shared: &tokenBudget{firsts: map[string]int{}, retries: map[string]int{}}}, calls: 10, retries: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := retry.New(retry.WithBudget(tt.budget),
					retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond, Jitter: retry.Jitter{Kind: retry.JitterNone}}))
				budgetStops := 0
				for range tt.calls {
					err := r.Run(t.Context(), func(context.Context) error { return errTransient })
					var re *retry.Error
					if errors.As(err, &re) && re.Reason == retry.ReasonBudget {
						budgetStops++
						if !errors.Is(err, errTransient) || re.Attempts != 1 || retry.TypeOf(err) != "budget.exhausted" {
							t.Errorf("budget stop %v: want the last error, 1 attempt, type %s", err, "budget.exhausted")
						}
					}
				}
				s := r.Stats()
				if s.Retried != tt.retries || s.BudgetDenied != tt.denied || int64(budgetStops) != tt.denied {
					t.Errorf("retried %d, denied %d (stops %d); want %d and %d", s.Retried, s.BudgetDenied, budgetStops, tt.retries, tt.denied)
				}
				if tt.budget.Off && s.BudgetBalance != -1 {
					t.Errorf("balance %v with the budget off, want -1", s.BudgetBalance)
				}
				if tt.balance0 && s.BudgetBalance >= 1 {
					t.Errorf("balance %v, want under one retry", s.BudgetBalance)
				}
			})
		})
	}
}

// TestBudgetWindowSlides: retries denied now are granted again once the
// window has moved past the retries that spent the budget.
func TestBudgetWindowSlides(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := retry.New(retry.WithBudget(retry.Budget{Ratio: -1, Reserve: 0.2, Window: 10 * time.Second}),
			retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond, Jitter: retry.Jitter{Kind: retry.JitterNone}}))
		fail := func(context.Context) error { return errTransient }
		for range 3 {
			_ = r.Run(t.Context(), fail)
		}
		if s := r.Stats(); s.Retried != 2 || s.BudgetDenied != 1 {
			t.Fatalf("stats %+v, want 2 retries and 1 denial", s)
		}
		time.Sleep(11 * time.Second)
		_ = r.Run(t.Context(), fail)
		if s := r.Stats(); s.Retried != 3 {
			t.Fatalf("after the window: retried %d, want 3", s.Retried)
		}
	})
}

// TestBudgetPerKey: one key spending its budget leaves the others theirs.
func TestBudgetPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := retry.New(retry.WithBudget(retry.Budget{Ratio: -1, Reserve: 0.1, Window: 10 * time.Second, PerKey: true}),
			retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond, Jitter: retry.Jitter{Kind: retry.JitterNone}}))
		fail := func(context.Context) error { return errTransient }
		for range 5 {
			_ = retry.Run(t.Context(), fail, r, retry.WithKey("a"))
		}
		err := retry.Run(t.Context(), fail, r, retry.WithKey("b"))
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonExhausted {
			t.Fatalf("key b: %v, want its own budget to allow the retry", err)
		}
		s := r.Stats()
		if s.Retried != 2 || s.BudgetDenied != 4 || len(s.Budgets) != 2 || s.BudgetBalance != -1 {
			t.Errorf("stats %+v", s)
		}
	})
}

// outage drives the real engine in virtual time: rate logical requests per
// second for the duration, each attempt failing with probability failP
// (decided per request and attempt, so the draw does not depend on
// scheduling), under the OJS default policy. It returns the load
// amplification (attempts per logical request) and the success rate.
func outage(t *testing.T, r *retry.Retrier, rate int, dur time.Duration, failP float64) (amp, success float64) {
	t.Helper()
	var attempts, ok atomic.Int64
	var wg sync.WaitGroup
	n := int(float64(rate) * dur.Seconds())
	every := time.Second / time.Duration(rate)
	for i := range n {
		wg.Go(func() {
			err := r.Run(t.Context(), func(ctx context.Context) error {
				attempts.Add(1)
				rng := rand.New(rand.NewPCG(uint64(i), uint64(retry.AttemptFrom(ctx))))
				if rng.Float64() < failP {
					return errTransient
				}
				return nil
			})
			if err == nil {
				ok.Add(1)
			}
		})
		time.Sleep(every)
	}
	wg.Wait()
	return float64(attempts.Load()) / float64(n), float64(ok.Load()) / float64(n)
}

// TestOutageAmplification: with every attempt failing for 60 s at 100
// requests per second and for 20 s at 1,000, the default budget keeps the
// load within 1.2 times the logical requests (3.0 without a
// budget); with 10% independent failures it costs no success.
func TestOutageAmplification(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates minutes of traffic")
	}
	t.Parallel()
	for _, tt := range []struct {
		rate int
		dur  time.Duration
	}{{rate: 100, dur: time.Minute}, {rate: 1000, dur: 20 * time.Second}} {
		rate, dur := tt.rate, tt.dur
		t.Run(fmt.Sprintf("%d per second", rate), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				ampBudget, _ := outage(t, retry.New(), rate, dur, 1)
				ampNone, _ := outage(t, retry.New(retry.WithBudget(retry.Budget{Off: true})), rate, dur, 1)
				_, okBudget := outage(t, retry.New(), rate, dur, 0.1)
				_, okNone := outage(t, retry.New(retry.WithBudget(retry.Budget{Off: true})), rate, dur, 0.1)
				t.Logf("%d req/s for %v, all failing: amplification %.3f with the default budget, %.3f without", rate, dur, ampBudget, ampNone)
				t.Logf("%d req/s for %v, 10%% failing: success %.3f%% with the default budget, %.3f%% without", rate, dur, 100*okBudget, 100*okNone)
				if ampBudget > 1.2 {
					t.Errorf("amplification %.3f with the default budget, want <= 1.2", ampBudget)
				}
				if ampNone != 3 {
					t.Errorf("amplification %.3f without a budget, want 3.0", ampNone)
				}
				if okBudget < 0.998 || okBudget < okNone-0.0005 {
					t.Errorf("success %.4f with the budget, %.4f without; want >= 99.8%% and the same", okBudget, okNone)
				}
			})
		})
	}
}

// tokenBudget is a SharedBudget with a fixed number of retry tokens that
// records what it is told.
type tokenBudget struct {
	mu      sync.Mutex
	tokens  int
	firsts  map[string]int
	retries map[string]int
}

func (b *tokenBudget) First(key string) {
	b.mu.Lock()
	b.firsts[key]++
	b.mu.Unlock()
}

func (b *tokenBudget) Retry(_ context.Context, key string, _ time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.retries[key]++
	if b.tokens == 0 {
		return false
	}
	b.tokens--
	return true
}

// TestBudgetShared: a Budget's Shared budget counts every first attempt by
// key, is asked for each retry, and its refusal ends the call with Reason
// budget; a later WithBudget replaces it.
func TestBudgetShared(t *testing.T) {
	tests := []struct {
		name     string
		tokens   int
		fails    int            // failures before success
		opts     []retry.Option // after the shared budget
		budget   retry.Budget   // its other fields
		err      error
		reason   retry.Reason
		attempts int
		retries  int
	}{
		{name: "success: counted, never asked", attempts: 1},
		{name: "retry granted", tokens: 1, fails: 1, attempts: 2, retries: 1},
		{name: "retry refused", tokens: 1, fails: 2, err: errTransient, reason: retry.ReasonBudget, attempts: 2, retries: 2},
		{name: "the rule's fields are not used", tokens: 1, fails: 1, budget: retry.Budget{Ratio: -1, Reserve: -1}, attempts: 2, retries: 1},
		{name: "a later WithBudget replaces it", fails: 1, opts: []retry.Option{retry.WithBudget(retry.Budget{Off: true})}, attempts: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &tokenBudget{tokens: tt.tokens, firsts: map[string]int{}, retries: map[string]int{}}
			spec := tt.budget
			spec.Shared = b
			opts := append([]retry.Option{
				retry.WithBudget(spec), retry.WithKey("dep"),
				retry.WithPolicy(retry.Policy{MaxAttempts: 5, InitialInterval: time.Microsecond, MaxInterval: time.Microsecond}),
			}, tt.opts...)
			r := retry.New(opts...)
			n := 0
			err := r.Run(t.Context(), func(context.Context) error {
				n++
				if n <= tt.fails {
					return errTransient
				}
				return nil
			})
			var re *retry.Error
			switch {
			case tt.err == nil && err != nil:
				t.Fatalf("err = %v, want success", err)
			case tt.err != nil && (!errors.As(err, &re) || re.Reason != tt.reason || !errors.Is(err, tt.err) || retry.TypeOf(err) != "budget.exhausted"):
				t.Fatalf("err = %v, want %v of type %s keeping the last error", err, tt.reason, "budget.exhausted")
			}
			if n != tt.attempts || b.retries["dep"] != tt.retries {
				t.Errorf("%d attempts, %d retries asked; want %d and %d", n, b.retries["dep"], tt.attempts, tt.retries)
			}
			wantFirsts := 1
			if tt.opts != nil {
				wantFirsts = 0
			}
			if b.firsts["dep"] != wantFirsts || len(b.firsts) > 1 {
				t.Errorf("first attempts counted %v, want dep:%d", b.firsts, wantFirsts)
			}
		})
	}
}

// TestBudgetZeroFields: a Budget's zero fields take their defaults one by
// one; a negative Ratio or Reserve means none.
func TestBudgetZeroFields(t *testing.T) {
	tests := []struct {
		name    string
		budget  retry.Budget
		retries bool // whether a quiet Retrier grants two retries
	}{
		{name: "Window only", budget: retry.Budget{Window: 30 * time.Second}, retries: true},
		{name: "Ratio only", budget: retry.Budget{Ratio: 0.5}, retries: true},
		{name: "Reserve only", budget: retry.Budget{Reserve: 1}, retries: true},
		{name: "no reserve, no ratio", budget: retry.Budget{Ratio: -1, Reserve: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				calls := 0
				err := retry.Run(t.Context(), script(&calls, errTransient, errTransient),
					retry.WithBudget(tt.budget), retry.WithPolicy(retry.Policy{MaxAttempts: 3, Backoff: retry.Immediate}))
				if tt.retries && err != nil {
					t.Fatalf("err = %v, want success after two retries", err)
				}
				var re *retry.Error
				if !tt.retries && (!errors.As(err, &re) || re.Reason != retry.ReasonBudget) {
					t.Fatalf("err = %v, want a budget stop", err)
				}
			})
		})
	}
	t.Run("negative Window is refused", func(t *testing.T) {
		err := retry.Run(t.Context(), func(context.Context) error { return nil },
			retry.WithBudget(retry.Budget{Window: -time.Second}))
		if err == nil || !strings.Contains(err.Error(), "Window") {
			t.Fatalf("err = %v, want an error naming Window", err)
		}
	})
}
