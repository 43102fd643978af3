package redis_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/steadyhq/retry"
	retryredis "github.com/steadyhq/retry/redis"
)

// TestBudgetRule: the fleet budget is retry.Budget's rule for the fleet as
// one client, across processes: a bucket that starts full and holds the
// larger of Tokens and Ratio for each success the processes sent in the
// window; a retry takes a token, and one after a timeout may spend what
// the successes earned and TimeoutTokens of the stock; successes and
// tokens given back refill it, and time does not.
func TestBudgetRule(t *testing.T) {
	s := startServer(t)
	tests := []struct {
		name   string
		spec   retry.Budget
		won    [3]int // calls that succeeded in each of three processes
		back   int    // tokens a call of the first process gives back once the bucket is spent
		slow   bool   // retries after timeouts
		want   int    // retries granted at once
		later  time.Duration
		wantAt int // retries granted after later, with nothing new
	}{
		{name: "stock", spec: retry.Budget{}, want: 12, later: time.Hour},
		{name: "earned across processes", spec: retry.Budget{}, won: [3]int{100, 100, 100}, want: 60, later: 11 * time.Second},
		{name: "given back", spec: retry.Budget{}, back: 5, want: 17, later: time.Hour},
		{name: "timeouts: one token of the stock", spec: retry.Budget{}, slow: true, want: 1},
		{name: "timeouts: what successes earned", spec: retry.Budget{}, won: [3]int{50, 50, 0}, slow: true, want: 21},
		{name: "no stock", spec: retry.Budget{Tokens: -1, Ratio: 0.5}, won: [3]int{10, 10, 0}, want: 10},
		{name: "no ratio", spec: retry.Budget{Ratio: -1, Tokens: 6}, won: [3]int{100, 0, 0}, want: 6},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Unix(1_000_000+int64(i)*1000, 0)
			var bs [3]*retryredis.Budget
			got := 0
			for p := range bs {
				b, err := retryredis.NewBudget(s.Client(), tt.spec, retryredis.Options{Prefix: tt.name + ":"})
				if err != nil {
					t.Fatal(err)
				}
				bs[p] = b
				for range tt.won[p] {
					b.Won("k", 0)
				}
				// Each process sends its counts with its first request.
				if b.Retry(t.Context(), "k", tt.slow, now) {
					got++
				}
			}
			drain := func() {
				for bs[0].Retry(t.Context(), "k", tt.slow, now) {
					if got++; got > 10_000 {
						t.Fatal("no end to the retries")
					}
				}
			}
			drain()
			if tt.back > 0 {
				bs[0].Won("k", tt.back) // a call that succeeded gives back
				drain()
			}
			if got != tt.want {
				t.Errorf("granted %d, want %d", got, tt.want)
			}
			n := 0
			for tt.later > 0 && bs[1].Retry(t.Context(), "k", tt.slow, now.Add(tt.later)) {
				if n++; n > 10_000 {
					t.Fatal("no end to the retries")
				}
			}
			if n != tt.wantAt {
				t.Errorf("granted %d after %v, want %d", n, tt.later, tt.wantAt)
			}
			if st := bs[0].Stats(); st.Fallbacks != 0 || st.Errors != 0 {
				t.Errorf("stats %+v: Redis failed", st)
			}
		})
	}
}

// TestBudgetWonAge: successes count in the window in full while they are
// within it, and at the window's share of the time they cover once older,
// the first ones sent too (dated from when the Budget, or its key, began);
// they earn in full, up to the bucket's size.
func TestBudgetWonAge(t *testing.T) {
	s := startServer(t)
	spec := retry.Budget{Tokens: -1, Ratio: 0.5, Window: 10 * time.Second}
	tests := []struct {
		name   string
		perKey bool
		won    int
		age    time.Duration // from building the Budget to the retry
		want   int
	}{
		{name: "fresh", won: 100, want: 50},
		{name: "half a window old", won: 100, age: 5 * time.Second, want: 50},
		{name: "an hour old", won: 10_000, age: time.Hour, want: 13}, // 10000·10/3600 = 27 in the window
		{name: "an hour old, per key", perKey: true, won: 10_000, age: time.Hour, want: 13},
		{name: "a clock behind the wall clock", won: 100, age: -time.Hour, want: 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := spec
			spec.PerKey = tt.perKey
			b, err := retryredis.NewBudget(s.Client(), spec, retryredis.Options{Prefix: tt.name + ":"})
			if err != nil {
				t.Fatal(err)
			}
			for range tt.won {
				b.Won("k", 0)
			}
			now := time.Now().Add(tt.age)
			got := 0
			for b.Retry(t.Context(), "k", false, now) {
				if got++; got > 10_000 {
					t.Fatal("no end to the retries")
				}
			}
			if got != tt.want {
				t.Errorf("granted %d retries for %d successes %v old, want %d; %+v", got, tt.won, tt.age, tt.want, b.Stats())
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
// about the retries from the fleet budget that the in-process budget gives,
// its Tokens: the old successes do not count as the window's, and the
// outage's calls earn nothing.
func TestBudgetAfterQuiet(t *testing.T) {
	s := startServer(t)
	retries := func(shared bool) int {
		clk := &stepClock{t: time.Now()}
		opts := []retry.Option{retry.WithClock(clk), retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond})}
		if shared {
			// A loaded machine must not make Redis look slow: a failed
			// round trip would fall back.
			b, err := retryredis.NewBudget(s.ClientWith(func(o *goredis.Options) { o.ReadTimeout = time.Second }), retry.Budget{}, retryredis.Options{Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			opts = append(opts, retry.WithBudget(retry.Budget{Shared: b}))
			defer func() {
				if st := b.Stats(); st.Fallbacks != 0 {
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
	if fleet > local+3 || fleet < local-3 {
		t.Errorf("the fleet budget granted %d retries, the in-process one %d; want the fleet's within 3 of it", fleet, local)
	}
}

// TestBudgetRedisRestart: a fleet of three processes shares its budget on
// Redis through a full outage of their dependency, and Redis is killed and
// restarted, empty, half way. Before, the fleet spends its one bucket, 12
// tokens; while Redis is down each process decides on a bucket of its own,
// 12 tokens each, counted as fallbacks; once Redis answers again, the
// processes are back on the fleet's bucket, full again since Redis lost
// it. Whatever happens to Redis, some 450 calls that all fail get at most
// 12 + 3·12 + 12 retries, not the 450 a budget failing open would let
// through.
func TestBudgetRedisRestart(t *testing.T) {
	s := startServer(t)
	var bs [3]*retryredis.Budget
	var rs [3]*retry.Retrier
	for i := range bs {
		b, err := retryredis.NewBudget(s.Client(), retry.Budget{}, retryredis.Options{Timeout: 200 * time.Millisecond, SyncInterval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		bs[i] = b
		rs[i] = retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond}), retry.WithBudget(retry.Budget{Shared: b}))
	}
	attempts, made := 0, 0
	down := func(context.Context) error { attempts++; return errDown }
	calls := func(n int) {
		for range n {
			for _, r := range rs {
				_ = r.Run(t.Context(), down)
				made++
			}
		}
	}
	stats := func() (st retryredis.BudgetStats) {
		for _, b := range bs {
			s := b.Stats()
			st.Granted, st.Denied, st.Fallbacks = st.Granted+s.Granted, st.Denied+s.Denied, st.Fallbacks+s.Fallbacks
		}
		return st
	}
	calls(50)
	before := stats()
	s.Stop()
	calls(50)
	during := stats()
	s.Start()
	waitFor(t, 5*time.Second, "the processes back on Redis", func() bool {
		calls(1)
		return stats().Granted+stats().Denied > during.Granted+during.Denied
	})
	calls(50)
	after := stats()
	retries := attempts - made
	t.Logf("before %+v, during %+v, after %+v; %d retries for %d calls", before, during, after, retries, made)
	switch {
	case before.Granted != 12 || before.Fallbacks != 0:
		t.Errorf("before the restart: %+v, want 12 retries granted by Redis", before)
	case during.Fallbacks == 0 || during.Granted != before.Granted:
		t.Errorf("Redis down: %+v, want the processes' own buckets to decide", during)
	case retries > 12+3*12+12:
		t.Errorf("%d retries, want at most %d", retries, 12+3*12+12)
	}
}

// TestBudgetFleetFaults: a fleet of three processes shares the default
// budget on Redis through a full outage of their dependency while Redis
// itself fails in each of the ways the fault harness brings (one server
// behind a proxy). The fleet spends its one bucket, 12 tokens, before the
// fault. While Redis does not answer, each process decides on a bucket of
// its own, counted in Stats.Fallbacks and Errors: its first retry is
// granted there (the fallback stops no retry it has tokens for) and it
// grants no more than its own 12 (it does not let every retry through).
// While Redis answers but lost the bucket, the bucket starts full again,
// with no fallback. Once Redis is back, every process is on the fleet's
// bucket again. Whatever the fault, 135 calls that all fail get at most
// 12 + 3·12 + 12 retries, where a budget failing open would let 135
// through.
func TestBudgetFleetFaults(t *testing.T) {
	const procs, rounds, tokens = 3, 15, 12
	for _, fl := range faults {
		t.Run(fl.name, func(t *testing.T) {
			f := newFaulty(t)
			var bs [procs]*retryredis.Budget
			var rs [procs]*retry.Retrier
			for i := range bs {
				// A SyncInterval long enough that a process that found
				// Redis failing stays on its own bucket through the
				// fault's calls, rather than waiting Timeout on Redis at
				// each of them.
				b, err := retryredis.NewBudget(f.client(t), retry.Budget{}, retryredis.Options{Timeout: faultTimeout, SyncInterval: 300 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				bs[i] = b
				rs[i] = retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond}), retry.WithBudget(retry.Budget{Shared: b}))
			}
			var attempts, made atomic.Int64
			down := func(context.Context) error { attempts.Add(1); return errDown }
			calls := func(n int) int64 {
				before := attempts.Load() - made.Load()
				for range n {
					for _, r := range rs {
						_ = r.Run(context.Background(), down)
						made.Add(1)
					}
				}
				return attempts.Load() - made.Load() - before
			}
			stats := func() (st retryredis.BudgetStats) {
				st.OnFleet = true
				for _, b := range bs {
					s := b.Stats()
					st.Granted, st.Denied = st.Granted+s.Granted, st.Denied+s.Denied
					st.Fallbacks, st.Errors = st.Fallbacks+s.Fallbacks, st.Errors+s.Errors
					st.OnFleet = st.OnFleet && s.OnFleet
				}
				return st
			}

			if got := calls(rounds); got != tokens {
				t.Fatalf("before the fault: %d retries, want the fleet's %d; %+v", got, tokens, stats())
			}
			before := stats()
			fl.inject(t, f)
			during := calls(rounds)
			inFault := stats()
			fl.heal(t, f)
			waitFor(t, 5*time.Second, "every process back on Redis", func() bool {
				calls(1)
				for _, b := range bs {
					if s := b.Stats(); !s.OnFleet || s.Granted+s.Denied == 0 {
						return false
					}
				}
				return stats().Granted+stats().Denied > inFault.Granted+inFault.Denied+procs
			})
			healed := stats()
			after := calls(rounds)
			end := stats()
			retries := attempts.Load() - made.Load()
			t.Logf("retries: %d before, %d in the fault, %d after it, %d in all for %d calls; stats before %+v, in the fault %+v, at the end %+v",
				tokens, during, after, retries, made.Load(), before, inFault, end)

			if fl.answers {
				if got := inFault.Fallbacks; got != 0 {
					t.Errorf("Redis answering: %d fallbacks, want none", got)
				}
				if during != tokens {
					t.Errorf("Redis lost the bucket: %d retries, want %d, a full bucket again", during, tokens)
				}
			} else {
				if inFault.Fallbacks == 0 || inFault.Errors == 0 {
					t.Errorf("Redis failing: %+v, want fallbacks and errors counted", inFault)
				}
				if inFault.Granted != before.Granted {
					t.Errorf("Redis failing: it granted %d retries, want none", inFault.Granted-before.Granted)
				}
				if during < procs || during > procs*tokens {
					t.Errorf("Redis failing: %d retries, want each process's own bucket to grant its first and at most %d in all", during, procs*tokens)
				}
			}
			if end.Fallbacks != healed.Fallbacks || !end.OnFleet {
				t.Errorf("Redis back: %+v after %+v, want every retry decided on Redis", end, healed)
			}
			if after > tokens {
				t.Errorf("Redis back: %d retries, want at most a full bucket, %d", after, tokens)
			}
			if most := int64(tokens + procs*tokens + tokens); retries > most {
				t.Errorf("%d retries for %d calls, want at most %d", retries, made.Load(), most)
			}
		})
	}
}
