package shed_test

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry/shed"
)

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
		{name: "huge quota", opts: shed.Options{Quota: shed.Quota{Limit: 999_999_999_999_999, Window: math.MaxInt64 / time.Second * time.Second}}},
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
				for i := range 20 { // 20 clients, each within its share
					ip := fmt.Sprintf("127.0.0.%d", i+2)
					wg.Go(func() {
						if resp, err := clientFrom(t, ip).Get(srv.URL + "/hold"); err == nil {
							resp.Body.Close()
						}
					})
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
// exactly as draft-ietf-httpapi-ratelimit-headers-11 writes them, r never
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
