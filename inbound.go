package retry

import "context"

// AttemptHeader is the request header field in which the Transport sends
// the number of an attempt, from the second on: "Retry-Attempt: 2" on the
// first retry or hedge of a request, 3 on the next, and so on; the first
// attempt carries no such field, so a request without it is a first
// attempt. The server's shedding (package shed) reads it to shed retries
// first and to mark the request's context (WithInboundAttempt). The name
// says what the value is, without the "X-" prefix RFC 6648 retired; the
// count is one-based like Envoy's x-envoy-attempt-count, which shed reads
// too.
const AttemptHeader = "Retry-Attempt"

// inboundKey is the context key of WithInboundAttempt.
type inboundKey struct{}

// WithInboundAttempt returns a copy of ctx that says the request being
// served is attempt n of its caller (1 for a first attempt): the server's
// shedding (package shed) and the gRPC server interceptors set it from the
// request's AttemptHeader or grpc-previous-rpc-attempts. For n <= 1 it
// returns ctx itself.
//
// Retries happen at one layer: a call of this package (Do, Run, Attempts,
// Hedged, the Transport, the gRPC interceptors) under a context whose
// inbound attempt is 2 or more makes one attempt and no hedge, since its
// caller is already retrying; a failure that would have been retried ends
// the call with ReasonInboundRetry. WithNestedRetries(true) retries anyway.
func WithInboundAttempt(ctx context.Context, n int) context.Context {
	if n <= 1 || ctx == nil {
		return ctx
	}
	return context.WithValue(ctx, inboundKey{}, n)
}

// InboundAttempt returns the attempt of the request being served that
// WithInboundAttempt put into ctx, or 0 when there is none.
func InboundAttempt(ctx context.Context) int {
	if ctx == nil {
		return 0
	}
	n, _ := ctx.Value(inboundKey{}).(int)
	return n
}

// WithNestedRetries sets whether calls retry and hedge under a context
// that WithInboundAttempt marks as serving a retry. The default, false,
// keeps retries at one layer: such a call makes one attempt. Pass true
// for a dependency that the caller's retries do not reach, such as one
// whose failure the caller cannot see.
func WithNestedRetries(allow bool) Option {
	return optionFunc(func(cfg *config) { cfg.nested = allow })
}

// inboundRetry reports whether cfg must not retry or hedge under ctx: ctx
// serves a request that is itself a retry, and nested retries are off.
func (c *config) inboundRetry(ctx context.Context) bool {
	return !c.nested && InboundAttempt(ctx) > 1
}

// OutboundAttempt returns the attempt number that a request sent under ctx
// carries on the wire (the Transport's AttemptHeader; the gRPC client
// interceptors send one less as grpc-previous-rpc-attempts): the larger of
// the attempt whose context ctx is (AttemptFrom) and the inbound attempt of
// the request being served (InboundAttempt). A request made while serving
// a retry is thus marked a retry too, even on its own first attempt, so
// that the layers below do not retry it either.
func OutboundAttempt(ctx context.Context) int {
	return max(AttemptFrom(ctx), InboundAttempt(ctx))
}
