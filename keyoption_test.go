package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/steadyhq/retry"
)

// TestRetrierWithKey: a call given a *Retrier and WithKey, in either order,
// runs on the Retrier's configuration under the key: its events carry the
// key (none when the key is empty, whatever the Retrier's), and its gates
// per key are the key's, shared with the Retrier's other calls of it.
func TestRetrierWithKey(t *testing.T) {
	ctx := context.Background()
	var got []string
	hook := retry.OnGiveUp(func(ev retry.Event) { got = append(got, ev.Key) })
	policy := retry.WithPolicy(retry.Policy{MaxAttempts: 1})
	r := retry.New(policy, hook, retry.WithKey("base"))
	var nilR *retry.Retrier
	fail := func(context.Context) error { return errTransient }
	tests := []struct {
		name string
		opts []retry.Option
		want string
	}{
		{name: "retrier then key", opts: []retry.Option{r, retry.WithKey("k")}, want: "k"},
		{name: "key then retrier", opts: []retry.Option{retry.WithKey("k"), r}, want: "k"},
		{name: "empty key over the retrier's", opts: []retry.Option{r, retry.WithKey("")}, want: ""},
		{name: "the retrier's key", opts: []retry.Option{r}, want: "base"},
		{name: "a nil retrier: fresh state, the options alone", opts: []retry.Option{nilR, retry.WithKey("k"), policy, hook}, want: "k"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got = nil
			_ = retry.Run(ctx, fail, tt.opts...)
			if len(got) != 1 || got[0] != tt.want {
				t.Fatalf("give-up events' keys = %q, want [%q]", got, tt.want)
			}
		})
	}

	// A breaker per key: the failures of key "a" open a's breaker alone,
	// whichever order the call gives its options in.
	br := retry.New(policy, retry.WithBreaker(retry.Breaker{PerKey: true, MinRequests: 2, FailureRatio: 0.5, OpenTimeout: time.Hour}))
	_ = retry.Run(ctx, fail, br, retry.WithKey("a"))
	_ = retry.Run(ctx, fail, retry.WithKey("a"), br)
	var e *retry.Error
	if err := retry.Run(ctx, fail, br, retry.WithKey("a")); !errors.As(err, &e) || e.Reason != retry.ReasonBreakerOpen {
		t.Errorf("third call of a: %v, want a refusal by a's open breaker", err)
	}
	if err := retry.Run(ctx, func(context.Context) error { return nil }, retry.WithKey("b"), br); err != nil {
		t.Errorf("a call of b: %v, want nil: b's breaker is its own", err)
	}
}

// TestRetrierWithKeyOdd: the pair of a *Retrier and WithKey alone, with a
// nil or typed-nil *Retrier, or a Retrier whose configuration is invalid,
// behaves as those options always did: a nil Retrier adds nothing (the
// call runs, once, as with no Retrier), and an invalid one returns its
// configuration error without calling fn, in either order.
func TestRetrierWithKeyOdd(t *testing.T) {
	ctx := context.Background()
	var nilR *retry.Retrier
	bad := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: -1}))
	if bad.Err() == nil {
		t.Fatal("MaxAttempts -1 was accepted; the test needs an invalid Retrier")
	}
	tests := []struct {
		name    string
		opts    []retry.Option
		calls   int
		wantErr error
	}{
		{name: "typed nil then key", opts: []retry.Option{nilR, retry.WithKey("k")}, calls: 1},
		{name: "key then typed nil", opts: []retry.Option{retry.WithKey("k"), nilR}, calls: 1},
		{name: "invalid then key", opts: []retry.Option{bad, retry.WithKey("k")}, wantErr: bad.Err()},
		{name: "key then invalid", opts: []retry.Option{retry.WithKey("k"), bad}, wantErr: bad.Err()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			err := retry.Run(ctx, func(context.Context) error { calls++; return nil }, tt.opts...)
			if calls != tt.calls {
				t.Errorf("fn called %d times, want %d", calls, tt.calls)
			}
			if tt.wantErr == nil && err != nil {
				t.Errorf("err = %v, want nil", err)
			}
			if tt.wantErr != nil && (err == nil || err.Error() != tt.wantErr.Error()) {
				t.Errorf("err = %v, want the Retrier's configuration error %v", err, tt.wantErr)
			}
		})
	}
}
