// Command httpclient wraps an http.Client with retry.Transport: a loopback
// server fails the first two requests with 503 and a connection reset, and
// the client's single Get succeeds on the third attempt.
//
//	go run ./examples/httpclient
package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"time"

	"github.com/steadyhq/retry"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "httpclient:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		switch hits.Add(1) {
		case 1:
			http.Error(rw, "busy", http.StatusServiceUnavailable)
		case 2:
			conn, _, _ := http.NewResponseController(rw).Hijack()
			conn.(*net.TCPConn).SetLinger(0) // a reset, as from a crashing server
			conn.Close()
		default:
			io.WriteString(rw, "hello from the third attempt\n")
		}
	}))
	defer srv.Close()

	// The only change to an existing client: its Transport. Four attempts,
	// exponential backoff from 50 ms with the default ±50% jitter.
	// (Keep-alives are off so that the reset meets a fresh connection:
	// net/http itself resends a GET whose reused connection was reset.)
	base := srv.Client().Transport.(*http.Transport).Clone()
	base.DisableKeepAlives = true
	r := retry.New(
		retry.WithPolicy(retry.Policy{MaxAttempts: 4, InitialInterval: 50 * time.Millisecond}),
		retry.OnRetry(func(ev retry.Event) {
			fmt.Fprintf(w, "attempt %d failed (%s); retrying in %v\n", ev.Attempt, ev.Type, ev.Delay.Round(time.Millisecond))
		}),
	)
	rt := retry.NewTransport(base, r)
	defer rt.CloseIdleConnections()
	client := &http.Client{Transport: rt, Timeout: 5 * time.Second}

	resp, err := client.Get(srv.URL)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s after %d attempts: %s", resp.Status, r.Stats().Attempts, body)
	return nil
}
