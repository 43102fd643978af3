package shed_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry/shed"
)

// one returns a Shedder of one permit with o's other fields.
func one(t *testing.T, o shed.Options) *shed.Shedder {
	t.Helper()
	o.Initial, o.Min, o.Max = 1, 1, 1
	s, err := shed.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// eventually waits up to 5 s for cond, polling every millisecond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("after 5 s: %s", what)
		}
	}
}

// settled checks that every permit came back and the queue is empty.
func settled(t *testing.T, s *shed.Shedder) {
	t.Helper()
	eventually(t, "permits and queue settle", func() bool {
		st := s.Stats()
		return st.InFlight == 0 && st.Queued == 0
	})
}

// servers returns an HTTP/1.1 and an HTTP/2 (TLS) server of h with their
// clients.
func servers(t *testing.T, h http.Handler) []struct {
	name string
	srv  *httptest.Server
} {
	t.Helper()
	h1 := httptest.NewUnstartedServer(h)
	h1.Config.ErrorLog = log.New(io.Discard, "", 0)
	h1.Start()
	h2 := httptest.NewUnstartedServer(h)
	h2.EnableHTTP2 = true
	h2.Config.ErrorLog = log.New(io.Discard, "", 0)
	h2.StartTLS()
	t.Cleanup(func() {
		h1.Client().CloseIdleConnections()
		h2.Client().CloseIdleConnections()
		h1.Close()
		h2.Close()
	})
	return []struct {
		name string
		srv  *httptest.Server
	}{{name: "HTTP/1.1", srv: h1}, {name: "HTTP/2", srv: h2}}
}

// TestStreamingBehindHandler: a handler that flushes part of its answer
// and waits for the client to read it works behind Handler, over HTTP/1.1
// and HTTP/2, through http.Flusher and http.NewResponseController.
func TestStreamingBehindHandler(t *testing.T) {
	s := one(t, shed.Options{})
	read := make(chan struct{})
	h := s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Now().Add(5 * time.Second)); err != nil {
			http.Error(w, "SetWriteDeadline: "+err.Error(), http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "first\n")
		if r.URL.Path == "/flusher" {
			w.(http.Flusher).Flush()
		} else if err := rc.Flush(); err != nil {
			return
		}
		<-read // the client has the first line before the handler goes on
		io.WriteString(w, "second\n")
	}))
	for _, sv := range servers(t, h) {
		for _, path := range []string{"/flusher", "/controller"} {
			t.Run(sv.name+path, func(t *testing.T) {
				resp, err := sv.srv.Client().Get(sv.srv.URL + path)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if want := map[string]int{"HTTP/1.1": 1, "HTTP/2": 2}[sv.name]; resp.ProtoMajor != want {
					t.Errorf("proto %s, want %s", resp.Proto, sv.name)
				}
				br := bufio.NewReader(resp.Body)
				line, err := br.ReadString('\n')
				if err != nil || line != "first\n" {
					t.Fatalf("first line %q, %v (status %d)", line, err, resp.StatusCode)
				}
				read <- struct{}{}
				if rest, _ := io.ReadAll(br); string(rest) != "second\n" {
					t.Errorf("rest %q, want %q", rest, "second\n")
				}
			})
		}
	}
	settled(t, s)
}

// TestHijack: a handler that takes over the connection (as a WebSocket
// server does) holds its permit while it runs and gives it back when it
// returns.
func TestHijack(t *testing.T) {
	s := one(t, shed.Options{})
	srv := httptest.NewServer(s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		line, _ := brw.ReadString('\n') // echo one line
		brw.WriteString(line)
		brw.Flush()
		brw.ReadString('\n') // until the client closes
	})))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v, %v", resp, err)
	}
	io.WriteString(conn, "ping\n")
	if line, err := br.ReadString('\n'); line != "ping\n" {
		t.Errorf("echo %q, %v", line, err)
	}
	if st := s.Stats(); st.InFlight != 1 {
		t.Errorf("while hijacked: InFlight = %d, want 1", st.InFlight)
	}
	if code, _, _ := get(t, srv.URL, "Retry-Attempt", "2"); code != http.StatusServiceUnavailable {
		t.Errorf("a retry while the hijacked handler holds the permit: %d, want 503", code)
	}
	conn.Close()
	settled(t, s)
}

// TestBehindReverseProxy: a shed backend's 503 and Retry-After reach the
// client through httputil.ReverseProxy, its Retry-Attempt goes through
// to the backend, and a streaming answer flows through the proxy.
func TestBehindReverseProxy(t *testing.T) {
	s := one(t, shed.Options{QueueWait: time.Millisecond})
	hold, release, read := make(chan struct{}), make(chan struct{}), make(chan struct{})
	back := httptest.NewServer(s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hold":
			close(hold)
			<-release
		case "/stream":
			io.WriteString(w, "first\n")
			http.NewResponseController(w).Flush()
			<-read
			io.WriteString(w, "second\n")
		}
	})))
	defer back.Close()
	u, _ := url.Parse(back.URL)
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.FlushInterval = -1
	front := httptest.NewServer(proxy)
	defer front.Close()

	held := make(chan int)
	go func() { code, _, _ := get(t, front.URL+"/hold"); held <- code }()
	<-hold
	for _, tt := range []struct {
		name     string
		fields   []string
		wantBody string
	}{
		{name: "retry", fields: []string{"Retry-Attempt", "2"}, wantBody: "shed: server overloaded"},
		{name: "first attempt, queue timeout", wantBody: "shed: server overloaded"},
	} {
		code, ra, body := get(t, front.URL, tt.fields...)
		n, err := strconv.Atoi(ra)
		if code != http.StatusServiceUnavailable || err != nil || n < 1 || n > 60 || !strings.HasPrefix(body, tt.wantBody) {
			t.Errorf("%s through the proxy: %d, Retry-After %q, body %q; want 503, 1..60", tt.name, code, ra, body)
		}
	}
	close(release)
	if code := <-held; code != http.StatusOK {
		t.Errorf("held: %d", code)
	}
	resp, err := http.Get(front.URL + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); line != "first\n" {
		t.Fatalf("first line through the proxy %q, %v", line, err)
	}
	close(read)
	if rest, _ := io.ReadAll(br); string(rest) != "second\n" {
		t.Errorf("rest %q", rest)
	}
	settled(t, s)
}

// TestClientGoesAway: a handler that runs until its client goes away
// gives its permit back when it does, over HTTP/1.1 and HTTP/2; a client
// that gives up while queued leaves the queue, counted as canceled.
func TestClientGoesAway(t *testing.T) {
	s := one(t, shed.Options{QueueWait: time.Minute})
	started := make(chan struct{}, 1)
	h := s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		started <- struct{}{}
		<-r.Context().Done()
	}))
	for _, sv := range servers(t, h) {
		t.Run(sv.name, func(t *testing.T) {
			before := s.Stats().Shed[shed.ReasonCanceled]
			ctx, cancel := context.WithCancel(context.Background())
			resp, err := sv.srv.Client().Do(mustRequest(t, ctx, http.MethodGet, sv.srv.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			<-started
			// A second client queues behind the first, then gives up with
			// a cause.
			qctx, qcancel := context.WithCancelCause(context.Background())
			queued := make(chan error)
			go func() {
				_, err := sv.srv.Client().Do(mustRequest(t, qctx, http.MethodGet, sv.srv.URL, nil))
				queued <- err
			}()
			eventually(t, "the second request queues", func() bool { return s.Stats().Queued == 1 })
			cause := errors.New("user left")
			qcancel(cause)
			if err := <-queued; err == nil || context.Cause(qctx) != cause {
				t.Errorf("queued client: %v (cause %v), want canceled by %v", err, context.Cause(qctx), cause)
			}
			eventually(t, "the queued request is counted as canceled", func() bool {
				return s.Stats().Shed[shed.ReasonCanceled] == before+1
			})
			if st := s.Stats(); st.InFlight != 1 || st.Queued != 0 {
				t.Errorf("after the queued client left: %+v, want 1 in flight, none queued", st)
			}
			cancel()
			resp.Body.Close()
			settled(t, s)
		})
	}
}

// TestAdmitCanceledWithCause: Admit of a request whose context is
// canceled with a cause while it waits returns ReasonCanceled at once.
func TestAdmitCanceledWithCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := one(t, shed.Options{QueueWait: time.Hour})
		hold, _ := s.Admit(context.Background(), shed.Request{})
		ctx, cancel := context.WithCancelCause(context.Background())
		done := make(chan *shed.Refusal)
		go func() {
			_, no := s.Admit(ctx, shed.Request{})
			done <- no
		}()
		synctest.Wait()
		time.Sleep(time.Second)
		cancel(errors.New("user left"))
		no := <-done
		if no == nil || no.Reason != shed.ReasonCanceled || no.RetryAfter <= 0 {
			t.Errorf("refusal %v, want %v", no, shed.ReasonCanceled)
		}
		s.Done(hold)
		if st := s.Stats(); st.InFlight != 0 || st.Queued != 0 {
			t.Errorf("Stats() = %+v", st)
		}
	})
}

func mustRequest(t *testing.T, ctx context.Context, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestEndlessBody: a request whose body never ends is shed at once when
// it is a retry (the 503 reaches the client while it still sends), and,
// admitted, gives its permit back when its client gives up; over HTTP/1.1
// and HTTP/2.
func TestEndlessBody(t *testing.T) {
	s := one(t, shed.Options{})
	reading := make(chan struct{}, 1)
	h := s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/read" {
			reading <- struct{}{}
			io.Copy(io.Discard, r.Body)
		}
	}))
	for _, sv := range servers(t, h) {
		t.Run(sv.name, func(t *testing.T) {
			// The first holds the permit, reading a body that never ends.
			pr, pw := io.Pipe()
			defer pw.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			first := make(chan error, 1)
			go func() {
				resp, err := sv.srv.Client().Do(mustRequest(t, ctx, http.MethodPost, sv.srv.URL+"/read", pr))
				if err == nil {
					resp.Body.Close()
				}
				first <- err
			}()
			go io.Copy(pw, zeros{}) // ends when pw is closed
			<-reading
			// A retry with a body that never ends is shed at once.
			pr2, pw2 := io.Pipe()
			defer pw2.Close()
			go io.Copy(pw2, zeros{})
			req := mustRequest(t, context.Background(), http.MethodPost, sv.srv.URL, pr2)
			req.Header.Set("Retry-Attempt", "2")
			resp, err := sv.srv.Client().Do(req)
			if err != nil {
				t.Fatalf("shed request with an endless body: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
				t.Errorf("shed request with an endless body: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
			}
			cancel()
			<-first
			settled(t, s)
		})
	}
}

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestNilBody: a request with a nil Body is served and shed like any
// other (Handler never reads the body).
func TestNilBody(t *testing.T) {
	s := one(t, shed.Options{})
	h := s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	req := httptest.NewRequest(http.MethodPost, "/", nil)
	req.Body = nil
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNoContent {
		t.Errorf("admitted: %d", rec.Code)
	}
	hold, _ := s.Admit(context.Background(), shed.Request{})
	defer s.Done(hold)
	req.Header.Set("Retry-Attempt", "2")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("shed: %d", rec.Code)
	}
}

// holder takes a Shedder's one permit with a request to /hold that its
// handler keeps until given back.
type holder struct{ holding, release chan struct{} }

func newHolder() *holder {
	return &holder{holding: make(chan struct{}, 1), release: make(chan struct{})}
}

// handler serves /hold until given back, and any other path at once.
func (h *holder) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			h.holding <- struct{}{}
			<-h.release
		}
	})
}

// take sends the request to /hold on srv and returns once its handler
// runs; the function it returns gives the permit back and waits for the
// request's end.
func (h *holder) take(srv *httptest.Server) (give func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := srv.Client().Get(srv.URL + "/hold"); err == nil {
			resp.Body.Close()
		}
	}()
	<-h.holding
	return func() { h.release <- struct{}{}; <-done }
}

// stalled is a request body that sends a little, then nothing until its
// request's context ends: a client whose upload stalled. (net/http's
// client waits for a body's Read to return before it gives up a request.)
type stalled struct {
	sent bool
	ctx  context.Context
}

func (b *stalled) Read(p []byte) (int, error) {
	if !b.sent {
		b.sent = true
		return copy(p, strings.Repeat("x", 1024)), nil
	}
	<-b.ctx.Done()
	return 0, b.ctx.Err()
}

// TestShedWhileBodyStalls: the refusal of a request whose body is still
// being sent, and stalls, reaches the client at once, over HTTP/1.1 (where
// it closes the connection) and HTTP/2; a bodiless refusal over HTTP/1.1
// keeps its connection.
func TestShedWhileBodyStalls(t *testing.T) {
	s := one(t, shed.Options{})
	hold := newHolder()
	h := s.Handler(hold.handler())
	for _, sv := range servers(t, h) {
		t.Run(sv.name, func(t *testing.T) {
			defer hold.take(sv.srv)()
			tests := []struct {
				name  string
				body  bool
				close bool // Connection: close over HTTP/1.1
			}{
				{name: "a body that stalls", body: true, close: !sv.srv.EnableHTTP2},
				{name: "no body"},
			}
			for _, tt := range tests {
				// Without the answer, the request would end with this
				// deadline: a pass takes milliseconds.
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				var body io.Reader
				if tt.body {
					body = &stalled{ctx: ctx}
				}
				req := mustRequest(t, ctx, http.MethodPost, sv.srv.URL, body)
				req.Header.Set("Retry-Attempt", "2")
				resp, err := sv.srv.Client().Do(req)
				cancel()
				if err != nil {
					t.Fatalf("%s: %v, want the 503 while the body stalls", tt.name, err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusServiceUnavailable || resp.Close != tt.close {
					t.Errorf("%s: %d, Connection: close %v; want 503, %v", tt.name, resp.StatusCode, resp.Close, tt.close)
				}
			}
		})
	}
}

// TestQueuedClientGoesAwayWithBody: a queued request whose client gives
// up leaves the queue at once, counted as canceled, except over HTTP/1.1
// when it has a body, which net/http does not watch until it is read: that
// one stays queued (until QueueWait, or a permit). QueueWait says so.
func TestQueuedClientGoesAwayWithBody(t *testing.T) {
	s := one(t, shed.Options{QueueWait: time.Minute})
	hold := newHolder()
	h := s.Handler(hold.handler())
	for _, sv := range servers(t, h) {
		tests := []struct {
			method string
			body   io.Reader
			stays  bool // still queued after its client left
		}{
			{method: http.MethodGet},
			{method: http.MethodPost, body: strings.NewReader("row 42"), stays: !sv.srv.EnableHTTP2},
		}
		for _, tt := range tests {
			t.Run(sv.name+"/"+tt.method, func(t *testing.T) {
				give := hold.take(sv.srv)
				before := s.Stats().Shed[shed.ReasonCanceled]
				ctx, cancel := context.WithCancelCause(t.Context())
				done := make(chan struct{})
				go func() {
					defer close(done)
					if resp, err := sv.srv.Client().Do(mustRequest(t, ctx, tt.method, sv.srv.URL, tt.body)); err == nil {
						resp.Body.Close()
					}
				}()
				eventually(t, "the request queues", func() bool { return s.Stats().Queued == 1 })
				cancel(errors.New("user left"))
				<-done
				if tt.stays {
					time.Sleep(100 * time.Millisecond) // gone at once had net/http noticed
					if st := s.Stats(); st.Queued != 1 || st.Shed[shed.ReasonCanceled] != before {
						t.Errorf("%+v: want the request still queued, none canceled", st)
					}
				} else {
					eventually(t, "the request leaves the queue, canceled", func() bool {
						st := s.Stats()
						return st.Queued == 0 && st.Shed[shed.ReasonCanceled] == before+1
					})
				}
				give()
				settled(t, s)
			})
		}
	}
}
