package retry_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry"
)

// oneRetry is a policy of two attempts, the second 1 ms after the first.
var oneRetry = retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond, Jitter: retry.Jitter{Kind: retry.JitterNone}})

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
		{name: "minus infinity is none", budget: retry.Budget{Ratio: math.Inf(-1), Reserve: math.Inf(-1)}},
		{name: "shadow", budget: retry.Budget{Shadow: true}},
		{name: "ratio NaN", budget: retry.Budget{Ratio: math.NaN()}, want: "retry: option WithBudget: Ratio = NaN: must be at most 1000 (negative for none)"},
		{name: "ratio infinite", budget: retry.Budget{Ratio: math.Inf(1)}, want: "retry: option WithBudget: Ratio = +Inf: must be at most 1000 (negative for none)"},
		{name: "ratio too high", budget: retry.Budget{Ratio: 1001}, want: "retry: option WithBudget: Ratio = 1001: must be at most 1000 (negative for none)"},
		{name: "reserve NaN", budget: retry.Budget{Reserve: math.NaN()}, want: "retry: option WithBudget: Reserve = NaN: must be at most 1e9 (negative for none)"},
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
			if tt.want != "" {
				called := false
				err := retry.Run(t.Context(), func(context.Context) error { called = true; return nil }, retry.WithBudget(tt.budget))
				if err == nil || called {
					t.Errorf("Run: err %v, fn called %v; want the error and no call", err, called)
				}
			}
		})
	}
}

// TestBudgetDefaults: zero fields take the zero Budget's, one by one (0.15
// a success, 0.5 a second, 10 s, as Budget documents), and a negative
// Ratio or Reserve means none.
func TestBudgetDefaults(t *testing.T) {
	d := retry.Budget{Ratio: 0.15, Reserve: 0.5, Window: 10 * time.Second}
	tests := []struct {
		name string
		in   retry.Budget
		want retry.Budget
	}{
		{name: "zero", in: retry.Budget{}, want: d},
		{name: "ratio only", in: retry.Budget{Ratio: 0.5}, want: retry.Budget{Ratio: 0.5, Reserve: d.Reserve, Window: d.Window}},
		{name: "none", in: retry.Budget{Ratio: -1, Reserve: -1, Window: time.Minute}, want: retry.Budget{Window: time.Minute}},
		{name: "per key and shadow kept", in: retry.Budget{PerKey: true, Shadow: true}, want: retry.Budget{Ratio: d.Ratio, Reserve: d.Reserve, Window: d.Window, PerKey: true, Shadow: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.WithDefaults(); got != tt.want {
				t.Errorf("WithDefaults() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestBudgetZeroBudgetReserve: the zero Budget lets a Retrier with no
// success yet make 5 retries (its reserve, 0.5 a second over 10 s) and
// denies the sixth; once the window has passed, it grants them again.
func TestBudgetZeroBudgetReserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := retry.New(oneRetry)
		fail := func(context.Context) error { return errTransient }
		for range 6 {
			_ = r.Run(t.Context(), fail)
		}
		if s := r.Stats(); s.Retried != 5 || s.BudgetDenied != 1 || s.BudgetBalance >= 1 {
			t.Fatalf("stats %+v, want 5 retries and 1 denial", s)
		}
		time.Sleep(11 * time.Second)
		if s := r.Stats(); s.BudgetBalance != 5 {
			t.Fatalf("balance %v after the window, want 5", s.BudgetBalance)
		}
	})
}

// TestBudgetDenies: calls that succeed earn Ratio retries each, calls that
// fail earn nothing, and the reserve is always there; a retry the budget
// refuses stops the call with reason budget and keeps the last error; Off
// disables the budget.
func TestBudgetDenies(t *testing.T) {
	tests := []struct {
		name     string
		budget   retry.Budget
		ok       int // calls that succeed first
		calls    int // then calls that fail
		retries  int64
		denied   int64
		balance0 bool // the balance reaches zero
	}{
		{name: "reserve only", budget: retry.Budget{Ratio: -1, Reserve: 0.5, Window: 10 * time.Second}, calls: 10, retries: 5, denied: 5, balance0: true},
		{name: "successes earn", budget: retry.Budget{Ratio: 0.5, Reserve: 0.1, Window: 10 * time.Second}, ok: 10, calls: 10, retries: 6, denied: 4, balance0: true},
		{name: "failures earn nothing", budget: retry.Budget{Ratio: 0.5, Reserve: 0.1, Window: 10 * time.Second}, calls: 10, retries: 1, denied: 9, balance0: true},
		{name: "zero fields take the defaults", budget: retry.Budget{Ratio: -1, Reserve: 0.5}, calls: 10, retries: 5, denied: 5, balance0: true},
		{name: "off", budget: retry.Budget{Off: true}, calls: 10, retries: 10},
		{name: "off overrides Shared", budget: retry.Budget{Off: true, Shared: &tokenBudget{firsts: map[string]int{}, retries: map[string]int{}}}, calls: 10, retries: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := retry.New(retry.WithBudget(tt.budget), oneRetry)
				for range tt.ok {
					_ = r.Run(t.Context(), func(context.Context) error { return nil })
				}
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
// window has moved past the retries that spent the budget, and successes
// earn only while they are within the window.
func TestBudgetWindowSlides(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := retry.New(retry.WithBudget(retry.Budget{Ratio: -1, Reserve: 0.2, Window: 10 * time.Second}), oneRetry)
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
	synctest.Test(t, func(t *testing.T) {
		r := retry.New(retry.WithBudget(retry.Budget{Ratio: 1, Reserve: -1, Window: 10 * time.Second}))
		for range 4 {
			_ = r.Run(t.Context(), func(context.Context) error { return nil })
		}
		if b := r.Stats().BudgetBalance; b != 4 {
			t.Fatalf("balance %v after 4 successes, want 4", b)
		}
		time.Sleep(11 * time.Second)
		if b := r.Stats().BudgetBalance; b != 0 {
			t.Fatalf("balance %v once they left the window, want 0", b)
		}
	})
}

// TestBudgetUnreadSuccesses: successes made while the budget was not read
// (no failure for longer than the window) count by the share of the time
// since its last reading that the window covers, as if spread evenly.
func TestBudgetUnreadSuccesses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := retry.New(retry.WithBudget(retry.Budget{Ratio: 1, Reserve: -1, Window: 10 * time.Second}))
		for range 200 { // 200 successes over 20 s
			_ = r.Run(t.Context(), func(context.Context) error { return nil })
			time.Sleep(100 * time.Millisecond)
		}
		if b := r.Stats().BudgetBalance; math.Abs(b-100) > 5 {
			t.Fatalf("balance %v, want about 100: the successes of the last 10 s", b)
		}
	})
}

// TestBudgetPerKey: one key spending its budget leaves the others theirs,
// and a key's successes earn for that key alone.
func TestBudgetPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := retry.New(retry.WithBudget(retry.Budget{Ratio: 0.5, Reserve: 0.1, Window: 10 * time.Second, PerKey: true}), oneRetry)
		fail := func(context.Context) error { return errTransient }
		for range 10 {
			_ = retry.Run(t.Context(), func(context.Context) error { return nil }, r, retry.WithKey("ok"))
		}
		for range 5 {
			_ = retry.Run(t.Context(), fail, r, retry.WithKey("a"))
		}
		err := retry.Run(t.Context(), fail, r, retry.WithKey("b"))
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonExhausted {
			t.Fatalf("key b: %v, want its own budget to allow the retry", err)
		}
		for range 6 {
			_ = retry.Run(t.Context(), fail, r, retry.WithKey("ok"))
		}
		s := r.Stats()
		// a: 1 retry of its reserve, 4 denied; b: 1 retry; ok: 5 earned
		// and 1 of reserve, 0 denied.
		if s.Retried != 8 || s.BudgetDenied != 4 || len(s.Budgets) != 3 || s.BudgetBalance != -1 {
			t.Errorf("stats %+v", s)
		}
		if s.Budgets["ok"] != 0 || s.Budgets["b"] != 0 {
			t.Errorf("balances %v, want every key spent", s.Budgets)
		}
	})
}

// TestBudgetTimeoutsCostTheSame: a retry after a timeout takes one token,
// as one after a fast failure does (see Budget for why): with a reserve of
// 3 retries, three calls are retried and the fourth is denied whatever
// the failure, and its give-up event names that failure's type.
func TestBudgetTimeoutsCostTheSame(t *testing.T) {
	tests := []struct {
		name string
		fn   func(ctx context.Context) error
		opts []retry.Option
		typ  string
	}{
		{name: "fast failure", fn: func(context.Context) error { return errTransient }, typ: "error"},
		{name: "503", fn: func(context.Context) error { return &retry.StatusError{StatusCode: 503} }, typ: "http.5xx.503"},
		{name: "attempt timeout", fn: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() },
			opts: []retry.Option{retry.WithAttemptTimeout(time.Second)}, typ: retry.TypeAttemptTimeout},
		{name: "deadline inside fn", fn: func(ctx context.Context) error {
			inner, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			<-inner.Done()
			return inner.Err()
		}, typ: "timeout.deadline_exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var gaveUp []retry.Event
				opts := append([]retry.Option{
					retry.WithBudget(retry.Budget{Ratio: -1, Reserve: 0.05, Window: time.Minute}), oneRetry,
					retry.OnGiveUp(func(ev retry.Event) { gaveUp = append(gaveUp, ev) }),
				}, tt.opts...)
				r := retry.New(opts...)
				for range 4 {
					_ = r.Run(t.Context(), tt.fn)
				}
				s := r.Stats()
				if s.Retried != 3 || s.BudgetDenied != 1 {
					t.Fatalf("retried %d, denied %d; want 3 and 1", s.Retried, s.BudgetDenied)
				}
				last := gaveUp[len(gaveUp)-1]
				if last.Reason != retry.ReasonBudget || last.Type != tt.typ || s.BudgetDeniedType != tt.typ {
					t.Errorf("denial: event %s of type %q, Stats type %q; want budget and %q", last.Reason, last.Type, s.BudgetDeniedType, tt.typ)
				}
			})
		})
	}
}

// TestBudgetDenialDetails: a denial's OnFailure and OnGiveUp events carry
// the call's key, the type of the failure whose retry was denied and the
// balance then (under one retry; 0 for a Shared budget), as does Stats;
// the call's error keeps its type budget.exhausted. Events of retries
// carry the balance after their token was taken.
func TestBudgetDenialDetails(t *testing.T) {
	tests := []struct {
		name   string
		budget retry.Budget
		retry  []float64 // the balances of the OnRetry events
		denied float64   // the balance of the denial
	}{
		{name: "one budget", budget: retry.Budget{Ratio: 0.75, Reserve: 0.1, Window: 10 * time.Second}, retry: []float64{1.5, 0.5}, denied: 0.5},
		{name: "per key", budget: retry.Budget{Ratio: 0.75, Reserve: 0.1, Window: 10 * time.Second, PerKey: true}, retry: []float64{1.5, 0.5}, denied: 0.5},
		{name: "shared", budget: retry.Budget{Shared: &tokenBudget{tokens: 2, firsts: map[string]int{}, retries: map[string]int{}}}, retry: []float64{0, 0}, denied: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var retried, failed, gaveUp []retry.Event
				r := retry.New(retry.WithBudget(tt.budget), oneRetry, retry.WithKey("dep"),
					retry.OnRetry(func(ev retry.Event) { retried = append(retried, ev) }),
					retry.OnFailure(func(ev retry.Event) { failed = append(failed, ev) }),
					retry.OnGiveUp(func(ev retry.Event) { gaveUp = append(gaveUp, ev) }))
				for range 2 { // 1.5 retries earned, with 1 of reserve (shared: 2 tokens)
					_ = r.Run(t.Context(), func(context.Context) error { return nil })
				}
				down := func(context.Context) error { return &retry.StatusError{StatusCode: 503} }
				for range 2 {
					_ = r.Run(t.Context(), down) // retried, then exhausted
				}
				err := r.Run(t.Context(), down) // denied
				if retry.TypeOf(err) != "budget.exhausted" {
					t.Errorf("TypeOf(err) = %q, want budget.exhausted", retry.TypeOf(err))
				}
				if len(retried) != 2 || len(gaveUp) != 3 {
					t.Fatalf("%d retries, %d give-ups; want 2 and 3", len(retried), len(gaveUp))
				}
				for i, ev := range retried {
					if math.Abs(ev.Balance-tt.retry[i]) > 1e-9 {
						t.Errorf("retry %d: balance %v, want %v", i, ev.Balance, tt.retry[i])
					}
				}
				for _, ev := range []retry.Event{failed[len(failed)-1], gaveUp[2]} {
					if ev.Reason != retry.ReasonBudget || ev.Key != "dep" || ev.Type != "http.5xx.503" || math.Abs(ev.Balance-tt.denied) > 1e-9 {
						t.Errorf("denial event: reason %s, key %q, type %q, balance %v; want budget, dep, http.5xx.503, %v", ev.Reason, ev.Key, ev.Type, ev.Balance, tt.denied)
					}
				}
				s := r.Stats()
				if s.BudgetDenied != 1 || s.BudgetDeniedKey != "dep" || s.BudgetDeniedType != "http.5xx.503" || math.Abs(s.BudgetDeniedBalance-tt.denied) > 1e-9 {
					t.Errorf("stats: denied %d, last %q %q %v; want 1, dep, http.5xx.503, %v", s.BudgetDenied, s.BudgetDeniedKey, s.BudgetDeniedType, s.BudgetDeniedBalance, tt.denied)
				}
			})
		})
	}
}

// TestBudgetShadow: a Shadow budget denies nothing, counts the retries it
// would have denied, and shows them as events with a negative Balance and
// no Reason; a Shared one is shadowed too.
func TestBudgetShadow(t *testing.T) {
	tests := []struct {
		name     string
		budget   retry.Budget
		overdraw int // OnRetry events with a negative balance
	}{
		{name: "own", budget: retry.Budget{Ratio: -1, Reserve: 0.2, Window: 10 * time.Second, Shadow: true}, overdraw: 3},
		{name: "per key", budget: retry.Budget{Ratio: -1, Reserve: 0.2, Window: 10 * time.Second, Shadow: true, PerKey: true}, overdraw: 3},
		{name: "shared", budget: retry.Budget{Shadow: true, Shared: &tokenBudget{tokens: 2, firsts: map[string]int{}, retries: map[string]int{}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				overdrawn := 0
				r := retry.New(retry.WithBudget(tt.budget), oneRetry, retry.OnRetry(func(ev retry.Event) {
					if ev.Balance < 0 {
						overdrawn++
					}
				}))
				for range 5 {
					if err := r.Run(t.Context(), func(context.Context) error { return errTransient }); retry.TypeOf(err) == "budget.exhausted" {
						t.Errorf("a shadow budget denied a retry: %v", err)
					}
				}
				s := r.Stats()
				if s.Retried != 5 || s.BudgetDenied != 0 || s.BudgetShadowDenied != 3 || s.BudgetDeniedType != "" || overdrawn != tt.overdraw {
					t.Errorf("retried %d, denied %d, shadow denied %d, last denial %q, overdrawn events %d; want 5, 0, 3, none, %d",
						s.Retried, s.BudgetDenied, s.BudgetShadowDenied, s.BudgetDeniedType, overdrawn, tt.overdraw)
				}
			})
		})
	}
}

// drive runs the real engine in virtual time (call it inside a synctest
// bubble): rate requests a second for dur, each a call of r.Run whose
// attempts take 10 ms and fail from down on, or otherwise with probability
// failP, drawn for each request and attempt so that every run meets the
// same failures. It returns the attempts made from down on per request
// arriving then, and the share of calls that succeeded.
func drive(t *testing.T, r *retry.Retrier, rate int, dur, down time.Duration, failP float64) (outageLoad, success float64) {
	t.Helper()
	var inOutage, arrived, ok atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	n := int(float64(rate) * dur.Seconds())
	every := time.Second / time.Duration(rate)
	for i := range n {
		if time.Since(start) >= down {
			arrived.Add(1)
		}
		wg.Go(func() {
			err := r.Run(t.Context(), func(ctx context.Context) error {
				time.Sleep(10 * time.Millisecond)
				if time.Since(start) >= down {
					inOutage.Add(1)
					return errTransient
				}
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
	if arrived.Load() > 0 {
		outageLoad = float64(inOutage.Load()) / float64(arrived.Load())
	}
	return outageLoad, float64(ok.Load()) / float64(n)
}

// TestBudgetBound: with the zero Budget and the default policy, a full
// outage of 60 s after 20 s of health loads the dependency with at most
// 1.10 times the requests at 10, 100 and 1,000 requests a second (about 3
// without a budget), and under 10% independent failures the budget costs
// no success: as many calls succeed as without it, at least 99.8% within
// the sample's tolerance (three standard errors of a 99.9% rate).
func TestBudgetBound(t *testing.T) {
	for _, rate := range []int{10, 100, 1000} {
		t.Run(fmt.Sprintf("%d per second", rate), func(t *testing.T) {
			if rate == 1000 && testing.Short() {
				t.Skip("simulates 140,000 calls")
			}
			const warm, outage = 20 * time.Second, 60 * time.Second
			var load, loadNone, ok, okNone float64
			synctest.Test(t, func(t *testing.T) {
				load, _ = drive(t, retry.New(), rate, warm+outage, warm, 0)
			})
			synctest.Test(t, func(t *testing.T) {
				loadNone, _ = drive(t, retry.New(retry.WithBudget(retry.Budget{Off: true})), rate, warm+outage, warm, 0)
			})
			synctest.Test(t, func(t *testing.T) {
				_, ok = drive(t, retry.New(), rate, time.Minute, time.Hour, 0.1)
			})
			synctest.Test(t, func(t *testing.T) {
				_, okNone = drive(t, retry.New(retry.WithBudget(retry.Budget{Off: true})), rate, time.Minute, time.Hour, 0.1)
			})
			t.Logf("%d/s: outage load %.3f× (%.3f× without a budget); success %.3f%% under 10%% failures (%.3f%% without)", rate, load, loadNone, 100*ok, 100*okNone)
			tolerance := 3 * math.Sqrt(0.999*0.001/(float64(rate)*60))
			if load > 1.10 || loadNone < 2.8 {
				t.Errorf("outage load %.3f× with the zero Budget, %.3f× without; want at most 1.10× and about 3×", load, loadNone)
			}
			if ok < 0.998-tolerance || ok != okNone {
				t.Errorf("success %.3f%% with the zero Budget, %.3f%% without; want the same, at least %.2f%%", 100*ok, 100*okNone, 100*(0.998-tolerance))
			}
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
			if s := r.Stats(); s.BudgetBalance != -1 && tt.opts == nil {
				t.Errorf("balance %v with a Shared budget, want -1", s.BudgetBalance)
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
}

// TestBudgetBurst: calls still running earn nothing. A burst of calls whose
// first attempts all run at once and then all fail gets the retries the
// rule gives, whatever its size: the reserve's 5, plus 0.15 for each call
// that succeeded before (counted as running calls, a burst of 1,000 got 154).
func TestBudgetBurst(t *testing.T) {
	tests := []struct {
		name   string
		before int // calls that succeed first
		burst  int
		most   int64 // retries the rule allows
	}{
		{name: "10 at once", burst: 10, most: 5},
		{name: "1000 at once", burst: 1000, most: 5},
		{name: "1000 at once after 100 successes", before: 100, burst: 1000, most: 5 + 15},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond}))
				for range tt.before {
					_ = r.Run(t.Context(), func(context.Context) error { return nil })
				}
				var started sync.WaitGroup
				started.Add(tt.burst)
				gate := make(chan struct{})
				var wg sync.WaitGroup
				for range tt.burst {
					wg.Go(func() {
						first := true
						_ = r.Run(t.Context(), func(context.Context) error {
							if first {
								first = false
								started.Done()
								<-gate
							}
							return errors.New("down")
						})
					})
				}
				started.Wait()
				close(gate)
				wg.Wait()
				if st := r.Stats(); st.Retried > tt.most {
					t.Errorf("%d retries granted to %d calls failing at once, want at most %d", st.Retried, tt.burst, tt.most)
				}
			})
		})
	}
}
