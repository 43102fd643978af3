// Command first calls an HTTP endpoint through retry.Do: failures are
// retried with backoff, and a 503 or 429 waits at least the server's
// Retry-After.
package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/steadyhq/retry"
)

// target is the endpoint to call.
var target = "http://127.0.0.1:8080/health"

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Built once, safe for concurrent use: 5 attempts, exponential backoff
	// from 100 ms with ±50% jitter, capped at 5 s.
	r := retry.New(retry.WithPolicy(retry.Policy{
		MaxAttempts:     5,
		InitialInterval: 100 * time.Millisecond,
		MaxInterval:     5 * time.Second,
	}))

	status, err := retry.Do(ctx, func(ctx context.Context) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		if err != nil {
			return 0, retry.Permanent(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err // connection refused, reset, timeouts: retried
		}
		defer resp.Body.Close()
		// nil below 400. 5xx, 408, 425 and 429 are retried, waiting at
		// least the server's Retry-After; other 4xx stop at once.
		if err := retry.ResponseError(resp); err != nil {
			return 0, err
		}
		return resp.StatusCode, nil
	}, r)
	fmt.Println(status, err)
}
