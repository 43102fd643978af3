package shed_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/shed"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNewInvalid(t *testing.T) {
	tests := []struct {
		name string
		opts shed.Options
		want string
	}{
		{name: "queue", opts: shed.Options{Queue: -1}, want: "shed: Options.Queue = -1: must be >= 0"},
		{name: "initial", opts: shed.Options{Initial: -1}, want: "shed: Options.Initial = -1: must be in [0, 1000000]"},
		{name: "min over max", opts: shed.Options{Min: 10, Max: 5}, want: "shed: Options.Min = 10: must be <= Max (5)"},
		{name: "initial outside", opts: shed.Options{Initial: 50, Max: 10}, want: "shed: Options.Initial = 50: must be within [Min, Max] = [1, 10]"},
		{name: "queue wait", opts: shed.Options{QueueWait: -time.Second}, want: "shed: Options.QueueWait = -1s: must be >= 0"},
		{name: "max latency", opts: shed.Options{MaxLatency: -1}, want: "shed: Options.MaxLatency = -1ns: must be >= 0"},
		{name: "max retry after", opts: shed.Options{MaxRetryAfter: 500 * time.Millisecond}, want: "shed: Options.MaxRetryAfter = 500ms: must be 0 or >= 1s"},
		{name: "quota limit", opts: shed.Options{Quota: shed.Quota{Limit: -1}}, want: "shed: Options.Quota.Limit = -1: must be in [0, 999999999999999], the integers a Structured Field can carry (RFC 9651)"},
		{name: "quota limit past 15 digits", opts: shed.Options{Quota: shed.Quota{Limit: 1_000_000_000_000_000}}, want: "shed: Options.Quota.Limit = 1000000000000000: must be in [0, 999999999999999], the integers a Structured Field can carry (RFC 9651)"},
		{name: "quota window", opts: shed.Options{Quota: shed.Quota{Limit: 1, Window: 1500 * time.Millisecond}}, want: "shed: Options.Quota.Window = 1.5s: must be a whole number of seconds >= 0"},
		{name: "client share over 1", opts: shed.Options{ClientShare: 1.5}, want: "shed: Options.ClientShare = 1.5: must be in [0, 1] (0 means 0.75)"},
		{name: "client share negative", opts: shed.Options{ClientShare: -0.5}, want: "shed: Options.ClientShare = -0.5: must be in [0, 1] (0 means 0.75)"},
		{name: "client share NaN", opts: shed.Options{ClientShare: math.NaN()}, want: "shed: Options.ClientShare = NaN: must be in [0, 1] (0 means 0.75)"},
		{name: "IPv6 prefix", opts: shed.Options{IPv6Prefix: 129}, want: "shed: Options.IPv6Prefix = 129: must be in [0, 128] (0 means 64)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := shed.New(tt.opts)
			if err == nil || err.Error() != tt.want || s != nil {
				t.Errorf("New() = %v, %v; want nil, %q", s, err, tt.want)
			}
		})
	}
	if s, err := shed.New(shed.Options{}); err != nil || s.Stats().Limit != 20 {
		t.Errorf("New(Options{}) = %v, %v; want a limit of 20", s, err)
	}
}

// blocking returns a handler that holds each request until release is
// closed, and a channel that receives as each one starts.
func blocking() (h http.Handler, started chan struct{}, release chan struct{}) {
	started, release = make(chan struct{}, 100), make(chan struct{})
	h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
		io.WriteString(w, "ok")
	})
	return h, started, release
}

// get sends a GET with the given header fields and returns the status, the
// Retry-After field and the body.
func get(t *testing.T, url string, fields ...string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(fields); i += 2 {
		req.Header.Set(fields[i], fields[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(body)
}

// TestRetriesShedFirst holds the one permit, then sends retries, a Low
// request, and a first attempt: the first three are shed at once with
// 503, the last queues and is served when the permit comes back.
func TestRetriesShedFirst(t *testing.T) {
	s, err := shed.New(shed.Options{Initial: 1, Min: 1, Max: 1, QueueWait: 10 * time.Second,
		Priority: func(r *http.Request) shed.Priority {
			if r.URL.Path == "/batch" {
				return shed.Low
			}
			return shed.Normal
		}})
	if err != nil {
		t.Fatal(err)
	}
	h, started, release := blocking()
	srv := httptest.NewServer(s.Handler(h))
	defer srv.Close()

	first := make(chan int)
	go func() { code, _, _ := get(t, srv.URL); first <- code }()
	<-started

	shedTests := []struct {
		name   string
		path   string
		fields []string
	}{
		{name: "Retry-Attempt 2", path: "/", fields: []string{"Retry-Attempt", "2"}},
		{name: "x-envoy-attempt-count 3", path: "/", fields: []string{"x-envoy-attempt-count", "3"}},
		{name: "huge attempt", path: "/", fields: []string{"Retry-Attempt", "99999999999999999999"}},
		{name: "low priority", path: "/batch"},
	}
	for _, tt := range shedTests {
		code, ra, body := get(t, srv.URL+tt.path, tt.fields...)
		if code != http.StatusServiceUnavailable || ra == "" || !strings.HasPrefix(body, "shed: server overloaded, retry after "+ra+" s") {
			t.Errorf("%s: %d, Retry-After %q, body %q; want 503 with Retry-After", tt.name, code, ra, body)
		}
	}
	queued := make(chan int)
	go func() { code, _, _ := get(t, srv.URL, "Retry-Attempt", "abc"); queued <- code }() // malformed: a first attempt
	for s.Stats().Queued == 0 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	if code := <-first; code != http.StatusOK {
		t.Errorf("first request: %d, want 200", code)
	}
	if code := <-queued; code != http.StatusOK {
		t.Errorf("queued request: %d, want 200", code)
	}
	st := s.Stats()
	if st.Shed[shed.ReasonLow] != 4 || st.Admitted != 2 || st.InFlight != 0 || st.Queued != 0 {
		t.Errorf("Stats() = %+v, want 4 shed as low priority, 2 admitted, none left", st)
	}
}

// TestQueue runs the core on virtual time: a full queue sheds at once, a
// queued request gives up after QueueWait or when its context ends, and
// a permit given back goes to the head of the queue.
func TestQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := shed.New(shed.Options{Initial: 1, Min: 1, Max: 1, Queue: 2, QueueWait: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		hold, no := s.Admit(ctx, shed.Request{})
		if no != nil {
			t.Fatal(no)
		}
		type result struct {
			name string
			no   *shed.Refusal
			at   time.Duration
		}
		results := make(chan result, 3)
		start := time.Now()
		admit := func(name string, ctx context.Context) {
			tk, no := s.Admit(ctx, shed.Request{})
			results <- result{name, no, time.Since(start)}
			s.Done(tk)
		}
		cctx, cancel := context.WithCancel(ctx)
		go admit("canceled", cctx)
		synctest.Wait()
		go admit("times out", ctx)
		synctest.Wait()
		if _, no := s.Admit(ctx, shed.Request{}); no == nil || no.Reason != shed.ReasonQueueFull {
			t.Errorf("third waiter: %v, want %v", no, shed.ReasonQueueFull)
		}
		time.Sleep(10 * time.Millisecond)
		cancel()
		r := <-results
		if r.name != "canceled" || r.no == nil || r.no.Reason != shed.ReasonCanceled || r.at != 10*time.Millisecond {
			t.Errorf("%s: %v at %v, want %v at 10ms", r.name, r.no, r.at, shed.ReasonCanceled)
		}
		r = <-results
		if r.name != "times out" || r.no == nil || r.no.Reason != shed.ReasonQueueTimeout || r.at != 50*time.Millisecond {
			t.Errorf("%s: %v at %v, want %v at 50ms", r.name, r.no, r.at, shed.ReasonQueueTimeout)
		}
		// A permit given back goes to the waiter, not to a newcomer.
		start = time.Now()
		go admit("handed", ctx)
		synctest.Wait()
		time.Sleep(20 * time.Millisecond)
		s.Done(hold)
		if _, no := s.Admit(ctx, shed.Request{Attempt: 2}); no == nil {
			t.Errorf("a retry took the permit handed to the queue")
		}
		r = <-results
		if r.no != nil || r.at != 20*time.Millisecond {
			t.Errorf("%s: %v at %v, want admitted at 20ms", r.name, r.no, r.at)
		}
		if st := s.Stats(); st.InFlight != 0 || st.Queued != 0 {
			t.Errorf("Stats() = %+v, want nothing in flight or queued", st)
		}
	})
}

func TestPanicGivesPermitBack(t *testing.T) {
	s, err := shed.New(shed.Options{Initial: 1, Min: 1, Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	srv := httptest.NewUnstartedServer(s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			panic("handler bug")
		}
		io.WriteString(w, "ok")
	})))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	defer srv.Close()
	if _, err := http.Get(srv.URL); err == nil {
		t.Errorf("the panic did not reach net/http (which drops the connection)")
	}
	if code, _, _ := get(t, srv.URL); code != http.StatusOK {
		t.Errorf("after a panic: %d, want 200 (the permit given back)", code)
	}
	if st := s.Stats(); st.InFlight != 0 || st.Admitted != 2 {
		t.Errorf("Stats() = %+v, want 2 admitted, none in flight", st)
	}
}

func TestNilHandlerAndShedder(t *testing.T) {
	s, err := shed.New(shed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mux *http.ServeMux
	for _, next := range []http.Handler{nil, http.HandlerFunc(nil), mux} {
		rec := httptest.NewRecorder()
		s.Handler(next).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "Handler(nil)") {
			t.Errorf("Handler(%#v): %d %q, want 500 naming the problem", next, rec.Code, rec.Body.String())
		}
	}
	if st := s.Stats(); st.Admitted != 0 || st.InFlight != 0 {
		t.Errorf("Stats() = %+v after nil handlers, want nothing admitted", st)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	for _, s := range []*shed.Shedder{nil, {}} {
		rec := httptest.NewRecorder()
		s.Handler(ok).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		if rec.Code != http.StatusNoContent {
			t.Errorf("%#v.Handler: %d, want the handler's 204", s, rec.Code)
		}
	}
}

// TestQuota: the RateLimit fields on every counted response, 429 with the
// window's reset past the quota, and a client of "" leaves a request out.
func TestQuota(t *testing.T) {
	s, err := shed.New(shed.Options{Quota: shed.Quota{Limit: 2, Window: 30 * time.Second}, Client: func(r *http.Request) string {
		return r.Header.Get("Client")
	}})
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	tests := []struct {
		client     string
		wantCode   int
		wantLimit  string
		wantRetry  string
		wantPolicy string
	}{
		{client: "a", wantCode: 200, wantPolicy: `"default";q=2;w=30`, wantLimit: `"default";r=1;t=30`},
		{client: "a", wantCode: 200, wantPolicy: `"default";q=2;w=30`, wantLimit: `"default";r=0;t=30`},
		{client: "a", wantCode: 429, wantPolicy: `"default";q=2;w=30`, wantLimit: `"default";r=0;t=30`, wantRetry: "30"},
		{client: "b", wantCode: 200, wantPolicy: `"default";q=2;w=30`, wantLimit: `"default";r=1;t=30`},
		{client: "", wantCode: 200},
	}
	for i, tt := range tests {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("Client", tt.client)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		got := rec.Result().Header
		if rec.Code != tt.wantCode || got.Get("RateLimit-Policy") != tt.wantPolicy || got.Get("RateLimit") != tt.wantLimit || got.Get("Retry-After") != tt.wantRetry {
			t.Errorf("request %d of %q: %d, RateLimit-Policy %q, RateLimit %q, Retry-After %q; want %d, %q, %q, %q", i, tt.client,
				rec.Code, got.Get("RateLimit-Policy"), got.Get("RateLimit"), got.Get("Retry-After"), tt.wantCode, tt.wantPolicy, tt.wantLimit, tt.wantRetry)
		}
	}
	if st := s.Stats(); st.Shed[shed.ReasonQuota] != 1 {
		t.Errorf("Stats().Shed[ReasonQuota] = %d, want 1", st.Shed[shed.ReasonQuota])
	}
}

// TestRetriesAtOneLayer: a client of package retry inside the handler
// makes one attempt to a failing dependency when the request it serves is
// itself a retry, and all its attempts otherwise.
func TestRetriesAtOneLayer(t *testing.T) {
	var downstreamHits atomic.Int64
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		downstreamHits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()
	client := &http.Client{Transport: retry.NewTransport(down.Client().Transport,
		retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond, MaxInterval: 2 * time.Millisecond}))}
	defer client.CloseIdleConnections()
	s, err := shed.New(shed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, down.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		resp.Body.Close()
		w.Header().Set("Inbound", strconv.Itoa(retry.InboundAttempt(r.Context())))
		w.WriteHeader(resp.StatusCode)
	})))
	defer up.Close()
	tests := []struct {
		name     string
		fields   []string
		wantHits int64
	}{
		{name: "first attempt", wantHits: 3},
		{name: "Retry-Attempt 2", fields: []string{"Retry-Attempt", "2"}, wantHits: 1},
		{name: "x-envoy-attempt-count 2", fields: []string{"x-envoy-attempt-count", "2"}, wantHits: 1},
		{name: "Retry-Attempt 1", fields: []string{"Retry-Attempt", "1"}, wantHits: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			downstreamHits.Store(0)
			get(t, up.URL, tt.fields...)
			if got := downstreamHits.Load(); got != tt.wantHits {
				t.Errorf("downstream attempts = %d, want %d", got, tt.wantHits)
			}
		})
	}
}

func TestRefusalError(t *testing.T) {
	r := &shed.Refusal{Reason: shed.ReasonQueueTimeout, RetryAfter: 3 * time.Second}
	var err error = r
	var got *shed.Refusal
	if !errors.As(err, &got) || err.Error() != "shed: queue timeout, retry after 3s" {
		t.Errorf("Error() = %q", err.Error())
	}
}

// TestStatsShedNamed: Stats.Shed prints each count by its reason's name,
// alone and inside Stats, and is still indexed by Reason.
func TestStatsShedNamed(t *testing.T) {
	st := shed.Stats{Limit: 4, Admitted: 130}
	st.Shed[shed.ReasonQueueFull], st.Shed[shed.ReasonQueueTimeout] = 116, 14
	const want = "{queue full: 116, queue timeout: 14, low priority: 0, canceled: 0, quota: 0, client share: 0}"
	if got := fmt.Sprint(st.Shed); got != want {
		t.Errorf("fmt.Sprint(Shed) = %q, want %q", got, want)
	}
	if got := fmt.Sprintf("%+v", st); !strings.Contains(got, "Shed:"+want) {
		t.Errorf("fmt.Sprintf(%%+v, Stats) = %q, want it to hold Shed:%s", got, want)
	}
}
