package retry_test

import (
	"context"
	"errors"
	"testing"

	"github.com/steadyhq/retry"
)

var sinkStr string

func BenchmarkTypeOfPlain(b *testing.B) {
	err := errors.New("flaky")
	for b.Loop() {
		sinkStr = retry.TypeOf(err)
	}
}

func BenchmarkTwoFailuresRoot(b *testing.B) {
	ctx := context.Background()
	errFlaky := errors.New("flaky")
	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 3, Backoff: retry.Immediate}), retry.WithBudget(retry.Budget{Off: true}))
	n := 0
	fn := func(context.Context) error {
		n++
		if n%3 != 0 {
			return errFlaky
		}
		return nil
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Run(ctx, fn); err != nil {
			b.Fatal(err)
		}
	}
}
