package grpc

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/shed"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// UnaryServerInterceptor returns an interceptor that sheds the load of a
// server through s, as s's HTTP Handler does (see package shed): each RPC
// is admitted by s.Admit, and its permit given back when the handler
// returns or panics.
//
// An RPC whose PreviousAttemptsKey says k >= 1 is attempt k+1 of its
// caller: a retry, shed first (it never waits in the queue), and, when
// admitted, handled under retry.WithInboundAttempt(ctx, k+1), so that the
// interceptors and calls of package retry inside the handler make one
// attempt. A malformed value counts as absent (see shed.ParseAttempt).
// The client, for the quota and the client's share of the permits
// (shed.Options.ClientShare), is the host part of the peer's address.
//
// A shed RPC ends with UNAVAILABLE (overload) or RESOURCE_EXHAUSTED (a
// client over its quota), the message of the shed.Refusal, and the
// trailer PushbackKey: the come-back delay of shed.Refusal.RetryAfter in
// milliseconds, rounded up, which UnaryClientInterceptor and gRPC's own
// retries wait at least. An RPC whose context ended while it waited ends
// with its context's status (CANCELED or DEADLINE_EXCEEDED). A nil s
// admits every RPC.
func UnaryServerInterceptor(s *shed.Shedder) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		n := inboundAttempt(ctx)
		t, no := s.Admit(ctx, shed.Request{Attempt: n, Key: clientKey(ctx, s)})
		if no != nil {
			return nil, refused(ctx, no, func(md metadata.MD) { grpc.SetTrailer(ctx, md) })
		}
		defer s.Done(t)
		return handler(retry.WithInboundAttempt(ctx, n), req)
	}
}

// StreamServerInterceptor is UnaryServerInterceptor for streams: a stream
// holds its permit until its handler returns. Long-lived streams (watches,
// subscriptions) on the Shedder of unary RPCs would take the permits those
// RPCs need: give them a Shedder of their own, or no interceptor.
func StreamServerInterceptor(s *shed.Shedder) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx := ss.Context()
		n := inboundAttempt(ctx)
		t, no := s.Admit(ctx, shed.Request{Attempt: n, Key: clientKey(ctx, s)})
		if no != nil {
			return refused(ctx, no, ss.SetTrailer)
		}
		defer s.Done(t)
		if n >= 2 {
			ss = &inboundStream{ServerStream: ss, ctx: retry.WithInboundAttempt(ctx, n)}
		}
		return handler(srv, ss)
	}
}

// inboundStream is a server stream whose context says it serves a retry.
type inboundStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *inboundStream) Context() context.Context { return s.ctx }

// inboundAttempt returns the attempt number that the RPC's
// PreviousAttemptsKey says: k+1 for k previous attempts, 0 without one.
func inboundAttempt(ctx context.Context) int {
	v := metadata.ValueFromIncomingContext(ctx, PreviousAttemptsKey)
	if len(v) == 0 {
		return 0
	}
	if k := shed.ParseAttempt(v[0]); k >= 1 {
		return k + 1
	}
	return 0
}

// clientKey returns the RPC's client for s, the host part of the peer's
// address: "" when s has neither a quota nor a client share, which need
// none (a nil or zero Shedder's Options have a ClientShare of 0).
func clientKey(ctx context.Context, s *shed.Shedder) string {
	if o := s.Options(); o.Quota.Limit == 0 && (o.ClientShare == 0 || o.ClientShare >= 1) {
		return ""
	}
	return peerHost(ctx)
}

// peerHost returns the host part of the RPC's peer address, or "".
func peerHost(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	addr := p.Addr.String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// refused returns the status of a shed RPC, and sets its pushback trailer
// through set.
func refused(ctx context.Context, no *shed.Refusal, set func(metadata.MD)) error {
	if no.Reason == shed.ReasonCanceled {
		if err := ctx.Err(); err != nil {
			return status.FromContextError(err).Err()
		}
	}
	ms := (no.RetryAfter + time.Millisecond - 1) / time.Millisecond
	set(metadata.Pairs(PushbackKey, strconv.FormatInt(int64(ms), 10)))
	code := codes.Unavailable
	if no.Reason == shed.ReasonQuota {
		code = codes.ResourceExhausted
	}
	return status.Error(code, no.Error())
}
