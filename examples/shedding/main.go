// Command shedding puts package shed in front of a loopback server that
// serves at most 200 requests a second (4 workers, 20 ms each), sends it
// three times that for a second from clients of retry.Transport, and
// prints what the server served of what its workers could, what it shed
// and what it told the clients; then it shows retries kept at one layer:
// a handler serving a request that is itself a retry calls a failing
// dependency once, not three times.
//
//	go run ./examples/shedding
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/shed"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "shedding:", err)
		os.Exit(1)
	}
}

const (
	workers = 4
	service = 20 * time.Millisecond
	offered = 600 // requests a second: three times capacity
)

func run(w io.Writer) error {
	if err := overload(w); err != nil {
		return err
	}
	return oneLayer(w)
}

// overload drives a shedding server at three times its capacity.
func overload(w io.Writer) error {
	s, err := shed.New(shed.Options{})
	if err != nil {
		return err
	}
	pool := make(chan struct{}, workers)
	// How long the workers took a request: on a busy machine a sleep of
	// 20 ms takes longer, and the server serves fewer than 200 a second.
	var held, handled atomic.Int64 // nanoseconds, requests
	srv := httptest.NewServer(s.Handler(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		pool <- struct{}{} // a worker, or a wait for one
		began := time.Now()
		time.Sleep(service)
		held.Add(int64(time.Since(began)))
		handled.Add(1)
		<-pool
		io.WriteString(rw, "ok\n")
	})))
	defer srv.Close()
	tr := retry.NewTransport(nil)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	var (
		ok, shedded atomic.Int64
		mu          sync.Mutex
		retryAfter  = map[string]int{}
		wg          sync.WaitGroup
	)
	// A ticker drops the ticks this loop misses: on a busy machine,
	// where the clients share the server's CPU, they send fewer requests
	// a second instead of a heap of overdue ones at once, which would
	// starve the process and time out on the clients' side whatever the
	// server did. The lines printed say the rate offered and what the
	// workers could serve meanwhile.
	tick := time.NewTicker(time.Second / offered)
	defer tick.Stop()
	start := time.Now()
	for range offered {
		<-tick.C
		wg.Go(func() {
			// A deadline shorter than any Retry-After: the client gives
			// up at once instead of sleeping into certain failure.
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			resp, err := client.Do(req)
			if err != nil {
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				ok.Add(1)
				return
			}
			shedded.Add(1)
			mu.Lock()
			retryAfter[resp.Header.Get("Retry-After")]++
			mu.Unlock()
		})
	}
	sent := time.Since(start)
	wg.Wait()
	took := time.Since(start)
	perRequest := time.Duration(held.Load() / max(handled.Load(), 1))
	capacity := float64(workers) / perRequest.Seconds() // requests a second
	rate := float64(offered) / sent.Seconds()
	fmt.Fprintf(w, "offered %d requests in %.1f s, %.0f a second: %.1f times the %.0f/s its %d workers can serve at %.1f ms a request\n",
		offered, sent.Seconds(), rate, rate/capacity, capacity, workers, float64(perRequest.Microseconds())/1000)
	fmt.Fprintf(w, "served %d in %.1f s, %.0f%% of what the workers could; shed %d with 503\n",
		ok.Load(), took.Seconds(), 100*float64(ok.Load())/took.Seconds()/capacity, shedded.Load())
	var values []string
	for v := range retryAfter {
		values = append(values, v)
	}
	sort.Strings(values)
	for _, v := range values {
		fmt.Fprintf(w, "  Retry-After: %s on %d\n", v, retryAfter[v])
	}
	return nil
}

// oneLayer calls, from inside a shedding server's handler, a dependency
// that always fails: once for a request that is itself a retry, three
// times for a first attempt.
func oneLayer(w io.Writer) error {
	var hits atomic.Int64
	down := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		rw.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()
	tr := retry.NewTransport(nil, retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond}))
	defer tr.CloseIdleConnections()
	downstream := &http.Client{Transport: tr}

	s, err := shed.New(shed.Options{})
	if err != nil {
		return err
	}
	front := httptest.NewServer(s.Handler(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, down.URL, nil)
		resp, err := downstream.Do(req)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadGateway)
			return
		}
		resp.Body.Close()
		rw.WriteHeader(resp.StatusCode)
	})))
	defer front.Close()

	for _, attempt := range []string{"", "2"} {
		hits.Store(0)
		req, _ := http.NewRequest(http.MethodGet, front.URL, nil)
		if attempt != "" {
			req.Header.Set(retry.AttemptHeader, attempt)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		what := "a first attempt"
		if attempt != "" {
			what = "Retry-Attempt: " + attempt
		}
		fmt.Fprintf(w, "%s: the handler called the failing dependency %d time(s)\n", what, hits.Load())
	}
	http.DefaultClient.CloseIdleConnections()
	return nil
}
