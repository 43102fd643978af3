package retry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadyhq/retry"
)

// step is what the scripted server does for one request.
type step struct {
	status int
	header map[string]string
	body   string
	hangup bool          // close the connection without a response
	cutoff bool          // write half a status line, then close
	delay  time.Duration // wait before answering
	slow   time.Duration // after the headers, write the body over this long
}

// seen is one request as the server received it.
type seen struct {
	method string
	header http.Header
	body   []byte
}

// scripted is a real loopback HTTP server answering with steps in order, the
// last step repeating. It records requests and counts new connections.
type scripted struct {
	*httptest.Server
	mu    sync.Mutex
	steps []step
	reqs  []seen
	conns atomic.Int32
}

func newScripted(t *testing.T, steps ...step) *scripted {
	t.Helper()
	s := &scripted{steps: steps}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *scripted) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.reqs)
	s.reqs = append(s.reqs, seen{method: r.Method, header: r.Header.Clone(), body: body})
	st := s.steps[min(n, len(s.steps)-1)]
	s.mu.Unlock()
	if st.delay > 0 {
		select {
		case <-time.After(st.delay):
		case <-r.Context().Done():
			return
		}
	}
	if st.hangup || st.cutoff {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		if st.cutoff {
			buf.WriteString("HTTP/1.1 200 O")
			buf.Flush()
		}
		conn.Close()
		return
	}
	for k, v := range st.header {
		w.Header().Set(k, v)
	}
	status := cmpOr(st.status, http.StatusOK)
	if st.slow > 0 {
		w.Header().Set("Content-Length", strconv.Itoa(len(st.body)))
		w.WriteHeader(status)
		half := len(st.body) / 2
		io.WriteString(w, st.body[:half])
		http.NewResponseController(w).Flush()
		time.Sleep(st.slow)
		io.WriteString(w, st.body[half:])
		return
	}
	w.WriteHeader(status)
	io.WriteString(w, st.body)
}

func (s *scripted) requests() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.reqs...)
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// countingBody is a request body that counts its Close calls. It has no
// method that would let net/http see through it, so requests built on it
// have no GetBody.
type countingBody struct {
	r      io.Reader
	closes *atomic.Int32
}

func (b *countingBody) Read(p []byte) (int, error) { return b.r.Read(p) }
func (b *countingBody) Close() error               { b.closes.Add(1); return nil }

// waitFor polls cond for up to a second: the base transport closes request
// bodies from its own goroutines, after RoundTrip may have returned.
func waitFor(cond func() bool) bool {
	for range 1000 {
		if cond() {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return cond()
}

// fast is a policy for loopback tests: 1 ms waits, no jitter.
func fast(attempts int) retry.Option {
	return retry.WithPolicy(retry.Policy{MaxAttempts: attempts, InitialInterval: time.Millisecond, MaxInterval: 5 * time.Millisecond, Jitter: retry.Jitter{Kind: retry.JitterNone}})
}

// newBase returns a base transport of the test's own, closed at cleanup, so
// that no idle connection outlives the test.
func newBase(t *testing.T) *http.Transport {
	b := &http.Transport{}
	t.Cleanup(b.CloseIdleConnections)
	return b
}

// bodyKind says how a scenario's request carries its body.
type bodyKind int

const (
	noBody     bodyKind = iota
	opaqueBody          // an io.Reader without GetBody: teed for replay
	getBody             // bytes.Reader: net/http sets GetBody
)

func TestTransportScenarios(t *testing.T) {
	payload := strings.Repeat("p", 100)
	tests := []struct {
		name    string
		steps   []step
		method  string
		header  map[string]string
		body    bodyKind
		size    int // body size when not payload
		opts    []retry.Option
		status  int    // final status; 0 means an error is expected
		errType string // TypeOf the error when status is 0
		reqs    int    // requests the server saw
		resp    string // final body
	}{
		{name: "200 at once", steps: []step{{body: "ok"}}, status: 200, reqs: 1, resp: "ok"},
		{name: "503 503 200", steps: []step{{status: 503}, {status: 503}, {body: "ok"}}, status: 200, reqs: 3, resp: "ok"},
		{name: "final 500 intact", steps: []step{{status: 500, body: "final", header: map[string]string{"X-Final": "yes"}}}, status: 500, reqs: 3, resp: "final"},
		{name: "404 not retried", steps: []step{{status: 404, body: "nope"}}, status: 404, reqs: 1, resp: "nope"},
		{name: "400 not retried", steps: []step{{status: 400}}, status: 400, reqs: 1},
		{name: "401 not retried", steps: []step{{status: 401}}, status: 401, reqs: 1},
		{name: "408 retried", steps: []step{{status: 408}, {body: "ok"}}, status: 200, reqs: 2, resp: "ok"},
		{name: "425 retried", steps: []step{{status: 425}, {body: "ok"}}, status: 200, reqs: 2, resp: "ok"},
		{name: "429 retried", steps: []step{{status: 429}, {body: "ok"}}, status: 200, reqs: 2, resp: "ok"},
		{name: "502 retried", steps: []step{{status: 502}, {body: "ok"}}, status: 200, reqs: 2, resp: "ok"},
		{name: "504 retried", steps: []step{{status: 504}, {body: "ok"}}, status: 200, reqs: 2, resp: "ok"},
		{name: "501 not retried", steps: []step{{status: 501}}, status: 501, reqs: 1},
		{name: "505 not retried", steps: []step{{status: 505}}, status: 505, reqs: 1},
		{name: "3xx returned as is", steps: []step{{status: 304}}, status: 304, reqs: 1},
		{name: "Retry-After far beyond MaxServerDelay returned at once", steps: []step{{status: 429, header: map[string]string{"Retry-After": "3600"}, body: "slow down"}},
			status: 429, reqs: 1, resp: "slow down"},
		{name: "Retry-After beyond a lowered MaxServerDelay", steps: []step{{status: 503, header: map[string]string{"Retry-After": "2"}}},
			opts: []retry.Option{retry.WithMaxServerDelay(time.Second)}, status: 503, reqs: 1},
		{name: "Retry-After zero means policy backoff", steps: []step{{status: 503, header: map[string]string{"Retry-After": "0"}}, {body: "ok"}}, status: 200, reqs: 2, resp: "ok"},
		{name: "Retry-After garbage ignored", steps: []step{{status: 503, header: map[string]string{"Retry-After": "soon"}}, {body: "ok"}}, status: 200, reqs: 2, resp: "ok"},
		{name: "POST without key not retried after 503", method: "POST", body: opaqueBody, steps: []step{{status: 503}, {body: "ok"}}, status: 503, reqs: 1},
		{name: "PATCH not retried after 500", method: "PATCH", body: getBody, steps: []step{{status: 500}, {body: "ok"}}, status: 500, reqs: 1},
		{name: "POST with Idempotency-Key retried", method: "POST", body: opaqueBody, header: map[string]string{"Idempotency-Key": "k-1"},
			steps: []step{{status: 503}, {body: "ok"}}, status: 200, reqs: 2, resp: "ok"},
		{name: "POST with generated key retried", method: "POST", body: getBody, opts: []retry.Option{retry.WithHTTP(retry.HTTP{IdempotencyKey: true})},
			steps: []step{{status: 503}, {status: 502}, {body: "ok"}}, status: 200, reqs: 3, resp: "ok"},
		{name: "POST retried when opted in", method: "POST", body: opaqueBody, opts: []retry.Option{retry.WithHTTP(retry.HTTP{AllMethods: true})},
			steps: []step{{status: 503}, {body: "ok"}}, status: 200, reqs: 2, resp: "ok"},
		{name: "PUT opaque body replayed", method: "PUT", body: opaqueBody, steps: []step{{status: 503}, {status: 503}, {body: "ok"}}, status: 200, reqs: 3, resp: "ok"},
		{name: "PUT GetBody used", method: "PUT", body: getBody, steps: []step{{status: 503}, {status: 503}, {body: "ok"}}, status: 200, reqs: 3, resp: "ok"},
		{name: "body over MaxReplayBytes streamed once", method: "PUT", body: opaqueBody, size: 4096, opts: []retry.Option{retry.WithHTTP(retry.HTTP{MaxReplayBytes: 1024})},
			steps: []step{{status: 503}, {body: "ok"}}, status: 503, reqs: 1},
		{name: "body at MaxReplayBytes replayed", method: "PUT", body: opaqueBody, size: 1024, opts: []retry.Option{retry.WithHTTP(retry.HTTP{MaxReplayBytes: 1024})},
			steps: []step{{status: 503}, {body: "ok"}}, status: 200, reqs: 2, resp: "ok"},
		{name: "negative MaxReplayBytes keeps nothing", method: "PUT", body: opaqueBody, size: 16, opts: []retry.Option{retry.WithHTTP(retry.HTTP{MaxReplayBytes: -1})},
			steps: []step{{status: 503}, {body: "ok"}}, status: 503, reqs: 1},
		{name: "large body with GetBody replayed", method: "PUT", body: getBody, size: 1 << 16, opts: []retry.Option{retry.WithHTTP(retry.HTTP{MaxReplayBytes: 1024})},
			steps: []step{{status: 503}, {body: "ok"}}, status: 200, reqs: 2, resp: "ok"},
		{name: "GET with opaque body", body: opaqueBody, steps: []step{{status: 500}, {body: "ok"}}, status: 200, reqs: 2, resp: "ok"},
		{name: "HEAD retried", method: "HEAD", steps: []step{{status: 503}, {}}, status: 200, reqs: 2},
		{name: "DELETE retried", method: "DELETE", steps: []step{{status: 503}, {status: 204}}, status: 204, reqs: 2},
		{name: "OPTIONS retried", method: "OPTIONS", steps: []step{{status: 503}, {}}, status: 200, reqs: 2},
		{name: "hangup before the response", steps: []step{{hangup: true}, {body: "ok"}}, status: 200, resp: "ok"},
		{name: "cut off mid status line", steps: []step{{cutoff: true}, {body: "ok"}}, status: 200, resp: "ok"},
		{name: "always hanging up", steps: []step{{hangup: true}}, errType: "net.eof"},
		{name: "POST not retried after a hangup", method: "POST", body: opaqueBody, steps: []step{{hangup: true}, {body: "ok"}}, errType: "net.eof"},
		{name: "non_retryable_errors stops a 503", steps: []step{{status: 503}, {body: "ok"}},
			opts: []retry.Option{retry.WithPolicy(retry.Policy{NonRetryableErrors: []string{"http.5xx.*"}})}, status: 503, reqs: 1},
		{name: "one attempt", steps: []step{{status: 503}, {body: "ok"}}, opts: []retry.Option{fast(1)}, status: 503, reqs: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newScripted(t, tc.steps...)
			size := cmpOr(tc.size, len(payload))
			content := bytes.Repeat([]byte("b"), size)
			var closes atomic.Int32
			var body io.Reader
			switch tc.body {
			case opaqueBody:
				body = &countingBody{r: bytes.NewReader(content), closes: &closes}
			case getBody:
				body = bytes.NewReader(content)
			}
			req, err := http.NewRequest(cmpOrS(tc.method, "GET"), srv.URL+"/x", body)
			if err != nil {
				t.Fatal(err)
			}
			var getBodies []*countingBody
			if tc.body == getBody {
				// Count the Close of the caller's body and of every copy.
				req.Body = &countingBody{r: bytes.NewReader(content), closes: &closes}
				req.GetBody = func() (io.ReadCloser, error) {
					b := &countingBody{r: bytes.NewReader(content), closes: new(atomic.Int32)}
					getBodies = append(getBodies, b)
					return b, nil
				}
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			before := snapshot(req)
			opts := append([]retry.Option{fast(3)}, tc.opts...)
			tr := retry.NewTransport(newBase(t), opts...)
			resp, err := tr.RoundTrip(req)
			if tc.status == 0 {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("got %d, want an error", resp.StatusCode)
				}
				if got := retry.TypeOf(err); got != tc.errType {
					t.Errorf("TypeOf(%v) = %q, want %q", err, got, tc.errType)
				}
			} else {
				if err != nil {
					t.Fatalf("RoundTrip: %v", err)
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatalf("reading the body: %v", err)
				}
				if resp.StatusCode != tc.status || string(got) != tc.resp {
					t.Errorf("got %d %q, want %d %q", resp.StatusCode, got, tc.status, tc.resp)
				}
				for k, v := range tc.steps[len(tc.steps)-1].header {
					if resp.Header.Get(k) != v {
						t.Errorf("header %s = %q, want %q", k, resp.Header.Get(k), v)
					}
				}
			}
			reqs := srv.requests()
			if tc.reqs != 0 && len(reqs) != tc.reqs {
				t.Errorf("server saw %d requests, want %d", len(reqs), tc.reqs)
			}
			// Every attempt that reached the server carried the whole body and
			// the same idempotency key.
			for i, r := range reqs {
				if tc.body != noBody && tc.size <= 1024 && !bytes.Equal(r.body, content) {
					t.Errorf("request %d body: %d bytes, want %d identical", i+1, len(r.body), len(content))
				}
				if r.header.Get("Idempotency-Key") != reqs[0].header.Get("Idempotency-Key") {
					t.Errorf("request %d Idempotency-Key %q, first was %q", i+1, r.header.Get("Idempotency-Key"), reqs[0].header.Get("Idempotency-Key"))
				}
			}
			if len(reqs) > 0 && tc.body == opaqueBody && tc.size > 1024 && len(reqs[0].body) != size {
				t.Errorf("streamed %d bytes, want %d", len(reqs[0].body), size)
			}
			if tc.body != noBody && !waitFor(func() bool { return closes.Load() >= 1 }) || closes.Load() > 1 {
				t.Errorf("request body closed %d times, want 1", closes.Load())
			}
			if tc.body == getBody && len(reqs) > 1 && len(getBodies) != len(reqs)-1 {
				t.Errorf("GetBody called %d times for %d requests", len(getBodies), len(reqs))
			}
			if after := snapshot(req); after != before {
				t.Errorf("caller's request changed:\n before %s\n after  %s", before, after)
			}
		})
	}
}

func cmpOrS(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// snapshot renders what a RoundTripper must not change in a request.
func snapshot(r *http.Request) string {
	var hdr strings.Builder
	r.Header.Write(&hdr)
	return fmt.Sprintf("%s %s ctx=%p body=%p len=%d header=%q", r.Method, r.URL, r.Context(), r.Body, r.ContentLength, hdr.String())
}

func TestTransportGeneratedKeyStable(t *testing.T) {
	srv := newScripted(t, step{status: 503}, step{status: 503}, step{})
	tr := retry.NewTransport(newBase(t), fast(3), retry.WithHTTP(retry.HTTP{IdempotencyKey: true}))
	req, _ := http.NewRequest("POST", srv.URL, strings.NewReader("order=1"))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	reqs := srv.requests()
	key := reqs[0].header.Get("Idempotency-Key")
	if len(key) < 16 || len(reqs) != 3 {
		t.Fatalf("key %q over %d requests", key, len(reqs))
	}
	for _, r := range reqs {
		if r.header.Get("Idempotency-Key") != key || string(r.body) != "order=1" {
			t.Errorf("attempt sent key %q body %q", r.header.Get("Idempotency-Key"), r.body)
		}
	}
	if req.Header.Get("Idempotency-Key") != "" {
		t.Error("the caller's headers were modified")
	}
	// A second logical request gets a fresh key.
	req2, _ := http.NewRequest("POST", srv.URL, strings.NewReader("order=2"))
	resp, err = tr.RoundTrip(req2)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if k := srv.requests()[3].header.Get("Idempotency-Key"); k == key || k == "" {
		t.Errorf("second request key %q, first %q", k, key)
	}
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestTransportConnectionRefused(t *testing.T) {
	tests := []struct {
		name      string
		method    string
		listen    bool // start the server after the first failure
		status    int
		attempts  int
		reasonStr string
	}{
		{name: "POST retried after connection refused", method: "POST", listen: true, status: 200, attempts: 2},
		{name: "GET retried after connection refused", method: "GET", listen: true, status: 200, attempts: 2},
		{name: "GET exhausted", method: "GET", attempts: 3, reasonStr: "exhausted"},
		{name: "POST exhausted", method: "POST", attempts: 3, reasonStr: "exhausted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := freeAddr(t)
			var got []byte
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got, _ = io.ReadAll(r.Body)
			}))
			defer srv.Close()
			var failures int
			hook := retry.OnRetry(func(ev retry.Event) {
				failures++
				if ev.Type != "net.connection_refused" {
					t.Errorf("event type %q", ev.Type)
				}
				if tc.listen && failures == 1 {
					ln, err := net.Listen("tcp", addr)
					if err != nil {
						t.Skipf("port %s taken meanwhile: %v", addr, err)
					}
					srv.Listener = ln
					srv.Start()
				}
			})
			var closes atomic.Int32
			req, _ := http.NewRequest(tc.method, "http://"+addr+"/", &countingBody{r: strings.NewReader("data"), closes: &closes})
			resp, err := retry.NewTransport(newBase(t), fast(3), hook).RoundTrip(req)
			if tc.status != 0 {
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if string(got) != "data" {
					t.Errorf("server got body %q", got)
				}
			} else {
				var re *retry.Error
				if !errors.As(err, &re) || re.Reason.String() != tc.reasonStr || re.Attempts != tc.attempts {
					t.Fatalf("err = %v, want %s after %d attempts", err, tc.reasonStr, tc.attempts)
				}
				if retry.TypeOf(err) != "net.connection_refused" {
					t.Errorf("TypeOf = %q", retry.TypeOf(err))
				}
			}
			if !waitFor(func() bool { return closes.Load() == 1 }) || closes.Load() != 1 {
				t.Errorf("body closed %d times", closes.Load())
			}
		})
	}
}

func TestTransportAttemptTimeout(t *testing.T) {
	body := strings.Repeat("x", 64<<10)
	srv := newScripted(t,
		step{delay: 500 * time.Millisecond},
		step{body: body, slow: 150 * time.Millisecond},
	)
	var types []string
	tr := retry.NewTransport(newBase(t), fast(3), retry.WithAttemptTimeout(50*time.Millisecond),
		retry.OnRetry(func(ev retry.Event) { types = append(types, ev.Type) }))
	req, _ := http.NewRequest("GET", srv.URL, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body) // longer than the attempt timeout
	resp.Body.Close()
	if err != nil || len(got) != len(body) {
		t.Fatalf("read %d bytes, %v; want %d", len(got), err, len(body))
	}
	if len(types) != 1 || types[0] != retry.TypeAttemptTimeout {
		t.Errorf("retry events %q, want one %s", types, retry.TypeAttemptTimeout)
	}
}

func TestTransportCancelDuringWait(t *testing.T) {
	srv := newScripted(t, step{status: 503})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := retry.NewTransport(newBase(t), retry.WithPolicy(retry.Policy{InitialInterval: time.Hour}),
		retry.OnRetry(func(retry.Event) { time.AfterFunc(10*time.Millisecond, cancel) }))
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	start := time.Now()
	resp, err := tr.RoundTrip(req)
	if resp != nil {
		t.Fatalf("got a response %d", resp.StatusCode)
	}
	var re *retry.Error
	var se *retry.StatusError
	if !errors.As(err, &re) || re.Reason != retry.ReasonCanceled || !errors.Is(err, context.Canceled) || !errors.As(err, &se) || se.StatusCode != 503 {
		t.Fatalf("err = %#v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("took %v", el)
	}
}

func TestTransportDeadline(t *testing.T) {
	// The server asks for 30 s; the caller's deadline is much nearer: the 503
	// comes back at once instead of a wait into certain failure.
	srv := newScripted(t, step{status: 503, header: map[string]string{"Retry-After": "30"}, body: "busy"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var reasons []retry.Reason
	tr := retry.NewTransport(newBase(t), fast(3), retry.OnFailure(func(ev retry.Event) { reasons = append(reasons, ev.Reason) }))
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	start := time.Now()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || string(b) != "busy" || time.Since(start) > time.Second {
		t.Errorf("got %d %q after %v", resp.StatusCode, b, time.Since(start))
	}
	if len(reasons) != 1 || reasons[0] != retry.ReasonDeadline {
		t.Errorf("reasons %v, want [deadline]", reasons)
	}
}

func TestTransportRetryAfter(t *testing.T) {
	t.Parallel() // a Retry-After of one second is waited out
	// Both forms are checked through the delay the engine chose; the seconds
	// form is also measured on the clock (one second, run in parallel).
	tests := []struct {
		name     string
		value    string
		min, max time.Duration
		measure  bool
	}{
		{name: "seconds", value: "1", min: time.Second, max: 1100 * time.Millisecond, measure: true},
		{name: "HTTP-date", value: "in 3s", min: time.Second, max: 3300 * time.Millisecond},
		{name: "seconds on 503", value: "2", min: 2 * time.Second, max: 2200 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.value == "in 3s" { // a date is taken when the subtest runs
				tc.value = time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat)
			}
			srv := newScripted(t, step{status: 429, header: map[string]string{"Retry-After": tc.value}}, step{body: "ok"})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var delay time.Duration
			tr := retry.NewTransport(newBase(t), retry.OnRetry(func(ev retry.Event) {
				delay = ev.Delay
				if !tc.measure {
					cancel()
				}
			}))
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
			start := time.Now()
			resp, err := tr.RoundTrip(req)
			elapsed := time.Since(start)
			if delay < tc.min || delay > tc.max {
				t.Errorf("delay %v, want in [%v, %v]", delay, tc.min, tc.max)
			}
			if !tc.measure {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if elapsed < tc.min || elapsed > tc.max+500*time.Millisecond {
				t.Errorf("waited %v, want about %v", elapsed, delay)
			}
		})
	}
}

func TestTransportTLSCertificate(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ErrorLog = discardLog()
	var conns atomic.Int32
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL, nil)
	_, err := retry.NewTransport(newBase(t), fast(3)).RoundTrip(req)
	var re *retry.Error
	if !errors.As(err, &re) || re.Reason != retry.ReasonNonRetryable || re.Attempts != 1 {
		t.Fatalf("err = %v", err)
	}
	if typ := retry.TypeOf(err); typ != "tls.certificate" {
		t.Errorf("TypeOf = %q", typ)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

func TestTransportRedirectLoop(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, r.URL.Path, http.StatusFound)
	}))
	defer srv.Close()
	client := &http.Client{Transport: retry.NewTransport(newBase(t), fast(3))}
	calls := 0
	_, err := retry.Do(context.Background(), func(ctx context.Context) (int, error) {
		calls++
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/loop", nil)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}, fast(3))
	if retry.TypeOf(err) != "redirect.too_many" || calls != 1 {
		t.Errorf("TypeOf(%v) = %q after %d calls", err, retry.TypeOf(err), calls)
	}
	if n := hits.Load(); n != 10 {
		t.Errorf("server saw %d requests, want 10 (no retry of a 302)", n)
	}
}

func TestTransportConnectionReuse(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
		conns int32
	}{
		{name: "small retried bodies", steps: []step{{status: 503, body: "busy"}, {status: 502, body: strings.Repeat("e", 2000)}, {body: "ok"}}, conns: 1},
		{name: "retried with Retry-After", steps: []step{{status: 429, header: map[string]string{"Retry-After": "0"}}, {body: "ok"}}, conns: 1},
		{name: "a large retried body closes its connection", steps: []step{{status: 503, body: strings.Repeat("e", 64<<10)}, {body: "ok"}}, conns: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newScripted(t, tc.steps...)
			tr := retry.NewTransport(newBase(t), fast(3))
			for range 3 {
				req, _ := http.NewRequest("GET", srv.URL, nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				srv.mu.Lock()
				srv.reqs = nil
				srv.mu.Unlock()
				if tc.conns > 1 {
					break
				}
			}
			if n := srv.conns.Load(); n != tc.conns {
				t.Errorf("%d connections, want %d", n, tc.conns)
			}
		})
	}
}

func TestTransportEvents(t *testing.T) {
	srv := newScripted(t, step{status: 503}, step{status: 503})
	var evs []retry.Event
	var records []retry.Event
	tr := retry.NewTransport(newBase(t), fast(2), retry.WithHTTP(retry.HTTP{RecordBody: true}),
		retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond, Jitter: retry.Jitter{Kind: retry.JitterNone}, OnExhaustion: retry.ExhaustDeadLetter}),
		retry.OnFailure(func(ev retry.Event) { evs = append(evs, ev) }),
		retry.WithDeadLetter(retry.DeadLetters{Sink: func(_ context.Context, ev retry.Event) error { records = append(records, ev); return nil }}))
	u := strings.Replace(srv.URL, "http://", "http://user:hunter2@", 1) + "/pay?token=abc123&id=7"
	req, _ := http.NewRequest("PUT", u, strings.NewReader(`{"amount":5}`))
	req.Header.Set("Authorization", "Bearer s3cr3t")
	req.Header.Set("X-Request-Id", "r-1")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(evs) != 2 || len(records) != 1 {
		t.Fatalf("%d failure events, %d records", len(evs), len(records))
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, ev := range append(evs, records...) {
		if ev.Method != "PUT" || ev.Key != host || ev.Type != "http.5xx.503" {
			t.Errorf("event %+v", ev)
		}
		for _, secret := range []string{"hunter2", "abc123", "s3cr3t"} {
			if strings.Contains(ev.URL+ev.Message, secret) {
				t.Errorf("event leaks %q: URL %q message %q", secret, ev.URL, ev.Message)
			}
		}
		if !strings.Contains(ev.URL, "/pay") || !strings.Contains(ev.URL, "id=7") {
			t.Errorf("event URL %q lost its path or query", ev.URL)
		}
	}
	rec, ok := records[0].Payload.(*retry.RequestRecord)
	if !ok {
		t.Fatalf("payload %T", records[0].Payload)
	}
	if rec.Method != "PUT" || string(rec.Body) != `{"amount":5}` || !rec.BodyComplete ||
		rec.Header.Get("Authorization") != "" || rec.Header.Get("X-Request-Id") != "r-1" || strings.Contains(rec.URL, "hunter2") {
		t.Errorf("record %+v", rec)
	}
}

func TestTransportBadInput(t *testing.T) {
	var closes atomic.Int32
	body := func() io.Reader { return &countingBody{r: strings.NewReader("x"), closes: &closes} }
	req, _ := http.NewRequest("PUT", "http://127.0.0.1:1/", body())
	_, err := retry.NewTransport(newBase(t), retry.WithAttemptTimeout(-1)).RoundTrip(req)
	if err == nil || !strings.Contains(err.Error(), "WithAttemptTimeout") {
		t.Errorf("err = %v", err)
	}
	noURL := &http.Request{Method: "GET", Body: &countingBody{r: strings.NewReader("x"), closes: &closes}}
	_, err = retry.NewTransport(newBase(t)).RoundTrip(noURL)
	if retry.TypeOf(err) != "request.invalid" {
		t.Errorf("TypeOf(%v) = %q", err, retry.TypeOf(err))
	}
	if _, err := retry.NewTransport(newBase(t)).RoundTrip(nil); retry.TypeOf(err) != "request.invalid" {
		t.Errorf("nil request: %v", err)
	}
	if closes.Load() != 2 {
		t.Errorf("%d closes for 2 bodies", closes.Load())
	}
	// A scheme the base does not speak is the caller's mistake, not retried.
	calls := 0
	ftp, _ := http.NewRequest("GET", "ftp://127.0.0.1/", nil)
	_, err = retry.NewTransport(newBase(t), fast(3), retry.OnRetry(func(retry.Event) { calls++ })).RoundTrip(ftp)
	if err == nil || calls != 0 {
		t.Errorf("ftp: %v after %d retries", err, calls)
	}
}

func TestTransportNilBase(t *testing.T) {
	srv := newScripted(t, step{status: 503}, step{body: "ok"})
	tr := retry.NewTransport(nil, fast(3))
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" {
		t.Errorf("body %q", b)
	}
}

// typedNilBase is a RoundTripper whose nil pointer would panic in RoundTrip.
type typedNilBase struct{ rt http.RoundTripper }

func (b *typedNilBase) RoundTrip(r *http.Request) (*http.Response, error) { return b.rt.RoundTrip(r) }

// TestTransportTypedNilBase: a typed nil base (a nil *http.Transport, a nil
// pointer of the caller's own type) makes every request fail at once with an
// error naming it, nothing sent and the request's body closed; nothing
// panics.
func TestTransportTypedNilBase(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	for _, base := range []http.RoundTripper{(*http.Transport)(nil), (*typedNilBase)(nil)} {
		t.Run(fmt.Sprintf("%T", base), func(t *testing.T) {
			body := &closeCount{r: strings.NewReader("x")}
			req, _ := http.NewRequest(http.MethodPut, srv.URL, body)
			resp, err := retry.NewTransport(base, fast(3)).RoundTrip(req)
			if resp != nil || err == nil || !strings.Contains(err.Error(), fmt.Sprintf("is a nil %T", base)) {
				t.Errorf("RoundTrip = %v, %v; want an error naming the nil %T", resp, err, base)
			}
			if body.closes.Load() != 1 {
				t.Errorf("the request's body closed %d times, want 1", body.closes.Load())
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server saw %d requests, want none", n)
	}
}

// TestTransportSharedRetrier: a Transport built on a Retrier counts its
// requests in the Retrier's Stats, shared with another Transport and a
// call given the same Retrier, breaker states included (README, HTTP).
func TestTransportSharedRetrier(t *testing.T) {
	srv := newScripted(t, step{status: 503}, step{})
	r := retry.New(fast(3), retry.WithBreaker(retry.Breaker{PerKey: true}))
	tr := retry.NewTransport(newBase(t), r)
	req, _ := http.NewRequest("GET", srv.URL, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s := r.Stats(); s.Calls != 1 || s.Attempts != 2 || s.Retried != 1 {
		t.Errorf("Retrier stats %+v", s)
	}
	req, _ = http.NewRequest("GET", srv.URL, nil)
	resp, err = retry.NewTransport(newBase(t), r).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := r.Run(t.Context(), func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	if s := r.Stats(); s.Calls != 3 || s.Attempts != 4 || s.Breakers[host] != retry.BreakerClosed {
		t.Errorf("after a second Transport's request and a Run: Calls %d, Attempts %d, Breakers %v; want 3, 4 and %s closed", s.Calls, s.Attempts, s.Breakers, host)
	}
}

// discardLog keeps the TLS server's handshake errors out of the test output.
func discardLog() *log.Logger { return log.New(io.Discard, "", 0) }

// TestTransportBreaker: a per-host breaker opened by a host's 5xx storm
// stops further requests to it at once, without reaching the server, while
// other hosts and 4xx answers are unaffected.
func TestTransportBreaker(t *testing.T) {
	down := newScripted(t, step{status: 503})
	up := newScripted(t, step{status: 404}, step{status: 200})
	tr, trR := newCounted(newBase(t), fast(1),
		retry.WithBreaker(retry.Breaker{MinRequests: 3, FailureRatio: 1, OpenTimeout: time.Hour, PerKey: true}))
	get := func(url string) (*http.Response, error) {
		req, _ := http.NewRequest("GET", url, nil)
		resp, err := tr.RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
		}
		return resp, err
	}
	for range 3 {
		if resp, err := get(down.URL); err != nil || resp.StatusCode != 503 {
			t.Fatalf("while closed: %v, %v", resp, err)
		}
	}
	_, err := get(down.URL)
	var re *retry.Error
	if !errors.As(err, &re) || re.Reason != retry.ReasonBreakerOpen || re.Attempts != 0 || retry.TypeOf(err) != "breaker.open" {
		t.Fatalf("after the storm: %v, want breaker_open after 0 attempts", err)
	}
	if n := len(down.requests()); n != 3 {
		t.Errorf("the failing server saw %d requests, want 3", n)
	}
	for range 5 { // a 404 is the caller's error: it never trips the breaker
		if _, err := get(up.URL); err != nil {
			t.Fatalf("other host: %v", err)
		}
	}
	s := trR.Stats()
	if s.Breakers[strings.TrimPrefix(down.URL, "http://")] != retry.BreakerOpen ||
		s.Breakers[strings.TrimPrefix(up.URL, "http://")] != retry.BreakerClosed || s.BreakerDenied != 1 {
		t.Errorf("stats %+v", s)
	}
}

// TestTransportRateLimitAndBudget: attempts through the Transport are paced
// by the limiter, and the budget stops retries, returning the last response.
func TestTransportRateLimitAndBudget(t *testing.T) {
	t.Run("rate limit", func(t *testing.T) {
		srv := newScripted(t, step{status: 200})
		// Five requests at once at 10/s, burst 1: the first takes the
		// token, and each of the other four waits for one, 100 ms apart
		// (sent one after another, a request slowed by a loaded machine
		// past the interval would find its token there and not wait).
		tr, trR := newCounted(newBase(t), retry.WithRateLimit(retry.RateLimit{Limit: 10, Burst: 1}))
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, 5)
		for range 5 {
			wg.Go(func() {
				req, _ := http.NewRequest("GET", srv.URL, nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					errs <- err
					return
				}
				resp.Body.Close()
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if elapsed := time.Since(start); elapsed < 350*time.Millisecond {
			t.Errorf("5 requests at 10/s burst 1 took %v, want at least 400ms", elapsed)
		}
		if s := trR.Stats(); s.LimiterWaits < 4 {
			t.Errorf("limiter waits %d, want 4", s.LimiterWaits)
		}
	})
	t.Run("budget", func(t *testing.T) {
		srv := newScripted(t, step{status: 503, body: "down"})
		tr, trR := newCounted(newBase(t), fast(3), retry.WithBudget(retry.Budget{Tokens: 6, Ratio: -1}))
		attempts := 0
		for range 4 {
			req, _ := http.NewRequest("GET", srv.URL, nil)
			resp, err := tr.RoundTrip(req)
			if err != nil || resp.StatusCode != 503 {
				t.Fatalf("%v, %v: want the 503 itself", resp, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != "down" {
				t.Errorf("body %q", b)
			}
			attempts = len(srv.requests())
		}
		// A stock of 6 tokens and nothing earned: three requests take 2
		// retries each, and the fourth is stopped after its first attempt.
		if s := trR.Stats(); attempts != 10 || s.BudgetDenied != 1 {
			t.Errorf("%d attempts, %d denied; want 10 and 1", attempts, s.BudgetDenied)
		}
	})
}

// newCounted returns a Transport on base configured by opts, and the
// Retrier whose Stats count its requests.
func newCounted(base http.RoundTripper, opts ...retry.Option) (*retry.Transport, *retry.Retrier) {
	r := retry.New(opts...)
	return retry.NewTransport(base, r), r
}

// TestTransportAttemptTimeoutError: when every attempt runs out of its own
// time, the error is the attempt timeout's, over HTTP/1.1 and HTTP/2 alike
// (HTTP/2 reports an attempt's context ending as context.Canceled): it
// matches context.DeadlineExceeded, never context.Canceled, and its type is
// timeout.attempt; plain and hedged.
func TestTransportAttemptTimeoutError(t *testing.T) {
	for _, proto := range hedgeProtos {
		for _, hedged := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/hedged=%v", proto.name, hedged), func(t *testing.T) {
				srv, base := proto.start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					<-r.Context().Done() // hangs until the attempt gives up
				}))
				defer srv.Close()
				defer base.CloseIdleConnections()
				opts := []retry.Option{fast(2), retry.WithAttemptTimeout(50 * time.Millisecond)}
				if hedged {
					opts = append(opts, retry.WithHedge(retry.Hedge{Delay: 10 * time.Millisecond}))
				}
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
				resp, err := retry.NewTransport(base, opts...).RoundTrip(req)
				if resp != nil {
					resp.Body.Close()
					t.Fatalf("a response %d from a server that never answers", resp.StatusCode)
				}
				if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || retry.TypeOf(err) != "timeout.attempt" {
					t.Errorf("err = %v (type %q, Is Canceled %v), want the attempt timeout's: DeadlineExceeded, not Canceled, type timeout.attempt",
						err, retry.TypeOf(err), errors.Is(err, context.Canceled))
				}
			})
		}
	}
}
