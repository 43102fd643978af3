package bench

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/failsafehttp"

	"github.com/steadyhq/retry/shed"
)

// nopWriter is a ResponseWriter that keeps nothing, so that the figures
// are the middleware's own.
type nopWriter struct{ h http.Header }

func (w nopWriter) Header() http.Header         { return w.h }
func (w nopWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w nopWriter) WriteHeader(int)             {}

// Case: a request admitted by a server's load shedding, a first attempt
// with no quota, through a handler that does nothing: the middleware's
// own cost over the handler alone ("plain"), ours (package shed with its
// defaults) beside failsafe-go's server handler with its adaptive limiter
// (the policy its documentation gives for shedding), one goroutine and
// all of them in parallel. Each limit is warmed first: until its first
// windows close, ours times every request.
func BenchmarkShed(b *testing.B) {
	nop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	s, err := shed.New(shed.Options{})
	if err != nil {
		b.Fatal(err)
	}
	impls := []struct {
		name string
		h    http.Handler
	}{
		{name: "plain", h: nop},
		{name: "retry-shed", h: s.Handler(nop)},
		{name: "failsafe-go-adaptivelimiter", h: failsafehttp.NewHandler(nop, adaptivelimiter.NewWithDefaults[*http.Response]())},
	}
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	for _, im := range impls {
		w := nopWriter{h: http.Header{}}
		for end := time.Now().Add(1100 * time.Millisecond); time.Now().Before(end); {
			for range 1000 {
				im.h.ServeHTTP(w, req)
			}
		}
	}
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			w := nopWriter{h: http.Header{}}
			for b.Loop() {
				im.h.ServeHTTP(w, req)
			}
		})
	}
}

// Case: BenchmarkShed's requests from every goroutine at once, as a
// server serves them.
func BenchmarkShedParallel(b *testing.B) {
	nop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	s, err := shed.New(shed.Options{})
	if err != nil {
		b.Fatal(err)
	}
	impls := []struct {
		name string
		h    http.Handler
	}{
		{name: "plain", h: nop},
		{name: "retry-shed", h: s.Handler(nop)},
		{name: "failsafe-go-adaptivelimiter", h: failsafehttp.NewHandler(nop, adaptivelimiter.NewWithDefaults[*http.Response]())},
	}
	for _, im := range impls {
		w, req := nopWriter{h: http.Header{}}, httptest.NewRequest(http.MethodGet, "/", nil)
		for end := time.Now().Add(1100 * time.Millisecond); time.Now().Before(end); {
			for range 1000 {
				im.h.ServeHTTP(w, req)
			}
		}
	}
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				w, req := nopWriter{h: http.Header{}}, httptest.NewRequest(http.MethodGet, "/", nil)
				for pb.Next() {
					im.h.ServeHTTP(w, req)
				}
			})
		})
	}
}
