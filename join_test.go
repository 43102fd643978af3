package retry_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/steadyhq/retry"
)

func TestOptions(t *testing.T) {
	var log []string
	hook := func(name string) retry.Option {
		return retry.OnRetry(func(retry.Event) { log = append(log, name) })
	}
	shared := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 5}))
	tests := []struct {
		name     string
		opts     []retry.Option
		wantLog  []string
		wantRuns int
	}{
		{name: "empty", opts: []retry.Option{retry.Options()}, wantRuns: 3},
		{name: "in order", opts: []retry.Option{retry.Options(hook("a"), hook("b"))}, wantLog: []string{"a", "b", "a", "b"}, wantRuns: 3},
		{name: "nested and nil", opts: []retry.Option{retry.Options(nil, retry.Options(hook("a")), hook("b"))}, wantLog: []string{"a", "b", "a", "b"}, wantRuns: 3},
		{name: "a policy inside", opts: []retry.Option{retry.Options(retry.WithPolicy(retry.Policy{MaxAttempts: 2, Backoff: retry.Immediate}), hook("a"))}, wantLog: []string{"a"}, wantRuns: 2},
		{name: "a Retrier inside is skipped", opts: []retry.Option{retry.Options(shared, hook("a"))}, wantLog: []string{"a", "a"}, wantRuns: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log = nil
			runs := 0
			opts := append([]retry.Option{retry.WithPolicy(retry.Policy{Backoff: retry.Immediate})}, tt.opts...)
			retry.Run(context.Background(), func(context.Context) error { runs++; return errors.New("x") }, opts...)
			if !slices.Equal(log, tt.wantLog) || runs != tt.wantRuns {
				t.Errorf("hooks %v, runs %d; want %v, %d", log, runs, tt.wantLog, tt.wantRuns)
			}
		})
	}
	if shared.Stats().Calls != 0 {
		t.Error("a Retrier inside Options shared its state")
	}
}
