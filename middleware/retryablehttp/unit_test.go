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
		{"first retry, no response", 0, nil, time.Second},
		{"second retry, no response", 1, nil, 2 * time.Second},
		{"third retry after a 503", 2, response(503, ""), 4 * time.Second},
		{"Retry-After wins", 0, response(429, "7"), 7 * time.Second},
		{"invalid Retry-After: the policy", 1, response(503, "soon"), 2 * time.Second},
		{"past the attempts: the last wait", 9, nil, 4 * time.Second},
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
		{"200", nil, response(200, ""), nil, false},
		{"503", nil, response(503, ""), nil, true},
		{"400", nil, response(400, ""), nil, false},
		{"reset of a GET, named by the wrapper", nil, nil, tagged(get), true},
		{"reset without the wrapper: taken as unsafe", nil, nil, resetError, false},
		{"canceled context", canceled, response(503, ""), nil, false},
		{"Discard verdict", nil, nil, retry.Discard(errors.New("x")), false},
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
