package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/steadyhq/retry/redact"
)

// Transport is an http.RoundTripper that retries requests under the same
// engine and options as Do. Build it with NewTransport; it is safe for
// concurrent use, and all its requests share one state (counters, dedup
// window, and whatever else its options hold). To read its counters, give
// NewTransport a *Retrier and read the Retrier's Stats.
//
// It keeps the RoundTripper contract: the caller's request is never modified;
// the final response is returned with a nil error whatever its status (a 503
// after the last attempt is a 503, body intact); the request body is closed
// exactly once.
//
// Every attempt from the second on, retries and hedges alike, carries its
// number in the AttemptHeader field ("Retry-Attempt: 2" on the first retry
// or hedge), so that the server can tell retries apart and shed them first;
// the first attempt carries none of its own, unless the request is made
// while serving a retry (WithInboundAttempt) or inside a retry of an
// enclosing call (a Transport inside Do's fn), when every attempt carries
// OutboundAttempt, so that the layers below do not retry it either. A
// Retry-Attempt the caller set goes out as is on an attempt that carries
// none of its own, and is replaced on the others.
//
// Only requests that are safe to repeat are retried: GET, HEAD, OPTIONS,
// TRACE, PUT and DELETE, and any request carrying an Idempotency-Key header.
// Other methods are retried only when the failure proves the request was never
// sent (connection refused, DNS failure, HTTP/2 refused stream or GOAWAY), or
// when HTTP.AllMethods is set (WithHTTP). An empty Idempotency-Key header counts as
// absent.
//
// Once a response is in hand, whatever stops the retry (the retry budget, an
// open breaker, the rate limiter, a wait that cannot fit the deadline,
// MaxElapsed or MaxServerDelay) returns that response with a nil error and
// its body intact: the retry is admitted or refused before the response is
// drained. A response whose Body is nil is treated as an empty body.
//
// The Transport reads the RateLimit response field of
// draft-ietf-httpapi-ratelimit-headers-11 (RateLimit: "default";r=0;t=17),
// on responses of any status; RateLimit-Policy is not read. Only a service
// limit whose available quota r is 0 and whose window t is positive does
// anything: it holds the request's key (HTTP.Key, by default the host) for
// t seconds. A retry of that request waits at least t, like a Retry-After;
// when both are sent it waits the longer, which honours Retry-After as the
// draft requires, and MaxServerDelay bounds it as it bounds Retry-After.
// Every later attempt on the key before the t seconds have passed, first
// attempts of other requests included, waits until they have if the wait
// fits the caller's deadline, MaxElapsed and MaxServerDelay; otherwise it
// is not sent, and the request stops at once with a *Error whose Reason is
// ReasonRateLimited and whose type is "ratelimit.remote" (a retry stopped
// so returns the response in hand instead). A key is held for at most
// MaxServerDelay, however far the reset: no request could wait longer, and
// a reset sent wrong (a timestamp where seconds were meant) cannot stop
// every request on the key for good; after that the next request goes
// out, and its answer holds the key again if the quota is still used up.
// At the reset every request held for it goes out at once: the Transport
// does not know the new window's quota (it does not read
// RateLimit-Policy), so more of them than the quota allows are refused
// by the server, and their answers hold the key again. A hedge is not
// started on a held key. A quota above 0 holds nothing and frees nothing; of several
// policies, the longest exhausted window counts; the partition key pk is
// checked for syntax and not used; a malformed field is ignored whole, as
// the draft requires. Keys are held per Transport, at most 1024 at once,
// on the Retrier's clock (WithClock). While no key is held, this costs a
// request one atomic load and a look-up of the field in each response.
//
// The zero Transport works like NewTransport(nil).
type Transport struct {
	base  http.RoundTripper
	cfg   config
	once  sync.Once // resolves the zero Transport's configuration
	pacer *pacer
	paced *config // cfg with first attempts paced too (see gated)
	// baseErr is the error of every request when base is a typed nil.
	baseErr error
}

// Defaults of the Transport's options.
const (
	defaultMaxReplayBytes = 1 << 20 // 1 MiB
	// drainLimit is how much of a response being retried is read so that its
	// connection can be reused; a longer body closes the connection instead.
	drainLimit = 4 << 10
)

// NewTransport returns a Transport that sends requests through base (nil means
// http.DefaultTransport) under opts. Options are resolved once; a *Retrier
// among them shares its state with the Transport. A typed nil base, such as
// a nil *http.Transport, makes every request fail at once with an error
// that says so, nothing sent.
func NewTransport(base http.RoundTripper, opts ...Option) *Transport {
	var baseErr error
	if isNil(base) {
		if base != nil {
			baseErr = fmt.Errorf("retry: NewTransport: base = nil: %s", typedNil(base))
		}
		base = http.DefaultTransport
	}
	t := &Transport{base: base, baseErr: baseErr}
	t.cfg.build(opts)
	t.pace()
	return t
}

// CloseIdleConnections closes the idle connections of the base transport, if
// it has that method; on a nil *Transport it does nothing.
func (t *Transport) CloseIdleConnections() {
	if t == nil {
		return
	}
	if c, ok := t.baseRT().(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// config returns the Transport's configuration, resolving the defaults once
// for a zero Transport.
func (t *Transport) config() *config {
	t.once.Do(func() {
		if t.cfg.state == nil {
			t.cfg.build(nil)
			t.pace()
		}
	})
	return &t.cfg
}

// invalid returns the error of every request when the Transport cannot
// send any: a typed nil base, or an invalid configuration.
func (t *Transport) invalid(cfg *config) error {
	if t.baseErr != nil {
		return t.baseErr
	}
	return cfg.err
}

// baseRT returns the base transport; nil means http.DefaultTransport.
func (t *Transport) baseRT() http.RoundTripper {
	if t.base == nil {
		return http.DefaultTransport
	}
	return t.base
}

// RoundTrip sends req, retrying it under the Transport's policy. It returns
// the last response with a nil error whatever its status, or, when no attempt
// produced a response, a *Error whose Err is the last transport error. A
// nil *Transport sends nothing: it closes the request's body and returns an
// error that says so.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t == nil || req == nil || req.URL == nil {
		if req != nil {
			closeBody(req)
		}
		if t == nil {
			return nil, errNilTransport
		}
		return nil, &requestInvalid{errNilRequest}
	}
	cfg := t.config()
	if bad := t.invalid(cfg); bad != nil {
		closeBody(req)
		return nil, bad
	}
	rt := roundTrip{t: t, req: req, key: t.key(req), idempotent: cfg.http.AllMethods || idempotent(req)}
	if cfg.http.IdempotencyKey && !hasIdempotencyKey(req.Header) {
		rt.idemKey = newIdempotencyKey()
		rt.idempotent = true
	}
	if rt.mayHedge() {
		return t.hedged(rt)
	}
	defer rt.finish()
	ctx := req.Context()
	c := call{cfg: t.gated(cfg), key: rt.key}
	drv := driver{verdict: rt.verdictOf, giveUp: rt.discard, describe: rt.describe, record: rt.record}
	err := c.run(ctx, &drv, func(actx context.Context) (bool, error) {
		var failure error
		var timedOut bool
		rt.held = nil
		rt.resp, rt.cancel, timedOut, rt.verdict, failure = rt.attempt(actx, c.attempt)
		if failure == nil {
			return false, nil
		}
		if b := rt.blocked(ctx, failure, c.attempt < cfg.policy.MaxAttempts); b != nil {
			failure = b
		}
		return timedOut, failure
	})
	return rt.answer(err)
}

// answer is RoundTrip's result once the loop has ended with err: the
// response in hand, whether a success or a stop decided with it in hand,
// or else the response held from a retry that was then refused, or err.
func (rt *roundTrip) answer(err error) (*http.Response, error) {
	if rt.resp != nil {
		return deliver(rt.resp, rt.cancel), nil
	}
	release(rt.cancel)
	return heldOr(rt.held, err)
}

// attempt sends attempt n of the request on actx, a child of the caller's
// context, and returns the response, the release of the attempt's context,
// whether the attempt's own timeout cut it off, what it means to a circuit
// breaker, and its failure (nil when the response is final). Plain and
// hedged requests alike send their attempts through it.
func (rt *roundTrip) attempt(actx context.Context, n int) (resp *http.Response, cancel context.CancelFunc, timedOut bool, verdict, failure error) {
	cfg := rt.t.config()
	actx, cancel, timer := rt.attemptContext(actx)
	resp, err := rt.send(actx, n)
	if timer != nil && !timer.Stop() && err == nil {
		// The timeout struck as the headers arrived: the body is cut.
		// The timer's cancel may still be on its way: wait for it.
		resp.Body.Close()
		<-actx.Done()
		resp, err = nil, context.Cause(actx)
	}
	timedOut = err != nil && context.Cause(actx) == errAttemptTimeout
	if timedOut && !errors.Is(err, errAttemptTimeout) {
		// HTTP/1 reports the attempt's context ending as its cause, HTTP/2
		// as context.Canceled: the attempt's own timeout either way, never
		// a cancel by the caller.
		err = errAttemptTimeout
	}
	failure = err
	if err == nil {
		failure = cfg.statusFailure(resp)
		rt.learnRateLimit(cfg, resp)
	}
	if cfg.learns {
		verdict = httpVerdict(rt.req.Context(), cfg, resp, err, timedOut)
	}
	return resp, cancel, timedOut, verdict, failure
}

// verdictOf is what the attempt in hand means to the gates.
func (rt *roundTrip) verdictOf() error { return rt.verdict }

// describe returns the request's method and its URL without credentials,
// for events and records.
func (rt *roundTrip) describe() (method, url string) {
	if rt.url == "" {
		rt.method, rt.url = methodOf(rt.req), redact.SanitizeURL(rt.req.URL)
	}
	return rt.method, rt.url
}

// httpVerdict is what an attempt's outcome means to a circuit breaker:
// server errors and requests to slow down are failures, other 4xx the
// caller's own errors.
func httpVerdict(ctx context.Context, cfg *config, resp *http.Response, err error, timedOut bool) error {
	if err != nil {
		return cfg.breakerOutcome(ctx, err, timedOut)
	}
	switch code := resp.StatusCode; {
	case serverFailure(code):
		return errBreakerFailure
	case code >= 400:
		return errBreakerExcluded
	}
	return nil
}

// statusFailure returns the failure a response stands for: nil when its
// status is final, a *StatusError with its Retry-After when it is retried.
func (c *config) statusFailure(resp *http.Response) error {
	if !retryableStatus(resp.StatusCode) {
		return nil
	}
	return &StatusError{StatusCode: resp.StatusCode, RetryAfter: serverWait(resp.Header, c.now())}
}

// serverFailure reports whether a status counts as a failure for a circuit
// breaker: the server's errors and its requests to slow down.
func serverFailure(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests ||
		code >= 500 && code != http.StatusNotImplemented && code != http.StatusHTTPVersionNotSupported
}

func (t *Transport) key(req *http.Request) string {
	switch {
	case t.cfg.http.Key != nil:
		return t.cfg.http.Key(req)
	case t.cfg.key != "":
		return t.cfg.key
	}
	return req.URL.Host
}

func methodOf(req *http.Request) string {
	if req.Method == "" {
		return http.MethodGet
	}
	return req.Method
}

func release(cancel context.CancelFunc) {
	if cancel != nil {
		cancel()
	}
}

// roundTrip is the state of one logical request across its attempts.
type roundTrip struct {
	t          *Transport
	req        *http.Request
	key        string // the request's key (HTTP.Key)
	idempotent bool
	idemKey    string
	body       *replayBody   // the body source when req has a body and no GetBody
	next       io.ReadCloser // the next attempt's body, from GetBody
	bodyOwned  bool          // the caller's body was handed on; someone else closes it

	method string // for events and records, set when first asked
	url    string // the request's URL without credentials, likewise

	resp    *http.Response     // the response of the attempt in hand
	cancel  context.CancelFunc // releases that attempt's context
	verdict error              // what that attempt means to the gates
	held    *http.Response     // a response given up for a retry, kept in memory
}

// discard gives up the response in hand once a retry is decided, after its
// admission: it is drained so that its connection is reused, and kept, when
// its body fits the drain limit, for a refusal that comes only after the
// wait (a breaker opened meanwhile by other calls).
func (rt *roundTrip) discard() {
	if rt.resp != nil {
		rt.held, rt.resp = hold(rt.resp), nil
	}
	release(rt.cancel)
	rt.cancel = nil
}

// attemptContext returns the context of one attempt. A per-attempt timeout
// bounds the wait for the response headers only: its timer is stopped once
// they arrive, and the context is canceled when the response body is closed,
// so a timeout never cuts short the body of the response returned.
func (rt *roundTrip) attemptContext(ctx context.Context) (context.Context, context.CancelFunc, *time.Timer) {
	d := rt.t.config().attemptTimeout
	if d <= 0 {
		return ctx, nil, nil
	}
	actx, cancel := context.WithCancelCause(ctx)
	timer := time.AfterFunc(d, func() { cancel(errAttemptTimeout) })
	return actx, func() { cancel(context.Canceled) }, timer
}

// errAttemptTimeout is the cause of an attempt's context when its time ran out.
var errAttemptTimeout = fmt.Errorf("retry: attempt timed out: %w", context.DeadlineExceeded)

// send runs one attempt with the attempt's context.
func (rt *roundTrip) send(ctx context.Context, n int) (*http.Response, error) {
	out, err := rt.request(ctx, n)
	if err != nil {
		return nil, err
	}
	resp, err := rt.t.baseRT().RoundTrip(out)
	if err != nil {
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		return nil, err
	}
	if resp == nil {
		return nil, errNoResponse
	}
	if resp.Body == nil {
		resp.Body = http.NoBody // stub transports and middlewares return nil bodies
	}
	return resp, nil
}

var errNoResponse = errors.New("retry: base transport returned neither a response nor an error")

// blocked returns the error that stops a retry the request itself forbids
// (a method that is not idempotent, a body that cannot be replayed), or nil.
// When more attempts may follow it also gets the next body from GetBody, so
// that a GetBody failure stops the call with the response in hand rather
// than after it was discarded.
func (rt *roundTrip) blocked(ctx context.Context, failure error, more bool) error {
	req := rt.req
	if !mayRepeat(rt.idempotent, failure) {
		return Permanent(failure)
	}
	if !more {
		return nil
	}
	if rt.body != nil {
		// The base may still be sending this attempt's body (net/http
		// writes it while the response comes back): see how it ends
		// before promising a retry, unless its length is known to fit.
		fits := req.ContentLength > 0 && req.ContentLength <= rt.t.maxReplay()
		if !fits {
			rt.body.settle(ctx, bodySettleLimit)
		}
		if !rt.body.replayable(fits) {
			return &notReplayable{failure}
		}
	}
	if req.GetBody != nil && req.Body != nil && req.Body != http.NoBody && rt.next == nil {
		b, err := req.GetBody()
		if err != nil {
			return &notReplayable{errors.Join(failure, fmt.Errorf("GetBody: %w", err))}
		}
		rt.next = b
	}
	return nil
}

// bodySettleLimit bounds the wait for the base transport to finish with a
// request body of unknown length before deciding whether it can be sent
// again; a body still streaming then is not retried.
const bodySettleLimit = time.Second

// finish closes the caller's body if no attempt took it over, and releases
// the replay buffer.
func (rt *roundTrip) finish() {
	if !rt.bodyOwned {
		closeBody(rt.req)
	}
	if rt.next != nil {
		rt.next.Close()
	}
	if rt.body != nil {
		rt.body.release()
	}
}
