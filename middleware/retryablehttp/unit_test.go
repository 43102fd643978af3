package retryablehttp_test

import (
	"context"
	"errors"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/middleware/retryablehttp"
)

func response(code int, retryAfter string) *http.Response {
	h := http.Header{}
	if retryAfter != "" {
		h.Set("Retry-After", retryAfter)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
	return &http.Response{StatusCode: code, Header: h, Body: http.NoBody, Request: req}
}

func TestBackoff(t *testing.T) {
	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 4, InitialInterval: time.Second, Jitter: retry.Jitter{Kind: retry.JitterNone}}))
	backoff := retryablehttp.Backoff(r)
	tests := []struct {
		name       string
		attemptNum int
		resp       *http.Response
		want       time.Duration
	}{
		{name: "first retry, no response", want: time.Second},
		{name: "second retry, no response", attemptNum: 1, want: 2 * time.Second},
		{name: "third retry after a 503", attemptNum: 2, resp: response(503, ""), want: 4 * time.Second},
		{name: "Retry-After wins", resp: response(429, "7"), want: 7 * time.Second},
		{name: "invalid Retry-After: the policy", attemptNum: 1, resp: response(503, "soon"), want: 2 * time.Second},
		{name: "past the attempts: the last wait", attemptNum: 9, want: 4 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// min and max are retryablehttp's; the policy's intervals apply.
			if got := backoff(time.Millisecond, time.Millisecond, tt.attemptNum, tt.resp); got != tt.want {
				t.Errorf("Backoff = %v, want %v", got, tt.want)
			}
		})
	}
}

// resetError is a connection reset as net returns it.
var resetError = &netOpError{syscall.ECONNRESET}

type netOpError struct{ errno syscall.Errno }

func (e *netOpError) Error() string { return "read tcp: " + e.errno.Error() }
func (e *netOpError) Unwrap() error { return e.errno }

func TestCheckRetry(t *testing.T) {
	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond}))
	check := retryablehttp.CheckRetry(r)
	get, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
	// A transport error as the wrapper passes it on, naming its request.
	tagged := func(req *http.Request) error {
		_, err := retryablehttp.Transport(failing{}).RoundTrip(req)
		return err
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		resp *http.Response
		err  error
		want bool
	}{
		{name: "200", resp: response(200, "")},
		{name: "503", resp: response(503, ""), want: true},
		{name: "400", resp: response(400, "")},
		{name: "reset of a GET, named by the wrapper", err: tagged(get), want: true},
		{name: "reset without the wrapper: taken as unsafe", err: resetError},
		{name: "canceled context", ctx: canceled, resp: response(503, "")},
		{name: "Discard verdict", err: retry.Discard(errors.New("x"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			got, err := check(ctx, tt.resp, tt.err)
			if got != tt.want || err != nil {
				t.Errorf("CheckRetry = (%v, %v), want (%v, nil)", got, err, tt.want)
			}
		})
	}
}

type failing struct{}

func (failing) RoundTrip(*http.Request) (*http.Response, error) { return nil, resetError }

func TestTransportKeepsTheError(t *testing.T) {
	tr := retryablehttp.Transport(failing{})
	if retryablehttp.Transport(tr) != tr {
		t.Error("Transport wrapped itself twice")
	}
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
	_, err := tr.RoundTrip(req)
	if !errors.Is(err, syscall.ECONNRESET) || err.Error() != resetError.Error() || retry.TypeOf(err) != "net.connection_reset" {
		t.Errorf("wrapped error = %v (type %s), want the base's", err, retry.TypeOf(err))
	}
}
