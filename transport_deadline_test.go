package retry_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/steadyhq/retry"
)

// TestTransportDeadlineSaidOnce: a request whose deadline passes while a
// server hangs ends with an error that matches context.DeadlineExceeded
// and says so once, whatever the method (a POST's failure, which it may
// not retry, carried the deadline and repeated it as the cause).
func TestTransportDeadlineSaidOnce(t *testing.T) {
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	defer srv.Close()
	defer close(done)
	tr := retry.NewTransport(nil)
	defer tr.CloseIdleConnections()
	for _, method := range []string{"GET", "POST", "PUT"} {
		t.Run(method, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, method, srv.URL, strings.NewReader("x"))
			resp, err := tr.RoundTrip(req)
			if resp != nil {
				resp.Body.Close()
			}
			if !errors.Is(err, context.DeadlineExceeded) || strings.Count(err.Error(), "context deadline exceeded") != 1 {
				t.Errorf("err = %v, want one that matches and says context deadline exceeded once", err)
			}
		})
	}
}
