package shed_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/shed"
)

// TestClientPacedByQuota: both ends of the wire. A Shedder's quota tells
// a retry.Transport, on the response that uses the quota up, that none is
// left (RateLimit: r=0) and when it resets (t); the client holds its next
// request instead of sending it to be refused: with a deadline shorter
// than t it stops at once, with ReasonRateLimited and type
// "ratelimit.remote", and the server never sees the request.
func TestClientPacedByQuota(t *testing.T) {
	tests := []struct {
		name     string
		limit    int
		requests int           // sent in a row, each with deadline
		deadline time.Duration // per request
		wantHits int64         // requests that reached the handler
		wantLast string        // how the last one ends: "ok", "paced" or "429"
	}{
		{name: "within the quota", limit: 3, requests: 3, deadline: 200 * time.Millisecond, wantHits: 3, wantLast: "ok"},
		{name: "past the quota, reset beyond the deadline", limit: 2, requests: 3, deadline: 200 * time.Millisecond, wantHits: 2, wantLast: "paced"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := shed.New(shed.Options{Quota: shed.Quota{Limit: tt.limit, Window: 30 * time.Second}})
			if err != nil {
				t.Fatal(err)
			}
			var hits atomic.Int64
			srv := httptest.NewServer(s.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) })))
			defer srv.Close()
			tr := retry.NewTransport(nil)
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			last := ""
			for range tt.requests {
				ctx, cancel := context.WithTimeout(context.Background(), tt.deadline)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
				start := time.Now()
				resp, err := client.Do(req)
				took := time.Since(start)
				cancel()
				var e *retry.Error
				switch {
				case err == nil:
					resp.Body.Close()
					last = "ok"
					if resp.StatusCode == http.StatusTooManyRequests {
						last = "429"
					}
				case errors.As(err, &e) && e.Reason == retry.ReasonRateLimited && retry.TypeOf(err) == "ratelimit.remote":
					last = "paced"
					if took > tt.deadline/2 {
						t.Errorf("a paced request took %v, want it stopped at once", took)
					}
				default:
					t.Fatalf("request: %v", err)
				}
			}
			if last != tt.wantLast || hits.Load() != tt.wantHits {
				t.Errorf("last request %s, handler hits %d; want %s and %d", last, hits.Load(), tt.wantLast, tt.wantHits)
			}
		})
	}
}
