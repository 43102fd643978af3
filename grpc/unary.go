package grpc

import (
	"context"
	"strconv"
	"sync"

	"github.com/steadyhq/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"
)

// UnaryClientInterceptor returns an interceptor that runs every unary RPC
// through r's engine: the RPC is sent again while the engine decides to retry
// its failures, and the caller gets the reply of the attempt that succeeded,
// or the error of the call. A nil r means a Retrier of its own with the
// default policy and budget (retry.New()); an invalid r (r.Err() != nil)
// fails every call with codes.Internal and r's error.
//
// An attempt's status becomes an error of type Type(code); codes other than
// the retryable ones stop the call at once, and so does any failure once the
// server's response headers had arrived. The server's pushback
// (PushbackKey) is the least wait before the next attempt, and retries carry
// PreviousAttemptsKey. The caller's Header, Trailer and Peer call options
// receive those of the attempt whose outcome is returned.
//
// When r has a Hedge (retry.WithHedge), or a call asks with WithHedge(true),
// the call is hedged as gRFC A6's hedgingPolicy describes; see the package
// documentation. CallOptions of this package change one call: Disable,
// WithMax, WithCodes, WithAttemptTimeout, WithHedge.
//
// Attempts run under the Retrier derived from r for the connection's target
// (and method, with PerMethod); see the package documentation for how keys
// work. A call that fails returns an error that errors.As turns into r's
// *retry.Error, and whose status (status.FromError, status.Convert,
// status.Code) is the last attempt's status exactly, or CANCELED,
// DEADLINE_EXCEEDED or UNAVAILABLE as the package documentation says.
func UnaryClientInterceptor(r *retry.Retrier, opts ...Option) grpc.UnaryClientInterceptor {
	c := newConfig(r, opts)
	pool := &sync.Pool{}
	pool.New = func() any {
		u := &unaryCall{}
		u.fn = u.attempt
		u.ownHeader = grpc.Header(&u.header)
		u.ownTrailer = grpc.Trailer(&u.trailer)
		u.headerAt, u.trailerAt = &u.header, &u.trailer
		u.opts = append(u.opts, u.ownHeader, u.ownTrailer)
		return u
	}
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if c.err != nil {
			return c.err
		}
		if invoker == nil {
			return errNilInvoker
		}
		var target string
		if cc != nil {
			target = cc.Target()
		}
		e := c.hit(target, method)
		if e == nil {
			e = c.entry(target, method)
		}
		u := pool.Get().(*unaryCall)
		u.method, u.req, u.reply, u.cc, u.invoker = method, req, reply, cc, invoker
		u.start(opts)
		err := u.run(ctx, c, e)
		u.end()
		pool.Put(u)
		return err
	}
}

// run runs the call under the Retrier of its key, or one derived from it
// for the call's CallOptions, hedged or not, and returns what the caller
// gets.
func (u *unaryCall) run(ctx context.Context, c *config, e *keyedRetrier) error {
	rt, cs := e.r, c.codes
	hedge := e.hedges
	if call := &u.call; call.set {
		if err := call.err(); err != nil {
			return &configError{err}
		}
		if call.codes != nil {
			cs = call.codes
		}
		if call.hedge != 0 {
			hedge = call.hedge > 0
		}
		if call.max == 1 {
			hedge = false
		}
	}
	if hedge {
		// Messages of another codec cannot be copied, nor a nil reply
		// made anew.
		_, okReq := u.req.(proto.Message)
		reply, okReply := u.reply.(proto.Message)
		hedge = okReq && okReply && reply.ProtoReflect().IsValid()
	}
	if hedge {
		rt = e.hedging()
	}
	if u.call.set {
		if rt = u.call.retrier(rt); rt.Err() != nil {
			return &configError{rt.Err()}
		}
	}
	u.codes = cs
	if hedge {
		return u.hedged(ctx, rt)
	}
	if err := rt.Run(ctx, u.fn); err != nil {
		return final(ctx, err)
	}
	return nil
}

// unaryCall is the state of one unary call. Calls take it from a pool, so
// that a call that succeeds at once allocates nothing of its own: fn, bound
// once, and the two call options that fetch the header and trailer of each
// attempt are made with it. grpc-go fills in those options before the
// invoker returns, and the call gives its state back only then.
type unaryCall struct {
	fn    func(context.Context) error // attempt
	call  callConfig                  // what the call's CallOptions set
	codes map[codes.Code]bool         // the retryable codes, nil for UNAVAILABLE alone

	method  string
	req     any
	reply   any
	cc      *grpc.ClientConn
	invoker grpc.UnaryInvoker
	// opts are ownHeader and ownTrailer, which stay there from call to
	// call, and the caller's; one of the first two is a no-op while the
	// caller's grpc.Header or grpc.Trailer stands in for it.
	opts []grpc.CallOption

	// Where each attempt's header and trailer arrive: header and trailer,
	// through ownHeader and ownTrailer, or the caller's own variables when
	// the caller asked for them with grpc.Header and grpc.Trailer. Between
	// calls they point at header and trailer.
	header, trailer       metadata.MD
	headerAt, trailerAt   *metadata.MD
	ownHeader, ownTrailer grpc.CallOption
	peerAt                *peer.Peer // the caller's grpc.Peer, if any
}

// start prepares the call's attempts from the call options it was given;
// the interceptor has set the other fields (passing them down cost as
// much as storing them).
func (u *unaryCall) start(opts []grpc.CallOption) {
	u.opts = u.opts[:2]
	for _, o := range opts {
		// One at a time, in the loop that reads them: a call has a few,
		// and append(u.opts, opts...) costs a call of typedslicecopy.
		u.opts = append(u.opts, o)
		switch o := o.(type) {
		case CallOption:
			u.call.add(o)
		case grpc.PeerCallOption:
			u.peerAt = o.PeerAddr
		case grpc.HeaderCallOption:
			if o.HeaderAddr != nil {
				u.headerAt = o.HeaderAddr
			}
		case grpc.TrailerCallOption:
			if o.TrailerAddr != nil {
				u.trailerAt = o.TrailerAddr
			}
		}
	}
	if u.headerAt != &u.header {
		u.opts[0] = grpc.EmptyCallOption{}
	}
	if u.trailerAt != &u.trailer {
		u.opts[1] = grpc.EmptyCallOption{}
	}
}

// end drops what the call referenced, before the state goes back to the
// pool, and leaves it as start expects it: no header or trailer, headerAt
// and trailerAt at the state's own, and the zero callConfig. (A call's
// stores cost it about a nanosecond each, with their write barrier's
// check: the fields a call seldom changes are stored only when it did.)
func (u *unaryCall) end() {
	u.req, u.reply, u.cc, u.invoker = nil, nil, nil, nil
	// A few: stored one by one, cheaper than the call of memclrHasPointers
	// that clear, or a range loop of such stores, compiles to.
	for i := 2; i < len(u.opts); i++ {
		u.opts[i] = nil
	}
	if u.header != nil {
		u.header = nil
	}
	if u.trailer != nil {
		u.trailer = nil
	}
	if u.headerAt != &u.header {
		u.headerAt, u.opts[0] = &u.header, u.ownHeader
	}
	if u.trailerAt != &u.trailer {
		u.trailerAt, u.opts[1] = &u.trailer, u.ownTrailer
	}
	if u.peerAt != nil {
		u.peerAt = nil
	}
	if u.call.set {
		u.call = callConfig{}
		u.codes = nil // the call's own
	}
}

// attempt runs one attempt of the call.
func (u *unaryCall) attempt(ctx context.Context) error {
	if n := retry.OutboundAttempt(ctx); n > 1 {
		ctx = metadata.AppendToOutgoingContext(ctx, PreviousAttemptsKey, strconv.Itoa(n-1))
	}
	// grpc-go sets these only when the attempt's stream was created.
	*u.headerAt, *u.trailerAt = nil, nil
	err := u.invoker(ctx, u.method, u.req, u.reply, u.cc, u.opts...)
	if err == nil {
		return nil
	}
	// A header, even an empty one, is there only when the server's
	// response headers arrived: the RPC is committed.
	return classify(ctx, err, *u.headerAt != nil, *u.trailerAt, u.codes)
}
