package retry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/steadyhq/retry"
)

func ok(context.Context) error { return nil }

// BenchmarkRunSuccess measures a call that succeeds at once.
func BenchmarkRunSuccess(b *testing.B) {
	ctx := context.Background()
	b.Run("retrier", func(b *testing.B) {
		r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 3}))
		b.ReportAllocs()
		for b.Loop() {
			if err := r.Run(ctx, ok); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("no-options", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := retry.Run(ctx, ok); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("do-retrier-option", func(b *testing.B) {
		r := retry.New()
		fn := func(context.Context) (int, error) { return 1, nil }
		b.ReportAllocs()
		for b.Loop() {
			if _, err := retry.Do(ctx, fn, r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		r := retry.New()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = r.Run(ctx, ok)
			}
		})
	})
}

// BenchmarkTransportGET compares a GET on a loopback server through
// Transport with the same GET through the bare http.Transport it wraps.
func BenchmarkTransportGET(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	for _, bc := range []struct {
		name string
		rt   func(*http.Transport) http.RoundTripper
	}{
		{name: "plain", rt: func(t *http.Transport) http.RoundTripper { return t }},
		{name: "retry", rt: func(t *http.Transport) http.RoundTripper { return retry.NewTransport(t) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			base := &http.Transport{}
			defer base.CloseIdleConnections()
			client := &http.Client{Transport: bc.rt(base)}
			b.ReportAllocs()
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

// BenchmarkRunTwoFailures measures a call that fails twice, then succeeds,
// with no wait between attempts.
func BenchmarkRunTwoFailures(b *testing.B) {
	ctx := context.Background()
	errFlaky := errors.New("flaky")
	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 3, Backoff: retry.Immediate}), retry.WithBudget(retry.Budget{Off: true}))
	n := 0
	fn := func(context.Context) error {
		if n++; n%3 != 0 {
			return errFlaky
		}
		return nil
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Run(ctx, fn); err != nil {
			b.Fatal(err)
		}
	}
}

var typeSink string

// BenchmarkTypeOf measures the classification of common errors.
func BenchmarkTypeOf(b *testing.B) {
	tests := []struct {
		name string
		err  error
	}{
		{name: "errors.New", err: errors.New("flaky")},
		{name: "io.EOF", err: io.EOF},
		{name: "wrapped", err: fmt.Errorf("read: %w", io.ErrUnexpectedEOF)},
		{name: "status", err: &retry.StatusError{StatusCode: 503}},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				typeSink = retry.TypeOf(tt.err)
			}
		})
	}
}

// BenchmarkGuardedParts measures the success path with no guard, each guard
// alone and all together, each also from every core at once (bench/ has
// gobreaker's Execute and failsafe-go's policies beside them). The budget is
// off in the rows of the other guards, so that each row's difference from
// "none" is its guard's cost.
func BenchmarkGuardedParts(b *testing.B) {
	ctx := context.Background()
	off := retry.WithBudget(retry.Budget{Off: true})
	limiter := retry.WithRateLimit(retry.RateLimit{Limit: 1e9, Burst: 1e9})
	tests := []struct {
		name string
		opts []retry.Option
	}{
		{name: "none", opts: []retry.Option{off}},
		{name: "budget", opts: []retry.Option{retry.WithBudget(retry.Budget{})}},
		{name: "budget per key", opts: []retry.Option{retry.WithBudget(retry.Budget{PerKey: true}), retry.WithKey("k")}},
		{name: "limiter", opts: []retry.Option{off, limiter}},
		{name: "breaker", opts: []retry.Option{off, retry.WithBreaker(retry.Breaker{})}},
		{name: "throttle", opts: []retry.Option{off, retry.WithThrottle(retry.Throttle{})}},
		{name: "throttle per key", opts: []retry.Option{off, retry.WithThrottle(retry.Throttle{PerKey: true}), retry.WithKey("k")}},
		{name: "concurrency", opts: []retry.Option{off, retry.WithConcurrency(retry.Concurrency{})}},
		{name: "concurrency per key", opts: []retry.Option{off, retry.WithConcurrency(retry.Concurrency{PerKey: true}), retry.WithKey("k")}},
		{name: "all", opts: []retry.Option{retry.WithBreaker(retry.Breaker{}), limiter, retry.WithBudget(retry.Budget{}),
			retry.WithThrottle(retry.Throttle{}), retry.WithConcurrency(retry.Concurrency{})}},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			r := retry.New(tt.opts...)
			b.ReportAllocs()
			for b.Loop() {
				if err := r.Run(ctx, ok); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tt.name+"/parallel", func(b *testing.B) {
			r := retry.New(tt.opts...)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_ = r.Run(ctx, ok)
				}
			})
		})
	}
}
