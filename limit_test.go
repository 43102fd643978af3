package retry_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

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
		{name: "50/s burst 5, 8 callers", limit: 50, burst: 5, callers: 8, calls: 100, wantSeconds: (800 - 5) / 50.0},
		{name: "200/s burst 1, 16 callers", limit: 200, burst: 1, callers: 16, calls: 50, wantSeconds: (800 - 1) / 200.0},
		{name: "10/s burst 3, 4 callers, retries", limit: 10, burst: 3, callers: 4, calls: 20, failOneIn: 3},
		// Most tokens are handed out ahead, without the clock (see ahead).
		{name: "1000/s burst 500, 8 callers", limit: 1000, burst: 500, callers: 8, calls: 300, wantSeconds: (2400 - 500) / 1000.0},
		{name: "1000/s burst 1000, 8 callers, retries", limit: 1000, burst: 1000, callers: 8, calls: 300, failOneIn: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := retry.New(retry.WithRateLimit(retry.RateLimit{Limit: rate.Limit(tt.limit), Burst: tt.burst}),
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
		r := retry.New(retry.WithRateLimit(retry.RateLimit{Limit: 1}))
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
		if time.Since(start) != 0 || retry.TypeOf(err) != "ratelimit.local" {
			t.Fatalf("stopped after %v with type %q; want at once, %q", time.Since(start), retry.TypeOf(err), "ratelimit.local")
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
			r := retry.New(retry.WithRateLimit(retry.RateLimit{Limit: 0.1}))
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
			r := retry.New(retry.WithRateLimit(retry.RateLimit{Limit: 1}), retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond}))
			calls := 0
			err := r.Run(t.Context(), script(&calls, errTransient))
			if err != nil || calls != 2 {
				t.Fatalf("err %v after %d calls, want success on the second", err, calls)
			}
		})
	})
}

// TestRateLimitPerKey: with PerKey each key has its own bucket.
func TestRateLimitPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := retry.New(retry.WithRateLimit(retry.RateLimit{Limit: 1, PerKey: true}))
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

// TestRateLimitSettings: zero fields take their defaults or are errors
// naming the field, its value and the rule.
func TestRateLimitSettings(t *testing.T) {
	own := rate.NewLimiter(10, 1)
	tests := []struct {
		name string
		rl   retry.RateLimit
		want string // error; "" for none
	}{
		{name: "limit and burst", rl: retry.RateLimit{Limit: 10, Burst: 5}},
		{name: "zero burst means 1", rl: retry.RateLimit{Limit: 10}},
		{name: "no limit", rl: retry.RateLimit{Limit: rate.Inf}},
		{name: "per key", rl: retry.RateLimit{Limit: 10, PerKey: true}},
		{name: "own limiter", rl: retry.RateLimit{Limiter: own}},
		{name: "zero", rl: retry.RateLimit{}, want: "retry: option WithRateLimit: Limit = 0: must be > 0 attempts per second (rate.Inf for no limit)"},
		{name: "negative limit", rl: retry.RateLimit{Limit: -1}, want: "retry: option WithRateLimit: Limit = -1: must be > 0"},
		{name: "NaN limit", rl: retry.RateLimit{Limit: rate.Limit(math.NaN())}, want: "retry: option WithRateLimit: Limit = NaN: must be > 0"},
		{name: "negative burst", rl: retry.RateLimit{Limit: 10, Burst: -1}, want: "retry: option WithRateLimit: Burst = -1: must be >= 0 (0 means 1)"},
		{name: "own limiter per key", rl: retry.RateLimit{Limiter: own, PerKey: true}, want: "retry: option WithRateLimit: PerKey = true: must be false when Limiter is set"},
		{name: "own limiter with a limit", rl: retry.RateLimit{Limiter: own, Limit: 5}, want: "retry: option WithRateLimit: Limit = 5: must be zero when Limiter is set"},
		{name: "own limiter with a burst", rl: retry.RateLimit{Limiter: own, Burst: 5}, want: "retry: option WithRateLimit: Burst = 5: must be zero when Limiter is set"},
		{name: "shared", rl: retry.RateLimit{Shared: &fixedLimiter{}}},
		{name: "shared with an own limiter", rl: retry.RateLimit{Shared: &fixedLimiter{}, Limiter: own}, want: "retry: option WithRateLimit: Limiter = non-nil: must be nil when Shared is set"},
		{name: "shared per key", rl: retry.RateLimit{Shared: &fixedLimiter{}, PerKey: true}, want: "retry: option WithRateLimit: PerKey = true: must be false when Shared is set"},
		{name: "shared with a limit", rl: retry.RateLimit{Shared: &fixedLimiter{}, Limit: 5}, want: "retry: option WithRateLimit: Limit = 5: must be zero when Shared is set"},
		{name: "shared with a burst", rl: retry.RateLimit{Shared: &fixedLimiter{}, Burst: 5}, want: "retry: option WithRateLimit: Burst = 5: must be zero when Shared is set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := retry.New(retry.WithRateLimit(tt.rl)).Err()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}

// TestRateLimitOwnLimiter: a caller's own *rate.Limiter is shared with the
// code that takes tokens from it, and a call that cannot wait gives its
// token back to it.
func TestRateLimitOwnLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		own := rate.NewLimiter(10, 1)
		r := retry.New(retry.WithRateLimit(retry.RateLimit{Limiter: own}))
		start := time.Now()
		if !own.Allow() { // other code takes the only token
			t.Fatal("a new limiter refused its first token")
		}
		if err := r.Run(t.Context(), ok); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 100*time.Millisecond {
			t.Fatalf("the call ran after %v, want 100ms: the other code took the token", d)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		var re *retry.Error
		if err := r.Run(ctx, ok); !errors.As(err, &re) || re.Reason != retry.ReasonRateLimited {
			t.Fatalf("err = %v, want rate_limited", err)
		}
		// The refused call gave its token back: the next is due 100 ms
		// after the last, not 200 ms.
		if d := own.ReserveN(time.Now(), 1).DelayFrom(time.Now()); d != 100*time.Millisecond {
			t.Errorf("next token in %v, want 100ms", d)
		}
	})
}

// fixedLimiter answers every Reserve with the same wait, or refuses when
// the wait exceeds maxWait, and records what it was asked.
type fixedLimiter struct {
	wait     time.Duration
	keys     []string
	maxWaits []time.Duration
	canceled int
}

func (l *fixedLimiter) Reserve(_ context.Context, key string, _ time.Time, maxWait time.Duration) (time.Duration, func(time.Time), bool) {
	l.keys = append(l.keys, key)
	l.maxWaits = append(l.maxWaits, maxWait)
	if l.wait > maxWait {
		return 0, nil, false
	}
	return l.wait, func(time.Time) { l.canceled++ }, true
}

// TestSharedLimiter: a Limiter set as RateLimit.Shared is asked before every
// attempt with the call's key and the room left before its deadline; its
// wait is slept, its refusal stops the call, and a call canceled during the
// wait gives the token back.
func TestSharedLimiter(t *testing.T) {
	tests := []struct {
		name      string
		wait      time.Duration
		timeout   time.Duration
		cancelAt  time.Duration // cancel the call's context then; 0: never
		reason    retry.Reason  // zero: success
		elapsed   time.Duration
		maxWait   time.Duration // the first maxWait the limiter saw
		canceled  int
		asked     int
		waits     int64
		denied    int64
		firstType string
	}{
		{name: "no wait", timeout: time.Second, maxWait: time.Second - 1, asked: 1},
		{name: "a wait that fits", wait: 300 * time.Millisecond, timeout: time.Second, elapsed: 300 * time.Millisecond, maxWait: time.Second - 1, asked: 1, waits: 1},
		{name: "a wait past the deadline", wait: 2 * time.Second, timeout: time.Second, reason: retry.ReasonRateLimited, maxWait: time.Second - 1, asked: 1, denied: 1, firstType: "ratelimit.local"},
		{name: "canceled during the wait", wait: 500 * time.Millisecond, timeout: time.Second, cancelAt: 100 * time.Millisecond, reason: retry.ReasonCanceled, elapsed: 100 * time.Millisecond, maxWait: time.Second - 1, canceled: 1, asked: 1, waits: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := &fixedLimiter{wait: tt.wait}
				r := retry.New(retry.WithRateLimit(retry.RateLimit{Shared: l}), retry.WithKey("dep"))
				ctx, cancel := context.WithTimeout(t.Context(), tt.timeout)
				defer cancel()
				if tt.cancelAt > 0 {
					time.AfterFunc(tt.cancelAt, cancel)
				}
				start := time.Now()
				err := r.Run(ctx, func(context.Context) error { return nil })
				var re *retry.Error
				switch {
				case tt.reason == "" && err != nil:
					t.Fatalf("err = %v, want success", err)
				case tt.reason != "" && (!errors.As(err, &re) || re.Reason != tt.reason):
					t.Fatalf("err = %v, want reason %v", err, tt.reason)
				}
				if tt.firstType != "" && retry.TypeOf(err) != tt.firstType {
					t.Errorf("type %q, want %q", retry.TypeOf(err), tt.firstType)
				}
				if d := time.Since(start); d != tt.elapsed {
					t.Errorf("elapsed %v, want %v", d, tt.elapsed)
				}
				if len(l.keys) != tt.asked || l.keys[0] != "dep" || l.maxWaits[0] != tt.maxWait {
					t.Errorf("asked %v with maxWait %v; want %d times for dep, maxWait %v", l.keys, l.maxWaits, tt.asked, tt.maxWait)
				}
				if l.canceled != tt.canceled {
					t.Errorf("canceled %d, want %d", l.canceled, tt.canceled)
				}
				if s := r.Stats(); s.LimiterWaits != tt.waits || s.LimiterDenied != tt.denied {
					t.Errorf("waits %d, denied %d; want %d and %d", s.LimiterWaits, s.LimiterDenied, tt.waits, tt.denied)
				}
			})
		})
	}
}

// TestSharedLimiterMaxElapsed: without a deadline, the room is what is left
// of MaxElapsed; with neither, any wait fits.
func TestSharedLimiterMaxElapsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &fixedLimiter{}
		_ = retry.Run(t.Context(), func(context.Context) error { return nil }, retry.WithRateLimit(retry.RateLimit{Shared: l}), retry.WithMaxElapsed(time.Minute))
		_ = retry.Run(t.Context(), func(context.Context) error { return nil }, retry.WithRateLimit(retry.RateLimit{Shared: l}))
		if l.maxWaits[0] != time.Minute || l.maxWaits[1] < 100*365*24*time.Hour {
			t.Fatalf("maxWaits %v, want 1m and unbounded", l.maxWaits)
		}
	})
}

// countingLimiter hands out tokens at once and counts those given back.
type countingLimiter struct{ returned atomic.Int32 }

func (l *countingLimiter) Reserve(context.Context, string, time.Time, time.Duration) (time.Duration, func(time.Time), bool) {
	return 0, func(time.Time) { l.returned.Add(1) }, true
}

// TestRateLimitTokenSpent: the token of an attempt that ran stays spent
// when the call ends; only a token for an attempt that never ran is given
// back.
func TestRateLimitTokenSpent(t *testing.T) {
	lim := &countingLimiter{}
	r := retry.New(retry.WithRateLimit(retry.RateLimit{Shared: lim}))
	if err := r.Run(t.Context(), func(context.Context) error { return nil }); err != nil {
		t.Fatalf("call: %v", err)
	}
	if n := lim.returned.Load(); n != 0 {
		t.Errorf("%d tokens given back after the attempt ran, want 0", n)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r.Run(ctx, func(context.Context) error { return nil })
	if n := lim.returned.Load(); n != 0 {
		t.Errorf("%d tokens given back by a call canceled before it asked, want 0", n)
	}
}
