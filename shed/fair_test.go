package shed_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry/shed"
	"go.uber.org/goleak"
)

// clientFrom returns an HTTP client whose connections come from the
// loopback address ip (Linux answers on all of 127.0.0.0/8), so that a
// test server sees it as another client.
func clientFrom(t *testing.T, ip string) *http.Client {
	t.Helper()
	tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// slowUpload sends the head of a POST with a body of 1,000 bytes from
// 127.0.0.1, then one byte of it, and keeps the rest back until the test
// ends: a client uploading as slowly as it likes.
func slowUpload(t *testing.T, addr string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nx"); err != nil {
		t.Fatal(err)
	}
}

// waitStats polls s until ok holds of its Stats, for at most 10 s.
func waitStats(t *testing.T, s *shed.Shedder, ok func(shed.Stats) bool) shed.Stats {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		st := s.Stats()
		if ok(st) || time.Now().After(end) {
			return st
		}
	}
}

// One client uploading slowly on 20 connections cannot take every permit
// of a default Shedder: it holds at most its share (three quarters of the
// limit of 20), and the other clients' GETs are served. Before the share,
// the 20 uploads held all 20 permits and 0 of 10 GETs were served.
func TestSlowBodiesLeaveOthersPermits(t *testing.T) {
	defer goleak.VerifyNone(t)
	s, err := shed.New(shed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // as slow as the client sends it
		io.WriteString(w, "ok")
	})))
	defer srv.Close()
	defer srv.CloseClientConnections() // first: the uploads' handlers wait for them
	addr := strings.TrimPrefix(srv.URL, "http://")
	const uploads = 20
	for range uploads {
		slowUpload(t, addr)
	}
	st := waitStats(t, s, func(st shed.Stats) bool {
		var shed int64
		for _, n := range st.Shed {
			shed += n
		}
		return int64(st.InFlight+st.Queued)+shed >= uploads
	})
	if st.InFlight > 15 {
		t.Errorf("one client holds %d permits of %d, want at most 15 (three quarters)", st.InFlight, st.Limit)
	}
	served := 0
	for i := range 10 {
		resp, err := clientFrom(t, fmt.Sprintf("127.0.0.%d", i+2)).Get(srv.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			served++
		}
	}
	if served != 10 {
		t.Errorf("%d of 10 GETs of other clients served while one client uploads slowly, want 10 (Stats %+v)", served, s.Stats())
	}
}

// With http.Server's ReadTimeout, a slow upload ends when it runs out (the
// handler's read of the body fails), and its permit comes back: the share
// bounds how many permits one client holds, ReadTimeout for how long.
func TestReadTimeoutEndsSlowBodies(t *testing.T) {
	defer goleak.VerifyNone(t)
	s, err := shed.New(shed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusRequestTimeout)
		}
	})))
	srv.Config.ReadTimeout = 200 * time.Millisecond
	srv.Start()
	defer srv.Close()
	defer srv.CloseClientConnections()
	addr := strings.TrimPrefix(srv.URL, "http://")
	for range 5 {
		slowUpload(t, addr)
	}
	if st := waitStats(t, s, func(st shed.Stats) bool { return st.InFlight == 5 }); st.InFlight != 5 {
		t.Fatalf("%d uploads in flight, want 5", st.InFlight)
	}
	// Generous for a loaded machine: ReadTimeout is 200 ms.
	if st := waitStats(t, s, func(st shed.Stats) bool { return st.InFlight == 0 }); st.InFlight != 0 {
		t.Errorf("%d permits still held 10 s after the uploads' ReadTimeout of 200 ms", st.InFlight)
	}
}

// serveFrom serves one GET from remote through h, and returns its status.
func serveFrom(h http.Handler, remote string) int {
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = remote
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

// A flood of addresses from one IPv6 /64 is one client: it uses up one
// quota and evicts no one; with whole addresses counted apart
// (IPv6Prefix 128), the flood evicts the clients seen least recently, and
// newcomers still get windows of their own. Before, one /64 filled the
// 10,000 windows and every new client shared one: 50 of 50 legitimate
// first requests got 429.
func TestQuotaIPv6Flood(t *testing.T) {
	tests := []struct {
		name       string
		prefix     int
		wantFlood  int // of the flood's 20,000 requests, those admitted
		wantLegit  int // of 50 first requests of other networks, those admitted
		wantInside int // of 2 requests of another address of the flood's /64
	}{
		{name: "default: by /64", wantFlood: 10, wantLegit: 50, wantInside: 0},
		{name: "whole addresses", prefix: 128, wantFlood: 20_000, wantLegit: 50, wantInside: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := shed.New(shed.Options{IPv6Prefix: tt.prefix, Quota: shed.Quota{Limit: 10, Window: time.Hour}})
			if err != nil {
				t.Fatal(err)
			}
			h := s.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			flood := 0
			for i := range 20_000 {
				if serveFrom(h, fmt.Sprintf("[2001:db8:bad:1::%x]:443", i+1)) == http.StatusOK {
					flood++
				}
			}
			legit := 0
			for i := range 50 {
				if serveFrom(h, fmt.Sprintf("[2001:db8:%x::1]:443", i+1)) == http.StatusOK {
					legit++
				}
			}
			inside := 0
			for range 2 {
				if serveFrom(h, "[2001:db8:bad:1:ffff::1]:443") == http.StatusOK {
					inside++
				}
			}
			if flood != tt.wantFlood || legit != tt.wantLegit || inside != tt.wantInside {
				t.Errorf("admitted: flood %d, others %d, same /64 %d; want %d, %d, %d",
					flood, legit, inside, tt.wantFlood, tt.wantLegit, tt.wantInside)
			}
		})
	}
}

// heapInUse returns the bytes of live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// 10,000 clients named by keys of 64 KiB hold about what 10,000 short
// keys do: a client is kept as a hash of its key. Before, the keys were
// kept whole: 10,000 of 64 KiB held 704 MB.
func TestQuotaKeysBoundedInSize(t *testing.T) {
	s, err := shed.New(shed.Options{Quota: shed.Quota{Limit: 10, Window: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	key := []byte(strings.Repeat("k", 64<<10))
	before := heapInUse()
	for i := range 10_000 {
		copy(key, fmt.Sprintf("%08d", i))
		tk, no := s.Admit(context.Background(), shed.Request{Key: string(key)})
		if no != nil {
			t.Fatalf("client %d: %v", i, no)
		}
		s.Done(tk)
	}
	grown := int64(heapInUse()) - int64(before)
	t.Logf("10,000 clients of 64 KiB keys hold %d bytes", grown)
	if grown > 2<<20 {
		t.Errorf("10,000 clients of 64 KiB keys hold %d bytes, want at most 2 MiB", grown)
	}
	runtime.KeepAlive(s)
}

// A client's requests, admitted or waiting, hold at most its share of the
// limit (three quarters by default, rounded down, at least one); the next
// is shed at once with ReasonClient, and does not use the client's quota;
// other clients take the rest; a share of the whole limit bounds nothing.
func TestClientShare(t *testing.T) {
	tests := []struct {
		name  string
		opts  shed.Options
		most  int // requests of one client admitted while none ends
		limit int
	}{
		{name: "default, limit 20", opts: shed.Options{}, most: 15, limit: 20},
		{name: "half of 10", opts: shed.Options{Initial: 10, ClientShare: 0.5}, most: 5, limit: 10},
		{name: "three quarters of 2: one", opts: shed.Options{Initial: 2}, most: 1, limit: 2},
		{name: "limit 1: no share to keep", opts: shed.Options{Initial: 1, Min: 1, Max: 1}, most: 1, limit: 1},
		{name: "share 1: no bound", opts: shed.Options{ClientShare: 1}, most: 20, limit: 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tt.opts.QueueWait = time.Second
				// A quota of one more than the share: a request shed for the
				// share must be given back, or the last would be over it.
				tt.opts.Quota = shed.Quota{Limit: tt.most + 1}
				s, err := shed.New(tt.opts)
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				var held []shed.Ticket
				for i := range tt.most {
					tk, no := s.Admit(ctx, shed.Request{Key: "2001:db8::1"})
					if no != nil {
						t.Fatalf("request %d of the client: %v", i+1, no)
					}
					held = append(held, tk)
				}
				if tt.most < tt.limit {
					// Another address of the same /64 is the same client.
					_, no := s.Admit(ctx, shed.Request{Key: "2001:db8::2"})
					if no == nil || no.Reason != shed.ReasonClient || no.RetryAfter <= 0 || no.Error() != "shed: client share, retry after "+no.RetryAfter.String() {
						t.Fatalf("past the share: %v, want %v", no, shed.ReasonClient)
					}
					// Others take the rest.
					for i := tt.most; i < tt.limit; i++ {
						tk, no := s.Admit(ctx, shed.Request{Key: fmt.Sprintf("client-%d", i)})
						if no != nil {
							t.Fatalf("another client: %v", no)
						}
						held = append(held, tk)
					}
				} else {
					// The client waits in the queue behind its own request,
					// and takes the permit its first one gives back.
					go func() {
						time.Sleep(time.Millisecond)
						s.Done(held[0])
					}()
					tk, no := s.Admit(ctx, shed.Request{Key: "2001:db8::2"})
					if no != nil {
						t.Fatalf("the client's next request: %v, want it queued, then admitted", no)
					}
					held[0] = tk
				}
				// When the client's first request ends, its next is admitted.
				if tt.most < tt.limit {
					s.Done(held[0])
					tk, no := s.Admit(ctx, shed.Request{Key: "2001:db8::1"})
					if no != nil {
						t.Fatalf("the client's next request once one ended: %v", no)
					}
					held[0] = tk
				}
				for _, tk := range held {
					s.Done(tk)
				}
				synctest.Wait()
				if st := s.Stats(); st.InFlight != 0 || st.Queued != 0 || st.Shed[shed.ReasonClient] != int64(min(1, tt.limit-tt.most)) {
					t.Errorf("Stats() = %+v", st)
				}
			})
		})
	}
}

// Admit with a nil context waits in the queue as with
// context.Background(): it does not panic.
func TestAdmitNilContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := shed.New(shed.Options{Initial: 1, Min: 1, Max: 1, QueueWait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		hold, _ := s.Admit(context.Background(), shed.Request{})
		//lint:ignore SA1012 a nil context is what the test is about
		_, no := s.Admit(nil, shed.Request{})
		if no == nil || no.Reason != shed.ReasonQueueTimeout {
			t.Errorf("Admit(nil, ...) with the permit held: %v, want %v", no, shed.ReasonQueueTimeout)
		}
		s.Done(hold)
		//lint:ignore SA1012 a nil context is what the test is about
		tk, no := s.Admit(nil, shed.Request{})
		if no != nil {
			t.Errorf("Admit(nil, ...) with the permit free: %v", no)
		}
		s.Done(tk)
	})
}
