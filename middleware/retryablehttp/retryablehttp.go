package retryablehttp

import (
	"context"
	"errors"
	"net/http"
	"time"

	hcretry "github.com/hashicorp/go-retryablehttp"
	"github.com/steadyhq/retry"
)

// Configure makes c decide as r: RetryMax is r's MaxAttempts minus one,
// CheckRetry, Backoff and ErrorHandler are this package's for r, and c's
// HTTP client is replaced by a copy whose transport is wrapped by Transport
// (other users of the original client are unaffected). A nil r is the
// default Retrier. Configure does not change r.
func Configure(c *hcretry.Client, r *retry.Retrier) {
	c.RetryMax = max(r.Policy().MaxAttempts-1, 0)
	c.CheckRetry = CheckRetry(r)
	c.Backoff = Backoff(r)
	c.ErrorHandler = ErrorHandler(r)
	var hc http.Client
	if c.HTTPClient != nil {
		hc = *c.HTTPClient
	}
	hc.Transport = Transport(hc.Transport)
	c.HTTPClient = &hc
}

// CheckRetry returns a retryablehttp.CheckRetry that decides as r's
// Transport does after a first attempt: a response whose status is final
// ends the call, a request that is not safe to repeat is retried only when
// the failure proves it was never sent, and the failure's type, verdicts,
// Retry-After and the context's deadline decide the rest. Without the
// Transport wrapper, a failure without a response is taken to come from a
// request that is not safe to repeat.
func CheckRetry(r *retry.Retrier) hcretry.CheckRetry {
	return func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		failure := r.HTTPFailure(requestOf(resp, err), resp, err)
		if failure == nil {
			return false, nil
		}
		return r.Decide(ctx, 1, 0, failure).Retry, nil
	}
}

// Backoff returns a retryablehttp.Backoff that waits as r does before retry
// attemptNum+1: the Decider's delay, else the response's Retry-After, else
// the policy's backoff with jitter. The client's RetryWaitMin and
// RetryWaitMax are ignored; the policy's intervals apply.
func Backoff(r *retry.Retrier) hcretry.Backoff {
	return func(_, _ time.Duration, attemptNum int, resp *http.Response) time.Duration {
		var failure error = errNoResponse
		if resp != nil {
			if f := r.HTTPFailure(nil, resp, nil); f != nil {
				failure = f
			}
		}
		// Never the last attempt: the wait is for the one that follows.
		n := min(attemptNum+1, max(r.Policy().MaxAttempts-1, 1))
		return r.Decide(context.Background(), n, 0, failure).Delay
	}
}

// errNoResponse stands for a failure without a response when Backoff
// computes its wait: its type is TypeUnknown, which the policy retries.
var errNoResponse = errors.New("retryablehttp: no response")

// ErrorHandler returns a retryablehttp.ErrorHandler that ends a call as r's
// Transport does: the last response is returned with a nil error whatever
// its status (its body open, for the caller to close); without a response,
// the error is a *retry.Error carrying the attempts, the Reason and the last
// error.
func ErrorHandler(r *retry.Retrier) hcretry.ErrorHandler {
	return func(resp *http.Response, err error, numTries int) (*http.Response, error) {
		if resp != nil {
			return resp, nil
		}
		req := requestOf(nil, err)
		ctx := context.Background()
		if req != nil {
			ctx = req.Context()
		}
		d := r.Decide(ctx, numTries, 0, r.HTTPFailure(req, nil, err))
		reason := d.Reason
		if reason == "" {
			reason = retry.ReasonExhausted // RetryMax ran out first
		}
		return nil, &retry.Error{Attempts: numTries, Reason: reason, Err: err}
	}
}

// unknownRequest stands for the request of a failure that does not name it:
// a POST, so that only failures that prove it was never sent are retried.
var unknownRequest = &http.Request{Method: http.MethodPost, Header: http.Header{}}

// requestOf returns the request of an attempt: the response's, or the one
// Transport attached to the error, or unknownRequest.
func requestOf(resp *http.Response, err error) *http.Request {
	if resp != nil && resp.Request != nil {
		return resp.Request
	}
	var ae *attemptError
	if errors.As(err, &ae) {
		return ae.req
	}
	return unknownRequest
}

// Transport wraps base (nil means http.DefaultTransport) so that its errors
// name their request, which the functions of this package need to apply
// the idempotency rule to a failure without a response. The error's text,
// errors.Is, errors.As and retry.TypeOf are those of base's error.
func Transport(base http.RoundTripper) http.RoundTripper {
	if t, ok := base.(*transport); ok {
		return t
	}
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{base: base}
}

type transport struct{ base http.RoundTripper }

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, &attemptError{err: err, req: req}
	}
	return resp, nil
}

// CloseIdleConnections closes the idle connections of the base transport.
func (t *transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// attemptError is a transport error with its request.
type attemptError struct {
	err error
	req *http.Request
}

func (e *attemptError) Error() string { return e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }
