package bench

import (
	"context"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"
	"github.com/steadyhq/retry"
)

// Case: one call that succeeds before the hedge delay (1 s), so that no
// hedge starts: what hedging costs a call that does not need it, beside
// the plain success of the same Retrier without it.
func BenchmarkHedge(b *testing.B) {
	okValue := func(context.Context) (int, error) { return 1, nil }
	ctx := context.Background()
	b.Run("retry-retrier", func(b *testing.B) {
		r := retry.New()
		defer cpuPerOp(b)()
		for b.Loop() {
			if _, err := retry.Do(ctx, okValue, r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("retry-hedge", func(b *testing.B) {
		r := retry.New(retry.WithHedge(retry.Hedge{Delay: time.Second}))
		defer cpuPerOp(b)()
		for b.Loop() {
			if _, err := retry.Hedged(ctx, okValue, r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("retry-hedge-adaptive", func(b *testing.B) {
		r := retry.New(retry.WithHedge(retry.Hedge{Floor: time.Second, Ceiling: time.Second}))
		defer cpuPerOp(b)()
		for b.Loop() {
			if _, err := retry.Hedged(ctx, okValue, r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("failsafe-go-hedgepolicy", func(b *testing.B) {
		ex := failsafe.With(hedgepolicy.NewWithDelay[any](time.Second))
		defer cpuPerOp(b)()
		for b.Loop() {
			if err := ex.Run(func() error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
}
