package retry_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/steadyhq/retry"
)

// An http.Client whose requests are retried: the server is busy twice, and
// asks for a pause the second time.
func ExampleNewTransport() {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch hits.Add(1) {
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		case 2:
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			io.WriteString(w, "fresh data")
		}
	}))
	defer srv.Close()

	tr := retry.NewTransport(nil,
		retry.WithPolicy(retry.Policy{MaxAttempts: 4, InitialInterval: 10 * time.Millisecond}),
		retry.OnRetry(func(ev retry.Event) {
			fmt.Printf("%s %s: attempt %d got %s\n", ev.Method, ev.Type, ev.Attempt, ev.Message)
		}))
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))
	// Output:
	// GET http.5xx.503: attempt 1 got retry: http status 503
	// GET http.4xx.429: attempt 2 got retry: http status 429
	// 200 fresh data
}
