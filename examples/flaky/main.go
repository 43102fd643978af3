// Command flaky drives the same workload twice against a flaky HTTP server
// on loopback, once with a plain http.Client and once with retry.Transport,
// and prints what each saw: first under transient faults (503s, 429s with
// Retry-After, connection resets), then during a full outage, where the
// retry budget and the circuit breaker keep retries from multiplying the
// load. It needs no setup and ends in a few seconds.
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
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/steadyhq/retry"
)

const (
	requests = 400 // per phase
	workers  = 8
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "flaky:", err)
		os.Exit(1)
	}
}

// server fails a share of its requests; in an outage it fails them all.
type server struct {
	hits   atomic.Int64
	outage atomic.Bool
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.hits.Add(1)
	if s.outage.Load() {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		return
	}
	switch n := rand.IntN(100); {
	case n < 7:
		http.Error(w, "busy", http.StatusServiceUnavailable)
	case n < 9:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "slow down", http.StatusTooManyRequests)
	case n < 11:
		// A connection reset: the request may or may not have been seen.
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	default:
		io.WriteString(w, "ok")
	}
}

type result struct {
	ok, failed int64
	hits       int64
	elapsed    time.Duration
	why        map[string]int
}

// workload sends requests GETs from workers goroutines, each with a 3 s
// deadline, and tallies the outcomes.
func workload(srv *server, client *http.Client, url string) result {
	before := srv.hits.Load()
	start := time.Now()
	var mu sync.Mutex
	res := result{why: map[string]int{}}
	jobs := make(chan struct{})
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range jobs {
				why := get(client, url)
				mu.Lock()
				if why == "" {
					res.ok++
				} else {
					res.failed++
					res.why[why]++
				}
				mu.Unlock()
			}
		})
	}
	for range requests {
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
	res.hits = srv.hits.Load() - before
	res.elapsed = time.Since(start)
	return res
}

// get performs one GET; it returns "" on success, or why it failed.
func get(client *http.Client, url string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err.Error()
	}
	resp, err := client.Do(req)
	if err != nil {
		var re *retry.Error
		if errors.As(err, &re) {
			return re.Reason.String() + " " + retry.TypeOf(err)
		}
		return retry.TypeOf(err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return retry.TypeOf(err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("status %d", resp.StatusCode)
	}
	return ""
}

func run() error {
	srv := &server{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	plainClient := &http.Client{Transport: ts.Client().Transport}

	// One Transport for the whole run: five attempts, exponential backoff
	// from 20 ms with jitter, a per-host circuit breaker that fails fast
	// rather than wait more than 250 ms for the host to recover, and the
	// default retry budget (15% of requests plus 2 retries a second).
	rt := retry.NewTransport(ts.Client().Transport,
		retry.WithPolicy(retry.Policy{MaxAttempts: 5, InitialInterval: 20 * time.Millisecond, MaxInterval: 500 * time.Millisecond}),
		retry.WithBreaker(retry.Breaker{PerKey: true, OpenTimeout: 2 * time.Second, MaxWait: 250 * time.Millisecond}),
	)
	retryClient := &http.Client{Transport: rt}

	fmt.Printf("%d GETs per phase from %d workers against a flaky server on %s\n", requests, workers, ts.Listener.Addr())

	fmt.Println("\nphase 1: transient faults (7% 503, 2% 429 with Retry-After: 1, 2% connection resets)")
	report(workload(srv, plainClient, ts.URL), workload(srv, retryClient, ts.URL))

	srv.outage.Store(true)
	fmt.Println("\nphase 2: outage (every request answered 503)")
	report(workload(srv, plainClient, ts.URL), workload(srv, retryClient, ts.URL))

	s := rt.Stats()
	fmt.Printf("\nretry.Transport stats: attempts %d, retried %d, failed permanently %d, budget denied %d, breaker waits %d, breaker denied %d\n",
		s.Attempts, s.Retried, s.FailedPermanently, s.BudgetDenied, s.BreakerWaits, s.BreakerDenied)
	return nil
}

func report(plain, retried result) {
	fmt.Printf("  %-26s %14s %18s\n", "", "plain client", "retry.Transport")
	row := func(name string, a, b any) { fmt.Printf("  %-26s %14v %18v\n", name, a, b) }
	row("succeeded", pct(plain.ok), pct(retried.ok))
	row("server hits (load)", plain.hits, retried.hits)
	row("hits per request", fmt.Sprintf("%.2f", float64(plain.hits)/requests), fmt.Sprintf("%.2f", float64(retried.hits)/requests))
	row("elapsed", plain.elapsed.Round(time.Millisecond), retried.elapsed.Round(time.Millisecond))
	for _, side := range []struct {
		name string
		r    result
	}{{"plain client", plain}, {"retry.Transport", retried}} {
		if len(side.r.why) == 0 {
			continue
		}
		fmt.Printf("  failures with the %s:\n", side.name)
		keys := make([]string, 0, len(side.r.why))
		for k := range side.r.why {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Printf("    %-40s %5d\n", k, side.r.why[k])
		}
	}
}

func pct(n int64) string { return fmt.Sprintf("%.1f%%", 100*float64(n)/requests) }
