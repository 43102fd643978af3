//go:build !race

package shed_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/steadyhq/retry/shed"
)

// nopWriter is a ResponseWriter that keeps nothing, so that the figures
// are the middleware's own.
type nopWriter struct{ h http.Header }

func (w nopWriter) Header() http.Header         { return w.h }
func (w nopWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w nopWriter) WriteHeader(int)             {}

var nop = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

// TestAdmittedAllocs: a first attempt admitted without a quota allocates
// nothing, timed or not.
func TestAdmittedAllocs(t *testing.T) {
	s, err := shed.New(shed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler(nop)
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	w := nopWriter{h: http.Header{}}
	if n := testing.AllocsPerRun(1000, func() { h.ServeHTTP(w, req) }); n != 0 {
		t.Errorf("admitted request: %v allocs, want 0", n)
	}
}

// TestAdmittedAllocsOthers: what docs/shedding.md gives for the other admitted
// requests: a retry allocates 2 (its context, marked with
// retry.WithInboundAttempt, and the request's copy), a request under a
// quota 6 (its RateLimit fields).
func TestAdmittedAllocsOthers(t *testing.T) {
	tests := []struct {
		name   string
		opts   shed.Options
		header string // Retry-Attempt
		want   float64
	}{
		{name: "retry", header: "2", want: 2},
		{name: "quota", opts: shed.Options{Quota: shed.Quota{Limit: 1 << 40}, Client: func(*http.Request) string { return "k" }}, want: 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := shed.New(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			h := s.Handler(nop)
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			if tt.header != "" {
				req.Header.Set("Retry-Attempt", tt.header)
			}
			w := nopWriter{h: http.Header{}}
			if n := testing.AllocsPerRun(1000, func() { h.ServeHTTP(w, req) }); n != tt.want {
				t.Errorf("%v allocs, want %v", n, tt.want)
			}
		})
	}
}

// BenchmarkAdmitted is the middleware's cost on an admitted first attempt
// without a quota: compare with the handler alone ("bare").
func BenchmarkAdmitted(b *testing.B) {
	s, err := shed.New(shed.Options{})
	if err != nil {
		b.Fatal(err)
	}
	// Warm up: until the limit's first windows close, it times every
	// request (two clock readings and its lock); then one in up to 64.
	warm, req := s.Handler(nop), httptest.NewRequest(http.MethodGet, "/", nil)
	for end := time.Now().Add(1100 * time.Millisecond); time.Now().Before(end); {
		for range 1000 {
			warm.ServeHTTP(nopWriter{h: http.Header{}}, req)
		}
	}
	for _, bb := range []struct {
		name string
		h    http.Handler
	}{
		{name: "bare", h: nop},
		{name: "shed", h: s.Handler(nop)},
	} {
		b.Run(bb.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			w := nopWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				bb.h.ServeHTTP(w, req)
			}
		})
		b.Run(bb.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req := httptest.NewRequest(http.MethodGet, "/", nil)
				w := nopWriter{h: http.Header{}}
				for pb.Next() {
					bb.h.ServeHTTP(w, req)
				}
			})
		})
	}
}
