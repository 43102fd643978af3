package retrytest

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Step is one scripted answer to an HTTP request.
type Step struct {
	Status int         // the response status; 0 means 200
	Header http.Header // response headers, such as Retry-After
	Body   string      // the response body
	// Delay is a wait before answering. The request's end (its context, or
	// the client closing the connection) cuts it short.
	Delay time.Duration
	// Reset answers with no response: the connection is reset (a TCP RST
	// for Server, an error of type net.connection_reset for Transport).
	Reset bool
}

// Repeat returns n copies of s, for scripts such as "503 five times".
func Repeat(n int, s Step) []Step {
	steps := make([]Step, max(n, 0))
	for i := range steps {
		steps[i] = s
	}
	return steps
}

// Request records one request received by a Server or a Transport.
type Request struct {
	Method string
	URL    string // the request URL; for Server, the path and query
	Header http.Header
	Body   []byte    // up to MaxRecordedBody bytes of the request body
	Time   time.Time // when the request arrived
	Step   int       // the index of the step that answered; -1 past the script
}

// MaxRecordedBody bounds the request body a Request records.
const MaxRecordedBody = 1 << 20

// script is the steps and the record shared by Server and Transport.
type script struct {
	mu    sync.Mutex
	steps []Step
	reqs  []Request
}

// next records r and returns the step that answers it: the next one of the
// script, or a 200 with no body once the script is used up.
func (s *script) next(r *http.Request) Step {
	rec := Request{Method: r.Method, URL: r.URL.String(), Header: r.Header.Clone(), Time: time.Now()}
	if r.Body != nil {
		rec.Body, _ = io.ReadAll(io.LimitReader(r.Body, MaxRecordedBody))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.reqs)
	st := Step{}
	if n < len(s.steps) {
		rec.Step, st = n, s.steps[n]
	} else {
		rec.Step = -1
	}
	s.reqs = append(s.reqs, rec)
	return st
}

func (s *script) requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

func (s *script) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// wait sleeps d unless ctx ends or stop closes first, and reports whether
// it slept it all.
func wait(ctx context.Context, stop <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	}
}

// Server is an HTTP server on a loopback address that answers its requests
// with a script of steps, one step per request in arrival order, then 200
// with no body. Build it with NewServer (the zero Server is not usable) and
// Close it when done; it is safe for concurrent use.
//
// net/http itself sends an idempotent request again, once, when a reused
// keep-alive connection is reset before any response: a Reset step that is
// not the first request on its connection may be consumed by that resend,
// unseen by the retry engine. To count attempts exactly around resets, give
// the client a transport with DisableKeepAlives.
type Server struct {
	*httptest.Server
	s        script
	closing  chan struct{}
	stopOnce sync.Once
}

// NewServer starts a Server answering with steps.
func NewServer(steps ...Step) *Server {
	srv := &Server{s: script{steps: append([]Step(nil), steps...)}, closing: make(chan struct{})}
	srv.Server = httptest.NewServer(http.HandlerFunc(srv.serve))
	return srv
}

func (srv *Server) serve(w http.ResponseWriter, r *http.Request) {
	st := srv.s.next(r)
	if !wait(r.Context(), srv.closing, st.Delay) {
		panic(http.ErrAbortHandler) // no response: the connection is closed
	}
	if st.Reset {
		reset(w)
		return
	}
	for k, v := range st.Header {
		w.Header()[k] = append([]string(nil), v...)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(st.Body)))
	w.WriteHeader(status(st))
	io.WriteString(w, st.Body)
}

// Close cuts short the Delay of the steps in progress, then shuts the server
// down and waits for its requests to end.
func (srv *Server) Close() {
	srv.stopOnce.Do(func() { close(srv.closing) })
	srv.Server.Close()
}

// reset closes the connection with a TCP RST.
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // the server closes the stream
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

func status(st Step) int {
	if st.Status == 0 {
		return http.StatusOK
	}
	return st.Status
}

// Requests returns the requests received so far, in arrival order.
func (srv *Server) Requests() []Request { return srv.s.requests() }

// Count returns the number of requests received so far.
func (srv *Server) Count() int { return srv.s.count() }

// Waits returns the time between the arrivals of consecutive requests.
func (srv *Server) Waits() []time.Duration {
	return waits(srv.Requests(), func(r Request) time.Time { return r.Time })
}

// Transport is an http.RoundTripper that answers requests with a script of
// steps without a network, one step per request, then 200 with no body. It
// works inside a testing/synctest bubble, where a step's Delay passes in
// virtual time. It closes every request body it receives, is safe for
// concurrent use, and its zero value answers every request with 200.
type Transport struct {
	s script
}

// NewTransport returns a Transport answering with steps.
func NewTransport(steps ...Step) *Transport {
	return &Transport{s: script{steps: append([]Step(nil), steps...)}}
}

// RoundTrip answers req with the next step.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	st := t.s.next(req)
	if req.Body != nil {
		req.Body.Close()
	}
	ctx := req.Context()
	if !wait(ctx, nil, st.Delay) {
		return nil, context.Cause(ctx)
	}
	if st.Reset {
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	}
	code := status(st)
	h := st.Header.Clone()
	if h == nil {
		h = make(http.Header)
	}
	return &http.Response{
		Status:        strconv.Itoa(code) + " " + http.StatusText(code),
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(strings.NewReader(st.Body)),
		ContentLength: int64(len(st.Body)),
		Request:       req,
	}, nil
}

// Requests returns the requests received so far, in order.
func (t *Transport) Requests() []Request { return t.s.requests() }

// Count returns the number of requests received so far.
func (t *Transport) Count() int { return t.s.count() }

// Waits returns the time between consecutive requests.
func (t *Transport) Waits() []time.Duration {
	return waits(t.Requests(), func(r Request) time.Time { return r.Time })
}
