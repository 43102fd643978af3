package retry_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry"
)

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

// TestWithLimiter: a Limiter set with WithLimiter is asked before every
// attempt with the call's key and the room left before its deadline; its
// wait is slept, its refusal stops the call, and a call canceled during the
// wait gives the token back.
func TestWithLimiter(t *testing.T) {
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
		{"no wait", 0, time.Second, 0, 0, 0, time.Second - 1, 0, 1, 0, 0, ""},
		{"a wait that fits", 300 * time.Millisecond, time.Second, 0, 0, 300 * time.Millisecond, time.Second - 1, 0, 1, 1, 0, ""},
		{"a wait past the deadline", 2 * time.Second, time.Second, 0, retry.ReasonRateLimited, 0, time.Second - 1, 0, 1, 0, 1, retry.TypeRateLimited},
		{"canceled during the wait", 500 * time.Millisecond, time.Second, 100 * time.Millisecond, retry.ReasonCanceled, 100 * time.Millisecond, time.Second - 1, 1, 1, 1, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := &fixedLimiter{wait: tt.wait}
				r := retry.New(retry.WithLimiter(l), retry.WithKey("dep"))
				ctx, cancel := context.WithTimeout(t.Context(), tt.timeout)
				defer cancel()
				if tt.cancelAt > 0 {
					time.AfterFunc(tt.cancelAt, cancel)
				}
				start := time.Now()
				err := r.Run(ctx, func(context.Context) error { return nil })
				var re *retry.Error
				switch {
				case tt.reason == 0 && err != nil:
					t.Fatalf("err = %v, want success", err)
				case tt.reason != 0 && (!errors.As(err, &re) || re.Reason != tt.reason):
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

// TestWithLimiterMaxElapsed: without a deadline, the room is what is left
// of MaxElapsed; with neither, any wait fits.
func TestWithLimiterMaxElapsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &fixedLimiter{}
		_ = retry.Run(t.Context(), func(context.Context) error { return nil }, retry.WithLimiter(l), retry.WithMaxElapsed(time.Minute))
		_ = retry.Run(t.Context(), func(context.Context) error { return nil }, retry.WithLimiter(l))
		if l.maxWaits[0] != time.Minute || l.maxWaits[1] < 100*365*24*time.Hour {
			t.Fatalf("maxWaits %v, want 1m and unbounded", l.maxWaits)
		}
	})
}

func TestNewRateLimiter(t *testing.T) {
	tests := []struct {
		limit float64
		burst int
		want  string // error; "" for none
	}{
		{10, 1, ""},
		{0, 1, "retry: NewRateLimiter: value 0: limit must be a number of attempts per second in (0, 1e9]"},
		{10, 0, "retry: NewRateLimiter: value 0: burst must be >= 1"},
		{1e-9, 2, "retry: NewRateLimiter: value 2: burst / limit, the time to refill a whole burst, must be at most 1e9 seconds"},
		{1e-9, 1, ""},
		{0.99e9, 0.99e18, ""},
	}
	for _, tt := range tests {
		l, err := retry.NewRateLimiter(tt.limit, tt.burst, false)
		if tt.want == "" {
			if err != nil || l == nil {
				t.Errorf("NewRateLimiter(%v, %d) = %v, %v", tt.limit, tt.burst, l, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewRateLimiter(%v, %d): error %v, want %q", tt.limit, tt.burst, err, tt.want)
		}
	}
	// The same bucket through WithLimiter paces as WithRateLimit does.
	synctest.Test(t, func(t *testing.T) {
		l, _ := retry.NewRateLimiter(10, 1, false)
		r := retry.New(retry.WithLimiter(l))
		start := time.Now()
		for range 3 {
			_ = r.Run(t.Context(), func(context.Context) error { return nil })
		}
		if d := time.Since(start); d != 200*time.Millisecond {
			t.Fatalf("3 calls at 10/s burst 1 took %v, want 200ms", d)
		}
	})
}
