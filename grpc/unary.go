package grpc

import (
	"context"
	"strconv"
	"sync"

	"github.com/steadyhq/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// UnaryClientInterceptor returns an interceptor that runs every unary RPC
// through r's engine: the RPC is sent again while the engine decides to retry
// its failures, and the caller gets the reply of the attempt that succeeded,
// or the error of the call. A nil r means a Retrier of its own with the
// default policy and budget (retry.New()).
//
// An attempt's status becomes an error of type Type(code); codes other than
// the retryable ones stop the call at once, and so does any failure once the
// server's response headers had arrived. The server's pushback
// (PushbackKey) is the least wait before the next attempt, and retries carry
// PreviousAttemptsKey. The caller's Header and Trailer call options receive
// the metadata of the attempt whose outcome is returned.
//
// Attempts run under the Retrier derived from r for the connection's target
// (and method, with PerMethod); see the package documentation for how keys
// work. On failure the error is r's *retry.Error, whose chain holds the last
// attempt's status, so that status.Code and status.FromError report it; a
// call refused before any attempt (an open breaker, the rate limiter, the
// caller's context) reports codes.Unavailable, codes.Canceled or
// codes.DeadlineExceeded.
func UnaryClientInterceptor(r *retry.Retrier, opts ...Option) grpc.UnaryClientInterceptor {
	c := newConfig(r, opts)
	pool := &sync.Pool{}
	pool.New = func() any {
		u := &unaryCall{cfg: c}
		u.fn = u.attempt
		u.ownHeader = grpc.Header(&u.header)
		u.ownTrailer = grpc.Trailer(&u.trailer)
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
		rt := c.retrier(target, method)
		u := pool.Get().(*unaryCall)
		u.start(ctx, method, req, reply, cc, invoker, opts)
		err := rt.Run(ctx, u.fn)
		u.end()
		pool.Put(u)
		if err != nil {
			return final(err)
		}
		return nil
	}
}

// unaryCall is the state of one unary call. Calls take it from a pool, so
// that a call that succeeds at once allocates nothing of its own: fn, bound
// once, and the two call options that fetch the header and trailer of each
// attempt are made with it. grpc-go fills in those options before the
// invoker returns, and the call gives its state back only then.
type unaryCall struct {
	cfg *config
	fn  func(context.Context) error // attempt

	method  string
	req     any
	reply   any
	cc      *grpc.ClientConn
	invoker grpc.UnaryInvoker
	opts    []grpc.CallOption // the caller's, then ownHeader and ownTrailer when needed

	// Where each attempt's header and trailer arrive: header and trailer,
	// through ownHeader and ownTrailer, or the caller's own variables when
	// the caller asked for them with grpc.Header and grpc.Trailer.
	header, trailer       metadata.MD
	headerAt, trailerAt   *metadata.MD
	ownHeader, ownTrailer grpc.CallOption
}

// start prepares the call's attempts.
func (u *unaryCall) start(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts []grpc.CallOption) {
	u.method, u.req, u.reply, u.cc, u.invoker = method, req, reply, cc, invoker
	u.headerAt, u.trailerAt = nil, nil
	u.opts = append(u.opts[:0], opts...)
	for _, o := range opts {
		switch o := o.(type) {
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
	if u.headerAt == nil {
		u.headerAt = &u.header
		u.opts = append(u.opts, u.ownHeader)
	}
	if u.trailerAt == nil {
		u.trailerAt = &u.trailer
		u.opts = append(u.opts, u.ownTrailer)
	}
}

// end drops what the call referenced, before the state goes back to the
// pool.
func (u *unaryCall) end() {
	u.req, u.reply, u.cc, u.invoker = nil, nil, nil, nil
	clear(u.opts)
	u.opts = u.opts[:0]
	u.header, u.trailer, u.headerAt, u.trailerAt = nil, nil, nil, nil
}

// attempt runs one attempt of the call.
func (u *unaryCall) attempt(ctx context.Context) error {
	if n := retry.AttemptFrom(ctx); n > 1 {
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
	return u.cfg.classify(ctx, err, *u.headerAt != nil, *u.trailerAt)
}
