package redis_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	retryredis "github.com/steadyhq/retry/redis"
)

// TestLimiterBudgetValuesDistrusted: a limiter's bucket time or a
// budget's counter in Redis that no Limiter or Budget wrote (not a finite
// number, or a bucket emptied for years) is a failure of Redis, counted,
// with the local fallback: the limiter paces on its local bucket instead
// of refusing every call for good, and the budget decides on its local
// bucket instead of granting from counts that are not counts.
func TestLimiterBudgetValuesDistrusted(t *testing.T) {
	s := startServer(t)
	c := s.Client()
	far := strconv.FormatFloat(float64(time.Now().Unix()-1483228800)+1e9, 'f', 3, 64) // 31 years ahead, in the bucket's seconds since 2017
	for i, v := range []string{"inf", "nan", "-inf", far} {
		t.Run("limiter bucket "+v, func(t *testing.T) {
			prefix := fmt.Sprintf("distrust:limit:%d:", i)
			if err := c.Set(t.Context(), prefix+"{limit:}", v, 0).Err(); err != nil {
				t.Fatal(err)
			}
			l, err := retryredis.NewLimiter(s.Client(), 1000, 10, false, retryredis.Options{Prefix: prefix, Timeout: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			r := retry.New(retry.WithRateLimit(retry.RateLimit{Shared: l}), retry.WithPolicy(retry.Policy{MaxAttempts: 1}))
			var refused int
			for range 5 {
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				if err := r.Run(ctx, func(context.Context) error { return nil }); err != nil {
					refused++
				}
				cancel()
			}
			if st := l.Stats(); refused != 0 || st.Errors == 0 || st.Fallbacks == 0 || st.Allowed != 0 {
				t.Errorf("bucket %q: %d of 5 calls refused; %+v: want none refused, the bucket counted as an error and the local bucket pacing", v, refused, st)
			}
		})
	}
	budgetValues := []struct {
		name, key, value string // key: "t" the balance, "w" every counter of the window
	}{
		{name: "counter inf", key: "w", value: "inf"},
		{name: "counter nan", key: "w", value: "nan"},
		{name: "counter -5", key: "w", value: "-5"},
		{name: "balance inf", key: "t", value: "inf"},
		{name: "balance nan", key: "t", value: "nan"},
		{name: "balance 1e300", key: "t", value: "1e300"},
	}
	for i, tt := range budgetValues {
		t.Run("budget "+tt.name, func(t *testing.T) {
			prefix := fmt.Sprintf("distrust:budget:%d:", i)
			b, err := retryredis.NewBudget(s.Client(), retry.Budget{}, retryredis.Options{Prefix: prefix, Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			base := prefix + "{budget:}:"
			now := time.Now()
			if tt.key == "t" {
				if err := c.Set(t.Context(), base+"t", tt.value, 0).Err(); err != nil {
					t.Fatal(err)
				}
			} else {
				// Every counter the next retries read: the slices of the
				// window around now.
				slice := int64(time.Second) // a tenth of the default 10 s window
				for id := now.UnixNano()/slice - 12; id <= now.UnixNano()/slice+2; id++ {
					if err := c.Set(t.Context(), fmt.Sprintf("%sw:%d", base, id), tt.value, 0).Err(); err != nil {
						t.Fatal(err)
					}
				}
			}
			for range 3 {
				b.Retry(t.Context(), "", false, now)
			}
			if st := b.Stats(); st.Errors == 0 || st.Fallbacks == 0 || st.Granted != 0 || st.Denied != 0 {
				t.Errorf("%s %q: %+v, want it counted as an error and the retries decided by the local bucket", tt.key, tt.value, st)
			}
		})
	}
}

// TestLimiterBudgetStateBounded: the keys a shared limiter and budget keep
// in Redis follow the keys in use, as the package documentation says: a
// lease's keys live a share window (ten SyncIntervals), a budget's
// counters of successes its Window and two slices, and its balance ten
// Windows or at least a minute. 300 keys called twice each, with a retry
// each time, leave none of the first two once both windows have passed
// twice since the last call, and balances that expire within a minute.
func TestLimiterBudgetStateBounded(t *testing.T) {
	s := startServer(t)
	c := s.Client()
	const prefix = "bounded:"
	opts := retryredis.Options{Prefix: prefix, SyncInterval: 10 * time.Millisecond, Heartbeat: 50 * time.Millisecond, Timeout: time.Second}
	l, err := retryredis.NewLimiter(s.Client(), 1e6, 100, true, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := retryredis.NewBudget(s.Client(), retry.Budget{Window: 100 * time.Millisecond, PerKey: true}, opts)
	if err != nil {
		t.Fatal(err)
	}
	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond}),
		retry.WithRateLimit(retry.RateLimit{Shared: l}), retry.WithBudget(retry.Budget{Shared: b}))
	keys := func() []string {
		keys, err := c.Keys(t.Context(), prefix+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
	for i := range 300 {
		// The second call's retry sends the first call's success: the
		// budget's counter of the window.
		for range 2 {
			n := 0
			err := retry.Run(t.Context(), func(context.Context) error {
				if n++; n == 1 {
					return errDown
				}
				return nil
			}, r, retry.WithKey(fmt.Sprintf("dep-%d", i)))
			if err != nil {
				t.Fatalf("key %d: %v", i, err)
			}
		}
	}
	kinds := func(keys []string) map[string]int {
		m := map[string]int{}
		for _, k := range keys {
			switch {
			case strings.HasPrefix(k, prefix+"{limit:"):
				m["limiter"]++
			case strings.HasSuffix(k, ":t"):
				m["budget balance"]++
			case strings.Contains(k, ":w:"):
				m["budget counter"]++
			default:
				m["other"]++
			}
		}
		return m
	}
	held := kinds(keys())
	if held["limiter"] < 10 || held["budget counter"] < 10 {
		// Most keys' have lapsed already while the calls ran (a second or
		// so, against windows of 100 ms): the last ones' are left.
		t.Fatalf("keys in Redis after 300 keys' calls: %v, want some of the limiter's and the budget's counters: the test measures nothing", held)
	}
	// The share window is 100 ms, a lease's granted tokens live twice it,
	// and the budget's counters its Window and two slices: 400 ms is twice
	// the longest, and Redis expires a key within milliseconds of its TTL.
	time.Sleep(400 * time.Millisecond)
	left := keys()
	if m := kinds(left); m["limiter"]+m["budget counter"]+m["other"] != 0 {
		t.Errorf("keys in Redis 400 ms after the last call: %v (%v while the calls ran), want only the budget's balances", m, held)
	}
	for _, k := range left {
		if ttl := c.PTTL(t.Context(), k).Val(); ttl <= 0 || ttl > time.Minute {
			t.Errorf("%s expires in %v, want within a minute", k, ttl)
			break
		}
	}
	if st := l.Stats(); st.Errors != 0 {
		t.Errorf("limiter errors: %+v", st)
	}
}
