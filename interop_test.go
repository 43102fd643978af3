package retry

import (
	"context"
	"errors"
	"net/http"
	"syscall"
	"testing"
	"time"
)

type stopDecider struct{}

func (stopDecider) ShouldRetry(int, error) bool { return false }
func (stopDecider) Delay(int) time.Duration     { return 0 }

func TestDecide(t *testing.T) {
	errFlaky := errors.New("flaky")
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	soon, cancelSoon := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelSoon()
	policy := WithPolicy(Policy{MaxAttempts: 3, InitialInterval: time.Second, Jitter: Jitter{Kind: JitterNone}})
	tests := []struct {
		name    string
		opts    []Option
		ctx     context.Context
		attempt int
		err     error
		want    Decision
	}{
		{name: "success", attempt: 1, want: Decision{}},
		{name: "retry with the policy's delay", attempt: 1, err: errFlaky, want: Decision{Retry: true, Delay: time.Second, Type: typeUnknown}},
		{name: "second retry doubles", attempt: 2, err: errFlaky, want: Decision{Retry: true, Delay: 2 * time.Second, Type: typeUnknown}},
		{name: "exhausted", attempt: 3, err: errFlaky, want: Decision{Reason: ReasonExhausted, Type: typeUnknown}},
		{name: "attempt below 1 is the first", err: errFlaky, want: Decision{Retry: true, Delay: time.Second, Type: typeUnknown}},
		{name: "permanent", attempt: 1, err: Permanent(errFlaky), want: Decision{Reason: ReasonNonRetryable, Type: typeUnknown}},
		{name: "discard verdict", attempt: 1, err: Discard(errFlaky), want: Decision{Reason: ReasonDiscarded, Type: typeUnknown}},
		{name: "retryable verdict over a 404", attempt: 1, err: Retryable(&StatusError{StatusCode: 404}), want: Decision{Retry: true, Delay: time.Second, Type: "http.4xx.404"}},
		{name: "404 is not retried", attempt: 1, err: &StatusError{StatusCode: 404}, want: Decision{Reason: ReasonNonRetryable, Type: "http.4xx.404"}},
		{name: "policy pattern", opts: []Option{WithPolicy(Policy{NonRetryableErrors: []string{"http.5xx.*"}})}, attempt: 1,
			err: &StatusError{StatusCode: 503}, want: Decision{Reason: ReasonNonRetryable, Type: "http.5xx.503"}},
		{name: "server delay", attempt: 1, err: &StatusError{StatusCode: 429, RetryAfter: 7 * time.Second},
			want: Decision{Retry: true, Delay: 7 * time.Second, Type: "http.4xx.429"}},
		{name: "server delay over the maximum", opts: []Option{WithMaxServerDelay(time.Second)}, attempt: 1,
			err: After(errFlaky, 2*time.Second), want: Decision{Reason: ReasonDeadline, Type: typeUnknown}},
		{name: "wait past the deadline", ctx: soon, attempt: 1, err: errFlaky, want: Decision{Reason: ReasonDeadline, Type: typeUnknown}},
		{name: "canceled", ctx: canceled, attempt: 1, err: errFlaky, want: Decision{Reason: ReasonCanceled, Type: typeUnknown}},
		{name: "decider vetoes", opts: []Option{WithDecider(stopDecider{})}, attempt: 1, err: errFlaky, want: Decision{Reason: ReasonNonRetryable, Type: typeUnknown}},
		{name: "invalid configuration", opts: []Option{WithPolicy(Policy{MaxAttempts: -1})}, attempt: 1, err: errFlaky, want: Decision{Reason: ReasonFailed, Type: typeUnknown}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			r := New(append([]Option{policy}, tt.opts...)...)
			if got := r.Decide(ctx, tt.attempt, 0, tt.err); got != tt.want {
				t.Errorf("Decide = %+v, want %+v", got, tt.want)
			}
			if s := r.Stats(); s.Failed != 0 || s.Retried != 0 {
				t.Errorf("Decide changed the counters: %+v", s)
			}
		})
	}
}

func TestHTTPFailure(t *testing.T) {
	reset := &netOpError{syscall.ECONNRESET}
	refused := &netOpError{syscall.ECONNREFUSED}
	respond := func(code int, retryAfter string) *http.Response {
		h := http.Header{}
		if retryAfter != "" {
			h.Set("Retry-After", retryAfter)
		}
		return &http.Response{StatusCode: code, Header: h, Body: http.NoBody}
	}
	tests := []struct {
		name      string
		opts      []Option
		method    string
		key       bool // Idempotency-Key header
		resp      *http.Response
		err       error
		wantNil   bool
		wantType  string
		wantPerm  bool
		wantAfter time.Duration
		wantText  string // the error's text, when set
	}{
		{name: "200 is final", method: "GET", resp: respond(200, ""), wantNil: true},
		{name: "404 is final", method: "GET", resp: respond(404, ""), wantNil: true},
		{name: "501 is final", method: "POST", resp: respond(501, ""), wantNil: true},
		{name: "503 on GET", method: "GET", resp: respond(503, ""), wantType: "http.5xx.503"},
		{name: "429 with Retry-After", method: "GET", resp: respond(429, "7"), wantType: "http.4xx.429", wantAfter: 7 * time.Second},
		{name: "503 on POST", method: "POST", resp: respond(503, ""), wantType: "http.5xx.503", wantPerm: true},
		{name: "503 on POST with a key", method: "POST", key: true, resp: respond(503, ""), wantType: "http.5xx.503"},
		{name: "503 on POST, all methods", opts: []Option{WithHTTP(HTTP{AllMethods: true})}, method: "POST", resp: respond(503, ""), wantType: "http.5xx.503"},
		{name: "reset on PUT", method: "PUT", err: reset, wantType: typeConnectionReset},
		{name: "reset on POST", method: "POST", err: reset, wantType: typeConnectionReset, wantPerm: true},
		{name: "refused on POST: never sent", method: "POST", err: refused, wantType: typeConnectionRefused},
		{name: "neither response nor error", method: "GET", wantType: typeUnknown, wantText: "retry: HTTPFailure: neither a response nor an error"},
		{name: "neither response nor error on POST", method: "POST", wantType: typeUnknown, wantPerm: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, "http://127.0.0.1/", nil)
			if tt.key {
				req.Header.Set("Idempotency-Key", "k")
			}
			f := New(tt.opts...).HTTPFailure(req, tt.resp, tt.err)
			if tt.wantNil {
				if f != nil {
					t.Fatalf("HTTPFailure = %v, want nil", f)
				}
				return
			}
			if tt.wantText != "" && f.Error() != tt.wantText {
				t.Errorf("HTTPFailure = %q, want %q", f, tt.wantText)
			}
			o := inspect(f)
			if o.typ != tt.wantType || o.permanent != tt.wantPerm || o.hint != tt.wantAfter {
				t.Errorf("HTTPFailure = %v: type %q permanent %v hint %v; want %q %v %v",
					f, o.typ, o.permanent, o.hint, tt.wantType, tt.wantPerm, tt.wantAfter)
			}
		})
	}
}

// netOpError is a transport error carrying errno, as net returns them.
type netOpError struct{ errno syscall.Errno }

func (e *netOpError) Error() string { return "dial tcp: " + e.errno.Error() }
func (e *netOpError) Unwrap() error { return e.errno }
