//go:build !race

package retry_test

import (
	"context"
	"testing"
	"time"

	"github.com/steadyhq/retry"
)

// The allocation tests of the gates on their success path; built without
// -race, as allocs_test.go is (make test runs them in a pass of their own).

// TestThrottleAllocs: a call that succeeds through the throttle allocates
// nothing, and neither does one while the probability is above zero but
// the attempt is not shed.
func TestThrottleAllocs(t *testing.T) {
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	warm := newThrottleRig(t, retry.Throttle{K: 1})
	warm.calls(10, "", errRefused) // p = 10/(11+n) after n successes: every attempt reads the clock and draws
	tests := []struct {
		name string
		r    *retry.Retrier
	}{
		{name: "one", r: retry.New(retry.WithThrottle(retry.Throttle{}))},
		{name: "per key", r: retry.New(retry.WithThrottle(retry.Throttle{PerKey: true}), retry.WithKey("k"))},
		{name: "p above zero", r: warm.r},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if a := testing.AllocsPerRun(200, func() { _ = tt.r.Run(ctx, ok) }); a != 0 {
				t.Errorf("%v allocs per call, want 0", a)
			}
		})
	}
}

// TestConcurrencyAllocs: a call that succeeds through the limit allocates
// nothing, timed or not.
func TestConcurrencyAllocs(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		r    *retry.Retrier
	}{
		{name: "one limit", r: retry.New(retry.WithConcurrency(retry.Concurrency{}))},
		{name: "per key", r: retry.New(retry.WithConcurrency(retry.Concurrency{PerKey: true}), retry.WithKey("k"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn := func(context.Context) error { return nil }
			if a := testing.AllocsPerRun(1000, func() { _ = tt.r.Run(ctx, fn) }); a != 0 {
				t.Errorf("%v allocs per call, want 0", a)
			}
		})
	}
}

// TestBudgetSuccessAllocs: a call that succeeds allocates nothing through
// the zero Budget, nor through one kept per key.
func TestBudgetSuccessAllocs(t *testing.T) {
	ok := func(context.Context) error { return nil }
	for _, b := range []retry.Budget{{}, {PerKey: true}, {Shadow: true}} {
		r := retry.New(retry.WithBudget(b), retry.WithKey("dep"))
		if a := testing.AllocsPerRun(100, func() { _ = r.Run(context.Background(), ok) }); a != 0 {
			t.Errorf("budget %+v: %v allocations a call, want 0", b, a)
		}
	}
}

// TestSharedBreakerAllocs: a call that succeeds through a breaker shared
// through a Breaker.Store, closed for the fleet and read within the
// interval, allocates nothing.
func TestSharedBreakerAllocs(t *testing.T) {
	ctx := context.Background()
	store := newMemStore(time.Hour)
	tests := []struct {
		name string
		r    *retry.Retrier
	}{
		{name: "one", r: retry.New(retry.WithBreaker(retry.Breaker{Store: store}))},
		{name: "per key", r: retry.New(retry.WithBreaker(retry.Breaker{Store: store, PerKey: true}), retry.WithKey("k"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok := func(context.Context) error { return nil }
			_ = tt.r.Run(ctx, ok) // reads the fleet's state
			if a := testing.AllocsPerRun(1000, func() { _ = tt.r.Run(ctx, ok) }); a != 0 {
				t.Errorf("%v allocs per call, want 0", a)
			}
		})
	}
}

// TestKeyedCallAllocs: a call through a Retrier with every gate per key,
// named by WithKey, allocates nothing: it runs on the Retrier's
// configuration, not on one built for the call.
func TestKeyedCallAllocs(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		opts []retry.Option
	}{
		{name: "no gate"},
		{name: "every gate per key", opts: []retry.Option{
			retry.WithBreaker(retry.Breaker{PerKey: true}),
			retry.WithRateLimit(retry.RateLimit{Limit: 1e9, Burst: 1e6, PerKey: true}),
			retry.WithBudget(retry.Budget{PerKey: true}),
			retry.WithThrottle(retry.Throttle{PerKey: true}),
			retry.WithConcurrency(retry.Concurrency{PerKey: true}),
		}},
		{name: "shared breaker per key", opts: []retry.Option{
			retry.WithBreaker(retry.Breaker{Store: newMemStore(time.Hour), PerKey: true}),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := retry.New(tt.opts...)
			ok := func(context.Context) error { return nil }
			keys := []retry.Option{retry.WithKey("a"), retry.WithKey("b")}
			for _, k := range keys {
				_ = retry.Run(ctx, ok, r, k) // the keys' first calls make their gates
			}
			for i, order := range [][]retry.Option{{r, keys[0]}, {keys[1], r}} {
				if a := testing.AllocsPerRun(1000, func() { _ = retry.Run(ctx, ok, order...) }); a != 0 {
					t.Errorf("order %d: %v allocs per call, want 0", i, a)
				}
			}
		})
	}
}
