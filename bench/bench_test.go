package bench

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	avast "github.com/avast/retry-go/v4"
	"github.com/cenkalti/backoff/v5"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/budget"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/ratelimiter"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/hashicorp/go-retryablehttp"
	sethvargo "github.com/sethvargo/go-retry"
	"github.com/sony/gobreaker/v2"
	"github.com/steadyhq/retry"
	"golang.org/x/time/rate"
)

// Names of the implementations, the second level of every benchmark name.
// Ours start with "retry"; "plain" is the bare baseline; the rest are peers.

var errFlaky = errors.New("flaky")

func ok(context.Context) error { return nil }

// flaky returns a func that fails twice, then succeeds, and starts over.
func flaky() func() error {
	n := 0
	return func() error {
		n++
		if n%3 != 0 {
			return errFlaky
		}
		return nil
	}
}

// Case 1: one call that succeeds at once.
func BenchmarkSuccess(b *testing.B) {
	ctx := context.Background()
	b.Run("plain", func(b *testing.B) {
		fn := ok
		defer cpuPerOp(b)()
		for b.Loop() {
			if fn(ctx) != nil {
				b.Fatal()
			}
		}
	})
	b.Run("retry-retrier", func(b *testing.B) {
		r := retry.New()
		defer cpuPerOp(b)()
		for b.Loop() {
			if err := r.Run(ctx, ok); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("retry-no-options", func(b *testing.B) {
		defer cpuPerOp(b)()
		for b.Loop() {
			if err := retry.Run(ctx, ok); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("failsafe-go-executor", func(b *testing.B) {
		ex := failsafe.With(retrypolicy.NewWithDefaults[any]())
		defer cpuPerOp(b)()
		for b.Loop() {
			if err := ex.Run(func() error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("failsafe-go-per-call", func(b *testing.B) {
		defer cpuPerOp(b)()
		for b.Loop() {
			if err := failsafe.With(retrypolicy.NewWithDefaults[any]()).Run(func() error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cenkalti-backoff", func(b *testing.B) {
		defer cpuPerOp(b)()
		for b.Loop() {
			if _, err := backoff.Retry(ctx, func() (struct{}, error) { return struct{}{}, nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("avast-retry-go", func(b *testing.B) {
		defer cpuPerOp(b)()
		for b.Loop() {
			if err := avast.Do(func() error { return nil }, avast.Context(ctx)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sethvargo-go-retry", func(b *testing.B) {
		defer cpuPerOp(b)()
		for b.Loop() {
			if err := sethvargo.Do(ctx, sethvargo.WithMaxRetries(2, sethvargo.NewExponential(time.Second)), ok); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// zeroBackoff is a sethvargo backoff that retries at once (its NewConstant
// refuses a zero interval).
var zeroBackoff = sethvargo.BackoffFunc(func() (time.Duration, bool) { return 0, false })

// Case 2: two failures then success, with no delay between attempts.
func BenchmarkTwoFailures(b *testing.B) {
	ctx := context.Background()
	b.Run("retry-retrier", func(b *testing.B) {
		// The peers have no retry budget: turn ours off, or it would rightly
		// refuse two retries per call at this rate.
		r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 3, Backoff: retry.Immediate}), retry.WithBudget(retry.Budget{Off: true}))
		fn := flaky()
		defer cpuPerOp(b)()
		for b.Loop() {
			if err := r.Run(ctx, func(context.Context) error { return fn() }); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("failsafe-go-executor", func(b *testing.B) {
		ex := failsafe.With(retrypolicy.NewBuilder[any]().WithMaxRetries(2).WithDelay(0).Build())
		fn := flaky()
		defer cpuPerOp(b)()
		for b.Loop() {
			if err := ex.Run(fn); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cenkalti-backoff", func(b *testing.B) {
		fn := flaky()
		defer cpuPerOp(b)()
		for b.Loop() {
			_, err := backoff.Retry(ctx, func() (struct{}, error) { return struct{}{}, fn() },
				backoff.WithBackOff(&backoff.ZeroBackOff{}), backoff.WithMaxTries(3))
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("avast-retry-go", func(b *testing.B) {
		fn := flaky()
		defer cpuPerOp(b)()
		for b.Loop() {
			if err := avast.Do(fn, avast.Context(ctx), avast.Attempts(3), avast.Delay(0), avast.DelayType(avast.FixedDelay)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sethvargo-go-retry", func(b *testing.B) {
		fn := flaky()
		defer cpuPerOp(b)()
		for b.Loop() {
			err := sethvargo.Do(ctx, sethvargo.WithMaxRetries(2, zeroBackoff), func(context.Context) error {
				if err := fn(); err != nil {
					return sethvargo.RetryableError(err)
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Case 3: the success path with a circuit breaker, a rate limiter that
// never refuses and a retry budget. The reference is the same work composed
// by hand from three small libraries: sethvargo/go-retry's Do around
// gobreaker's two-step breaker and golang.org/x/time/rate's Allow
// (guardedByHand). gobreaker's Execute, and its two-step Allow and done
// with rate.Limiter.AllowN called bare (no retry loop), are beside it.
func BenchmarkGuarded(b *testing.B) {
	ctx := context.Background()
	b.Run("gobreaker-execute", func(b *testing.B) {
		cb := gobreaker.NewCircuitBreaker[struct{}](zeroBreakerSettings)
		defer cpuPerOp(b)()
		for b.Loop() {
			if _, err := cb.Execute(func() (struct{}, error) { return struct{}{}, nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gobreaker-twostep+rate-allown", func(b *testing.B) {
		cb := gobreaker.NewTwoStepCircuitBreaker[struct{}](zeroBreakerSettings)
		lim := rate.NewLimiter(1e9, 1e9)
		defer cpuPerOp(b)()
		for b.Loop() {
			if !lim.AllowN(time.Now(), 1) {
				b.Fatal("no token")
			}
			done, err := cb.Allow()
			if err != nil {
				b.Fatal(err)
			}
			done(nil)
		}
	})
	for _, g := range guarded() {
		b.Run(g.name, func(b *testing.B) {
			call := g.new()
			defer cpuPerOp(b)()
			for b.Loop() {
				if err := call(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// zeroBreakerSettings are gobreaker's Settings for the zero retry.Breaker:
// a rolling window of 10 slices of a second, open for 30 s, one probe
// half-open. (gobreaker trips on 5 consecutive failures by default, ours
// on half of at least 20 attempts in the window; the success path counts
// alike.)
var zeroBreakerSettings = gobreaker.Settings{
	Name:         "bench",
	MaxRequests:  1,
	Interval:     10 * time.Second,
	BucketPeriod: time.Second,
	Timeout:      30 * time.Second,
}

// guardedImpl is one implementation of the guarded call: new builds it
// once, and returns the call that the benchmark makes over and over.
type guardedImpl struct {
	name string
	new  func() func(context.Context) error
}

// guarded returns the implementations of the guarded call that
// BenchmarkGuarded and BenchmarkParallelGuarded share: a retry policy of
// three attempts, a circuit breaker, a rate limiter of 1e9 a second with a
// burst of 1e9 (it never refuses) and, for ours and failsafe-go's, a retry
// budget.
func guarded() []guardedImpl {
	return []guardedImpl{
		{name: "retry-retrier", new: func() func(context.Context) error {
			r := retry.New(
				retry.WithBreaker(retry.Breaker{}),
				retry.WithRateLimit(retry.RateLimit{Limit: 1e9, Burst: 1e9}),
				retry.WithBudget(retry.Budget{}),
			)
			return func(ctx context.Context) error { return r.Run(ctx, ok) }
		}},
		{name: guardedByHand, new: func() func(context.Context) error {
			cb := gobreaker.NewTwoStepCircuitBreaker[struct{}](zeroBreakerSettings)
			lim := rate.NewLimiter(1e9, 1e9)
			attempt := func(ctx context.Context) error {
				if !lim.Allow() {
					return errRateLimited
				}
				done, err := cb.Allow()
				if err != nil {
					return err // open: not retried
				}
				err = ok(ctx)
				done(err)
				if err != nil {
					return sethvargo.RetryableError(err)
				}
				return nil
			}
			return func(ctx context.Context) error {
				return sethvargo.Do(ctx, sethvargo.WithMaxRetries(2, sethvargo.NewExponential(time.Second)), attempt)
			}
		}},
		{name: "failsafe-go-executor", new: func() func(context.Context) error {
			ex := failsafe.With[any](
				retrypolicy.NewBuilder[any]().WithBudget(budget.New()).Build(),
				circuitbreaker.NewWithDefaults[any](),
				ratelimiter.NewBursty[any](1e9, time.Second),
			)
			return func(context.Context) error { return ex.Run(func() error { return nil }) }
		}},
	}
}

// guardedByHand names the guarded call composed by hand: sethvargo/go-retry
// retrying an attempt that takes a token from golang.org/x/time/rate and
// passes gobreaker's two-step breaker, the way a user would without a
// library that has them all.
const guardedByHand = "sethvargo+gobreaker+rate"

var errRateLimited = errors.New("rate limited")

// Case 4: a GET on a loopback server.
func BenchmarkHTTPGet(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	clients := []struct {
		name   string
		client func(base *http.Transport) *http.Client
	}{
		{name: "plain", client: func(t *http.Transport) *http.Client { return &http.Client{Transport: t} }},
		{name: "retry-transport", client: func(t *http.Transport) *http.Client { return &http.Client{Transport: retry.NewTransport(t)} }},
		{name: "failsafe-go-roundtripper", client: func(t *http.Transport) *http.Client {
			return &http.Client{Transport: failsafehttp.NewRoundTripper(t, retrypolicy.NewWithDefaults[*http.Response]())}
		}},
		{name: "go-retryablehttp", client: func(t *http.Transport) *http.Client {
			c := retryablehttp.NewClient()
			c.HTTPClient = &http.Client{Transport: t}
			c.Logger = nil
			return c.StandardClient()
		}},
	}
	for _, bc := range clients {
		b.Run(bc.name, func(b *testing.B) {
			base := &http.Transport{}
			defer base.CloseIdleConnections()
			client := bc.client(base)
			defer cpuPerOp(b)()
			for b.Loop() {
				resp, err := client.Get(srv.URL)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

// cannedTransport answers every request at once with an empty 200, without
// a network: under BenchmarkHTTPOverhead it leaves only what the layers
// above it cost.
type cannedTransport struct{}

func (cannedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

// Case 4, without the network: the same clients on an in-memory base
// transport. Loopback timings move by several percent with scheduling on a
// 2-core machine; this isolates each layer's own cost.
func BenchmarkHTTPOverhead(b *testing.B) {
	clients := []struct {
		name   string
		client func(base http.RoundTripper) *http.Client
	}{
		{name: "plain", client: func(t http.RoundTripper) *http.Client { return &http.Client{Transport: t} }},
		{name: "retry-transport", client: func(t http.RoundTripper) *http.Client { return &http.Client{Transport: retry.NewTransport(t)} }},
		{name: "failsafe-go-roundtripper", client: func(t http.RoundTripper) *http.Client {
			return &http.Client{Transport: failsafehttp.NewRoundTripper(t, retrypolicy.NewWithDefaults[*http.Response]())}
		}},
		{name: "go-retryablehttp", client: func(t http.RoundTripper) *http.Client {
			c := retryablehttp.NewClient()
			c.HTTPClient = &http.Client{Transport: t}
			c.Logger = nil
			return c.StandardClient()
		}},
	}
	for _, bc := range clients {
		b.Run(bc.name, func(b *testing.B) {
			client := bc.client(cannedTransport{})
			defer cpuPerOp(b)()
			for b.Loop() {
				resp, err := client.Get("http://127.0.0.1/")
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}

// Case 5: the success path from every core at once (b.RunParallel, one
// goroutine per core) sharing one prebuilt value. benchtable compares each
// row with the same row of Success, run on one goroutine: the CPU time of a
// call should not grow when cores share the value.
func BenchmarkParallel(b *testing.B) {
	ctx := context.Background()
	b.Run("retry-retrier", func(b *testing.B) {
		r := retry.New()
		defer cpuPerOp(b)()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := r.Run(ctx, ok); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("failsafe-go-executor", func(b *testing.B) {
		ex := failsafe.With(retrypolicy.NewWithDefaults[any]())
		defer cpuPerOp(b)()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := ex.Run(func() error { return nil }); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// Case 5, guarded: Guarded's implementations from every core at once,
// each compared with its own row of Guarded.
func BenchmarkParallelGuarded(b *testing.B) {
	for _, g := range guarded() {
		b.Run(g.name, func(b *testing.B) {
			call := g.new()
			defer cpuPerOp(b)()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					if err := call(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
