package retry_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry"
)

// hedgeScript is a dependency whose attempt n takes lat[n-1] (the last entry
// for later attempts) and then fails with errs[n-1] when that is set, or
// returns n. It honours its context unless stubborn.
type hedgeScript struct {
	lat      []time.Duration
	errs     []error
	stubborn bool

	mu       sync.Mutex
	n        int
	canceled int
}

func (s *hedgeScript) fn(ctx context.Context) (int, error) {
	s.mu.Lock()
	s.n++
	n := s.n
	s.mu.Unlock()
	t := time.NewTimer(s.lat[min(n, len(s.lat))-1])
	defer t.Stop()
	if s.stubborn {
		<-t.C
	} else {
		select {
		case <-t.C:
		case <-ctx.Done():
			s.mu.Lock()
			s.canceled++
			s.mu.Unlock()
			return 0, ctx.Err()
		}
	}
	if n <= len(s.errs) && s.errs[n-1] != nil {
		return 0, s.errs[n-1]
	}
	return n, nil
}

var errDown = errors.New("down")

// hedgePlan is the configuration of a hedgeScript.
type hedgePlan struct {
	lat      []time.Duration
	errs     []error
	stubborn bool
}

// TestHedgeDo: the first success wins and is returned at its own time, the
// others are canceled, a failed hedge does not stop the others, Max bounds
// the attempts in flight and the policy's MaxAttempts their total, the
// caller's deadline bounds the call, and a losing value is released.
func TestHedgeDo(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name     string
		script   hedgePlan
		hedge    retry.Hedge
		attempts int           // Policy.MaxAttempts; 0 for 3
		timeout  time.Duration // the caller's deadline; 0 for none
		want     int           // the value returned; 0 for an error
		reason   retry.Reason  // of the error
		took     time.Duration
		stats    retry.Stats // Attempts, Hedges and HedgeWins
		canceled int
		released []int
	}{
		{name: "success before the delay: no hedge", script: hedgePlan{lat: []time.Duration{5 * ms}},
			hedge: retry.Hedge{Delay: 10 * ms}, want: 1, took: 5 * ms, stats: retry.Stats{Attempts: 1}},
		{name: "slow first attempt: the hedge wins, the first is canceled", script: hedgePlan{lat: []time.Duration{100 * ms, 5 * ms}},
			hedge: retry.Hedge{Delay: 10 * ms}, want: 2, took: 15 * ms, stats: retry.Stats{Attempts: 2, Hedges: 1, HedgeWins: 1}, canceled: 1},
		{name: "a failed hedge does not stop the first", script: hedgePlan{lat: []time.Duration{30 * ms, 5 * ms}, errs: []error{nil, errDown}},
			hedge: retry.Hedge{Delay: 10 * ms}, attempts: 2, want: 1, took: 30 * ms, stats: retry.Stats{Attempts: 2, Hedges: 1}},
		{name: "Max 3: two hedges in flight", script: hedgePlan{lat: []time.Duration{100 * ms, 100 * ms, 5 * ms}},
			hedge: retry.Hedge{Delay: 10 * ms, Max: 3}, want: 3, took: 25 * ms, stats: retry.Stats{Attempts: 3, Hedges: 2, HedgeWins: 1}, canceled: 2},
		{name: "MaxAttempts bounds the total", script: hedgePlan{lat: []time.Duration{100 * ms}},
			hedge: retry.Hedge{Delay: 10 * ms, Max: 5}, attempts: 2, want: 1, took: 100 * ms, stats: retry.Stats{Attempts: 2, Hedges: 1}, canceled: 1},
		{name: "a failure while a hedge runs starts the next at once", script: hedgePlan{lat: []time.Duration{20 * ms, 12 * ms, 5 * ms}, errs: []error{errDown, errDown}},
			hedge: retry.Hedge{Delay: 10 * ms}, want: 3, took: 25 * ms, // the third starts at 20 ms, as the first fails
			stats: retry.Stats{Attempts: 3, Hedges: 2, HedgeWins: 1}},
		{name: "all fail: the policy decides", script: hedgePlan{lat: []time.Duration{20 * ms, 12 * ms}, errs: []error{errDown, errDown}},
			hedge: retry.Hedge{Delay: 10 * ms}, attempts: 2, reason: retry.ReasonExhausted, took: 22 * ms,
			stats: retry.Stats{Attempts: 2, Hedges: 1}},
		{name: "the caller's deadline bounds everything", script: hedgePlan{lat: []time.Duration{100 * ms}},
			hedge: retry.Hedge{Delay: 10 * ms}, timeout: 50 * ms, reason: retry.ReasonCanceled, took: 50 * ms, stats: retry.Stats{Attempts: 2, Hedges: 1}, canceled: 2},
		{name: "a losing value is released", script: hedgePlan{lat: []time.Duration{20 * ms, 15 * ms}, stubborn: true},
			hedge: retry.Hedge{Delay: 10 * ms}, want: 1, took: 20 * ms, stats: retry.Stats{Attempts: 2, Hedges: 1}, released: []int{2}},
		{name: "a fatal failure of the first ends the call, the hedge canceled", script: hedgePlan{lat: []time.Duration{20 * ms, 15 * ms}, errs: []error{retry.Permanent(errDown)}},
			hedge: retry.Hedge{Delay: 10 * ms}, reason: retry.ReasonNonRetryable, took: 20 * ms, stats: retry.Stats{Attempts: 2, Hedges: 1}, canceled: 1},
		{name: "a fatal failure of a hedge ends the call, the first canceled", script: hedgePlan{lat: []time.Duration{100 * ms, 5 * ms}, errs: []error{nil, retry.Permanent(errDown)}},
			hedge: retry.Hedge{Delay: 10 * ms}, reason: retry.ReasonNonRetryable, took: 15 * ms, stats: retry.Stats{Attempts: 2, Hedges: 1}, canceled: 1},
		{name: "a fatal failure after the winner is given up", script: hedgePlan{lat: []time.Duration{100 * ms, 5 * ms}, errs: []error{retry.Permanent(errDown)}, stubborn: true},
			hedge: retry.Hedge{Delay: 10 * ms}, want: 2, took: 100 * ms, stats: retry.Stats{Attempts: 2, Hedges: 1, HedgeWins: 1}},
		{name: "a success after a fatal failure is released", script: hedgePlan{lat: []time.Duration{20 * ms, 15 * ms}, errs: []error{retry.Permanent(errDown)}, stubborn: true},
			hedge: retry.Hedge{Delay: 10 * ms}, reason: retry.ReasonNonRetryable, took: 20 * ms, stats: retry.Stats{Attempts: 2, Hedges: 1}, released: []int{2}},
		{name: "a server delay holds the next hedge back", script: hedgePlan{lat: []time.Duration{15 * ms, 100 * ms, 5 * ms}, errs: []error{retry.After(errDown, 30*ms), errDown}},
			hedge: retry.Hedge{Delay: 10 * ms, Max: 3}, want: 3, took: 50 * ms, // the third starts at 45 ms, not at 15 ms or 20 ms
			stats: retry.Stats{Attempts: 3, Hedges: 2, HedgeWins: 1}, canceled: 1},
		{name: "a server delay over MaxServerDelay starts no further hedge", script: hedgePlan{lat: []time.Duration{15 * ms, 100 * ms, 5 * ms}, errs: []error{retry.After(errDown, time.Hour)}},
			hedge: retry.Hedge{Delay: 10 * ms, Max: 3}, want: 2, took: 110 * ms, stats: retry.Stats{Attempts: 2, Hedges: 1, HedgeWins: 1}},
		{name: "a fatal failure with a delay over MaxServerDelay only stops further hedges", script: hedgePlan{lat: []time.Duration{15 * ms, 100 * ms, 5 * ms}, errs: []error{retry.After(retry.Permanent(errDown), time.Hour)}},
			hedge: retry.Hedge{Delay: 10 * ms, Max: 3}, want: 2, took: 110 * ms, stats: retry.Stats{Attempts: 2, Hedges: 1, HedgeWins: 1}},
		{name: "a round keeps its longest server delay", script: hedgePlan{lat: []time.Duration{50 * ms, 5 * ms, 5 * ms}, errs: []error{errDown, retry.After(errDown, 200*ms)}},
			hedge: retry.Hedge{Delay: 10 * ms}, attempts: 3, want: 3, took: 255 * ms, // the first fails last, at 50 ms; the retry waits the hedge's 200 ms
			stats: retry.Stats{Attempts: 3, Hedges: 1}},
		{name: "a round keeps a server delay over MaxServerDelay", script: hedgePlan{lat: []time.Duration{50 * ms, 5 * ms}, errs: []error{errDown, retry.After(errDown, time.Hour)}},
			hedge: retry.Hedge{Delay: 10 * ms}, attempts: 3, reason: retry.ReasonDeadline, took: 50 * ms,
			stats: retry.Stats{Attempts: 2, Hedges: 1}},
		{name: "Max 1 turns hedging off", script: hedgePlan{lat: []time.Duration{100 * ms}},
			hedge: retry.Hedge{Delay: 10 * ms, Max: 1}, want: 1, took: 100 * ms, stats: retry.Stats{Attempts: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var released []int
				h := tc.hedge
				h.Release = func(v any) {
					mu.Lock()
					released = append(released, v.(int))
					mu.Unlock()
				}
				p := noJitter
				p.MaxAttempts = tc.attempts
				r := retry.New(retry.WithPolicy(p), retry.WithHedge(h))
				ctx := context.Background()
				if tc.timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.timeout)
					defer cancel()
				}
				start := time.Now()
				s := &hedgeScript{lat: tc.script.lat, errs: tc.script.errs, stubborn: tc.script.stubborn}
				v, err := retry.Hedged(ctx, s.fn, r)
				took := time.Since(start)
				var e *retry.Error
				switch {
				case tc.want != 0 && (err != nil || v != tc.want):
					t.Errorf("Do = %v, %v; want %v", v, err, tc.want)
				case tc.want == 0 && (!errors.As(err, &e) || e.Reason != tc.reason):
					t.Errorf("Do = %v, %v; want reason %v", v, err, tc.reason)
				}
				if took != tc.took {
					t.Errorf("took %v, want %v", took, tc.took)
				}
				synctest.Wait() // the losers end
				time.Sleep(time.Second)
				st := r.Stats()
				if st.Attempts != tc.stats.Attempts || st.Hedges != tc.stats.Hedges || st.HedgeWins != tc.stats.HedgeWins {
					t.Errorf("attempts, hedges, wins = %d, %d, %d; want %d, %d, %d", st.Attempts, st.Hedges, st.HedgeWins,
						tc.stats.Attempts, tc.stats.Hedges, tc.stats.HedgeWins)
				}
				if s.canceled != tc.canceled {
					t.Errorf("%d attempts canceled, want %d", s.canceled, tc.canceled)
				}
				mu.Lock()
				defer mu.Unlock()
				if !slicesEqual(released, tc.released) {
					t.Errorf("released %v, want %v", released, tc.released)
				}
			})
		})
	}
}

func slicesEqual(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestHedgeAdmission: a hedge is load. It takes a retry-budget token, so that
// under a full outage hedges and retries together stay within the budget's
// bound; it needs a rate-limit token there at once; and it passes the
// breaker, which refuses it while its single half-open probe runs.
func TestHedgeAdmission(t *testing.T) {
	ms := time.Millisecond
	t.Run("budget under a full outage", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			const calls = 200
			for _, b := range []struct {
				budget retry.Budget
				most   int64 // attempts in all
			}{
				// The default budget: a full outage earns nothing, so hedges
				// and retries share its reserve of 5 tokens over 10 s.
				{budget: retry.Budget{}, most: calls * 1.1},
				{budget: retry.Budget{Off: true}, most: calls * 3},
			} {
				r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: ms, Jitter: retry.Jitter{Kind: retry.JitterNone}}),
					retry.WithBudget(b.budget), retry.WithHedge(retry.Hedge{Delay: ms}))
				s := &hedgeScript{lat: []time.Duration{5 * ms}, errs: repeat(errDown, calls*3)}
				for range calls {
					retry.Hedged(context.Background(), s.fn, r)
				}
				st := r.Stats()
				if st.Attempts > b.most || st.Hedges == 0 {
					t.Errorf("budget %+v: %d attempts (%d hedges) for %d calls; want at most %d, and hedges", b.budget, st.Attempts, st.Hedges, calls, b.most)
				}
			}
		})
	})
	t.Run("rate limiter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := retry.New(retry.WithRateLimit(retry.RateLimit{Limit: 1, Burst: 1}), retry.WithHedge(retry.Hedge{Delay: 10 * ms}))
			s := &hedgeScript{lat: []time.Duration{100 * ms}}
			if v, err := retry.Hedged(context.Background(), s.fn, r); v != 1 || err != nil {
				t.Fatalf("Do = %v, %v", v, err)
			}
			if st := r.Stats(); st.Attempts != 1 || st.Hedges != 0 {
				t.Errorf("%d attempts, %d hedges; want 1, 0: no token for a hedge", st.Attempts, st.Hedges)
			}
		})
	})
	t.Run("breaker half-open", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
				retry.WithBreaker(retry.Breaker{MinRequests: 1, OpenTimeout: 100 * ms}),
				retry.WithHedge(retry.Hedge{Delay: 15 * ms}))
			retry.Hedged(context.Background(), (&hedgeScript{lat: []time.Duration{ms}, errs: []error{errDown}}).fn, r)
			if st := r.Stats(); st.Breakers[""] != retry.BreakerOpen {
				t.Fatalf("breaker %v, want open", st.Breakers)
			}
			time.Sleep(100 * ms)
			p := retry.New(r, retry.WithPolicy(retry.Policy{MaxAttempts: 3}))
			s := &hedgeScript{lat: []time.Duration{50 * ms}}
			if v, err := retry.Hedged(context.Background(), s.fn, p); v != 1 || err != nil {
				t.Fatalf("Do = %v, %v", v, err)
			}
			if st := r.Stats(); st.Hedges != 0 || st.Breakers[""] != retry.BreakerClosed {
				t.Errorf("%d hedges, breaker %v; want 0, closed: the probe runs alone", st.Hedges, st.Breakers)
			}
		})
	})
}

// TestHedgeEvents: OnEvent reports a hedge started, with the delay before
// it, and a hedge won.
func TestHedgeEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []string
		h := retry.Hedge{Delay: 10 * time.Millisecond, OnEvent: func(ev retry.Event) {
			got = append(got, ev.Type+" "+ev.Key+" "+ev.Delay.String()+" "+string(rune('0'+ev.Attempt)))
		}}
		s := &hedgeScript{lat: []time.Duration{100 * time.Millisecond, time.Millisecond}}
		retry.Hedged(context.Background(), s.fn, retry.WithHedge(h), retry.WithKey("db"))
		synctest.Wait()
		want := "hedge.started db 10ms 2|hedge.won db 0s 2"
		if strings.Join(got, "|") != want {
			t.Errorf("events %q, want %q", strings.Join(got, "|"), want)
		}
	})
}

// TestHedgeAdaptive: with no Delay, the delay is Ceiling until the key has
// latencies, then their Percentile, kept within Floor and Ceiling.
func TestHedgeAdaptive(t *testing.T) {
	ms := time.Millisecond
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex // OnEvent may run after Hedged returned
		var delays []time.Duration
		r := retry.New(retry.WithHedge(retry.Hedge{Percentile: 90, Floor: 2 * ms, Ceiling: 50 * ms, OnEvent: func(ev retry.Event) {
			if ev.Type == retry.TypeHedgeStarted {
				mu.Lock()
				delays = append(delays, ev.Delay)
				mu.Unlock()
			}
		}}))
		// 100 calls: 95 of 10 ms and 5 of 200 ms, so that the 90th
		// percentile is 10 ms.
		for i := range 100 {
			lat := 10 * ms
			if i%20 == 19 {
				lat = 200 * ms
			}
			s := &hedgeScript{lat: []time.Duration{lat, ms}}
			retry.Hedged(context.Background(), s.fn, r)
		}
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(delays) == 0 || delays[0] != 50*ms {
			t.Fatalf("delays %v: want the Ceiling first", delays)
		}
		if last := delays[len(delays)-1]; last < 10*ms || last > 12*ms {
			t.Errorf("delays %v: want the p90 of the latencies, about 10 ms, last", delays)
		}
	})
}

// TestHedgeAdaptiveShare: with an adaptive delay at the Percentile p,
// about 100-p % of calls hedge, whatever share of the slow first attempts
// the hedges beat (a delay learned from the winners alone would fall:
// 9.3% of calls hedged at the 95th percentile). Latencies are exponential,
// 20,000 calls in virtual time.
func TestHedgeAdaptiveShare(t *testing.T) {
	tests := []struct {
		name       string
		percentile float64
		low, high  float64 // the share of calls hedged, in percent
	}{
		{name: "p95", percentile: 95, low: 4, high: 6},
		{name: "p90", percentile: 90, low: 8.5, high: 11.5},
		{name: "p99", percentile: 99, low: 0.5, high: 1.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var hedges atomic.Int64
				r := retry.New(retry.WithHedge(retry.Hedge{Percentile: tt.percentile, OnEvent: func(ev retry.Event) {
					if ev.Type == retry.TypeHedgeStarted {
						hedges.Add(1)
					}
				}}))
				rng := rand.New(rand.NewPCG(1, 2))
				var mu sync.Mutex
				const calls = 20000
				for range calls {
					_, _ = retry.Hedged(t.Context(), func(ctx context.Context) (int, error) {
						mu.Lock()
						d := time.Duration(rng.ExpFloat64() * float64(10*time.Millisecond))
						mu.Unlock()
						select {
						case <-time.After(d):
							return 1, nil
						case <-ctx.Done():
							return 0, ctx.Err()
						}
					}, r)
				}
				synctest.Wait()
				if share := 100 * float64(hedges.Load()) / calls; share < tt.low || share > tt.high {
					t.Errorf("%.2f%% of calls hedged, want %v–%v%%", share, tt.low, tt.high)
				}
			})
		})
	}
}

// TestHedgeInvalid: bad fields give an error naming the field, the value and
// the rule.
func TestHedgeInvalid(t *testing.T) {
	cases := []struct {
		name  string
		hedge retry.Hedge
		want  string
	}{
		{name: "negative delay", hedge: retry.Hedge{Delay: -1}, want: "Delay = -1ns: must be >= 0"},
		{name: "percentile 100", hedge: retry.Hedge{Percentile: 100}, want: "Percentile = 100: must be above 0 and below 100"},
		{name: "ceiling under floor", hedge: retry.Hedge{Floor: time.Second, Ceiling: time.Millisecond}, want: "Ceiling = 1ms: must be >= Floor (1s)"},
		{name: "negative max", hedge: retry.Hedge{Max: -2}, want: "Max = -2: must be >= 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := retry.New(retry.WithHedge(tc.hedge)).Err()
			if want := "retry: option WithHedge: " + tc.want; err == nil || err.Error() != want {
				t.Errorf("Err() = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestHedgePanic: a panic in the first attempt or in a hedge goes on to the
// caller, on the caller's goroutine, and the turn's other attempts end.
func TestHedgePanic(t *testing.T) {
	cases := []struct {
		name    string
		panicOn int // the attempt that panics
	}{
		{name: "first attempt", panicOn: 1},
		{name: "hedge", panicOn: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				defer func() {
					if got := recover(); got != "boom" {
						t.Errorf("recovered %v, want boom", got)
					}
				}()
				retry.Hedged(context.Background(), func(ctx context.Context) (int, error) {
					if retry.AttemptFrom(ctx) == tc.panicOn {
						panic("boom")
					}
					<-ctx.Done()
					return 0, ctx.Err()
				}, retry.WithHedge(retry.Hedge{Delay: 10 * time.Millisecond}))
				t.Error("Do returned")
			})
		})
	}
}

// TestDoNeverHedges: Do and Run run every attempt on the caller's
// goroutine, whatever their options; only Hedged hedges, and not with a
// breaker shared through a Store.
func TestDoNeverHedges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := retry.New(retry.WithHedge(retry.Hedge{Delay: time.Millisecond}))
		slow := func(ctx context.Context) (int, error) {
			select {
			case <-time.After(10 * time.Millisecond):
				return retry.AttemptFrom(ctx), nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		calls := []struct {
			name string
			call func() (int, error)
			want int // the attempt whose value is returned
		}{
			{name: "Do", call: func() (int, error) { return retry.Do(t.Context(), slow, r) }, want: 1},
			{name: "Run", call: func() (int, error) {
				return 1, retry.Run(t.Context(), func(ctx context.Context) error { _, err := slow(ctx); return err }, r)
			}, want: 1},
			{name: "Hedged", call: func() (int, error) { return retry.Hedged(t.Context(), slow, r) }, want: 1},
		}
		shared := retry.New(retry.WithHedge(retry.Hedge{Delay: time.Millisecond}),
			retry.WithBreaker(retry.Breaker{Store: newMemStore(time.Millisecond)}))
		calls = append(calls, struct {
			name string
			call func() (int, error)
			want int
		}{name: "Hedged, breaker in a Store", call: func() (int, error) { return retry.Hedged(t.Context(), slow, shared) }, want: 1})
		for _, tc := range calls {
			r := r
			if tc.name == "Hedged, breaker in a Store" {
				r = shared
			}
			before := r.Stats()
			v, err := tc.call()
			st := r.Stats()
			hedges := st.Hedges - before.Hedges
			if err != nil || v != tc.want {
				t.Errorf("%s = %v, %v; want %d", tc.name, v, err, tc.want)
			}
			if want := int64(map[bool]int{true: 1}[tc.name == "Hedged"]); hedges != want { // a Store turns hedging off
				t.Errorf("%s started %d hedges, want %d", tc.name, hedges, want)
			}
		}
	})
}

// TestHedgedDefault: without WithHedge, Hedged hedges with the zero Hedge,
// whose delay is the Ceiling (1 s) until the Retrier knows 20 latencies.
func TestHedgedDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := retry.New()
		start := time.Now()
		v, err := retry.Hedged(t.Context(), func(ctx context.Context) (int, error) {
			if n := retry.AttemptFrom(ctx); n > 1 {
				return n, nil
			}
			<-ctx.Done() // the first attempt hangs until the hedge wins
			return 0, ctx.Err()
		}, r)
		if took := time.Since(start); err != nil || v != 2 || took != time.Second {
			t.Errorf("Hedged = %v, %v after %v; want the hedge's 2 after 1s", v, err, took)
		}
		if st := r.Stats(); st.Hedges != 1 || st.HedgeWins != 1 {
			t.Errorf("Stats: %d hedges, %d wins; want 1, 1", st.Hedges, st.HedgeWins)
		}
	})
}

// TestRetrierHedge: Retrier.Hedge reports the Hedge of WithHedge with its
// defaults filled in, and false for a Retrier without one.
func TestRetrierHedge(t *testing.T) {
	tests := []struct {
		name string
		opts []retry.Option
		want retry.Hedge
		ok   bool
	}{
		{name: "none", opts: nil, ok: false},
		{name: "the zero Hedge", opts: []retry.Option{retry.WithHedge(retry.Hedge{})}, ok: true,
			want: retry.Hedge{Percentile: 95, Floor: time.Millisecond, Ceiling: time.Second, Max: 2}},
		{name: "a fixed delay", opts: []retry.Option{retry.WithHedge(retry.Hedge{Delay: 5 * time.Millisecond, Max: 3})}, ok: true,
			want: retry.Hedge{Delay: 5 * time.Millisecond, Percentile: 95, Floor: time.Millisecond, Ceiling: time.Second, Max: 3}},
		{name: "derived from one with a Hedge", opts: []retry.Option{retry.New(retry.WithHedge(retry.Hedge{Max: 4})), retry.WithKey("k")}, ok: true,
			want: retry.Hedge{Percentile: 95, Floor: time.Millisecond, Ceiling: time.Second, Max: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, ok := retry.New(tt.opts...).Hedge()
			if ok != tt.ok || h.Delay != tt.want.Delay || h.Percentile != tt.want.Percentile || h.Floor != tt.want.Floor ||
				h.Ceiling != tt.want.Ceiling || h.Max != tt.want.Max {
				t.Errorf("Hedge() = %+v, %v; want %+v, %v", h, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestHedgeAttemptsCounted: the error of a call whose first attempt ends
// the turn while a hedge runs counts the hedge among its attempts, as the
// Stats do.
func TestHedgeAttemptsCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 5}),
			retry.WithHedge(retry.Hedge{Delay: 10 * time.Millisecond}))
		_, err := retry.Hedged(t.Context(), func(ctx context.Context) (string, error) {
			if retry.AttemptFrom(ctx) == 1 {
				time.Sleep(50 * time.Millisecond)
				return "", retry.Permanent(errDown)
			}
			<-ctx.Done()
			return "", ctx.Err()
		}, r)
		synctest.Wait()
		var re *retry.Error
		if !errors.As(err, &re) || re.Attempts != 2 || r.Stats().Attempts != 2 {
			t.Errorf("err = %v, Stats().Attempts = %d; want 2 attempts in both", err, r.Stats().Attempts)
		}
	})
}

// TestHedgeWinnerReleasedOnPanic: when the first attempt panics after a
// hedge has won, the panic goes on and the hedge's value, returned to no
// one, is released.
func TestHedgeWinnerReleasedOnPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var released []any
		r := retry.New(retry.WithHedge(retry.Hedge{Delay: 10 * time.Millisecond,
			Release: func(v any) { mu.Lock(); released = append(released, v); mu.Unlock() }}))
		func() {
			defer func() {
				if p := recover(); p == nil {
					t.Error("the first attempt's panic did not reach the caller")
				}
			}()
			retry.Hedged(t.Context(), func(ctx context.Context) (string, error) {
				if retry.AttemptFrom(ctx) == 1 {
					time.Sleep(50 * time.Millisecond) // heedless of the hedge's win
					panic("first boom")
				}
				return "hedge's resource", nil
			}, r)
		}()
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(released) != 1 || released[0] != "hedge's resource" {
			t.Errorf("released %v, want the hedge's value once", released)
		}
	})
}

// TestHedgeHoldKept: a failure without a server delay, arriving while an
// earlier failure's delay runs, does not start a hedge before that delay
// ends; nor does a shorter delay shorten it.
func TestHedgeHoldKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		began := map[int]time.Duration{}
		r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 5}),
			retry.WithHedge(retry.Hedge{Delay: 10 * time.Millisecond, Max: 4}))
		v, err := retry.Hedged(t.Context(), func(ctx context.Context) (int, error) {
			n := retry.AttemptFrom(ctx)
			mu.Lock()
			began[n] = time.Since(start)
			mu.Unlock()
			switch n {
			case 1:
				<-ctx.Done()
				return 0, ctx.Err()
			case 2: // started at 10 ms, fails at 25 ms: no hedge before 325 ms
				time.Sleep(15 * time.Millisecond)
				return 0, retry.After(errDown, 300*time.Millisecond)
			case 3: // started at 20 ms, fails at 30 ms, with a shorter delay
				time.Sleep(10 * time.Millisecond)
				return 0, retry.After(errDown, 50*time.Millisecond)
			}
			return n, nil
		}, r)
		mu.Lock()
		defer mu.Unlock()
		if err != nil || v != 4 || began[4] != 325*time.Millisecond {
			t.Errorf("Hedged = %d, %v; attempts began at %v; want attempt 4 at 325ms", v, err, began)
		}
	})
}

// countingBudget is a SharedBudget that grants every retry and counts them.
type countingBudget struct{ retries atomic.Int32 }

func (*countingBudget) Won(string, int) {}
func (b *countingBudget) Retry(context.Context, string, bool, time.Time) bool {
	b.retries.Add(1)
	return true
}

// TestHedgeCountedWhenStarted: a hedge counts in Stats.Attempts and
// Stats.Hedges, and takes its token from the retry budget, when it starts,
// even when its call is won before the hedge is sent: here the first
// attempt succeeds as the hedge starts, and the hedge, canceled, never
// sends. The engine sees when it starts an attempt, not the wire.
func TestHedgeCountedWhenStarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		budget := &countingBudget{}
		release, returned := make(chan struct{}), make(chan struct{})
		r := retry.New(retry.WithBudget(retry.Budget{Shared: budget}),
			retry.WithHedge(retry.Hedge{Delay: 10 * time.Millisecond, Max: 2, OnEvent: func(ev retry.Event) {
				if ev.Type == retry.TypeHedgeStarted {
					close(release) // the first attempt succeeds
					<-returned     // and its call returns before the hedge runs
				}
			}}))
		var sent atomic.Int32
		v, err := retry.Hedged(t.Context(), func(ctx context.Context) (int, error) {
			if retry.AttemptFrom(ctx) == 1 {
				<-release
				sent.Add(1)
				return 1, nil
			}
			<-ctx.Done() // the hedge: its call is won, it sends nothing
			return 0, ctx.Err()
		}, r)
		close(returned)
		synctest.Wait()
		if v != 1 || err != nil {
			t.Fatalf("Hedged = %v, %v; want the first attempt's 1", v, err)
		}
		st := r.Stats()
		if st.Attempts != 2 || st.Hedges != 1 || budget.retries.Load() != 1 || sent.Load() != 1 {
			t.Errorf("Attempts %d, Hedges %d, budget tokens %d, attempts sent %d; want 2, 1, 1 and 1",
				st.Attempts, st.Hedges, budget.retries.Load(), sent.Load())
		}
	})
}
