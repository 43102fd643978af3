package retry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// What the Transport sends: its own settings (HTTP), and each attempt's
// request, built without touching the caller's, with its body replayed.

// HTTP holds the Transport's own settings. Zero fields take the defaults
// given beside them.
type HTTP struct {
	// MaxReplayBytes bounds how much of a request body without GetBody the
	// Transport keeps to send it again; a longer body is streamed once and
	// the request is not retried after it was read (type
	// body.not_replayable). Default 1 MiB; negative keeps nothing.
	MaxReplayBytes int64
	// IdempotencyKey makes the Transport add an Idempotency-Key header to
	// requests that have none: one random key per logical request, the
	// same on every attempt, which also makes the request retryable.
	IdempotencyKey bool
	// AllMethods makes the Transport retry every method, POST and PATCH
	// included, as if each request were idempotent.
	AllMethods bool
	// Key names the dependency a request targets, for events, dead-letter
	// records, and breakers, limiters and budgets kept per key. Default:
	// the request's host.
	Key func(*http.Request) string
	// RecordBody makes the Transport's dead-letter record keep the
	// request's body (RequestRecord.Body) with the values of secret keys
	// replaced (redact.SanitizeBody), so that it can be sent again. By
	// default a record keeps no body: a body may carry a credential
	// (client_secret=..., a password field) in no shape the sanitizer
	// knows.
	RecordBody bool
	// RecordHeaders names headers the dead-letter record keeps beyond
	// those known to carry no credential (see redact.SafeHeader), their
	// values sanitized, such as a tenant header a replay needs.
	RecordHeaders []string
}

// WithHTTP sets the Transport's own settings, in place of those before it.
// Do and Run ignore them; Retrier.HTTPFailure reads AllMethods. It refuses
// nothing, for every value of every field has a meaning: a negative
// MaxReplayBytes keeps nothing (as a negative Budget.Ratio or
// DeadLetters.DedupWindow means none), math.MaxInt64 keeps any body, and a
// nil Key keys requests by host.
func WithHTTP(h HTTP) Option {
	return optionFunc(func(c *config) { c.http = h })
}

var (
	errNilRequest   = errors.New("retry: nil request or request URL")
	errNilTransport = errors.New("retry: RoundTrip on a nil *retry.Transport (build one with NewTransport)")
)

// requestInvalid is a request the Transport cannot send.
type requestInvalid struct{ err error }

func (e *requestInvalid) Error() string     { return e.err.Error() }
func (e *requestInvalid) Unwrap() error     { return e.err }
func (e *requestInvalid) ErrorType() string { return typeRequestInvalid }

// notReplayable stops a retry whose request body cannot be sent again.
type notReplayable struct{ err error }

func (e *notReplayable) Error() string {
	return "retry: request body was read and cannot be replayed: " + e.err.Error()
}
func (e *notReplayable) Unwrap() error     { return e.err }
func (e *notReplayable) ErrorType() string { return typeBodyNotReplayable }

// request builds the request of attempt n without touching the caller's.
// Its header carries the attempt's number on the wire (AttemptHeader: see
// OutboundAttempt), in place of any the caller set, when that is 2 or more.
func (rt *roundTrip) request(ctx context.Context, n int) (*http.Request, error) {
	req := rt.req
	hasBody := req.Body != nil && req.Body != http.NoBody
	wire := max(n, OutboundAttempt(ctx)) // ctx is attempt n's, or the caller's for the first
	if !hasBody && rt.idemKey == "" && wire == 1 && ctx == req.Context() {
		return req, nil // nothing to change: the caller's own request
	}
	out := req.WithContext(ctx) // a shallow copy
	if rt.idemKey != "" || wire > 1 {
		out.Header = req.Header.Clone()
		if out.Header == nil {
			out.Header = make(http.Header, 2)
		}
		if rt.idemKey != "" {
			out.Header.Set("Idempotency-Key", rt.idemKey)
		}
		if wire > 1 {
			out.Header.Set(AttemptHeader, strconv.Itoa(wire))
		}
	}
	if !hasBody {
		return out, nil
	}
	switch {
	case req.GetBody != nil && n == 1:
		rt.bodyOwned = true // the first attempt sends the caller's own body
		out.Body = req.Body
	case req.GetBody != nil:
		b := rt.next
		if b != nil {
			rt.next = nil
		} else {
			var err error
			if b, err = req.GetBody(); err != nil {
				return nil, &notReplayable{fmt.Errorf("GetBody: %w", err)}
			}
		}
		out.Body = b
	default:
		if rt.body == nil {
			rt.bodyOwned = true
			rt.body = newReplayBody(req.Body, rt.t.maxReplay())
		}
		b, err := rt.body.attempt(ctx)
		if err != nil {
			return nil, err
		}
		out.Body = b
	}
	return out, nil
}

func (t *Transport) maxReplay() int64 {
	if n := t.cfg.http.MaxReplayBytes; n != 0 {
		return max(n, 0)
	}
	return defaultMaxReplayBytes
}
