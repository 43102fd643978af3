package grpc

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"

	"github.com/steadyhq/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

var (
	errNilInvoker  error = &configError{errors.New("retry: grpc: invoker is nil")}
	errNilStreamer error = &configError{errors.New("retry: grpc: streamer is nil")}
	errNilDesc     error = &configError{errors.New("retry: grpc: stream description is nil")}
	errNoStream    error = &configError{errors.New("retry: grpc: streamer returned neither a stream nor an error")}
)

// StreamClientInterceptor returns an interceptor that runs the start of every
// stream through r's engine, until the stream is committed: once the
// server's response headers or a message have arrived, the stream is the
// caller's and its errors pass through untouched.
//
// For a server-streaming RPC (and any RPC whose client sends one message)
// the start covers the phase before the first response: the request message
// and CloseSend are kept, and the stream is opened, sent the request and
// awaited when the caller first calls RecvMsg or Header. A failure before
// the server's response headers (UNAVAILABLE from a server that is going
// away, a pushback) opens a new stream and sends the request again. Errors
// of the opening therefore show on RecvMsg, not on NewStream. A caller that
// calls RecvMsg before sending its request gets the client-streaming
// treatment.
//
// For client-streaming and bidirectional RPCs, only the opening of the
// stream (NewStream) is retried: the messages the caller sends afterwards
// are not kept.
//
// Statuses, codes, pushback, PreviousAttemptsKey, keys and the error of a
// call that fails are as for UnaryClientInterceptor. When a server stream's
// start fails, Trailer gives the trailer of its last attempt, as grpc-go's
// stream does after RecvMsg's error. A per-attempt timeout
// (retry.WithAttemptTimeout) bounds the start only, never the committed
// stream. A nil r means a Retrier of its own (retry.New()).
func StreamClientInterceptor(r *retry.Retrier, opts ...Option) grpc.StreamClientInterceptor {
	c := newConfig(r, opts)
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		switch {
		case c.err != nil:
			return nil, c.err
		case streamer == nil:
			return nil, errNilStreamer
		case desc == nil:
			return nil, errNilDesc
		}
		var target string
		if cc != nil {
			target = cc.Target()
		}
		s := &streamCall{r: c.entry(target, method).r, codes: c.codes, ctx: ctx, desc: desc, cc: cc, method: method, streamer: streamer, opts: opts}
		var call callConfig
		if call.scan(opts); call.set {
			if err := call.err(); err != nil {
				return nil, &configError{err}
			}
			if call.codes != nil {
				s.codes = call.codes
			}
			if s.r = call.retrier(s.r); s.r.Err() != nil {
				return nil, &configError{s.r.Err()}
			}
		}
		if desc.ClientStreams {
			cs, err := retry.Do(ctx, s.open, s.r)
			if err != nil {
				return nil, final(ctx, err)
			}
			return cs, nil
		}
		return &replayStream{call: s, ready: make(chan struct{})}, nil
	}
}

// streamCall is what the attempts of one stream need.
type streamCall struct {
	r        *retry.Retrier
	codes    map[codes.Code]bool // the retryable codes, nil for UNAVAILABLE alone
	ctx      context.Context     // the caller's
	desc     *grpc.StreamDesc
	cc       *grpc.ClientConn
	method   string
	streamer grpc.Streamer
	opts     []grpc.CallOption

	// For replay: the request the caller sent, whether it called
	// CloseSend, and the message its first RecvMsg receives into (nil
	// when the start came from Header).
	msg    any
	closed bool
	recvTo any

	// failed is the latest attempt's stream that failed, nil when it
	// opened none: when the call fails, its Trailer is the call's, as
	// grpc-go gives a failed stream's trailer.
	failed grpc.ClientStream
}

// open is the attempt of a stream whose start is its opening alone.
func (s *streamCall) open(actx context.Context) (grpc.ClientStream, error) {
	cs, _, err := s.attempt(actx, false)
	return cs, err
}

// attempt opens a stream and, with replay, sends it the request and waits
// for the server's response headers. received says the first message is in
// s.recvTo already.
//
// The stream outlives the attempt, whose context the engine cancels when
// the attempt returns if it has a timeout of its own: the stream runs on the
// caller's context, and the attempt's context cancels it only until the
// attempt returns.
func (s *streamCall) attempt(actx context.Context, replay bool) (cs grpc.ClientStream, received bool, err error) {
	ctx := s.ctx
	if n := retry.OutboundAttempt(actx); n > 1 {
		ctx = metadata.AppendToOutgoingContext(ctx, PreviousAttemptsKey, strconv.Itoa(n-1))
	}
	var cancel context.CancelFunc
	var stop func() bool
	if actx.Done() != s.ctx.Done() {
		ctx, cancel = context.WithCancel(ctx)
		stop = context.AfterFunc(actx, cancel)
	}
	cs, err = s.streamer(ctx, s.desc, s.cc, s.method, s.opts...)
	if err == nil && cs == nil {
		err = retry.Permanent(errNoStream)
	}
	committed := false
	if err == nil && replay {
		committed, received, err = s.replay(cs)
	}
	if stop != nil && !stop() && err == nil {
		// The attempt's context ended as the stream started, and canceled it.
		err = actx.Err()
		if committed {
			err = retry.Permanent(err)
		}
	}
	if err != nil {
		if cancel != nil {
			cancel()
		}
		var trailer metadata.MD
		if cs != nil {
			trailer = cs.Trailer()
		}
		s.failed = cs
		return nil, false, classify(actx, err, committed, trailer, s.codes)
	}
	if cancel != nil {
		context.AfterFunc(cs.Context(), cancel) // once the stream ends
	}
	return cs, received, nil
}

// replay sends the caller's request on cs and waits for the response
// headers. It reports whether they came, and received when the first message
// came in their stead (a stream whose Header does not tell). A stream that
// ended before any header (a trailers-only response) fails with its status,
// or succeeds when that status is OK.
func (s *streamCall) replay(cs grpc.ClientStream) (committed, received bool, err error) {
	// io.EOF: the stream has ended, and RecvMsg below tells how.
	if err := cs.SendMsg(s.msg); err != nil && err != io.EOF {
		return false, false, err
	}
	if s.closed {
		if err := cs.CloseSend(); err != nil && err != io.EOF {
			return false, false, err
		}
	}
	if md, _ := cs.Header(); md != nil {
		return true, false, nil
	}
	m := s.recvTo
	if m == nil {
		m = new(emptypb.Empty)
	}
	switch err := cs.RecvMsg(m); err {
	case nil:
		return true, s.recvTo != nil, nil
	case io.EOF:
		return true, false, nil // the stream ended with OK: RecvMsg says so again
	default:
		return false, false, err
	}
}

// replayStream is the stream returned for an RPC whose client sends one
// message. It keeps the request until the caller first waits for the
// response, then starts the stream through the engine, and afterwards
// passes every call to the started stream.
type replayStream struct {
	call *streamCall

	mu      sync.Mutex
	sent    bool // the caller sent its request
	started bool

	ready    chan struct{}     // closed once the start is over
	cs       grpc.ClientStream // after ready: the started stream, nil if the call failed
	err      error             // after ready: the call's error
	received bool              // the first RecvMsg's message arrived during the start
}

// start starts the stream once, from the first RecvMsg (recvTo is its
// message) or Header, and returns the started stream, or the call's error.
func (s *replayStream) start(recvTo any) (cs grpc.ClientStream, received bool, err error) {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		<-s.ready
		return s.cs, false, s.err
	}
	s.started = true
	replay := s.sent
	s.mu.Unlock()

	c := s.call
	c.recvTo = recvTo
	fn := c.open
	if replay {
		fn = func(actx context.Context) (grpc.ClientStream, error) {
			cs, received, err := c.attempt(actx, true)
			s.received = received
			return cs, err
		}
	}
	c.failed = nil
	s.cs, s.err = retry.Do(c.ctx, fn, c.r)
	if s.err != nil {
		s.cs, s.err = nil, final(c.ctx, s.err)
	}
	c.msg, c.recvTo = nil, nil
	close(s.ready)
	return s.cs, s.received, s.err
}

// SendMsg keeps the request until the stream starts, and passes later
// messages on; a second request is refused as grpc-go refuses it.
func (s *replayStream) SendMsg(m any) error {
	s.mu.Lock()
	if !s.started {
		defer s.mu.Unlock()
		if s.sent || s.call.closed {
			return status.Error(codes.Internal, "SendMsg called after CloseSend")
		}
		s.call.msg, s.sent = m, true
		return nil
	}
	s.mu.Unlock()
	<-s.ready
	if s.cs == nil {
		return io.EOF // the call failed: RecvMsg returns its error
	}
	return s.cs.SendMsg(m)
}

// CloseSend notes that the caller has sent everything, until the stream
// starts; it always returns nil, as grpc-go's does.
func (s *replayStream) CloseSend() error {
	s.mu.Lock()
	if !s.started {
		s.call.closed = true
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	<-s.ready
	if s.cs == nil {
		return nil
	}
	return s.cs.CloseSend()
}

// RecvMsg starts the stream if it has not started, then receives m.
func (s *replayStream) RecvMsg(m any) error {
	cs, received, err := s.start(m)
	switch {
	case err != nil:
		return err
	case received:
		return nil
	}
	return cs.RecvMsg(m)
}

// Header starts the stream if it has not started, then returns its header
// metadata. When the call failed it returns nil and nil, as grpc-go does:
// RecvMsg returns the error.
func (s *replayStream) Header() (metadata.MD, error) {
	cs, _, err := s.start(nil)
	if err != nil {
		return nil, nil
	}
	return cs.Header()
}

// Trailer returns the started stream's trailer metadata. When the call
// failed it returns the trailer of the last attempt's stream, as grpc-go
// returns a failed stream's; nil before the start is over, or when the
// last attempt opened no stream.
func (s *replayStream) Trailer() metadata.MD {
	select {
	case <-s.ready:
	default:
		return nil
	}
	cs := s.cs
	if cs == nil {
		cs = s.call.failed
	}
	if cs == nil {
		return nil
	}
	return cs.Trailer()
}

// Context returns the started stream's context, or the caller's before the
// stream started or when the call failed.
func (s *replayStream) Context() context.Context {
	if cs := s.startedStream(); cs != nil {
		return cs.Context()
	}
	return s.call.ctx
}

// startedStream returns the started stream, or nil when the start is not
// over or failed.
func (s *replayStream) startedStream() grpc.ClientStream {
	select {
	case <-s.ready:
		return s.cs
	default:
		return nil
	}
}
