package retry_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/steadyhq/retry"
)

// tokenBudget is a SharedBudget with a fixed number of retry tokens that
// records what it is told.
type tokenBudget struct {
	mu      sync.Mutex
	tokens  int
	firsts  map[string]int
	retries map[string]int
}

func (b *tokenBudget) First(key string) {
	b.mu.Lock()
	b.firsts[key]++
	b.mu.Unlock()
}

func (b *tokenBudget) Retry(_ context.Context, key string, _ time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.retries[key]++
	if b.tokens == 0 {
		return false
	}
	b.tokens--
	return true
}

// TestWithSharedBudget: a shared budget counts every first attempt by key,
// is asked for each retry, and its refusal ends the call with Reason budget.
func TestWithSharedBudget(t *testing.T) {
	tests := []struct {
		name     string
		tokens   int
		fails    int // failures before success
		opts     []retry.Option
		err      error
		reason   retry.Reason
		attempts int
		retries  int
	}{
		{"success: counted, never asked", 0, 0, nil, nil, 0, 1, 0},
		{"retry granted", 1, 1, nil, nil, 0, 2, 1},
		{"retry refused", 1, 2, nil, errTransient, retry.ReasonBudget, 2, 2},
		{"a later WithBudget replaces it", 0, 1, []retry.Option{retry.WithBudget(retry.Budget{Off: true})}, nil, 0, 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &tokenBudget{tokens: tt.tokens, firsts: map[string]int{}, retries: map[string]int{}}
			opts := append([]retry.Option{
				retry.WithSharedBudget(b), retry.WithKey("dep"),
				retry.WithPolicy(retry.Policy{MaxAttempts: 5, InitialInterval: time.Microsecond, MaxInterval: time.Microsecond}),
			}, tt.opts...)
			r := retry.New(opts...)
			n := 0
			err := r.Run(t.Context(), func(context.Context) error {
				n++
				if n <= tt.fails {
					return errTransient
				}
				return nil
			})
			var re *retry.Error
			switch {
			case tt.err == nil && err != nil:
				t.Fatalf("err = %v, want success", err)
			case tt.err != nil && (!errors.As(err, &re) || re.Reason != tt.reason || !errors.Is(err, tt.err) || retry.TypeOf(err) != retry.TypeBudgetExhausted):
				t.Fatalf("err = %v, want %v of type %s keeping the last error", err, tt.reason, retry.TypeBudgetExhausted)
			}
			if n != tt.attempts || b.retries["dep"] != tt.retries {
				t.Errorf("%d attempts, %d retries asked; want %d and %d", n, b.retries["dep"], tt.attempts, tt.retries)
			}
			wantFirsts := 1
			if tt.opts != nil {
				wantFirsts = 0
			}
			if b.firsts["dep"] != wantFirsts || len(b.firsts) > 1 {
				t.Errorf("first attempts counted %v, want dep:%d", b.firsts, wantFirsts)
			}
		})
	}
}
