package retryablehttp_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	hcretry "github.com/hashicorp/go-retryablehttp"
	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/middleware/retryablehttp"
	"github.com/steadyhq/retry/retrytest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// counter counts the attempts that reach the network.
type counter struct {
	base http.RoundTripper
	n    atomic.Int32
}

func (c *counter) RoundTrip(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.base.RoundTrip(req)
}

func (c *counter) CloseIdleConnections() {
	c.base.(*http.Transport).CloseIdleConnections()
}

// result is what a client's caller saw.
type result struct {
	attempts int
	status   int          // the response's status, or 0
	body     string       // the response's body
	reason   retry.Reason // without a response: the *retry.Error's reason
	typ      string       // without a response: TypeOf the error
}

type scenario struct {
	name   string
	method string
	key    bool   // send an Idempotency-Key
	body   string // request body
	steps  []retrytest.Step
	opts   []retry.Option
	refuse bool          // send to a closed loopback port instead
	want   result        // checked for both clients
	ctx    time.Duration // a context deadline, when set
}

var (
	s503   = retrytest.Step{Status: 503}
	sReset = retrytest.Step{Reset: true}
	sOK    = retrytest.Step{Body: "ok"}
)

var scenarios = []scenario{
	{name: "503 twice then ok", method: "GET", steps: []retrytest.Step{s503, s503, sOK},
		want: result{attempts: 3, status: 200, body: "ok"}},
	{name: "503 until exhausted: last response returned", method: "GET",
		steps: append(retrytest.Repeat(3, retrytest.Step{Status: 503, Body: "busy"}), sOK),
		want:  result{attempts: 3, status: 503, body: "busy"}},
	{name: "404 is final", method: "GET", steps: []retrytest.Step{{Status: 404}, sOK},
		want: result{attempts: 1, status: 404}},
	{name: "501 is final", method: "GET", steps: []retrytest.Step{{Status: 501}, sOK},
		want: result{attempts: 1, status: 501}},
	{name: "408 is retried", method: "GET", steps: []retrytest.Step{{Status: 408}, sOK},
		want: result{attempts: 2, status: 200, body: "ok"}},
	{name: "POST 503 is not retried", method: "POST", body: "order", steps: []retrytest.Step{s503, sOK},
		want: result{attempts: 1, status: 503}},
	{name: "POST with Idempotency-Key is retried", method: "POST", key: true, body: "order",
		steps: []retrytest.Step{s503, sOK}, want: result{attempts: 2, status: 200, body: "ok"}},
	{name: "POST retried with RetryNonIdempotent", method: "POST", body: "order",
		opts:  []retry.Option{retry.WithHTTP(retry.HTTP{AllMethods: true})},
		steps: []retrytest.Step{s503, sOK}, want: result{attempts: 2, status: 200, body: "ok"}},
	{name: "PUT with a body replayed", method: "PUT", body: "doc", steps: []retrytest.Step{s503, sOK},
		want: result{attempts: 2, status: 200, body: "ok"}},
	{name: "GET reset then ok", method: "GET", steps: []retrytest.Step{sReset, sOK},
		want: result{attempts: 2, status: 200, body: "ok"}},
	{name: "GET reset until exhausted", method: "GET", steps: retrytest.Repeat(4, sReset),
		want: result{attempts: 3, reason: retry.ReasonExhausted, typ: "net.connection_reset"}},
	{name: "POST reset is not retried", method: "POST", body: "order", steps: []retrytest.Step{sReset, sOK},
		want: result{attempts: 1, reason: retry.ReasonNonRetryable, typ: "net.connection_reset"}},
	{name: "POST refused: never sent, retried", method: "POST", body: "order", refuse: true,
		want: result{attempts: 3, reason: retry.ReasonExhausted, typ: "net.connection_refused"}},
	{name: "policy's non-retryable type", method: "GET", steps: []retrytest.Step{{Status: 502}, sOK},
		opts: []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond,
			NonRetryableErrors: []string{"http.5xx.502"}})},
		want: result{attempts: 1, status: 502}},
	{name: "Retry-After 0 then ok", method: "GET",
		steps: []retrytest.Step{{Status: 429, Header: http.Header{"Retry-After": {"0"}}}, sOK},
		want:  result{attempts: 2, status: 200, body: "ok"}},
	{name: "Retry-After over the maximum server delay", method: "GET",
		steps: []retrytest.Step{{Status: 429, Header: http.Header{"Retry-After": {"1"}}}, sOK},
		opts:  []retry.Option{retry.WithMaxServerDelay(100 * time.Millisecond)},
		want:  result{attempts: 1, status: 429}},
	{name: "wait that cannot fit the deadline", method: "GET", steps: []retrytest.Step{s503, sOK},
		opts: []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Hour})},
		ctx:  time.Minute, want: result{attempts: 1, status: 503}},
	{name: "one attempt", method: "GET", steps: []retrytest.Step{s503, sOK},
		opts: []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 1})},
		want: result{attempts: 1, status: 503}},
}

// refusedURL returns the URL of a loopback port nothing listens on.
func refusedURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/"
}

// run sends the scenario's request through do and reports what it saw.
func (sc scenario) run(t *testing.T, send func(ctx context.Context, url string) (*http.Response, error)) result {
	t.Helper()
	url := refusedURL(t)
	if !sc.refuse {
		srv := retrytest.NewServer(sc.steps...)
		defer srv.Close()
		url = srv.URL + "/"
	}
	ctx := context.Background()
	if sc.ctx > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, sc.ctx)
		defer cancel()
	}
	var res result
	resp, err := send(ctx, url)
	if err != nil {
		var re *retry.Error
		if !errors.As(err, &re) {
			t.Fatalf("error %v is not a *retry.Error", err)
		}
		res.reason, res.typ = re.Reason, retry.TypeOf(re.Err)
		return res
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	res.status, res.body = resp.StatusCode, string(b)
	return res
}

func (sc scenario) request(ctx context.Context, url string) *http.Request {
	var body io.Reader
	if sc.body != "" {
		body = strings.NewReader(sc.body)
	}
	req, _ := http.NewRequestWithContext(ctx, sc.method, url, body)
	if sc.key {
		req.Header.Set("Idempotency-Key", "order-1")
	}
	return req
}

func (sc scenario) retrier() *retry.Retrier {
	opts := []retry.Option{retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond})}
	return retry.New(append(opts, sc.opts...)...)
}

// Each scenario runs through the retry Transport and through a
// retryablehttp.Client configured by this package: the attempts and the
// outcome must be the same, and the expected ones.
func TestSameDecisionsAsTransport(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			// Keep-alives off: net/http would otherwise resend a request
			// whose reused connection is reset, unseen by either client.
			base := &counter{base: &http.Transport{DisableKeepAlives: true}}
			client := &http.Client{Transport: retry.NewTransport(base, sc.retrier())}
			got := sc.run(t, func(ctx context.Context, url string) (*http.Response, error) {
				resp, err := client.Do(sc.request(ctx, url))
				if err != nil {
					// http.Client wraps the Transport's error in a *url.Error.
					var re *retry.Error
					if errors.As(err, &re) {
						return nil, re
					}
				}
				return resp, err
			})
			got.attempts = int(base.n.Load())
			if got != sc.want {
				t.Errorf("Transport: %+v, want %+v", got, sc.want)
			}

			rbase := &counter{base: &http.Transport{DisableKeepAlives: true}}
			rc := hcretry.NewClient()
			rc.Logger = nil
			rc.HTTPClient = &http.Client{Transport: rbase}
			retryablehttp.Configure(rc, sc.retrier())
			rgot := sc.run(t, func(ctx context.Context, url string) (*http.Response, error) {
				req, err := hcretry.FromRequest(sc.request(ctx, url))
				if err != nil {
					t.Fatal(err)
				}
				return rc.Do(req)
			})
			rgot.attempts = int(rbase.n.Load())
			if rgot != got {
				t.Errorf("retryablehttp: %+v, Transport: %+v", rgot, got)
			}
		})
	}
}
