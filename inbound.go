package retry

import "context"

// AttemptHeader is the request header field in which the Transport sends
// the attempt number of the operation a request belongs to (see
// OutboundAttempt): "Retry-Attempt: 2" on the first retry or hedge of a
// request, 3 on the next, and so on. A first attempt carries no such
// field, unless it is made while serving a retry (WithInboundAttempt) or
// inside an attempt of an enclosing call that is itself a retry (a
// Transport inside Do's second attempt): then it carries that number, so
// that the server knows the request belongs to a retry. The server's
// shedding (package shed) reads it to shed retries first and to mark the
// request's context. The name says what the value is, without the "X-"
// prefix RFC 6648 retired; the count is one-based like Envoy's
// x-envoy-attempt-count, which shed reads too.
const AttemptHeader = "Retry-Attempt"

// inboundKey is the context key of WithInboundAttempt.
type inboundKey struct{}

// WithInboundAttempt returns a copy of ctx that says the request being
// served is attempt n of its caller (1 for a first attempt): the server's
// shedding (package shed) and the gRPC server interceptors set it from the
// request's AttemptHeader or grpc-previous-rpc-attempts. For n <= 1 it
// returns ctx itself, or, when ctx carries a mark, a copy without it: a
// job a handler starts to outlive its request (with
// context.WithoutCancel(r.Context())), whose failure the caller never
// sees, is no part of the caller's retry, and WithInboundAttempt(ctx, 1)
// lets it retry on its own.
//
// Retries happen at one layer: a call of this package (Do, Run, Attempts,
// Hedged, the Transport, the gRPC interceptors) under a context whose
// inbound attempt is 2 or more makes one attempt and no hedge, since its
// caller is already retrying; a failure that would have been retried ends
// the call with ReasonInboundRetry. WithNestedRetries(true) retries anyway.
func WithInboundAttempt(ctx context.Context, n int) context.Context {
	if ctx == nil {
		return nil
	}
	if n <= 1 {
		if InboundAttempt(ctx) == 0 {
			return ctx
		}
		n = 0
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
// interceptors send one less as grpc-previous-rpc-attempts): the largest
// of the attempt whose context ctx is (AttemptFrom), the attempts of the
// calls enclosing it (a Transport inside Do's fn), and the inbound attempt
// of the request being served (InboundAttempt). A request made while
// serving a retry, or inside a retry of an enclosing call, is thus marked
// a retry too, even on its own first attempt, so that the layers below do
// not retry it either. The numbers of a call that retries under a mark
// may repeat: attempts 1, 2 and 3 under an inbound 2 (with
// WithNestedRetries(true)), or inside an enclosing call's attempt 2, send
// 2, 2 and 3. Only an inbound mark stops a call's own retries (see
// WithNestedRetries): a call nested in an enclosing call of the same
// process retries as its policy says, and the two policies multiply, so
// give the inner or the outer one attempt.
func OutboundAttempt(ctx context.Context) int {
	n, ok := ctx.Value(attemptKey{}).(int)
	if !ok { // nor an enclosing number, which withAttempt sets only beside it
		return max(1, InboundAttempt(ctx))
	}
	return max(n, enclosing(ctx), InboundAttempt(ctx))
}
