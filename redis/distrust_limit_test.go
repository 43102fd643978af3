package redis_test

import (
	"context"
	"fmt"
	"strconv"
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
