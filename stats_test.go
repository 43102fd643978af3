package retry_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry"
)

// TestStats checks the counters of a shared Retrier.
func TestStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond}))
		calls := 0
		_ = r.Run(t.Context(), script(&calls, errTransient)) // 2 attempts, 1 retry
		_ = r.Run(t.Context(), func(context.Context) error { return errTransient })
		_ = r.Run(t.Context(), func(context.Context) error { return nil })
		got := r.Stats()
		// The default budget: its stock of 12 tokens less the 2 retries of
		// the call that failed (the first call's retry was given back as it
		// succeeded), plus 0.2 for the call that succeeded since.
		if math.Abs(got.BudgetBalance-(12-2+0.2)) > 1e-9 {
			t.Errorf("budget balance %v, want 10.2", got.BudgetBalance)
		}
		got.BudgetBalance = 0
		want := retry.Stats{Calls: 3, Attempts: 6, Failed: 4, Retried: 3, FailedPermanently: 1}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("stats = %+v, want %+v", got, want)
		}
	})
}

// TestStatsSeenByHooksAndDuringWaits checks that a call's counts reach Stats
// as they happen: before every hook it fires, during its waits and during
// its attempts, not only at its end.
func TestStatsSeenByHooksAndDuringWaits(t *testing.T) {
	type seen struct {
		hook             string
		failed, retried  int64
		attempts, permas int64
	}
	var got []seen
	var r *retry.Retrier
	record := func(hook string) func(retry.Event) {
		return func(retry.Event) {
			s := r.Stats()
			got = append(got, seen{hook, s.Failed, s.Retried, s.Attempts, s.FailedPermanently})
		}
	}
	r = retry.New(
		retry.WithPolicy(retry.Policy{MaxAttempts: 3, Backoff: retry.Immediate}),
		retry.WithBudget(retry.Budget{Off: true}),
		retry.OnRetry(record("retry")),
		retry.OnGiveUp(record("giveup")),
	)
	_ = r.Run(t.Context(), func(context.Context) error { return errTransient })
	want := []seen{
		{"retry", 1, 1, 1, 0},
		{"retry", 2, 2, 2, 0},
		{"giveup", 3, 2, 3, 1},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Stats seen by hooks:\n got %v\nwant %v", got, want)
	}

	synctest.Test(t, func(t *testing.T) {
		r := retry.New(
			retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Second, Jitter: retry.Jitter{Kind: retry.JitterNone}}),
			retry.WithBudget(retry.Budget{Off: true}),
		)
		done := make(chan error)
		go func() {
			n := 0
			done <- r.Run(t.Context(), func(context.Context) error {
				if n++; n == 1 {
					return errTransient
				}
				return nil
			})
		}()
		synctest.Wait() // the call waits before its retry
		if s := r.Stats(); s.Failed != 1 || s.Retried != 1 || s.Attempts != 1 {
			t.Fatalf("during the wait: Failed %d Retried %d Attempts %d, want 1 1 1", s.Failed, s.Retried, s.Attempts)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if s := r.Stats(); s.Failed != 1 || s.Retried != 1 || s.Attempts != 2 {
			t.Fatalf("after the call: Failed %d Retried %d Attempts %d, want 1 1 2", s.Failed, s.Retried, s.Attempts)
		}
	})

	// A retry that runs at once is counted while it runs.
	r = retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 2, Backoff: retry.Immediate}), retry.WithBudget(retry.Budget{Off: true}))
	running, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		done <- r.Run(t.Context(), func(ctx context.Context) error {
			if retry.AttemptFrom(ctx) == 1 {
				return errTransient
			}
			close(running)
			<-release
			return nil
		})
	}()
	<-running
	if s := r.Stats(); s.Failed != 1 || s.Retried != 1 || s.Attempts != 2 {
		t.Errorf("during the retry: Failed %d Retried %d Attempts %d, want 1 1 2", s.Failed, s.Retried, s.Attempts)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestStatsCountsRefusedCalls: a call stopped before its first attempt is a
// call, though not an attempt.
func TestStatsCountsRefusedCalls(t *testing.T) {
	tests := []struct {
		name string
		opts []retry.Option
		ctx  func(context.Context) context.Context
	}{
		{name: "context done before the call", ctx: func(p context.Context) context.Context {
			ctx, cancel := context.WithCancel(p)
			cancel()
			return ctx
		}},
		{name: "open breaker", opts: []retry.Option{retry.WithBreaker(retry.Breaker{MinRequests: 1, FailureRatio: 1, MaxWait: -1})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := retry.New(append(tt.opts, retry.WithPolicy(retry.Policy{MaxAttempts: 1}))...)
			_ = r.Run(t.Context(), func(context.Context) error { return errTransient }) // one real call
			ctx := t.Context()
			if tt.ctx != nil {
				ctx = tt.ctx(ctx)
			}
			err := r.Run(ctx, func(context.Context) error { return nil })
			var re *retry.Error
			if !errors.As(err, &re) || re.Attempts != 0 {
				t.Fatalf("err = %v, want a stop before any attempt", err)
			}
			if s := r.Stats(); s.Calls != 2 || s.Attempts != 1 {
				t.Errorf("Calls = %d, Attempts = %d, want 2 and 1", s.Calls, s.Attempts)
			}
		})
	}
}

// TestStatsCountFirstAttemptAtItsEnd: a call and its first attempt count in
// Calls and Attempts when that attempt returns, not while it runs; a retry
// counts as it starts.
func TestStatsCountFirstAttemptAtItsEnd(t *testing.T) {
	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 2, Backoff: retry.Immediate}))
	running, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		done <- r.Run(t.Context(), func(ctx context.Context) error {
			running <- struct{}{}
			<-release
			if retry.AttemptFrom(ctx) == 1 {
				return errTransient
			}
			return nil
		})
	}()
	<-running
	if s := r.Stats(); s.Calls != 0 || s.Attempts != 0 {
		t.Errorf("during the first attempt: Calls %d Attempts %d, want 0 0", s.Calls, s.Attempts)
	}
	release <- struct{}{}
	<-running
	if s := r.Stats(); s.Calls != 1 || s.Attempts != 2 || s.Failed != 1 {
		t.Errorf("during the retry: Calls %d Attempts %d Failed %d, want 1 2 1", s.Calls, s.Attempts, s.Failed)
	}
	release <- struct{}{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s := r.Stats(); s.Calls != 1 || s.Attempts != 2 {
		t.Errorf("after the call: Calls %d Attempts %d, want 1 2", s.Calls, s.Attempts)
	}
}

// TestStatsCallsWhateverTheBudget: each call that ran an attempt counts
// once in Calls, and each attempt once in Attempts, whichever budget
// counts its successes: the Retrier's own (whose count Stats reads), none,
// one per key, or another Retrier's sharing the state with a budget of
// its own; and whatever the call's end: a success at once or after a
// failure, a failure, a panic in its first attempt or in a retry.
func TestStatsCallsWhateverTheBudget(t *testing.T) {
	policy := retry.WithPolicy(retry.Policy{MaxAttempts: 3, Backoff: retry.Immediate})
	tests := []struct {
		name string
		opts []retry.Option
		// derived, when set, makes the calls through a Retrier built on
		// the first with these options, sharing its state.
		derived []retry.Option
	}{
		{name: "own budget"},
		{name: "budget off", opts: []retry.Option{retry.WithBudget(retry.Budget{Off: true})}},
		{name: "budget per key", opts: []retry.Option{retry.WithBudget(retry.Budget{PerKey: true}), retry.WithKey("k")}},
		{name: "shared state, another budget", derived: []retry.Option{retry.WithBudget(retry.Budget{Ratio: 0.5})}},
		{name: "shared state, no budget", derived: []retry.Option{retry.WithBudget(retry.Budget{Off: true})}},
		{name: "shared state, same budget", derived: []retry.Option{retry.WithKey("other")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := retry.New(append([]retry.Option{policy}, tt.opts...)...)
			caller := r
			if tt.derived != nil {
				caller = retry.New(append([]retry.Option{r}, tt.derived...)...)
			}
			run := func(fn func(ctx context.Context) error) {
				defer func() { _ = recover() }()
				_ = caller.Run(t.Context(), fn)
			}
			run(func(context.Context) error { return nil })          // 1 attempt
			run(func(context.Context) error { return errTransient }) // 3 attempts
			run(func(ctx context.Context) error {                    // 2 attempts
				if retry.AttemptFrom(ctx) == 1 {
					return errTransient
				}
				return nil
			})
			run(func(context.Context) error { panic("boom") }) // 1 attempt
			run(func(ctx context.Context) error {              // 2 attempts
				if retry.AttemptFrom(ctx) == 1 {
					return errTransient
				}
				panic("boom")
			})
			for _, got := range []retry.Stats{r.Stats(), caller.Stats()} {
				if got.Calls != 5 || got.Attempts != 9 || got.Failed != 5 {
					t.Errorf("Calls %d Attempts %d Failed %d, want 5 9 5", got.Calls, got.Attempts, got.Failed)
				}
			}
		})
	}
}
