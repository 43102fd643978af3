// Package middleware composes the retry engine with existing middleware
// chains: http.RoundTripper middleware (authentication, tracing, logging) and
// middleware around the functions given to retry.Do and retry.Run.
//
// # Order
//
// Chain(base, a, b, c) sends a request through a, then b, then c, then base:
// the first middleware is the outermost. What sits outside the retry
// middleware sees one logical request; what sits inside it sees every
// attempt. The usual order is:
//
//	client.Transport = middleware.Chain(http.DefaultTransport,
//		tracing,               // outside: one span for the logical request
//		middleware.Retry(...), // the engine
//		auth,                  // inside: a fresh token on every attempt
//	)
//
// Tracing outside the retry gives one span whose duration is what the caller
// waited, waits included; the otel module's Transport, placed inside the
// retry, adds an event per attempt to that span. Authentication inside the retry applies
// credentials to each attempt, so a token that expires during a wait is
// refreshed before the next attempt, and the dead-letter record of the
// Transport, which leaves credentials out, can be replayed through the same
// client. Logging per attempt goes inside, logging per request outside.
//
// The same order holds for functions: ChainFunc(fn, a, b) calls a, which
// calls b, which calls fn.
package middleware

import (
	"context"
	"net/http"

	"github.com/steadyhq/retry"
)

// RoundTripper is a middleware of http.RoundTrippers: it returns a
// RoundTripper that does its work and calls next. A nil next must be read
// as http.DefaultTransport.
type RoundTripper func(next http.RoundTripper) http.RoundTripper

// Chain returns base wrapped in mws, the first the outermost: a request goes
// through mws[0], then mws[1], and so on, and last through base. A nil base
// means http.DefaultTransport; nil middlewares are skipped.
func Chain(base http.RoundTripper, mws ...RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	for i := len(mws) - 1; i >= 0; i-- {
		if mws[i] != nil {
			base = mws[i](base)
		}
	}
	return base
}

// Retry returns the middleware that retries requests under opts: it wraps
// next in retry.NewTransport(next, opts...). Options are resolved each time
// the middleware is applied, so every RoundTripper it builds has its own
// state unless a *retry.Retrier among opts shares one.
func Retry(opts ...retry.Option) RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper {
		return retry.NewTransport(next, opts...)
	}
}

// RoundTripperFunc turns a function into an http.RoundTripper.
type RoundTripperFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f(req).
func (f RoundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// Func is a middleware of functions of the shape retry.Do takes: it returns
// a function that does its work and calls next.
type Func[T any] func(next func(context.Context) (T, error)) func(context.Context) (T, error)

// ChainFunc returns fn wrapped in mws, the first the outermost: a call goes
// through mws[0], then mws[1], and so on, and last reaches fn. Nil
// middlewares are skipped.
func ChainFunc[T any](fn func(context.Context) (T, error), mws ...Func[T]) func(context.Context) (T, error) {
	for i := len(mws) - 1; i >= 0; i-- {
		if mws[i] != nil {
			fn = mws[i](fn)
		}
	}
	return fn
}

// RetryFunc returns the middleware that calls next through retry.Do under
// opts. The options are resolved once, here, into one retry.Retrier: every
// function the middleware wraps shares its state (counters, budget,
// breakers).
func RetryFunc[T any](opts ...retry.Option) Func[T] {
	r := retry.New(opts...)
	return func(next func(context.Context) (T, error)) func(context.Context) (T, error) {
		return func(ctx context.Context) (T, error) {
			return retry.Do(ctx, next, r)
		}
	}
}
