package retry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	"go.uber.org/goleak"
)

// TestTransportAttemptHeader: a real server records the AttemptHeader of
// every attempt it receives. The first attempt carries the caller's field
// or none; retries and hedges carry their one-based number; the caller's
// request is never changed.
func TestTransportAttemptHeader(t *testing.T) {
	immediate := retry.WithPolicy(retry.Policy{MaxAttempts: 3, Backoff: retry.Immediate})
	tests := []struct {
		name string
		opts []retry.Option
		// fail is how many requests the server answers 503 before a 200;
		// slow is how long it holds the first request.
		fail    int
		slow    time.Duration
		caller  string // the caller's own Retry-Attempt, if any
		inbound int    // the request is made while serving this attempt
		want    []string
	}{
		{name: "success", opts: []retry.Option{immediate}, want: []string{""}},
		{name: "retries", opts: []retry.Option{immediate}, fail: 2, want: []string{"", "2", "3"}},
		{name: "caller's field", opts: []retry.Option{immediate}, fail: 2, caller: "7", want: []string{"7", "2", "3"}},
		{name: "hedge", opts: []retry.Option{immediate, retry.WithHedge(retry.Hedge{Delay: 5 * time.Millisecond})},
			slow: 500 * time.Millisecond, want: []string{"", "2"}},
		{name: "hedge after a caller's field", opts: []retry.Option{immediate, retry.WithHedge(retry.Hedge{Delay: 5 * time.Millisecond})},
			slow: 500 * time.Millisecond, caller: "4", want: []string{"4", "2"}},
		// Made while serving a retry: one attempt, marked a retry too.
		{name: "serving a retry", opts: []retry.Option{immediate}, fail: 2, inbound: 3, want: []string{"3"}},
		{name: "serving a retry, nested retries on", opts: []retry.Option{immediate, retry.WithNestedRetries(true)},
			fail: 2, inbound: 2, want: []string{"2", "2", "3"}},
		{name: "serving a first attempt", opts: []retry.Option{immediate}, fail: 1, inbound: 1, want: []string{"", "2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			var mu sync.Mutex
			var got []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				got = append(got, r.Header.Get(retry.AttemptHeader))
				n := len(got)
				mu.Unlock()
				if n == 1 && tt.slow > 0 {
					select {
					case <-time.After(tt.slow):
					case <-r.Context().Done():
						return
					}
				}
				if n <= tt.fail {
					w.WriteHeader(http.StatusServiceUnavailable)
				}
			}))
			defer srv.Close()
			base := &http.Transport{}
			defer base.CloseIdleConnections()
			client := &http.Client{Transport: retry.NewTransport(base, tt.opts...)}
			ctx := retry.WithInboundAttempt(context.Background(), tt.inbound)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			if tt.caller != "" {
				req.Header.Set(retry.AttemptHeader, tt.caller)
			}
			before := req.Header.Clone()
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if tt.inbound < 2 && resp.StatusCode != http.StatusOK {
				t.Errorf("status %d, want 200", resp.StatusCode)
			}
			srv.Close() // waits for the handlers, the hedged loser's included
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(got, tt.want) {
				t.Errorf("attempts sent %q, want %q", got, tt.want)
			}
			if h := req.Header; len(h) != len(before) || h.Get(retry.AttemptHeader) != before.Get(retry.AttemptHeader) {
				t.Errorf("the caller's header changed: %v, was %v", h, before)
			}
		})
	}
}
