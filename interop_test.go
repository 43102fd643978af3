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
		{"success", nil, nil, 1, nil, Decision{}},
		{"retry with the policy's delay", nil, nil, 1, errFlaky, Decision{Retry: true, Delay: time.Second, Type: typeUnknown}},
		{"second retry doubles", nil, nil, 2, errFlaky, Decision{Retry: true, Delay: 2 * time.Second, Type: typeUnknown}},
		{"exhausted", nil, nil, 3, errFlaky, Decision{Reason: ReasonExhausted, Type: typeUnknown}},
		{"attempt below 1 is the first", nil, nil, 0, errFlaky, Decision{Retry: true, Delay: time.Second, Type: typeUnknown}},
		{"permanent", nil, nil, 1, Permanent(errFlaky), Decision{Reason: ReasonNonRetryable, Type: typeUnknown}},
		{"discard verdict", nil, nil, 1, Discard(errFlaky), Decision{Reason: ReasonDiscarded, Type: typeUnknown}},
		{"retryable verdict over a 404", nil, nil, 1, Retryable(&StatusError{StatusCode: 404}), Decision{Retry: true, Delay: time.Second, Type: "http.4xx.404"}},
		{"404 is not retried", nil, nil, 1, &StatusError{StatusCode: 404}, Decision{Reason: ReasonNonRetryable, Type: "http.4xx.404"}},
		{"policy pattern", []Option{WithPolicy(Policy{NonRetryableErrors: []string{"http.5xx.*"}})}, nil, 1,
			&StatusError{StatusCode: 503}, Decision{Reason: ReasonNonRetryable, Type: "http.5xx.503"}},
		{"server delay", nil, nil, 1, &StatusError{StatusCode: 429, RetryAfter: 7 * time.Second},
			Decision{Retry: true, Delay: 7 * time.Second, Type: "http.4xx.429"}},
		{"server delay over the maximum", []Option{WithMaxServerDelay(time.Second)}, nil, 1,
			After(errFlaky, 2*time.Second), Decision{Reason: ReasonDeadline, Type: typeUnknown}},
		{"wait past the deadline", nil, soon, 1, errFlaky, Decision{Reason: ReasonDeadline, Type: typeUnknown}},
		{"canceled", nil, canceled, 1, errFlaky, Decision{Reason: ReasonCanceled, Type: typeUnknown}},
		{"decider vetoes", []Option{WithDecider(stopDecider{})}, nil, 1, errFlaky, Decision{Reason: ReasonNonRetryable, Type: typeUnknown}},
		{"invalid configuration", []Option{WithPolicy(Policy{MaxAttempts: -1})}, nil, 1, errFlaky, Decision{Reason: ReasonFailed, Type: typeUnknown}},
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
	}{
		{"200 is final", nil, "GET", false, respond(200, ""), nil, true, "", false, 0},
		{"404 is final", nil, "GET", false, respond(404, ""), nil, true, "", false, 0},
		{"501 is final", nil, "POST", false, respond(501, ""), nil, true, "", false, 0},
		{"503 on GET", nil, "GET", false, respond(503, ""), nil, false, "http.5xx.503", false, 0},
		{"429 with Retry-After", nil, "GET", false, respond(429, "7"), nil, false, "http.4xx.429", false, 7 * time.Second},
		{"503 on POST", nil, "POST", false, respond(503, ""), nil, false, "http.5xx.503", true, 0},
		{"503 on POST with a key", nil, "POST", true, respond(503, ""), nil, false, "http.5xx.503", false, 0},
		{"503 on POST, all methods", []Option{WithHTTP(HTTP{AllMethods: true})}, "POST", false, respond(503, ""), nil, false, "http.5xx.503", false, 0},
		{"reset on PUT", nil, "PUT", false, nil, reset, false, typeConnectionReset, false, 0},
		{"reset on POST", nil, "POST", false, nil, reset, false, typeConnectionReset, true, 0},
		{"refused on POST: never sent", nil, "POST", false, nil, refused, false, typeConnectionRefused, false, 0},
		{"neither response nor error", nil, "GET", false, nil, nil, false, typeUnknown, false, 0},
		{"neither response nor error on POST", nil, "POST", false, nil, nil, false, typeUnknown, true, 0},
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
