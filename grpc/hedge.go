package grpc

import (
	"context"
	"errors"
	"strconv"
	"sync"

	"github.com/steadyhq/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// errReturned fails a hedge that would start after its call returned.
var errReturned = errors.New("retry: grpc: the call has returned")

// hedgedUnary is a hedged unary call. Hedges run on goroutines of their
// own and may outlive the call, so they use what this holds, never the
// pooled state of the call or, once it has returned, the caller's request.
type hedgedUnary struct {
	method  string
	cc      *grpc.ClientConn
	invoker grpc.UnaryInvoker
	opts    []grpc.CallOption // the caller's, without Header, Trailer and Peer
	codes   map[codes.Code]bool
	reply   any                      // the caller's: the first attempt's, on the caller's goroutine
	replyT  protoreflect.MessageType // the hedges make their replies of it
	peer    bool                     // the caller asked for the peer

	mu       sync.Mutex
	req      any           // the caller's request
	copy     proto.Message // the hedges' copy of it, made while the call runs
	returned bool
}

// hedgeResult is what an attempt that succeeded received.
type hedgeResult struct {
	reply           proto.Message // nil for the first attempt, whose reply is the caller's
	header, trailer metadata.MD
	peer            peer.Peer
}

// hedged runs the call through retry.Hedged on rt and gives the caller
// the winner's reply, header, trailer and peer, or the call's error.
func (u *unaryCall) hedged(ctx context.Context, rt *retry.Retrier) error {
	h := &hedgedUnary{method: u.method, cc: u.cc, invoker: u.invoker, codes: u.codes, reply: u.reply, peer: u.peerAt != nil, req: u.req,
		replyT: u.reply.(proto.Message).ProtoReflect().Type()}
	h.opts = make([]grpc.CallOption, 0, len(u.opts)+3)
	for _, o := range u.opts {
		switch o.(type) {
		case grpc.HeaderCallOption, grpc.TrailerCallOption, grpc.PeerCallOption, CallOption:
		default:
			h.opts = append(h.opts, o)
		}
	}
	res, err := retry.Hedged(ctx, h.attempt, rt)
	h.mu.Lock()
	h.returned = true
	h.mu.Unlock()
	if err != nil {
		var header, trailer metadata.MD
		var p *peer.Peer
		if se := (*statusError)(nil); errors.As(err, &se) {
			header, trailer, p = se.header, se.trailer, se.peer
		}
		u.give(header, trailer, p)
		return final(ctx, err)
	}
	if res.reply != nil {
		// Every attempt but the first has returned or runs on a message
		// of its own; the first ran on the caller's goroutine and is over.
		m := u.reply.(proto.Message)
		proto.Reset(m)
		proto.Merge(m, res.reply)
	}
	u.give(res.header, res.trailer, &res.peer)
	return nil
}

// give hands the caller's Header, Trailer and Peer options, every one of
// them, the header, trailer and peer of the attempt whose outcome the call
// returns; a nil p leaves the peers as they are. u.opts holds the call's own
// Header and Trailer options when the caller gave none.
func (u *unaryCall) give(header, trailer metadata.MD, p *peer.Peer) {
	for _, o := range u.opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			if o.HeaderAddr != nil {
				*o.HeaderAddr = header
			}
		case grpc.TrailerCallOption:
			if o.TrailerAddr != nil {
				*o.TrailerAddr = trailer
			}
		case grpc.PeerCallOption:
			if o.PeerAddr != nil && p != nil {
				*o.PeerAddr = *p
			}
		}
	}
}

// attempt runs one attempt of the call: the first on the caller's reply
// and request, the others on a reply of their own and a copy of the
// request.
func (h *hedgedUnary) attempt(ctx context.Context) (*hedgeResult, error) {
	res := &hedgeResult{}
	req, reply := h.req, h.reply
	if retry.AttemptFrom(ctx) > 1 {
		var err error
		if req, err = h.request(); err != nil {
			return nil, err
		}
		res.reply = h.replyT.New().Interface()
		reply = res.reply
	}
	if n := retry.OutboundAttempt(ctx); n > 1 {
		ctx = metadata.AppendToOutgoingContext(ctx, PreviousAttemptsKey, strconv.Itoa(n-1))
	}
	opts := append(h.opts[:len(h.opts):len(h.opts)], grpc.Header(&res.header), grpc.Trailer(&res.trailer))
	if h.peer {
		opts = append(opts, grpc.Peer(&res.peer))
	}
	err := h.invoker(ctx, h.method, req, reply, h.cc, opts...)
	if err == nil {
		return res, nil
	}
	err = classify(ctx, err, res.header != nil, res.trailer, h.codes)
	if se := (*statusError)(nil); errors.As(err, &se) {
		se.header, se.trailer = res.header, res.trailer
		if h.peer {
			se.peer = &res.peer
		}
	}
	return nil, err
}

// request returns the request for an attempt after the first: a copy of
// the caller's, made once while the caller waits for the call, so that
// no hedge reads the caller's request after the call has returned.
func (h *hedgedUnary) request() (any, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.returned:
		return nil, retry.Permanent(errReturned)
	case h.copy == nil:
		m, ok := h.req.(proto.Message)
		if !ok {
			return h.req, nil
		}
		h.copy = proto.Clone(m)
	}
	return h.copy, nil
}
