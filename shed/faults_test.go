package shed_test

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// TestManyClients sends 500 concurrent requests to a handler of four
// workers: every request is either served (the handler ran) or shed
// (503, the handler did not run), never both; at most Max run at once
// and at most Queue wait; every permit comes back and the queue empties.
func TestManyClients(t *testing.T) {
	const clients, workers, queue = 500, 4, 8
	s, err := shed.New(shed.Options{Initial: workers, Min: workers, Max: workers, Queue: queue, QueueWait: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var running, peak, ran atomic.Int64
	srv := httptest.NewServer(s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		ran.Add(1)
		time.Sleep(time.Millisecond)
		running.Add(-1)
		w.Header().Set("Served", "yes")
	})))
	defer srv.Close()
	client := srv.Client()
	defer client.CloseIdleConnections()

	stop := make(chan struct{})
	var maxQueued atomic.Int64
	var watch sync.WaitGroup
	watch.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if q := int64(s.Stats().Queued); q > maxQueued.Load() {
				maxQueued.Store(q)
			}
			time.Sleep(100 * time.Microsecond)
		}
	})
	var ok, shedN, both, other atomic.Int64
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			req := mustRequest(t, context.Background(), http.MethodGet, srv.URL, nil)
			if i%5 == 0 {
				req.Header.Set("Retry-Attempt", "2")
			}
			resp, err := client.Do(req)
			if err != nil {
				other.Add(1)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			served := resp.Header.Get("Served") == "yes"
			switch {
			case resp.StatusCode == http.StatusOK && served:
				ok.Add(1)
			case resp.StatusCode == http.StatusServiceUnavailable && !served:
				shedN.Add(1)
			case served:
				both.Add(1)
			default:
				other.Add(1)
			}
		})
	}
	wg.Wait()
	close(stop)
	watch.Wait()
	settled(t, s)
	st := s.Stats()
	var shedTotal int64
	for _, n := range st.Shed {
		shedTotal += n
	}
	if both.Load() != 0 || other.Load() != 0 || ok.Load()+shedN.Load() != clients {
		t.Errorf("served %d, shed %d, both %d, other %d; want %d served or shed", ok.Load(), shedN.Load(), both.Load(), other.Load(), clients)
	}
	if ran.Load() != ok.Load() || st.Admitted != ok.Load() || shedTotal != shedN.Load() {
		t.Errorf("handler ran %d, Admitted %d, Shed %d; clients saw %d served, %d shed", ran.Load(), st.Admitted, shedTotal, ok.Load(), shedN.Load())
	}
	if peak.Load() > workers || maxQueued.Load() > queue {
		t.Errorf("peak running %d (max %d), peak queued %d (max %d)", peak.Load(), workers, maxQueued.Load(), queue)
	}
	if ok.Load() == 0 || shedN.Load() == 0 {
		t.Errorf("served %d, shed %d: the load should both serve and shed", ok.Load(), shedN.Load())
	}
}

// TestQueueFIFO: waiters are admitted in the order they queued, one a
// permit given back.
func TestQueueFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 50
		s, err := shed.New(shed.Options{Initial: 1, Min: 1, Max: 1, Queue: n, QueueWait: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		hold, _ := s.Admit(context.Background(), shed.Request{})
		order := make(chan int, n)
		tickets := make(chan shed.Ticket, n)
		for i := range n {
			go func() {
				tk, no := s.Admit(context.Background(), shed.Request{})
				if no != nil {
					t.Errorf("waiter %d shed: %v", i, no)
					return
				}
				order <- i
				tickets <- tk
			}()
			synctest.Wait() // queued before the next one
		}
		if _, no := s.Admit(context.Background(), shed.Request{}); no == nil || no.Reason != shed.ReasonQueueFull {
			t.Errorf("past the queue's bound: %v, want %v", no, shed.ReasonQueueFull)
		}
		s.Done(hold)
		for want := range n {
			if got := <-order; got != want {
				t.Fatalf("admitted waiter %d, want %d", got, want)
			}
			s.Done(<-tickets)
		}
		if st := s.Stats(); st.InFlight != 0 || st.Queued != 0 || st.Admitted != n+1 {
			t.Errorf("Stats() = %+v", st)
		}
	})
}

// TestZeroAndNil: a nil *Shedder and a zero Shedder admit everything and
// report nothing; Admit, Done and Stats do not panic on them.
func TestZeroAndNil(t *testing.T) {
	for _, s := range []*shed.Shedder{nil, {}} {
		tk, no := s.Admit(context.Background(), shed.Request{Attempt: 5, Priority: shed.Low, Key: "k"})
		if no != nil {
			t.Errorf("%#v.Admit: %v", s, no)
		}
		s.Done(tk)
		s.Done(shed.Ticket{})
		if st := s.Stats(); st != (shed.Stats{}) {
			t.Errorf("%#v.Stats() = %+v", s, st)
		}
	}
}

// TestOptionsEdges: values at and past the bounds give an error naming
// the field, its value and the rule, or a working Shedder; none panics.
func TestOptionsEdges(t *testing.T) {
	var nilPriority func(*http.Request) shed.Priority
	tests := []struct {
		name       string
		opts       shed.Options
		wantErr    string
		wantSecond int // the second request's status, when not 200
	}{
		{name: "initial past the bound", opts: shed.Options{Initial: math.MaxInt}, wantErr: "shed: Options.Initial = " + strconv.Itoa(math.MaxInt) + ": must be in [0, 1000000]"},
		{name: "min negative", opts: shed.Options{Min: math.MinInt}, wantErr: "shed: Options.Min = " + strconv.Itoa(math.MinInt) + ": must be in [0, 1000000]"},
		{name: "max past the bound", opts: shed.Options{Max: 1_000_001}, wantErr: "shed: Options.Max = 1000001: must be in [0, 1000000]"},
		{name: "max retry after negative", opts: shed.Options{MaxRetryAfter: -time.Second}, wantErr: "shed: Options.MaxRetryAfter = -1s: must be 0 or >= 1s"},
		{name: "quota window negative", opts: shed.Options{Quota: shed.Quota{Limit: 1, Window: -time.Second}}, wantErr: "shed: Options.Quota.Window = -1s: must be a whole number of seconds >= 0"},
		{name: "bounds at their most", opts: shed.Options{Initial: 1_000_000, Min: 1_000_000, Max: 1_000_000}},
		{name: "huge durations and queue", opts: shed.Options{MaxLatency: math.MaxInt64, QueueWait: math.MaxInt64, Queue: math.MaxInt, MaxRetryAfter: math.MaxInt64}},
		{name: "huge quota", opts: shed.Options{Quota: shed.Quota{Limit: math.MaxInt, Window: math.MaxInt64 / time.Second * time.Second}}},
		{name: "typed nil priority, quota without key", opts: shed.Options{Initial: 1, Priority: nilPriority, Quota: shed.Quota{Limit: 1}}, wantSecond: http.StatusTooManyRequests},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := shed.New(tt.opts)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr || s != nil {
					t.Errorf("New() = %v, %v; want %q", s, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// It serves, and, with its permits taken by a handler on hold,
			// sheds a retry with a Retry-After in bounds.
			release := make(chan struct{})
			srv := httptest.NewServer(s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/hold" {
					<-release
				}
			})))
			defer srv.Close()
			if code, _, _ := get(t, srv.URL); code != http.StatusOK {
				t.Errorf("first request: %d", code)
			}
			if code, _, _ := get(t, srv.URL); code != cmp.Or(tt.wantSecond, http.StatusOK) {
				t.Errorf("second request: %d, want %d", code, cmp.Or(tt.wantSecond, http.StatusOK))
			}
			if tt.opts.Initial == 0 { // 20 permits: take them
				var wg sync.WaitGroup
				defer wg.Wait()
				defer close(release)
				for range 20 {
					wg.Go(func() { get(t, srv.URL+"/hold") })
				}
				eventually(t, "20 in flight", func() bool { return s.Stats().InFlight == 20 })
				code, ra, _ := get(t, srv.URL, "Retry-Attempt", "2")
				n, err := strconv.ParseInt(ra, 10, 64)
				most := max(int64(tt.opts.MaxRetryAfter/time.Second), 60)
				if tt.opts.MaxRetryAfter == 0 {
					most = 60
				}
				if code != http.StatusServiceUnavailable || err != nil || n < 1 || n > most {
					t.Errorf("retry: %d, Retry-After %q; want 503 within [1, %d]", code, ra, most)
				}
			} else {
				close(release)
			}
		})
	}
}

// TestPriorityPanics: a Priority func that panics is a bug of the
// handler's own: the panic goes on to net/http (which drops the
// connection), and no permit is taken.
func TestPriorityPanics(t *testing.T) {
	s := one(t, shed.Options{Priority: func(r *http.Request) shed.Priority {
		if r.URL.Path == "/bug" {
			panic("priority bug")
		}
		return shed.Normal
	}})
	srv := httptest.NewUnstartedServer(s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	defer srv.Close()
	if resp, err := http.Get(srv.URL + "/bug"); err == nil {
		resp.Body.Close()
		t.Errorf("the panic did not reach net/http: %d", resp.StatusCode)
	}
	if code, _, _ := get(t, srv.URL); code != http.StatusOK {
		t.Errorf("after the panic: %d, want 200", code)
	}
	if st := s.Stats(); st.InFlight != 0 || st.Admitted != 1 {
		t.Errorf("Stats() = %+v, want 1 admitted, none in flight", st)
	}
}

// TestRetryAfterSpreads: many requests shed at one moment are told more
// than one Retry-After, each a whole number of seconds within [1,
// MaxRetryAfter].
func TestRetryAfterSpreads(t *testing.T) {
	tests := []struct {
		name string
		most time.Duration
	}{
		{name: "default cap", most: 0},
		{name: "cap of 3 s", most: 3 * time.Second},
		{name: "cap of 1 s", most: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := one(t, shed.Options{MaxRetryAfter: tt.most})
			h := s.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			hold, _ := s.Admit(context.Background(), shed.Request{})
			defer s.Done(hold)
			most := int64(60)
			if tt.most != 0 {
				most = int64(tt.most / time.Second)
			}
			seen := map[int64]int{}
			for range 200 {
				req := httptest.NewRequest(http.MethodGet, "/", nil)
				req.Header.Set("Retry-Attempt", "2")
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				n, err := strconv.ParseInt(rec.Header().Get("Retry-After"), 10, 64)
				if rec.Code != http.StatusServiceUnavailable || err != nil || n < 1 || n > most {
					t.Fatalf("%d, Retry-After %q; want 503 within [1, %d]", rec.Code, rec.Header().Get("Retry-After"), most)
				}
				seen[n]++
			}
			if wantSpread := most > 1; wantSpread && len(seen) < 2 {
				t.Errorf("Retry-After values %v: 200 clients shed together are told the same", seen)
			}
		})
	}
}

var (
	policyField = regexp.MustCompile(`^"default";q=(\d+);w=(\d+)$`)
	limitField  = regexp.MustCompile(`^"default";r=(\d+);t=(\d+)$`)
)

// TestQuotaFields: over a run of requests past a quota, some also shed
// for overload, every response carries RateLimit-Policy and RateLimit
// exactly as draft-ietf-httpapi-ratelimit-headers-10 writes them, r never
// negative, t at least 1 and at most the window; a 429 has Retry-After
// equal to t, even with a window longer than MaxRetryAfter.
func TestQuotaFields(t *testing.T) {
	tests := []struct {
		name   string
		window time.Duration
	}{
		{name: "window 10 s", window: 10 * time.Second},
		{name: "window over MaxRetryAfter", window: 2 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := one(t, shed.Options{Quota: shed.Quota{Limit: 3, Window: tt.window}})
			h := s.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			hold, _ := s.Admit(context.Background(), shed.Request{})
			held := true
			codes := map[int]int{}
			for i := range 10 {
				if i == 2 && held { // two shed for overload first, then served
					s.Done(hold)
					held = false
				}
				req := httptest.NewRequest(http.MethodGet, "/", nil)
				req.Header.Set("Retry-Attempt", "2")
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				codes[rec.Code]++
				p := policyField.FindStringSubmatch(rec.Header().Get("RateLimit-Policy"))
				l := limitField.FindStringSubmatch(rec.Header().Get("RateLimit"))
				if p == nil || l == nil || p[1] != "3" || p[2] != strconv.Itoa(int(tt.window/time.Second)) {
					t.Fatalf("request %d: %d, RateLimit-Policy %q, RateLimit %q", i, rec.Code, rec.Header().Get("RateLimit-Policy"), rec.Header().Get("RateLimit"))
				}
				r, _ := strconv.Atoi(l[1])
				tt2, _ := strconv.ParseInt(l[2], 10, 64)
				if r < 0 || r > 3 || tt2 < 1 || tt2 > int64(tt.window/time.Second) {
					t.Errorf("request %d: r = %d, t = %d", i, r, tt2)
				}
				if rec.Code == http.StatusTooManyRequests && (r != 0 || rec.Header().Get("Retry-After") != l[2]) {
					t.Errorf("request %d: 429 with r = %d, Retry-After %q, t = %s; want r = 0, Retry-After = t", i, r, rec.Header().Get("Retry-After"), l[2])
				}
			}
			if held {
				s.Done(hold)
			}
			if codes[http.StatusServiceUnavailable] != 2 || codes[http.StatusOK] != 3 || codes[http.StatusTooManyRequests] != 5 {
				t.Errorf("codes %v, want 2 shed for overload (given back to the quota), 3 served, 5 over quota", codes)
			}
		})
	}
}
