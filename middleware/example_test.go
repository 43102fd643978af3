package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/middleware"
)

// tokens hands out a new access token on every call, as a token source does
// when the previous token has expired during the wait between attempts.
type tokens struct{ n atomic.Int32 }

func (t *tokens) Token() string { return fmt.Sprintf("token-%d", t.n.Add(1)) }

// Tracing outside the retry sees one logical request; authentication inside
// it applies a fresh token to every attempt.
func ExampleChain() {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()

	tracing := func(next http.RoundTripper) http.RoundTripper {
		return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			fmt.Println("span start:", req.Method, req.URL.Path)
			resp, err := next.RoundTrip(req)
			if err == nil {
				fmt.Println("span end:", resp.StatusCode)
			}
			return resp, err
		})
	}
	var src tokens
	auth := func(next http.RoundTripper) http.RoundTripper {
		return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			req = req.Clone(req.Context()) // never change the caller's request
			req.Header.Set("Authorization", "Bearer "+src.Token())
			resp, err := next.RoundTrip(req)
			if err == nil {
				fmt.Printf("attempt %d with %s: %d\n",
					retry.AttemptFrom(req.Context()), req.Header.Get("Authorization"), resp.StatusCode)
			}
			return resp, err
		})
	}

	base := &http.Transport{}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: middleware.Chain(base,
		tracing, // outermost: one span per logical request
		middleware.Retry(retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond})),
		auth, // innermost: credentials on every attempt
	)}
	resp, err := client.Get(srv.URL + "/data")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	// Output:
	// span start: GET /data
	// attempt 1 with Bearer token-1: 503
	// attempt 2 with Bearer token-2: 200
	// span end: 200
}

var errUnavailable = errors.New("inventory: unavailable")

type tokenKey struct{}

// The same order for a function given to retry.Do: the trace is outside the
// retries, the token is fetched on every attempt.
func ExampleChainFunc() {
	var calls int
	fetch := func(ctx context.Context) (int, error) {
		calls++
		token := ctx.Value(tokenKey{})
		if calls == 1 {
			fmt.Printf("attempt %d with %s: unavailable\n", retry.AttemptFrom(ctx), token)
			return 0, errUnavailable
		}
		fmt.Printf("attempt %d with %s: ok\n", retry.AttemptFrom(ctx), token)
		return 42, nil
	}

	tracing := func(next func(context.Context) (int, error)) func(context.Context) (int, error) {
		return func(ctx context.Context) (int, error) {
			fmt.Println("span start")
			v, err := next(ctx)
			fmt.Println("span end:", v, err)
			return v, err
		}
	}
	var src tokens
	auth := func(next func(context.Context) (int, error)) func(context.Context) (int, error) {
		return func(ctx context.Context) (int, error) {
			return next(context.WithValue(ctx, tokenKey{}, src.Token()))
		}
	}

	call := middleware.ChainFunc(fetch,
		tracing,
		middleware.RetryFunc[int](retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond})),
		auth,
	)
	call(context.Background())
	// Output:
	// span start
	// attempt 1 with token-1: unavailable
	// attempt 2 with token-2: ok
	// span end: 42 <nil>
}
