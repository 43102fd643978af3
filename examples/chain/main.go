// Command chain composes retry.Transport with an existing chain of
// http.RoundTrippers: what sits outside it sees one request per call,
// what sits inside it sees every attempt. Here an access log wraps the
// retries, and a token injector inside them signs each attempt afresh.
//
//	go run ./examples/chain
package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"time"

	"github.com/steadyhq/retry"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "chain:", err)
		os.Exit(1)
	}
}

// roundTripperFunc adapts a function to http.RoundTripper.
type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// accessLog logs each request it sends and the response it gets back.
func accessLog(w io.Writer, next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		start := time.Now()
		resp, err := next.RoundTrip(r)
		if err != nil {
			fmt.Fprintf(w, "log: %s %s -> %v\n", r.Method, r.URL.Path, err)
			return nil, err
		}
		fmt.Fprintf(w, "log: %s %s -> %d in %v\n", r.Method, r.URL.Path, resp.StatusCode, time.Since(start).Round(10*time.Millisecond))
		return resp, nil
	})
}

// signer adds a fresh token to each request, as token sources do. It
// clones the request first: a RoundTripper must not change its caller's.
func signer(next http.RoundTripper) http.RoundTripper {
	var n atomic.Int32
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", fmt.Sprintf("Bearer token-%d", n.Add(1)))
		return next.RoundTrip(r)
	})
}

func run(w io.Writer) error {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		n := hits.Add(1)
		fmt.Fprintf(w, "server: attempt %d with %q\n", n, r.Header.Get("Authorization"))
		if n < 3 {
			http.Error(rw, "busy", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(rw, "ok")
	}))
	defer srv.Close()

	// log -> retry -> sign -> the connection pool
	base := srv.Client().Transport
	rt := retry.NewTransport(signer(base), retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: 20 * time.Millisecond}))
	defer rt.CloseIdleConnections()
	client := &http.Client{Transport: accessLog(w, rt)}

	resp, err := client.Get(srv.URL + "/orders")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "client: %s %q; the log saw 1 request, the server %d attempts\n", resp.Status, body, hits.Load())
	return nil
}
