package redis_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	retryredis "github.com/steadyhq/retry/redis"
)

// TestLimiterSlowRedis: with Redis slower than Options.Timeout, a call
// takes a token from the local bucket whatever its deadline, even one
// under twice the timeout, and is refused only when the bucket's own wait
// does not fit.
func TestLimiterSlowRedis(t *testing.T) {
	s := startServer(t)
	// The Limiter's Timeout: each deadline leaves the local bucket tens of
	// milliseconds or more after the cut Redis wait, on a loaded machine.
	const timeout = 200 * time.Millisecond
	tests := []struct {
		name     string
		limit    float64
		burst    int
		deadline time.Duration
		calls    int
		refused  int // calls refused as rate_limited, the last ones
	}{
		{name: "a deadline of six timeouts", limit: 1000, burst: 10, deadline: 6 * timeout, calls: 1},
		{name: "a deadline under two timeouts", limit: 1000, burst: 10, deadline: 8 * timeout / 5, calls: 1},
		{name: "a deadline under one timeout", limit: 1000, burst: 10, deadline: 3 * timeout / 5, calls: 1},
		{name: "the bucket's wait past the deadline", limit: 1, burst: 1, deadline: 8 * timeout / 5, calls: 2, refused: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := s.Client()
			c.AddHook(latency(25 * timeout)) // cut by every timeout
			l, err := retryredis.NewLimiter(c, tt.limit, tt.burst, false, retryredis.Options{Prefix: tt.name, Timeout: timeout})
			if err != nil {
				t.Fatal(err)
			}
			r := retry.New(retry.WithRateLimit(retry.RateLimit{Shared: l}))
			for i := range tt.calls {
				ctx, cancel := context.WithTimeout(t.Context(), tt.deadline)
				ran := false
				err := r.Run(ctx, func(context.Context) error { ran = true; return nil })
				cancel()
				var re *retry.Error
				if refuse := i >= tt.calls-tt.refused; refuse {
					if ran || !errors.As(err, &re) || re.Reason != retry.ReasonRateLimited {
						t.Errorf("call %d: ran %v, %v; want rate_limited by the local bucket", i, ran, err)
					}
				} else if !ran || err != nil {
					t.Errorf("call %d: ran %v, %v; want paced by the local bucket", i, ran, err)
				}
			}
			if st := l.Stats(); st.Fallbacks != int64(tt.calls) || st.Allowed != 0 || st.Denied != 0 {
				t.Errorf("%+v, want %d fallbacks", st, tt.calls)
			}
		})
	}
}

// TestLimiterSmallRates: limits under one attempt per second, down to
// 0.0004/s, are kept by Redis: the first attempt is granted, the next
// refused for the emission interval, and Redis never fails.
func TestLimiterSmallRates(t *testing.T) {
	s := startServer(t)
	c := s.Client()
	for _, limit := range []float64{0.9, 1.0 / 3, 0.0004, 1e-9} {
		l, err := retryredis.NewLimiter(c, limit, 1, false, retryredis.Options{Prefix: time.Duration(float64(time.Second) / limit).String()})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if _, _, ok := l.Reserve(t.Context(), "", now, time.Second); !ok {
			t.Errorf("limit %v: first reservation refused", limit)
		}
		if _, _, ok := l.Reserve(t.Context(), "", now, time.Second); ok {
			t.Errorf("limit %v: second reservation granted within a second", limit)
		}
		// Waits may count a refusal of a few hundred nanoseconds, GCRA's
		// floating-point rounding at the boundary of the burst.
		if st := l.Stats(); st.Allowed != 1 || st.Denied != 1 || st.Fallbacks != 0 {
			t.Errorf("limit %v: %+v, want 1 allowed and 1 denied by Redis", limit, st)
		}
	}
	if _, err := retryredis.NewLimiter(c, 1e-10, 1, false, retryredis.Options{}); err == nil {
		t.Error("a limit under 1e-9 was accepted")
	}
}

// TestLimiterOneTokenBursts: a bucket of one token grants it at every
// rate, and paces the next at the emission interval: Redis's clock,
// counted in seconds, does not round the token away.
func TestLimiterOneTokenBursts(t *testing.T) {
	s := startServer(t)
	for _, limit := range []float64{20, 1000, 10_000, 100_000} {
		t.Run(strconv.FormatFloat(limit, 'g', -1, 64), func(t *testing.T) {
			l, err := retryredis.NewLimiter(s.Client(), limit, 1, false, retryredis.Options{Prefix: "one:" + strconv.FormatFloat(limit, 'g', -1, 64) + ":"})
			if err != nil {
				t.Fatal(err)
			}
			granted := 0
			start := time.Now()
			for range 20 {
				if _, _, ok := l.Reserve(t.Context(), "", time.Now(), time.Second); ok {
					granted++
				}
			}
			took := time.Since(start)
			st := l.Stats()
			// 20 tokens at limit a second take 19 emission intervals.
			least := time.Duration(19 / limit * float64(time.Second))
			t.Logf("20 reservations in %v (at least %v): %+v", took, least, st)
			if granted != 20 || st.Fallbacks != 0 || took < least-time.Millisecond {
				t.Errorf("granted %d of 20 in %v (at least %v), %+v", granted, took, least, st)
			}
		})
	}
}
