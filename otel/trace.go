package otel

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/internal/typednil"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// EventName is the name of the span event added per attempt.
const EventName = "retry.attempt"

// Transport wraps base (nil means http.DefaultTransport) so that each
// request it sends adds an event to the span in the request's context.
// Put it inside the retry Transport, which sends it one request per attempt:
//
//	retry.NewTransport(otel.Transport(nil), opts...)
//
// The event carries retry.attempt, http.request.resend_count on retries,
// http.response.status_code, and error.type for a status of 400 to 599
// (the code, as the HTTP conventions ask; _OTHER for any other status a
// server sends) or a transport error (its retry.TypeOf, from a bounded set:
// see package doc). A typed nil base, such as a nil *http.Transport, makes
// every request fail at once with an error that says so, nothing sent.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	} else if typednil.Is(base) {
		return &transport{err: fmt.Errorf("otel: Transport: base = nil: is a nil %T; pass nil for http.DefaultTransport", base)}
	}
	return &transport{base: base}
}

type transport struct {
	base  http.RoundTripper
	err   error      // the reason every request fails, for a typed nil base
	types errorTypes // bounds the values of error.type
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.err != nil {
		if req != nil && req.Body != nil {
			req.Body.Close()
		}
		return nil, t.err
	}
	resp, err := t.base.RoundTrip(req)
	ctx := req.Context()
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return resp, err
	}
	n := retry.AttemptFrom(ctx)
	attrs := make([]attribute.KeyValue, 0, 4)
	attrs = append(attrs, AttrAttempt.Int(n))
	if n > 1 {
		attrs = append(attrs, semconv.HTTPRequestResendCount(n-1))
	}
	switch {
	case err != nil:
		attrs = append(attrs, semconv.ErrorTypeKey.String(t.types.bound(retry.TypeOf(err))))
	case resp != nil:
		attrs = append(attrs, semconv.HTTPResponseStatusCode(resp.StatusCode))
		if resp.StatusCode >= 400 {
			attrs = append(attrs, semconv.ErrorTypeKey.String(statusType(resp.StatusCode)))
		}
	}
	span.AddEvent(EventName, trace.WithAttributes(attrs...))
	return resp, err
}

// CloseIdleConnections closes the idle connections of the base transport.
func (t *transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// Func wraps fn so that each call adds an event to the span in its context:
// give the wrapped function to retry.Do, which calls it once per attempt.
// The event carries retry.attempt and, for a failed attempt, error.type
// (retry.TypeOf the error, from a bounded set: see package doc). A nil fn
// gives a function that returns an error saying so.
func Func[T any](fn func(context.Context) (T, error)) func(context.Context) (T, error) {
	if fn == nil {
		return func(context.Context) (T, error) {
			var zero T
			return zero, errors.New("otel: Func(nil): no function to call")
		}
	}
	types := new(errorTypes)
	return func(ctx context.Context) (T, error) {
		v, err := fn(ctx)
		span := trace.SpanFromContext(ctx)
		if !span.IsRecording() {
			return v, err
		}
		if err != nil {
			span.AddEvent(EventName, trace.WithAttributes(
				AttrAttempt.Int(retry.AttemptFrom(ctx)), semconv.ErrorTypeKey.String(types.bound(retry.TypeOf(err)))))
		} else {
			span.AddEvent(EventName, trace.WithAttributes(AttrAttempt.Int(retry.AttemptFrom(ctx))))
		}
		return v, err
	}
}
