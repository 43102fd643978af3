package retry_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/steadyhq/retry"
)

// nilBodies is a middleware in front of a real transport that hands on each
// response with a nil Body, as some stub transports and middlewares do.
type nilBodies struct{ base http.RoundTripper }

func (n nilBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := n.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	resp.Body = nil
	return resp, nil
}

// TestTransportNilBody: a response whose Body is nil is an empty body
// everywhere: when it is retried, under a per-attempt timeout, and when it
// is returned. Nothing panics, on the caller's goroutine or any other.
func TestTransportNilBody(t *testing.T) {
	tests := []struct {
		name   string
		steps  []step
		opts   []retry.Option
		status int
	}{
		{name: "a retried 503, then 200", steps: []step{{status: 503}, {status: 200}}, opts: []retry.Option{fast(3)}, status: 200},
		{name: "a final 503", steps: []step{{status: 503}}, opts: []retry.Option{fast(2)}, status: 503},
		{name: "under an attempt timeout", steps: []step{{status: 503}, {status: 200}},
			opts: []retry.Option{fast(3), retry.WithAttemptTimeout(time.Second)}, status: 200},
		{name: "a final 503 under an attempt timeout", steps: []step{{status: 503}},
			opts: []retry.Option{fast(2), retry.WithAttemptTimeout(time.Second)}, status: 503},
		{name: "a 404, not retried", steps: []step{{status: 404}}, opts: []retry.Option{fast(3)}, status: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newScripted(t, tt.steps...)
			client := &http.Client{Transport: retry.NewTransport(nilBodies{newBase(t)}, tt.opts...)}
			resp, err := client.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status || resp.Body == nil {
				t.Fatalf("status %d, body %v; want %d with a body", resp.StatusCode, resp.Body, tt.status)
			}
			if b, err := io.ReadAll(resp.Body); err != nil || len(b) != 0 {
				t.Errorf("body %q, %v; want empty", b, err)
			}
			if err := resp.Body.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	// The drain of a retried response used to close its body from a timer
	// 200 ms later: a panic there would end the test binary. Cleanup runs
	// once every subtest is done.
	t.Cleanup(func() { time.Sleep(250 * time.Millisecond) })
}

// TestTransportRefusalKeepsResponse: once a response is in hand, whatever
// stops the retry returns that response, status, headers and body intact,
// with a nil error.
func TestTransportRefusalKeepsResponse(t *testing.T) {
	busy := step{status: 503, header: map[string]string{"Retry-After": "1", "X-Upstream": "a"}, body: "upstream busy"}
	tests := []struct {
		name    string
		step    step
		opts    []retry.Option
		timeout time.Duration
	}{
		{name: "budget", step: busy, opts: []retry.Option{retry.WithBudget(retry.Budget{Tokens: -1, Ratio: -1})}},
		{name: "breaker opened by this response", step: busy,
			opts: []retry.Option{retry.WithBreaker(retry.Breaker{MinRequests: 1, FailureRatio: 1, OpenTimeout: time.Minute})}},
		{name: "breaker, MaxWait never", step: busy,
			opts: []retry.Option{retry.WithBreaker(retry.Breaker{MinRequests: 1, FailureRatio: 1, OpenTimeout: 2 * time.Second, MaxWait: -1})}},
		{name: "rate limiter", step: busy, opts: []retry.Option{retry.WithRateLimit(retry.RateLimit{Limit: 0.01, Burst: 1})}, timeout: 5 * time.Second},
		{name: "a wait past the deadline", step: busy, timeout: 500 * time.Millisecond},
		{name: "MaxServerDelay", step: step{status: 503, header: map[string]string{"Retry-After": "600", "X-Upstream": "a"}, body: "upstream busy"}},
		{name: "MaxElapsed", step: busy, opts: []retry.Option{retry.WithMaxElapsed(500 * time.Millisecond)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newScripted(t, tt.step)
			opts := append([]retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond})}, tt.opts...)
			client := &http.Client{Transport: retry.NewTransport(newBase(t), opts...)}
			ctx := t.Context()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("err = %v, want the 503 itself", err)
			}
			defer resp.Body.Close()
			// 400 ms: below every wait a refusal could wrongly take (the
			// 500 ms deadline and MaxElapsed, the 1 s Retry-After), above
			// what a loaded machine adds to a loopback round trip.
			if elapsed := time.Since(start); elapsed > 400*time.Millisecond {
				t.Errorf("returned after %v: a refusal must not wait", elapsed)
			}
			b, err := io.ReadAll(resp.Body)
			if resp.StatusCode != 503 || string(b) != tt.step.body || err != nil ||
				resp.Header.Get("Retry-After") != tt.step.header["Retry-After"] || resp.Header.Get("X-Upstream") != "a" {
				t.Errorf("got %d %q %v %v, want the upstream's 503 intact", resp.StatusCode, b, resp.Header, err)
			}
			if n := len(srv.requests()); n != 1 {
				t.Errorf("the server saw %d requests, want 1", n)
			}
		})
	}
}

// TestReverseProxyKeepsUpstreamStatus: behind httputil.ReverseProxy, a retry
// refused by the breaker that the upstream's 503 has just opened passes that
// 503 on, with its Retry-After and body, rather than the proxy's own 502.
// A request refused before any attempt has no upstream answer to pass on:
// the proxy answers 502 at once.
func TestReverseProxyKeepsUpstreamStatus(t *testing.T) {
	upstream := newScripted(t, step{status: 503, header: map[string]string{"Retry-After": "30"}, body: "maintenance"})
	target, _ := url.Parse(upstream.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ErrorLog = discardLog()
	proxy.Transport = retry.NewTransport(newBase(t),
		retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond}),
		retry.WithBreaker(retry.Breaker{MinRequests: 1, FailureRatio: 1, OpenTimeout: time.Minute}))
	front := httptest.NewServer(proxy)
	defer front.Close()
	client := &http.Client{Transport: newBase(t)}
	tests := []struct {
		name       string
		status     int
		retryAfter string
		body       string
	}{
		{name: "the 503 that opened the breaker", status: 503, retryAfter: "30", body: "maintenance"},
		{name: "refused before any attempt", status: 502},
	}
	for _, tt := range tests {
		start := time.Now()
		resp, err := client.Get(front.URL)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status || resp.Header.Get("Retry-After") != tt.retryAfter || (tt.body != "" && string(b) != tt.body) {
			t.Errorf("%s: %d %q Retry-After %q, want %d %q Retry-After %q", tt.name, resp.StatusCode, b, resp.Header.Get("Retry-After"), tt.status, tt.body, tt.retryAfter)
		}
		if elapsed := time.Since(start); elapsed > 200*time.Millisecond {
			t.Errorf("%s: answered after %v, want at once", tt.name, elapsed)
		}
	}
	if n := len(upstream.requests()); n != 1 {
		t.Errorf("upstream saw %d requests, want 1", n)
	}
}

// TestTransportHungDependencyTripsBreaker: requests cut off by their
// deadline while the server never answered open the breaker.
func TestTransportHungDependencyTripsBreaker(t *testing.T) {
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(hang)
	tr, trR := newCounted(newBase(t), fast(3), retry.WithBreaker(retry.Breaker{MinRequests: 5, FailureRatio: 1, MaxWait: -1}))
	client := &http.Client{Transport: tr}
	for range 5 {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			t.Fatal("a hung request succeeded")
		}
		cancel()
	}
	if s := trR.Stats().Breakers[""]; s != retry.BreakerOpen {
		t.Errorf("breaker %v after 5 hung requests, want open", s)
	}
}

// TestZeroTransport: a zero Transport works like NewTransport(nil).
func TestZeroTransport(t *testing.T) {
	t.Parallel() // the default policy waits about a second
	srv := newScripted(t, step{status: 503}, step{status: 200, body: "ok"})
	tr := &retry.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ok" || len(srv.requests()) != 2 {
		t.Fatalf("%d %q after %d requests, want 200 ok after a retry", resp.StatusCode, b, len(srv.requests()))
	}
}

// TestTransportEmptyIdempotencyKey: an empty Idempotency-Key header counts
// as absent.
func TestTransportEmptyIdempotencyKey(t *testing.T) {
	tests := []struct {
		name     string
		opts     []retry.Option
		requests int
		keyed    bool
	}{
		{name: "not keyed: a POST is not retried", requests: 1},
		{name: "WithIdempotencyKey adds a real key", opts: []retry.Option{retry.WithHTTP(retry.HTTP{IdempotencyKey: true})}, requests: 2, keyed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newScripted(t, step{status: 503}, step{status: 200})
			client := &http.Client{Transport: retry.NewTransport(newBase(t), append([]retry.Option{fast(3)}, tt.opts...)...)}
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("order"))
			req.Header.Set("Idempotency-Key", "")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			reqs := srv.requests()
			if len(reqs) != tt.requests {
				t.Fatalf("server saw %d requests, want %d", len(reqs), tt.requests)
			}
			first := reqs[0].header.Get("Idempotency-Key")
			for i, r := range reqs {
				key := r.header.Get("Idempotency-Key")
				if tt.keyed && (key == "" || key != first) {
					t.Errorf("request %d key %q, want one non-empty key on every attempt", i, key)
				}
			}
		})
	}
}

// TestBreakerDefaultWaitHTTP: the HTTP setup of README and docs/http.md
// against a server that always answers 503: once the breaker is open,
// requests are answered at once instead of being held for the open
// timeout.
func TestBreakerDefaultWaitHTTP(t *testing.T) {
	srv := newScripted(t, step{status: 503, body: "down"})
	client := &http.Client{Transport: retry.NewTransport(newBase(t),
		retry.WithPolicy(retry.Policy{MaxAttempts: 4, InitialInterval: time.Millisecond}),
		retry.WithBreaker(retry.Breaker{PerKey: true}),
		retry.WithBudget(retry.Budget{Ratio: 10}),
	)}
	for range 10 { // 40 failed attempts trip the default breaker (20, half failing)
		resp, err := client.Get(srv.URL)
		if err != nil {
			var re *retry.Error
			if errors.As(err, &re) && re.Reason == retry.ReasonBreakerOpen {
				break
			}
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	start := time.Now()
	for range 5 {
		resp, err := client.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("5 requests against an open breaker took %v, want well under a second", elapsed)
	}
}

// TestResponseError: ResponseError turns a response into the error the
// engine understands: nil below 400, a *StatusError with its Retry-After.
func TestResponseError(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name  string
		resp  *http.Response
		typ   string
		after time.Duration
		isNil bool
		msg   string // the start of the error's text, when set
	}{
		{name: "200", resp: &http.Response{StatusCode: 200}, isNil: true},
		{name: "304", resp: &http.Response{StatusCode: 304}, isNil: true},
		{name: "404", resp: &http.Response{StatusCode: 404}, typ: "http.4xx.404"},
		{name: "503 with Retry-After seconds", resp: &http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {"7"}}}, typ: "http.5xx.503", after: 7 * time.Second},
		{name: "429 with an HTTP-date", resp: &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {now.Add(time.Hour).UTC().Format(http.TimeFormat)}}}, typ: "http.4xx.429", after: time.Hour},
		{name: "nil", typ: "error", msg: "retry: ResponseError(nil): no response"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := retry.ResponseError(tt.resp)
			if tt.isNil {
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
				return
			}
			if err == nil || retry.TypeOf(err) != tt.typ || !strings.HasPrefix(err.Error(), tt.msg) {
				t.Fatalf("err = %v of type %q, want type %q and a text starting %q", err, retry.TypeOf(err), tt.typ, tt.msg)
			}
			var se *retry.StatusError
			if tt.resp != nil && (!errors.As(err, &se) || se.RetryAfter < tt.after-2*time.Second || se.RetryAfter > tt.after) {
				t.Errorf("err = %#v, want Retry-After %v", err, tt.after)
			}
		})
	}
}
