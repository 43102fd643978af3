package redis_test

import (
	"context"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/steadyhq/retry"
	retryredis "github.com/steadyhq/retry/redis"
)

// TestBudgetRule: the fleet budget grants Ratio times the first attempts
// of the window plus Tokens, counted across processes,
// and forgets them once the window has passed.
func TestBudgetRule(t *testing.T) {
	s := startServer(t)
	tests := []struct {
		name    string
		spec    retry.Budget
		firsts  [3]int // first attempts in each of three processes
		perKey  bool
		want    int // retries granted at once
		later   time.Duration
		wantNow int // retries granted after later, with no new first attempts
	}{
		{name: "default rule: 20% plus 12 over 10 s", spec: retry.Budget{}, firsts: [3]int{400, 300, 300}, want: 212, later: 11 * time.Second, wantNow: 12},
		{name: "ratio only", spec: retry.Budget{Ratio: 0.5, Tokens: -1, Window: time.Second}, firsts: [3]int{10, 10, 0}, want: 10, later: 2 * time.Second},
		{name: "tokens only", spec: retry.Budget{Ratio: -1, Tokens: 6, Window: 2 * time.Second}, firsts: [3]int{100, 0, 0}, want: 6, later: 3 * time.Second, wantNow: 6},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Unix(1_000_000+int64(i)*1000, 0)
			var bs [3]*retryredis.Budget
			for p := range bs {
				b, err := retryredis.NewBudget(s.Client(), tt.spec, retryredis.Options{Prefix: tt.name + ":"})
				if err != nil {
					t.Fatal(err)
				}
				bs[p] = b
				for range tt.firsts[p] {
					b.First("k")
				}
				// Each process sends its counts with its first request.
				if !b.Retry(t.Context(), "k", now) && tt.want > p {
					t.Fatalf("process %d refused a retry", p)
				}
			}
			got := 3
			if tt.want < 3 {
				got = tt.want
			}
			for bs[0].Retry(t.Context(), "k", now) {
				got++
				if got > 10_000 {
					t.Fatal("no end to the retries")
				}
			}
			if got != tt.want {
				t.Errorf("granted %d, want %d", got, tt.want)
			}
			later := now.Add(tt.later)
			n := 0
			for bs[1].Retry(t.Context(), "k", later) {
				n++
				if n > 10_000 {
					t.Fatal("no end to the retries")
				}
			}
			if n != tt.wantNow {
				t.Errorf("granted %d after %v, want %d", n, tt.later, tt.wantNow)
			}
		})
	}
}

// TestBudgetFirstsAge: first attempts count in full while they are within
// the window, and at the window's share of the time they cover once older,
// the first ones sent too (dated from when the Budget, or its key, began).
func TestBudgetFirstsAge(t *testing.T) {
	s := startServer(t)
	spec := retry.Budget{Ratio: 0.5, Tokens: -1, Window: 10 * time.Second}
	tests := []struct {
		name   string
		perKey bool
		firsts int
		age    time.Duration // from building the Budget to the retry
		want   int
	}{
		{name: "fresh", firsts: 100, want: 50},
		{name: "half a window old", firsts: 100, age: 5 * time.Second, want: 50},
		{name: "an hour old", firsts: 10_000, age: time.Hour, want: 13}, // 10000·10/3600 = 27 sent
		{name: "an hour old, per key", perKey: true, firsts: 10_000, age: time.Hour, want: 13},
		{name: "a clock behind the wall clock", firsts: 100, age: -time.Hour, want: 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := spec
			spec.PerKey = tt.perKey
			b, err := retryredis.NewBudget(s.Client(), spec, retryredis.Options{Prefix: tt.name + ":"})
			if err != nil {
				t.Fatal(err)
			}
			for range tt.firsts {
				b.First("k")
			}
			now := time.Now().Add(tt.age)
			got := 0
			for b.Retry(t.Context(), "k", now) {
				if got++; got > 10_000 {
					t.Fatal("no end to the retries")
				}
			}
			if got != tt.want {
				t.Errorf("granted %d retries for %d first attempts %v old, want %d; %+v", got, tt.firsts, tt.age, tt.want, b.Stats())
			}
		})
	}
}

// stepClock is a retry.Clock that moves only when told.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *stepClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

func (c *stepClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestBudgetAfterQuiet: an outage an hour after 10,000 healthy calls gets
// about the retries from the fleet budget that the in-process budget gives
// (its Tokens), plus the 20 that the fleet budget earns from the outage's
// own 100 first attempts (the in-process one earns from successes, and
// there are none): the old first attempts do not count as the window's.
func TestBudgetAfterQuiet(t *testing.T) {
	s := startServer(t)
	retries := func(shared bool) int {
		clk := &stepClock{t: time.Now()}
		opts := []retry.Option{retry.WithClock(clk), retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond})}
		if shared {
			// A loaded machine must not make Redis look slow: a failed
			// round trip would fail open.
			b, err := retryredis.NewBudget(s.ClientWith(func(o *goredis.Options) { o.ReadTimeout = time.Second }), retry.Budget{}, retryredis.Options{Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			opts = append(opts, retry.WithBudget(retry.Budget{Shared: b}))
			defer func() {
				if st := b.Stats(); st.FailOpen != 0 {
					t.Errorf("budget %+v: Redis failed", st)
				}
			}()
		}
		r := retry.New(opts...)
		for range 10_000 {
			_ = r.Run(t.Context(), func(context.Context) error { return nil })
		}
		clk.Add(time.Hour)
		attempts := 0
		for range 100 {
			_ = r.Run(t.Context(), func(context.Context) error { attempts++; return errDown })
		}
		return attempts - 100
	}
	local, fleet := retries(false), retries(true)
	t.Logf("retries granted to 100 failing calls an hour after 10,000 healthy ones: in process %d, on Redis %d", local, fleet)
	if want := local + 20; fleet > want+5 || fleet < want-5 {
		t.Errorf("the fleet budget granted %d retries, the in-process one %d; want the fleet's within 5 of %d", fleet, local, want)
	}
}
