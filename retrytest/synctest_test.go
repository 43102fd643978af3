package retrytest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/retrytest"
)

// Testing retry code in virtual time: inside synctest.Test the waits between
// attempts pass at once, and the times recorded by Func and Transport are
// exact, so a test can check the schedule itself.
func TestVirtualTime(t *testing.T) {
	tests := []struct {
		name      string
		policy    retry.Policy
		fails     int
		wantWaits []time.Duration
		wantErr   bool
	}{
		{
			name:   "exponential",
			policy: retry.Policy{MaxAttempts: 4, InitialInterval: time.Second, Jitter: retry.Jitter{Kind: retry.JitterNone}},
			fails:  3, wantWaits: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, wantErr: false,
		},
		{
			name: "linear, capped",
			policy: retry.Policy{MaxAttempts: 5, Backoff: retry.Linear, InitialInterval: time.Minute,
				MaxInterval: 150 * time.Second, Jitter: retry.Jitter{Kind: retry.JitterNone}},
			fails: 4, wantWaits: []time.Duration{time.Minute, 2 * time.Minute, 150 * time.Second, 150 * time.Second}, wantErr: false,
		},
		{
			name:   "exhausted after an hour of waits",
			policy: retry.Policy{MaxAttempts: 3, Backoff: retry.Constant, InitialInterval: 30 * time.Minute, Jitter: retry.Jitter{Kind: retry.JitterNone}},
			fails:  5, wantWaits: []time.Duration{30 * time.Minute, 30 * time.Minute}, wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := retrytest.FailN(tt.fails, io.ErrUnexpectedEOF, "ok")
				start := time.Now()
				v, err := retry.Do(t.Context(), f.Do, retry.WithPolicy(tt.policy))
				if (err != nil) != tt.wantErr || !tt.wantErr && v != "ok" {
					t.Fatalf("Do = (%q, %v), want error %v", v, err, tt.wantErr)
				}
				if got := f.Waits(); !slices.Equal(got, tt.wantWaits) {
					t.Errorf("waits = %v, want %v", got, tt.wantWaits)
				}
				var total time.Duration
				for _, w := range tt.wantWaits {
					total += w
				}
				if got := time.Since(start); got != total {
					t.Errorf("virtual time elapsed = %v, want %v", got, total)
				}
			})
		})
	}
}

// The retry Transport over a scripted Transport in virtual time: a 30 s
// Retry-After is honoured to the nanosecond without jitter, and a slow
// response runs into the per-attempt timeout. Without a retry budget: a
// fresh one keeps the retry after a timeout that follows a retry not yet
// given back for what successes earn (see retry.Budget).
func TestVirtualTimeHTTP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		script := retrytest.NewTransport(
			retrytest.Step{Status: 503, Header: http.Header{"Retry-After": {"30"}}},
			retrytest.Step{Delay: time.Minute}, // longer than the attempt timeout
			retrytest.Step{Body: "ok"},
		)
		var types []string
		client := &http.Client{Transport: retry.NewTransport(script,
			retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: 2 * time.Second, Jitter: retry.Jitter{Kind: retry.JitterNone}}),
			retry.WithAttemptTimeout(10*time.Second), retry.WithBudget(retry.Budget{Off: true}),
			retry.OnRetry(func(ev retry.Event) { types = append(types, ev.Type) }))}
		resp, err := client.Get("http://svc.test/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("status = %d, want 200", resp.StatusCode)
		}
		// 30 s asked by the server; then the 10 s attempt timeout, and the
		// policy's second delay, 4 s.
		want := []time.Duration{30 * time.Second, 14 * time.Second}
		if got := script.Waits(); !slices.Equal(got, want) {
			t.Errorf("waits = %v, want %v", got, want)
		}
		if want := []string{"http.5xx.503", "timeout.attempt"}; !slices.Equal(types, want) {
			t.Errorf("retried on %v, want %v", types, want)
		}
	})
}

// A wait that cannot fit the deadline is not slept, in virtual time too.
func TestVirtualTimeDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		f := retrytest.FailN(10, io.ErrUnexpectedEOF, 0)
		p := retry.Policy{MaxAttempts: 10, Backoff: retry.Constant, InitialInterval: 25 * time.Minute, Jitter: retry.Jitter{Kind: retry.JitterNone}}
		_, err := retry.Do(ctx, f.Do, retry.WithPolicy(p))
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonDeadline {
			t.Fatalf("err = %v, want reason deadline", err)
		}
		// Two waits of 25 min fit the hour; the third would not, so the
		// engine stops without sleeping it.
		if f.Count() != 3 {
			t.Errorf("calls = %d, want 3", f.Count())
		}
	})
}
