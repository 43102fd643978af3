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

// shedImpl is a handler that does nothing, behind one implementation of
// shedding (or none: plain).
type shedImpl struct {
	name string
	h    http.Handler
}

// shedImpls returns the implementations of the Shed cases, each warmed:
// until its first windows close, ours times every request.
func shedImpls(b *testing.B) []shedImpl {
	nop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	s, err := shed.New(shed.Options{})
	if err != nil {
		b.Fatal(err)
	}
	// ClientShare 1 bounds nothing: no client is hashed and no share
	// counted, so that the difference from retry-shed is their cost.
	noShare, err := shed.New(shed.Options{ClientShare: 1})
	if err != nil {
		b.Fatal(err)
	}
	impls := []shedImpl{
		{name: "plain", h: nop},
		{name: "retry-shed", h: s.Handler(nop)},
		{name: "retry-shed-no-share", h: noShare.Handler(nop)},
		{name: "failsafe-go-adaptivelimiter", h: failsafehttp.NewHandler(nop, adaptivelimiter.NewWithDefaults[*http.Response]())},
	}
	w, req := nopWriter{h: http.Header{}}, httptest.NewRequest(http.MethodGet, "/", nil)
	for _, im := range impls {
		for end := time.Now().Add(1100 * time.Millisecond); time.Now().Before(end); {
			for range 1000 {
				im.h.ServeHTTP(w, req)
			}
		}
	}
	return impls
}

// Case: a request admitted by a server's load shedding, a first attempt
// with no quota, through a handler that does nothing: the middleware's
// own cost over the handler alone ("plain"), ours (package shed with its
// defaults, and with ClientShare 1: no client's share) beside failsafe-go's
// server handler with its adaptive limiter (the policy its documentation
// gives for shedding).
func BenchmarkShed(b *testing.B) {
	for _, im := range shedImpls(b) {
		b.Run(im.name, func(b *testing.B) {
			w, req := nopWriter{h: http.Header{}}, httptest.NewRequest(http.MethodGet, "/", nil)
			defer cpuPerOp(b)()
			for b.Loop() {
				im.h.ServeHTTP(w, req)
			}
		})
	}
}

// Case: BenchmarkShed's requests from every goroutine at once, as a
// server serves them.
func BenchmarkShedParallel(b *testing.B) {
	for _, im := range shedImpls(b) {
		b.Run(im.name, func(b *testing.B) {
			defer cpuPerOp(b)()
			b.RunParallel(func(pb *testing.PB) {
				w, req := nopWriter{h: http.Header{}}, httptest.NewRequest(http.MethodGet, "/", nil)
				for pb.Next() {
					im.h.ServeHTTP(w, req)
				}
			})
		})
	}
}
