package retry_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry"
)

func TestInboundAttempt(t *testing.T) {
	base := context.Background()
	tests := []struct {
		name string
		n    int
		want int
	}{
		{name: "unmarked", n: 0, want: 0},
		{name: "a first attempt is not marked", n: 1, want: 0},
		{name: "negative", n: -3, want: 0},
		{name: "second attempt", n: 2, want: 2},
		{name: "fifth attempt", n: 5, want: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := retry.WithInboundAttempt(base, tt.n)
			if got := retry.InboundAttempt(ctx); got != tt.want {
				t.Errorf("InboundAttempt = %d, want %d", got, tt.want)
			}
			if tt.n <= 1 && ctx != base {
				t.Errorf("WithInboundAttempt(ctx, %d) made a new context, want ctx itself", tt.n)
			}
		})
	}
	// A job started to outlive the request is no part of the caller's
	// retry: WithInboundAttempt(ctx, 1) clears the mark.
	marked := retry.WithInboundAttempt(base, 3)
	cleared := retry.WithInboundAttempt(context.WithoutCancel(marked), 1)
	if got := retry.InboundAttempt(cleared); got != 0 {
		t.Errorf("InboundAttempt after clearing = %d, want 0", got)
	}
	calls := 0
	_ = retry.Run(cleared, func(context.Context) error { calls++; return errors.New("down") },
		retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond}))
	if calls != 3 {
		t.Errorf("a call under a cleared mark made %d attempts, want 3", calls)
	}
	//lint:ignore SA1012 a nil context is what this case is about
	if got := retry.InboundAttempt(nil); got != 0 { //nolint:staticcheck
		t.Errorf("InboundAttempt(nil) = %d, want 0", got)
	}
	//lint:ignore SA1012 a nil context is what this case is about
	if got := retry.WithInboundAttempt(nil, 2); got != nil { //nolint:staticcheck
		t.Errorf("WithInboundAttempt(nil, 2) = %v, want nil", got)
	}
}

// TestRetriesAtOneLayer: a call under a context that serves an inbound
// retry makes one attempt and ends with ReasonInboundRetry, unless nested
// retries are allowed; a first attempt upstream changes nothing.
func TestRetriesAtOneLayer(t *testing.T) {
	fail := errors.New("downstream 503")
	tests := []struct {
		name       string
		inbound    int
		nested     bool
		wantCalls  int
		wantReason retry.Reason
	}{
		{name: "not marked", inbound: 0, wantCalls: 3, wantReason: retry.ReasonExhausted},
		{name: "inbound first attempt", inbound: 1, wantCalls: 3, wantReason: retry.ReasonExhausted},
		{name: "inbound retry", inbound: 2, wantCalls: 1, wantReason: retry.ReasonInboundRetry},
		{name: "inbound third attempt", inbound: 3, wantCalls: 1, wantReason: retry.ReasonInboundRetry},
		{name: "inbound retry, nested retries allowed", inbound: 2, nested: true, wantCalls: 3, wantReason: retry.ReasonExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond}), retry.WithNestedRetries(tt.nested))
			ctx := retry.WithInboundAttempt(context.Background(), tt.inbound)
			calls := 0
			err := r.Run(ctx, func(context.Context) error { calls++; return fail })
			var e *retry.Error
			if !errors.As(err, &e) || e.Reason != tt.wantReason || !errors.Is(err, fail) {
				t.Fatalf("err = %v, want reason %s wrapping the attempt's error", err, tt.wantReason)
			}
			if calls != tt.wantCalls || e.Attempts != tt.wantCalls {
				t.Errorf("calls = %d, Attempts = %d, want %d", calls, e.Attempts, tt.wantCalls)
			}
		})
	}
}

// TestRetriesAtOneLayerSuccess: the rule changes nothing for a call whose
// one attempt succeeds, and a non-retryable failure keeps its reason.
func TestRetriesAtOneLayerSuccess(t *testing.T) {
	ctx := retry.WithInboundAttempt(context.Background(), 2)
	if err := retry.Run(ctx, func(context.Context) error { return nil }); err != nil {
		t.Fatalf("success under an inbound retry: %v", err)
	}
	err := retry.Run(ctx, func(context.Context) error { return retry.Permanent(errors.New("bad request")) })
	var e *retry.Error
	if !errors.As(err, &e) || e.Reason != retry.ReasonNonRetryable {
		t.Fatalf("err = %v, want non_retryable", err)
	}
}

// TestHedgedAtOneLayer: Hedged under an inbound retry starts no hedge,
// though the first attempt outlasts the hedge delay.
func TestHedgedAtOneLayer(t *testing.T) {
	tests := []struct {
		name      string
		inbound   int
		nested    bool
		wantCalls int32
	}{
		{name: "not marked hedges", inbound: 0, wantCalls: 2},
		{name: "inbound retry does not hedge", inbound: 2, wantCalls: 1},
		{name: "inbound retry, nested allowed, hedges", inbound: 2, nested: true, wantCalls: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls atomic.Int32
				ctx := retry.WithInboundAttempt(context.Background(), tt.inbound)
				v, err := retry.Hedged(ctx, func(ctx context.Context) (int, error) {
					n := calls.Add(1)
					if n == 1 {
						select {
						case <-time.After(100 * time.Millisecond):
						case <-ctx.Done():
							return 0, ctx.Err()
						}
					}
					return int(n), nil
				}, retry.WithHedge(retry.Hedge{Delay: 10 * time.Millisecond, Max: 2}), retry.WithNestedRetries(tt.nested))
				if err != nil || v == 0 {
					t.Fatalf("Hedged = %d, %v", v, err)
				}
				if got := calls.Load(); got != tt.wantCalls {
					t.Errorf("attempts started = %d, want %d", got, tt.wantCalls)
				}
			})
		})
	}
}

// TestTransportAtOneLayer: a Transport used inside a handler that serves
// an inbound retry sends one attempt to a failing dependency.
func TestTransportAtOneLayer(t *testing.T) {
	var hits atomic.Int32
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()
	client := &http.Client{Transport: retry.NewTransport(nil, retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond}))}
	defer client.CloseIdleConnections()
	tests := []struct {
		name     string
		inbound  int
		wantHits int32
	}{
		{name: "first attempt upstream", inbound: 1, wantHits: 3},
		{name: "retry upstream", inbound: 2, wantHits: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hits.Store(0)
			ctx := retry.WithInboundAttempt(context.Background(), tt.inbound)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, down.URL, nil)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("status = %d, want the last attempt's 503", resp.StatusCode)
			}
			if got := hits.Load(); got != tt.wantHits {
				t.Errorf("hits = %d, want %d", got, tt.wantHits)
			}
		})
	}
}

// TestWireAttemptOfEnclosingCall: a Transport called inside an attempt of
// Do numbers its own attempts, and its requests carry the enclosing
// attempt's number when that is higher: Do's retry reaches the server
// marked a retry, even on the Transport's first attempt.
func TestWireAttemptOfEnclosingCall(t *testing.T) {
	var seen []string
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Get(retry.AttemptHeader))
		if hits.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	// The Transport makes one attempt a call, so every request is its
	// first; Do makes two.
	client := &http.Client{Transport: retry.NewTransport(nil, retry.WithPolicy(retry.Policy{MaxAttempts: 1}))}
	defer client.CloseIdleConnections()
	err := retry.Run(context.Background(), func(ctx context.Context) error {
		return getOK(ctx, client, srv.URL)
	}, retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"", "2"}; !slices.Equal(seen, want) {
		t.Errorf("Retry-Attempt of each request = %q, want %q", seen, want)
	}
}

// TestNestedCallRetriesMultiply: a retrying Transport inside Do retries
// as its own policy says, inside each of Do's attempts, its numbers
// repeating under Do's retry: an enclosing call of the same process is no
// inbound mark, and the two policies multiply (2 × 3 requests here).
func TestNestedCallRetriesMultiply(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get(retry.AttemptHeader))
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	client := &http.Client{Transport: retry.NewTransport(nil, fast(3))}
	defer client.CloseIdleConnections()
	err := retry.Run(t.Context(), func(ctx context.Context) error {
		return getOK(ctx, client, srv.URL)
	}, fast(2))
	if err == nil {
		t.Fatal("no error from a dependency that always fails")
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"", "2", "3", "2", "2", "3"}; !slices.Equal(seen, want) {
		t.Errorf("Retry-Attempt of each request = %q, want %q", seen, want)
	}
}

// getOK sends a GET to url through client, as a caller's fn in Do would:
// an error unless the answer is 200 OK.
func getOK(ctx context.Context, client *http.Client, url string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}
