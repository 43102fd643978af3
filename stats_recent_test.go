package retry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/steadyhq/retry"
)

// TestStatsBreakerChanges: every change of a breaker's state is listed with
// the time it happened on the Retrier's clock, half-open from the instant
// the open time is up (not when a call notices), keyed per breaker, the
// last 32 kept.
func TestStatsBreakerChanges(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := &virtualClock{now: t0}
	r := retry.New(retry.WithClock(clock), retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
		retry.WithBreaker(retry.Breaker{MinRequests: 1, FailureRatio: 1, OpenTimeout: time.Second, MaxWait: -1, PerKey: true}),
		retry.WithBudget(retry.Budget{Off: true}))
	fail := func(context.Context) error { return errTransient }
	ok := func(context.Context) error { return nil }
	if got := r.Stats().BreakerChanges; got != nil {
		t.Fatalf("before any change: %v, want nil", got)
	}
	_ = retry.Run(t.Context(), fail, r, retry.WithKey("a")) // a opens at t0
	clock.Sleep(t.Context(), 1500*time.Millisecond)
	_ = retry.Run(t.Context(), ok, r, retry.WithKey("a")) // half-open at t0+1s, closed at t0+1.5s
	_ = retry.Run(t.Context(), fail, r, retry.WithKey("b"))
	type change = struct {
		Key  string    `json:"key"`
		From string    `json:"from"`
		To   string    `json:"to"`
		Time time.Time `json:"time"`
	}
	want := []change{
		{Key: "a", From: retry.BreakerClosed, To: retry.BreakerOpen, Time: t0},
		{Key: "a", From: retry.BreakerOpen, To: retry.BreakerHalfOpen, Time: t0.Add(time.Second)},
		{Key: "a", From: retry.BreakerHalfOpen, To: retry.BreakerClosed, Time: t0.Add(1500 * time.Millisecond)},
		{Key: "b", From: retry.BreakerClosed, To: retry.BreakerOpen, Time: t0.Add(1500 * time.Millisecond)},
	}
	if got := r.Stats().BreakerChanges; !reflect.DeepEqual(got, want) {
		t.Fatalf("changes:\n got %v\nwant %v", got, want)
	}
	// 40 more changes: the last 32 of all 44 are kept, oldest first.
	for i := range 20 {
		clock.Sleep(t.Context(), time.Second)
		_ = retry.Run(t.Context(), ok, r, retry.WithKey(fmt.Sprint("b", i))) // a new key: no change
		_ = retry.Run(t.Context(), ok, r, retry.WithKey("b"))                // half-open, closed
		_ = retry.Run(t.Context(), fail, r, retry.WithKey("b"))              // open
	}
	got := r.Stats().BreakerChanges
	if len(got) != 32 {
		t.Fatalf("%d changes kept, want 32", len(got))
	}
	last := got[len(got)-1]
	if last.Key != "b" || last.To != retry.BreakerOpen || !last.Time.Equal(clock.Now()) {
		t.Errorf("last change %+v, want b opening at %v", last, clock.Now())
	}
	for i := 1; i < len(got); i++ {
		if got[i].Time.Before(got[i-1].Time) {
			t.Fatalf("changes out of order at %d: %v", i, got)
		}
	}
}

// TestStatsDenials: each call a gate stops is listed with its reason, its
// type (for the budget, the failure's) and, for the budget, its balance;
// calls that fail on their own are not denials.
func TestStatsDenials(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	one := retry.WithPolicy(retry.Policy{MaxAttempts: 1})
	tests := []struct {
		name string
		opts []retry.Option
		// calls: the errors of the calls' attempts, one call each; the
		// last call's is the denial.
		calls []error
		want  retry.Event
	}{
		{
			name:  "breaker open before any attempt",
			opts:  []retry.Option{one, retry.WithBreaker(retry.Breaker{MinRequests: 1, FailureRatio: 1, MaxWait: -1})},
			calls: []error{errTransient, nil},
			want:  retry.Event{Attempt: 0, Key: "dep", Type: "breaker.open", Reason: retry.ReasonBreakerOpen, Time: t0},
		},
		{
			name: "budget denies a retry",
			opts: []retry.Option{
				retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond, Jitter: retry.Jitter{Kind: retry.JitterNone}}),
				retry.WithBudget(retry.Budget{Tokens: -1, Ratio: 0.5}),
			},
			calls: []error{nil, &retry.StatusError{StatusCode: 503}}, // the success earns half a retry
			want:  retry.Event{Attempt: 1, Key: "dep", Type: "http.5xx.503", Reason: retry.ReasonBudget, Time: t0, Balance: 0.5},
		},
		{
			name:  "adaptive throttling sheds",
			opts:  []retry.Option{one, retry.WithThrottle(retry.Throttle{K: 1}), retry.WithRandom(func() float64 { return 0 })},
			calls: []error{errTransient, nil}, // then p = 1/2, and the draw is 0
			want:  retry.Event{Attempt: 0, Key: "dep", Type: "throttle.adaptive", Reason: retry.ReasonThrottled, Time: t0},
		},
		{
			name:  "rate limit wait cannot fit",
			opts:  []retry.Option{one, retry.WithRateLimit(retry.RateLimit{Limit: rate.Every(time.Hour), Burst: 1}), retry.WithMaxElapsed(time.Second)},
			calls: []error{nil, nil},
			want:  retry.Event{Attempt: 0, Key: "dep", Type: "ratelimit.local", Reason: retry.ReasonRateLimited, Time: t0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &virtualClock{now: t0}
			r := retry.New(append([]retry.Option{retry.WithClock(clock), retry.WithKey("dep")}, tt.opts...)...)
			for _, err := range tt.calls {
				_ = r.Run(t.Context(), func(context.Context) error { return err })
			}
			got := r.Stats().Denials
			if len(got) != 1 {
				t.Fatalf("denials %+v, want one", got)
			}
			if !reflect.DeepEqual(got[0], tt.want) {
				t.Errorf("denial\n got %+v\nwant %+v", got[0], tt.want)
			}
		})
	}
}

// TestStatsDenialsKeepsLast32: a flood of denials keeps the last 32, in
// order.
func TestStatsDenialsKeepsLast32(t *testing.T) {
	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
		retry.WithBreaker(retry.Breaker{MinRequests: 1, FailureRatio: 1, OpenTimeout: time.Hour, MaxWait: -1, PerKey: true}))
	_ = retry.Run(t.Context(), func(context.Context) error { return errTransient }, r, retry.WithKey("k"))
	for i := range 100 {
		_ = retry.Run(t.Context(), func(context.Context) error { return nil }, r, retry.WithKey("k"), retry.WithAttemptTimeout(time.Duration(i+1)))
	}
	got := r.Stats().Denials
	if len(got) != 32 {
		t.Fatalf("%d denials kept, want 32", len(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i].Time.Before(got[i-1].Time) {
			t.Fatalf("out of order at %d", i)
		}
	}
	if s := r.Stats(); s.BreakerDenied != 100 {
		t.Errorf("BreakerDenied = %d, want 100", s.BreakerDenied)
	}
}

// TestStatsTokens: the tokens of each bucket, by key; none without a rate
// limit or with a Shared one.
func TestStatsTokens(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	ok := func(context.Context) error { return nil }
	tests := []struct {
		name  string
		rl    *retry.RateLimit
		calls map[string]int
		want  map[string]float64
	}{
		{name: "no rate limit", want: nil},
		{name: "one bucket", rl: &retry.RateLimit{Limit: 1, Burst: 5}, calls: map[string]int{"a": 2, "b": 1}, want: map[string]float64{"": 2}},
		{name: "per key", rl: &retry.RateLimit{Limit: 1, Burst: 5, PerKey: true}, calls: map[string]int{"a": 2, "b": 1}, want: map[string]float64{"a": 3, "b": 4}},
		{name: "shared", rl: &retry.RateLimit{Shared: sharedLimiter{}}, calls: map[string]int{"a": 1}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := []retry.Option{retry.WithClock(&virtualClock{now: t0})}
			if tt.rl != nil {
				opts = append(opts, retry.WithRateLimit(*tt.rl))
			}
			r := retry.New(opts...)
			for key, n := range tt.calls {
				for range n {
					if err := retry.Run(t.Context(), ok, r, retry.WithKey(key)); err != nil {
						t.Fatal(err)
					}
				}
			}
			if got := r.Stats().Tokens; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Tokens = %v, want %v", got, tt.want)
			}
		})
	}
}

type sharedLimiter struct{}

func (sharedLimiter) Reserve(context.Context, string, time.Time, time.Duration) (time.Duration, func(time.Time), bool) {
	return 0, nil, true
}

// TestStatsJSONOfDenials: a denial in Stats' JSON has the Event's JSON
// names, and neither the error nor the payload.
func TestStatsJSONOfDenials(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	s := retry.Stats{Denials: []retry.Event{{Attempt: 2, Err: errors.New("secret"), Key: "k", Type: "http.503", Reason: retry.ReasonBudget, Time: t0, Balance: 0.5, Payload: func() {}}},
		Tokens: map[string]float64{"": 2}}
	s.BreakerChanges = append(s.BreakerChanges, struct {
		Key  string    `json:"key"`
		From string    `json:"from"`
		To   string    `json:"to"`
		Time time.Time `json:"time"`
	}{Key: "k", From: "closed", To: "open", Time: t0})
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Denials        []map[string]any `json:"denials"`
		BreakerChanges []map[string]any `json:"breaker_changes"`
		Tokens         map[string]float64
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	wantDenial := map[string]any{"attempt": 2.0, "key": "k", "type": "http.503", "reason": "budget", "time": "2030-01-02T03:04:05Z", "balance": 0.5}
	if len(got.Denials) != 1 || !reflect.DeepEqual(got.Denials[0], wantDenial) {
		t.Errorf("denials %v, want [%v]", got.Denials, wantDenial)
	}
	wantChange := map[string]any{"key": "k", "from": "closed", "to": "open", "time": "2030-01-02T03:04:05Z"}
	if len(got.BreakerChanges) != 1 || !reflect.DeepEqual(got.BreakerChanges[0], wantChange) {
		t.Errorf("changes %v, want [%v]", got.BreakerChanges, wantChange)
	}
	if got.Tokens[""] != 2 {
		t.Errorf("tokens %v", got.Tokens)
	}
}
