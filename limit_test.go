package retry_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry"
)

// TestRateLimitNeverExceeded: concurrent callers sharing a limiter never
// exceed limit·W + burst attempts in any window W, measured on the times the
// attempts ran; and they are not held back much below the limit either.
func TestRateLimitNeverExceeded(t *testing.T) {
	tests := []struct {
		name        string
		limit       float64
		burst       int
		callers     int
		calls       int
		failOneIn   int // every n-th attempt fails, so retries are paced too
		wantSeconds float64
	}{
		{"50/s burst 5, 8 callers", 50, 5, 8, 100, 0, (800 - 5) / 50.0},
		{"200/s burst 1, 16 callers", 200, 1, 16, 50, 0, (800 - 1) / 200.0},
		{"10/s burst 3, 4 callers, retries", 10, 3, 4, 20, 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := retry.New(retry.WithRateLimit(tt.limit, tt.burst),
					retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond}),
					retry.WithBudget(retry.Budget{Off: true}))
				var mu sync.Mutex
				var times []time.Time
				var n atomic.Int64
				start := time.Now()
				var wg sync.WaitGroup
				for range tt.callers {
					wg.Go(func() {
						for range tt.calls {
							_ = r.Run(t.Context(), func(context.Context) error {
								mu.Lock()
								times = append(times, time.Now())
								mu.Unlock()
								if tt.failOneIn > 0 && n.Add(1)%int64(tt.failOneIn) == 0 {
									return errTransient
								}
								return nil
							})
						}
					})
				}
				wg.Wait()
				elapsed := time.Since(start)
				slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
				for _, w := range []time.Duration{10 * time.Millisecond, 100 * time.Millisecond, time.Second, 3 * time.Second} {
					allowed := int(tt.limit*w.Seconds()) + tt.burst
					worst, j := 0, 0
					for i := range times {
						for times[i].Sub(times[j]) >= w {
							j++
						}
						worst = max(worst, i-j+1)
					}
					if worst > allowed {
						t.Errorf("%d attempts within %v, the limit allows %d", worst, w, allowed)
					}
				}
				if tt.wantSeconds > 0 && (elapsed.Seconds() < tt.wantSeconds*0.99 || elapsed.Seconds() > tt.wantSeconds*1.05) {
					t.Errorf("%d attempts took %v, want about %.2fs at the limit", len(times), elapsed, tt.wantSeconds)
				}
				if s := r.Stats(); s.Attempts != int64(len(times)) || s.LimiterWaits == 0 {
					t.Errorf("stats %+v for %d attempts", s, len(times))
				}
			})
		})
	}
}

// TestRateLimitDeadline: a wait that cannot fit the deadline stops at once
// and returns its token; waits are not attempts.
func TestRateLimitDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := retry.New(retry.WithRateLimit(1, 1))
		_ = r.Run(t.Context(), ok) // takes the only token

		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		calls := 0
		err := r.Run(ctx, func(context.Context) error { calls++; return nil })
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonRateLimited || re.Attempts != 0 || calls != 0 {
			t.Fatalf("err = %v, calls %d; want rate_limited after 0 attempts", err, calls)
		}
		if time.Since(start) != 0 || retry.TypeOf(err) != retry.TypeRateLimited {
			t.Fatalf("stopped after %v with type %q; want at once, %q", time.Since(start), retry.TypeOf(err), retry.TypeRateLimited)
		}
		// The canceled reservation gave its token back: the next call
		// waits 1 s from the first token, not 2 s.
		ctx2, cancel2 := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel2()
		if err := r.Run(ctx2, ok); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited != time.Second {
			t.Errorf("waited %v for the next token, want 1s", waited)
		}
		if s := r.Stats(); s.LimiterDenied != 1 || s.LimiterWaits != 1 || s.Attempts != 2 {
			t.Errorf("stats %+v", s)
		}
	})
	t.Run("canceled while waiting", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := retry.New(retry.WithRateLimit(0.1, 1))
			_ = r.Run(t.Context(), ok)
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(time.Second, cancel)
			start := time.Now()
			err := r.Run(ctx, ok)
			var re *retry.Error
			if !errors.As(err, &re) || re.Reason != retry.ReasonCanceled || time.Since(start) != time.Second {
				t.Fatalf("err = %v after %v, want canceled after 1s", err, time.Since(start))
			}
		})
	})
	t.Run("waits do not consume attempts", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := retry.New(retry.WithRateLimit(1, 1), retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond}))
			calls := 0
			err := r.Run(t.Context(), script(&calls, errTransient))
			if err != nil || calls != 2 {
				t.Fatalf("err %v after %d calls, want success on the second", err, calls)
			}
		})
	})
}

func TestKeyedRateLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := retry.New(retry.WithKeyedRateLimit(1, 1))
		start := time.Now()
		for _, key := range []string{"a", "b", "c", "a"} {
			if err := retry.Run(t.Context(), ok, r, retry.WithKey(key)); err != nil {
				t.Fatal(err)
			}
		}
		// a, b and c each have a token; only the second a waits.
		if elapsed := time.Since(start); elapsed != time.Second {
			t.Errorf("elapsed %v, want 1s", elapsed)
		}
	})
}

func TestRateLimitBadSettings(t *testing.T) {
	for _, opt := range []retry.Option{retry.WithRateLimit(0, 1), retry.WithRateLimit(-1, 1), retry.WithRateLimit(10, 0), retry.WithKeyedRateLimit(10, -1)} {
		if err := retry.New(opt).Err(); err == nil {
			t.Errorf("want an error")
		}
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
		{"reserve only", retry.Budget{Ratio: -1, Reserve: 0.5, Window: 10 * time.Second}, 10, 5, 5, true},
		{"ratio and reserve", retry.Budget{Ratio: 0.5, Reserve: 0.1, Window: 10 * time.Second}, 10, 6, 4, true},
		{"off", retry.Budget{Off: true}, 10, 10, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := retry.New(retry.WithBudget(tt.budget),
					retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond, Jitter: retry.NoJitter}))
				budgetStops := 0
				for range tt.calls {
					err := r.Run(t.Context(), func(context.Context) error { return errTransient })
					var re *retry.Error
					if errors.As(err, &re) && re.Reason == retry.ReasonBudget {
						budgetStops++
						if !errors.Is(err, errTransient) || re.Attempts != 1 || retry.TypeOf(err) != retry.TypeBudgetExhausted {
							t.Errorf("budget stop %v: want the last error, 1 attempt, type %s", err, retry.TypeBudgetExhausted)
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
			retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond, Jitter: retry.NoJitter}))
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
			retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond, Jitter: retry.NoJitter}))
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

// TestOutageAmplification: with every attempt failing for 60 s, the default
// budget keeps the load within 1.2 times the logical requests (3.0 without a
// budget); with 10% independent failures it costs no success.
func TestOutageAmplification(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates minutes of traffic")
	}
	for _, rate := range []int{100, 1000} {
		t.Run(fmt.Sprintf("%d per second", rate), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ampBudget, _ := outage(t, retry.New(), rate, time.Minute, 1)
				ampNone, _ := outage(t, retry.New(retry.WithBudget(retry.Budget{Off: true})), rate, time.Minute, 1)
				_, okBudget := outage(t, retry.New(), rate, time.Minute, 0.1)
				_, okNone := outage(t, retry.New(retry.WithBudget(retry.Budget{Off: true})), rate, time.Minute, 0.1)
				t.Logf("%d req/s for 60 s, all failing: amplification %.3f with the default budget, %.3f without", rate, ampBudget, ampNone)
				t.Logf("%d req/s for 60 s, 10%% failing: success %.3f%% with the default budget, %.3f%% without", rate, 100*okBudget, 100*okNone)
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
