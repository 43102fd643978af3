package otel

import (
	"context"
	"net/http"
	"strconv"

	"github.com/steadyhq/retry"
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
// http.response.status_code, and error.type for a status of 400 or more
// (the code, as the HTTP conventions ask) or a transport error (its
// retry.TypeOf).
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{base: base}
}

type transport struct{ base http.RoundTripper }

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
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
		attrs = append(attrs, semconv.ErrorTypeKey.String(retry.TypeOf(err)))
	case resp != nil:
		attrs = append(attrs, semconv.HTTPResponseStatusCode(resp.StatusCode))
		if resp.StatusCode >= 400 {
			attrs = append(attrs, semconv.ErrorTypeKey.String(strconv.Itoa(resp.StatusCode)))
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
// (retry.TypeOf the error).
func Func[T any](fn func(context.Context) (T, error)) func(context.Context) (T, error) {
	return func(ctx context.Context) (T, error) {
		v, err := fn(ctx)
		span := trace.SpanFromContext(ctx)
		if !span.IsRecording() {
			return v, err
		}
		if err != nil {
			span.AddEvent(EventName, trace.WithAttributes(
				AttrAttempt.Int(retry.AttemptFrom(ctx)), semconv.ErrorTypeKey.String(retry.TypeOf(err))))
		} else {
			span.AddEvent(EventName, trace.WithAttributes(AttrAttempt.Int(retry.AttemptFrom(ctx))))
		}
		return v, err
	}
}
