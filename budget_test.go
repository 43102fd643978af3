package retry_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry"
)

// oneRetry is a policy of two attempts, the second 1 ms after the first.
var oneRetry = retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond, Jitter: retry.Jitter{Kind: retry.JitterNone}})

// TestBudgetSettings: an invalid Budget is an error naming the field, its
// value and the rule; -1 is the one negative value, none; Off and Shared
// skip the rule's fields.
func TestBudgetSettings(t *testing.T) {
	tests := []struct {
		name   string
		budget retry.Budget
		want   string // error; "" for none
	}{
		{name: "zero", budget: retry.Budget{}},
		{name: "none", budget: retry.Budget{Tokens: -1, Ratio: -1}},
		{name: "shadow", budget: retry.Budget{Shadow: true}},
		{name: "ratio -5", budget: retry.Budget{Ratio: -5}, want: "retry: option WithBudget: Ratio = -5: must be in [0, 1000], or -1 for none"},
		{name: "ratio minus infinity", budget: retry.Budget{Ratio: math.Inf(-1)}, want: "retry: option WithBudget: Ratio = -Inf: must be in [0, 1000], or -1 for none"},
		{name: "ratio NaN", budget: retry.Budget{Ratio: math.NaN()}, want: "retry: option WithBudget: Ratio = NaN: must be in [0, 1000], or -1 for none"},
		{name: "ratio infinite", budget: retry.Budget{Ratio: math.Inf(1)}, want: "retry: option WithBudget: Ratio = +Inf: must be in [0, 1000], or -1 for none"},
		{name: "ratio too high", budget: retry.Budget{Ratio: 1001}, want: "retry: option WithBudget: Ratio = 1001: must be in [0, 1000], or -1 for none"},
		{name: "tokens -0.5", budget: retry.Budget{Tokens: -0.5}, want: "retry: option WithBudget: Tokens = -0.5: must be in [0, 1e9], or -1 for none"},
		{name: "tokens NaN", budget: retry.Budget{Tokens: math.NaN()}, want: "retry: option WithBudget: Tokens = NaN: must be in [0, 1e9], or -1 for none"},
		{name: "timeout tokens -2", budget: retry.Budget{TimeoutTokens: -2}, want: "retry: option WithBudget: TimeoutTokens = -2: must be in [0, 1e9], or -1 for none"},
		{name: "tokens too high", budget: retry.Budget{Tokens: 2e9}, want: "retry: option WithBudget: Tokens = 2e+09: must be in [0, 1e9], or -1 for none"},
		{name: "negative window", budget: retry.Budget{Window: -time.Second}, want: "retry: option WithBudget: Window = -1s: must be >= 0"},
		{name: "off", budget: retry.Budget{Off: true, Ratio: -5, Window: -time.Second}},
		{name: "shared", budget: retry.Budget{Shared: newTokenBudget(0), Tokens: -5, Window: -time.Second}},
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

// TestBudgetDefaults: zero fields take the zero Budget's, one by one (12
// tokens, 1 of them for timeouts, 0.2 a success, 10 s, as Budget
// documents), and -1 means none.
func TestBudgetDefaults(t *testing.T) {
	d := retry.Budget{Tokens: 12, TimeoutTokens: 1, Ratio: 0.2, Window: 10 * time.Second}
	tests := []struct {
		name string
		in   retry.Budget
		want retry.Budget
	}{
		{name: "zero", in: retry.Budget{}, want: d},
		{name: "ratio only", in: retry.Budget{Ratio: 0.5}, want: retry.Budget{Tokens: d.Tokens, TimeoutTokens: d.TimeoutTokens, Ratio: 0.5, Window: d.Window}},
		{name: "none", in: retry.Budget{Tokens: -1, TimeoutTokens: -1, Ratio: -1, Window: time.Minute}, want: retry.Budget{Window: time.Minute}},
		{name: "per key and shadow kept", in: retry.Budget{PerKey: true, Shadow: true}, want: retry.Budget{Tokens: d.Tokens, TimeoutTokens: d.TimeoutTokens, Ratio: d.Ratio, Window: d.Window, PerKey: true, Shadow: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.WithDefaults(); got != tt.want {
				t.Errorf("WithDefaults() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestBudgetStock: the zero Budget lets a Retrier with no success yet make
// 12 retries (its Tokens) and denies the thirteenth; time refills nothing,
// an hour later it still denies, and each call that succeeds earns 0.2.
func TestBudgetStock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := retry.New(oneRetry)
		fail := func(context.Context) error { return errTransient }
		for range 13 {
			_ = r.Run(t.Context(), fail)
		}
		if s := r.Stats(); s.Retried != 12 || s.BudgetDenied != 1 || s.BudgetBalance != 0 {
			t.Fatalf("stats %+v, want 12 retries, 1 denial, balance 0", s)
		}
		time.Sleep(time.Hour)
		_ = r.Run(t.Context(), fail)
		if s := r.Stats(); s.Retried != 12 || s.BudgetDenied != 2 {
			t.Fatalf("an hour later: %d retries, %d denied; want 12 and 2", s.Retried, s.BudgetDenied)
		}
		for range 5 {
			_ = r.Run(t.Context(), func(context.Context) error { return nil })
		}
		if s := r.Stats(); math.Abs(s.BudgetBalance-1) > 1e-9 {
			t.Fatalf("balance %v after 5 successes, want 1", s.BudgetBalance)
		}
	})
}

// TestBudgetDenies: calls that succeed earn Ratio tokens each, calls that
// fail earn nothing, and the stock is there from the start; a retry the
// budget refuses stops the call with reason budget and keeps the last
// error; Off disables the budget.
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
		{name: "stock only", budget: retry.Budget{Tokens: 5, Ratio: -1}, ok: 10, calls: 10, retries: 5, denied: 5, balance0: true},
		{name: "successes earn", budget: retry.Budget{Tokens: -1, Ratio: 0.5}, ok: 10, calls: 10, retries: 5, denied: 5, balance0: true},
		{name: "the larger of stock and earnings", budget: retry.Budget{Tokens: 2, Ratio: 0.1}, ok: 10, calls: 10, retries: 2, denied: 8, balance0: true},
		{name: "failures earn nothing", budget: retry.Budget{Tokens: -1, Ratio: 0.5}, calls: 10, retries: 0, denied: 10, balance0: true},
		{name: "zero fields take the defaults", budget: retry.Budget{Ratio: -1}, calls: 20, retries: 12, denied: 8, balance0: true},
		{name: "off", budget: retry.Budget{Off: true}, calls: 20, retries: 20},
		{name: "off overrides Shared", budget: retry.Budget{Off: true, Shared: newTokenBudget(0)}, calls: 10, retries: 10},
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
					t.Errorf("balance %v, want under one token", s.BudgetBalance)
				}
			})
		})
	}
}

// TestBudgetGivesBack: a call that succeeds gives back every token its
// retries took, so that retries that work cost nothing: with a stock of 2
// and nothing earned, 100 calls that each fail once or twice and then
// succeed are all retried, while calls that fail in the end keep what
// they took.
func TestBudgetGivesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := retry.New(retry.WithBudget(retry.Budget{Tokens: 2, Ratio: -1}),
			retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond}))
		for i := range 100 {
			calls := 0
			errs := []error{errTransient, errTransient}[:1+i%2]
			if err := r.Run(t.Context(), script(&calls, errs...)); err != nil {
				t.Fatalf("call %d: %v, want success after %d retries", i, err, len(errs))
			}
		}
		if s := r.Stats(); s.Retried != 150 || s.BudgetDenied != 0 || s.BudgetBalance != 2 {
			t.Fatalf("stats %+v, want 150 retries, none denied, balance 2", s)
		}
		fail := func(context.Context) error { return errTransient }
		_ = r.Run(t.Context(), fail) // two retries, never given back
		if err := r.Run(t.Context(), fail); retry.TypeOf(err) != "budget.exhausted" {
			t.Fatalf("after a call that failed spent the stock: %v, want budget.exhausted", err)
		}
	})
}

// TestBudgetTimeouts: a retry after a timeout may spend what the window's
// successes earned and TimeoutTokens (1) of the stock, no more: the rest of
// the stock is kept for failures that cost the dependency little. A
// Retrier with no success yet retries a call's first timeout and denies its
// second, while it still retries fast failures (an error, a 503, a refused
// connection) from its stock; after 10 successes in all (2 tokens earned
// at 0.2) it retries three timeouts and denies the fourth, and its
// give-up event names that timeout's type.
func TestBudgetTimeouts(t *testing.T) {
	slow := []struct {
		name string
		fn   func(ctx context.Context) error
		typ  string
	}{
		{name: "attempt timeout", fn: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, typ: retry.TypeAttemptTimeout},
		{name: "deadline inside fn", fn: func(ctx context.Context) error {
			inner, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			<-inner.Done()
			return inner.Err()
		}, typ: "timeout.deadline_exceeded"},
		{name: "net.timeout", fn: func(context.Context) error { return &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}} }, typ: "net.timeout"},
		{name: "gRPC DEADLINE_EXCEEDED", fn: func(context.Context) error { return typed{"grpc.deadline_exceeded"} }, typ: "grpc.deadline_exceeded"},
		{name: "504", fn: func(context.Context) error { return &retry.StatusError{StatusCode: 504} }, typ: "http.5xx.504"},
	}
	fast := []error{errTransient, &retry.StatusError{StatusCode: 503}, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	for _, tt := range slow {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var gaveUp []retry.Event
				opts := []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond}),
					retry.OnGiveUp(func(ev retry.Event) { gaveUp = append(gaveUp, ev) })}
				if tt.typ == retry.TypeAttemptTimeout {
					opts = append(opts, retry.WithAttemptTimeout(time.Second))
				}
				r := retry.New(opts...)
				if err := r.Run(t.Context(), tt.fn); retry.TypeOf(err) != "budget.exhausted" || r.Stats().Retried != 1 {
					t.Fatalf("two timeouts with nothing earned: %v after %d retries, want budget.exhausted after 1", err, r.Stats().Retried)
				}
				for _, fail := range fast {
					calls := 0
					if err := r.Run(t.Context(), script(&calls, fail, fail)); err != nil {
						t.Fatalf("a fast failure (%s) from the stock: %v, want two retries and success", retry.TypeOf(fail), err)
					}
				}
				for range 10 - len(fast) {
					_ = r.Run(t.Context(), func(context.Context) error { return nil })
				}
				for range 2 {
					_ = r.Run(t.Context(), tt.fn)
				}
				s := r.Stats()
				if s.Retried != 1+6+3 || s.BudgetDenied != 2 {
					t.Fatalf("retried %d, denied %d; want 10 (1 timeout, 6 fast, 3 timeouts) and 2", s.Retried, s.BudgetDenied)
				}
				last := gaveUp[len(gaveUp)-1]
				if last.Reason != retry.ReasonBudget || last.Type != tt.typ || s.BudgetDeniedType != tt.typ {
					t.Errorf("denial: event %s of type %q, Stats type %q; want budget and %q", last.Reason, last.Type, s.BudgetDeniedType, tt.typ)
				}
			})
		})
	}
}

// TestBudgetTimeoutTokens: TimeoutTokens is what a Retrier with nothing
// earned may spend of its stock on retries after timeouts; -1 is none.
func TestBudgetTimeoutTokens(t *testing.T) {
	tests := []struct {
		name    string
		budget  retry.Budget
		retries int64
	}{
		{name: "default", budget: retry.Budget{}, retries: 1},
		{name: "none", budget: retry.Budget{TimeoutTokens: -1}},
		{name: "three", budget: retry.Budget{TimeoutTokens: 3}, retries: 3},
		{name: "no more than the stock", budget: retry.Budget{Tokens: 2, TimeoutTokens: 3}, retries: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := retry.New(retry.WithBudget(tt.budget), retry.WithAttemptTimeout(time.Second),
					retry.WithPolicy(retry.Policy{MaxAttempts: 6, InitialInterval: time.Millisecond}))
				err := r.Run(t.Context(), func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
				if s := r.Stats(); s.Retried != tt.retries || retry.TypeOf(err) != "budget.exhausted" {
					t.Errorf("%d retries, then %v; want %d, then budget.exhausted", s.Retried, err, tt.retries)
				}
			})
		})
	}
}

// TestBudgetTimeoutAfterRetry: TimeoutTokens is of the stock: once retries
// not given back have taken that much of it, a timeout is retried only from
// what successes earned. A call whose 503 was retried, then whose retry
// timed out, is denied its second retry, and the call fails, keeping its
// token; 5 successes later (a token earned) a call retries two timeouts,
// one earned and one of the stock.
func TestBudgetTimeoutAfterRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := retry.New(retry.WithAttemptTimeout(time.Second), retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond}))
		hang := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
		n := 0
		err := r.Run(t.Context(), func(ctx context.Context) error {
			if n++; n == 1 {
				return &retry.StatusError{StatusCode: 503}
			}
			return hang(ctx)
		})
		if retry.TypeOf(err) != "budget.exhausted" || n != 2 {
			t.Fatalf("a 503, then a timeout: %v after %d attempts, want budget.exhausted after 2", err, n)
		}
		for range 5 {
			_ = r.Run(t.Context(), func(context.Context) error { return nil })
		}
		err = r.Run(t.Context(), hang)
		if s := r.Stats(); s.Retried != 3 || s.BudgetDenied != 1 || retry.TypeOf(err) != retry.TypeAttemptTimeout {
			t.Errorf("retried %d, denied %d, then %v; want 3 (the 503, two timeouts), 1, and the attempts used up", s.Retried, s.BudgetDenied, err)
		}
	})
}

// TestBudgetWindow: the bucket holds the larger of Tokens and what the
// successes of the last Window earned; once they leave the window it
// holds Tokens again.
func TestBudgetWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := retry.New(retry.WithBudget(retry.Budget{Tokens: 3, Ratio: 1, Window: 10 * time.Second}))
		for range 40 {
			_ = r.Run(t.Context(), func(context.Context) error { return nil })
		}
		if b := r.Stats().BudgetBalance; b != 40 {
			t.Fatalf("balance %v after 40 successes earning 1 each, want 40", b)
		}
		time.Sleep(11 * time.Second)
		if b := r.Stats().BudgetBalance; b != 3 {
			t.Fatalf("balance %v once they left the window, want 3", b)
		}
	})
}

// TestBudgetUnreadSuccesses: successes made while the budget was not read
// (no failure for longer than the window) count in the window by the share
// of the time since its last reading that the window covers, as if spread
// evenly.
func TestBudgetUnreadSuccesses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := retry.New(retry.WithBudget(retry.Budget{Tokens: -1, Ratio: 1, Window: 10 * time.Second}))
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
		r := retry.New(retry.WithBudget(retry.Budget{Tokens: 1, Ratio: 0.5, PerKey: true}), oneRetry)
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
		// a: 1 retry of its stock, 4 denied; b: 1 retry; ok: 5 earned,
		// 1 denied.
		if s.Retried != 7 || s.BudgetDenied != 5 || len(s.Budgets) != 3 || s.BudgetBalance != -1 {
			t.Errorf("stats %+v", s)
		}
		if s.Budgets["ok"] != 0 || s.Budgets["b"] != 0 || s.Budgets["a"] != 0 {
			t.Errorf("balances %v, want every key spent", s.Budgets)
		}
	})
}

// TestBudgetDenialDetails: a denial's OnFailure and OnGiveUp events carry
// the call's key, the type of the failure whose retry was denied and the
// balance then (under one token; 0 for a Shared budget), as does Stats;
// the call's error keeps its type budget.exhausted. Events of retries
// carry the balance after their token was taken.
func TestBudgetDenialDetails(t *testing.T) {
	tests := []struct {
		name   string
		budget retry.Budget
		retry  []float64 // the balances of the OnRetry events
		denied float64   // the balance of the denial
	}{
		{name: "one budget", budget: retry.Budget{Tokens: 0.5, Ratio: 1}, retry: []float64{1, 0}, denied: 0},
		{name: "per key", budget: retry.Budget{Tokens: 0.5, Ratio: 1, PerKey: true}, retry: []float64{1, 0}, denied: 0},
		{name: "shared", budget: retry.Budget{Shared: newTokenBudget(2)}, retry: []float64{0, 0}, denied: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var retried, failed, gaveUp []retry.Event
				r := retry.New(retry.WithBudget(tt.budget), oneRetry, retry.WithKey("dep"),
					retry.OnRetry(func(ev retry.Event) { retried = append(retried, ev) }),
					retry.OnFailure(func(ev retry.Event) { failed = append(failed, ev) }),
					retry.OnGiveUp(func(ev retry.Event) { gaveUp = append(gaveUp, ev) }))
				for range 2 { // 2 tokens earned, more than the stock (shared: 2 tokens)
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
		{name: "own", budget: retry.Budget{Tokens: 2, Ratio: -1, Shadow: true}, overdraw: 3},
		{name: "per key", budget: retry.Budget{Tokens: 2, Ratio: -1, Shadow: true, PerKey: true}, overdraw: 3},
		{name: "shared", budget: retry.Budget{Shadow: true, Shared: newTokenBudget(2)}},
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
	wins    map[string]int // calls that succeeded, by key
	refunds map[string]int // tokens given back, by key
	retries map[string]int // retries asked, by key
	slow    int            // of them, after timeouts
}

func newTokenBudget(tokens int) *tokenBudget {
	return &tokenBudget{tokens: tokens, wins: map[string]int{}, refunds: map[string]int{}, retries: map[string]int{}}
}

func (b *tokenBudget) Won(key string, refund int) {
	b.mu.Lock()
	b.wins[key]++
	b.refunds[key] += refund
	b.mu.Unlock()
}

func (b *tokenBudget) Retry(_ context.Context, key string, slow bool, _ time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.retries[key]++
	if slow {
		b.slow++
	}
	if b.tokens == 0 {
		return false
	}
	b.tokens--
	return true
}

// TestBudgetShared: a Budget's Shared budget is told of every call that
// succeeds by key, with the tokens its retries took to give back (none
// when Shadow lets through what it may have denied), is asked for each
// retry, after a timeout or not, and its refusal ends the call with Reason
// budget; a later WithBudget replaces it.
func TestBudgetShared(t *testing.T) {
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}
	tests := []struct {
		name     string
		tokens   int
		fails    []error        // failures before success
		opts     []retry.Option // after the shared budget
		budget   retry.Budget   // its other fields
		err      error
		reason   retry.Reason
		attempts int
		retries  int
		slow     int
		wins     int // calls that succeeded, told
		refund   int // tokens given back
	}{
		{name: "success: counted, never asked", attempts: 1, wins: 1},
		{name: "retry granted, given back", tokens: 1, fails: []error{errTransient}, attempts: 2, retries: 1, wins: 1, refund: 1},
		{name: "retry after a timeout", tokens: 2, fails: []error{errTransient, timeout}, attempts: 3, retries: 2, slow: 1, wins: 1, refund: 2},
		{name: "retry refused", tokens: 1, fails: []error{errTransient, errTransient}, err: errTransient, reason: retry.ReasonBudget, attempts: 2, retries: 2},
		{name: "shadow: nothing given back", fails: []error{errTransient}, budget: retry.Budget{Shadow: true}, attempts: 2, retries: 1, wins: 1},
		{name: "the rule's fields are not used", tokens: 1, fails: []error{errTransient}, budget: retry.Budget{Tokens: -1, Ratio: -1}, attempts: 2, retries: 1, wins: 1, refund: 1},
		{name: "a later WithBudget replaces it", fails: []error{errTransient}, opts: []retry.Option{retry.WithBudget(retry.Budget{Off: true})}, attempts: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newTokenBudget(tt.tokens)
			spec := tt.budget
			spec.Shared = b
			opts := append([]retry.Option{
				retry.WithBudget(spec), retry.WithKey("dep"),
				retry.WithPolicy(retry.Policy{MaxAttempts: 5, InitialInterval: time.Microsecond, MaxInterval: time.Microsecond}),
			}, tt.opts...)
			r := retry.New(opts...)
			n := 0
			err := r.Run(t.Context(), script(&n, tt.fails...))
			var re *retry.Error
			switch {
			case tt.err == nil && err != nil:
				t.Fatalf("err = %v, want success", err)
			case tt.err != nil && (!errors.As(err, &re) || re.Reason != tt.reason || !errors.Is(err, tt.err) || retry.TypeOf(err) != "budget.exhausted"):
				t.Fatalf("err = %v, want %v of type %s keeping the last error", err, tt.reason, "budget.exhausted")
			}
			if n != tt.attempts || b.retries["dep"] != tt.retries || b.slow != tt.slow {
				t.Errorf("%d attempts, %d retries asked (%d after timeouts); want %d, %d and %d", n, b.retries["dep"], b.slow, tt.attempts, tt.retries, tt.slow)
			}
			if b.wins["dep"] != tt.wins || b.refunds["dep"] != tt.refund || len(b.wins) > 1 {
				t.Errorf("told of successes %v, given back %v; want dep:%d and dep:%d", b.wins, b.refunds, tt.wins, tt.refund)
			}
			if s := r.Stats(); s.BudgetBalance != -1 && tt.opts == nil {
				t.Errorf("balance %v with a Shared budget, want -1", s.BudgetBalance)
			}
		})
	}
}

// TestBudgetZeroFields: a Budget's zero fields take their defaults one by
// one; -1 means none.
func TestBudgetZeroFields(t *testing.T) {
	tests := []struct {
		name    string
		budget  retry.Budget
		retries bool // whether a quiet Retrier grants two retries
	}{
		{name: "Window only", budget: retry.Budget{Window: 30 * time.Second}, retries: true},
		{name: "Ratio only", budget: retry.Budget{Ratio: 0.5}, retries: true},
		{name: "Tokens only", budget: retry.Budget{Tokens: 2}, retries: true},
		{name: "no ratio: the stock", budget: retry.Budget{Ratio: -1}, retries: true},
		{name: "no stock, nothing earned", budget: retry.Budget{Tokens: -1}},
		{name: "no stock, no ratio", budget: retry.Budget{Tokens: -1, Ratio: -1}},
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
// rule gives, whatever its size: the stock's 12, or what the calls that
// succeeded before earned when that is more (0.2 each: 20 for 100).
func TestBudgetBurst(t *testing.T) {
	tests := []struct {
		name   string
		before int // calls that succeed first
		burst  int
		most   int64 // retries the rule allows
	}{
		{name: "10 at once", burst: 10, most: 12},
		{name: "1000 at once", burst: 1000, most: 12},
		{name: "1000 at once after 100 successes", before: 100, burst: 1000, most: 20},
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
