// Command flaky runs the same workload twice against a flaky HTTP server on
// loopback: once with plain calls and once through retry.Do, and prints what
// each saw. It needs no setup and ends in a few seconds.
//
//	go run ./examples/flaky
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/steadyhq/retry"
)

const (
	requests = 300
	workers  = 8
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "flaky:", err)
		os.Exit(1)
	}
}

// server fails about a third of its requests: 503s, 429s with Retry-After,
// and a few 400s that no retry can fix.
type server struct{ hits atomic.Int64 }

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.hits.Add(1)
	switch n := rand.IntN(100); {
	case n < 20:
		http.Error(w, "busy", http.StatusServiceUnavailable)
	case n < 30:
		w.Header().Set("Retry-After", "0")
		http.Error(w, "slow down", http.StatusTooManyRequests)
	case n < 32:
		http.Error(w, "bad request", http.StatusBadRequest)
	default:
		io.WriteString(w, "ok")
	}
}

// get performs one GET and turns a failed status into a typed error that
// carries the server's Retry-After.
func get(ctx context.Context, c *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", retry.Permanent(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode >= 400 {
		se := &retry.StatusError{StatusCode: resp.StatusCode}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
			se.RetryAfter = time.Duration(s) * time.Second
		}
		return "", se
	}
	return string(body), nil
}

type result struct {
	ok, failed int64
	hits       int64
	elapsed    time.Duration
	reasons    map[string]int
}

func workload(srv *server, url string, call func(context.Context) (string, error)) result {
	before := srv.hits.Load()
	start := time.Now()
	var mu sync.Mutex
	res := result{reasons: map[string]int{}}
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range jobs {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := call(ctx)
				cancel()
				mu.Lock()
				if err == nil {
					res.ok++
				} else {
					res.failed++
					var re *retry.Error
					if errors.As(err, &re) {
						res.reasons[re.Reason.String()+" "+retry.TypeOf(re.Err)]++
					} else {
						res.reasons["no retry "+retry.TypeOf(err)]++
					}
				}
				mu.Unlock()
			}
		})
	}
	for i := range requests {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	res.hits = srv.hits.Load() - before
	res.elapsed = time.Since(start)
	return res
}

func run() error {
	srv := &server{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	client := ts.Client()

	plain := workload(srv, ts.URL, func(ctx context.Context) (string, error) {
		return get(ctx, client, ts.URL)
	})

	r := retry.New(retry.WithPolicy(retry.Policy{
		MaxAttempts:     5,
		InitialInterval: 10 * time.Millisecond,
		MaxInterval:     200 * time.Millisecond,
	}))
	retried := workload(srv, ts.URL, func(ctx context.Context) (string, error) {
		return retry.Do(ctx, func(ctx context.Context) (string, error) {
			return get(ctx, client, ts.URL)
		}, r)
	})

	fmt.Printf("%d requests from %d workers against a flaky server on %s\n\n", requests, workers, ts.Listener.Addr())
	fmt.Printf("%-22s %12s %12s\n", "", "plain", "retry.Do")
	row := func(name string, a, b any) { fmt.Printf("%-22s %12v %12v\n", name, a, b) }
	row("succeeded", pct(plain.ok), pct(retried.ok))
	row("failed", plain.failed, retried.failed)
	row("server hits", plain.hits, retried.hits)
	row("elapsed", plain.elapsed.Round(time.Millisecond), retried.elapsed.Round(time.Millisecond))
	fmt.Println("\nfailures with retry.Do, by reason and type:")
	for k, n := range retried.reasons {
		fmt.Printf("  %-40s %d\n", k, n)
	}
	s := r.Stats()
	fmt.Printf("\nstats: attempts %d, failed %d, retried %d, failed permanently %d\n",
		s.Attempts, s.Failed, s.Retried, s.FailedPermanently)
	return nil
}

func pct(n int64) string { return fmt.Sprintf("%.1f%%", 100*float64(n)/requests) }
