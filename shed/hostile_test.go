package shed_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/steadyhq/retry/shed"
)

// hostileField returns a header value of 64 KiB of unit repeated.
func hostileField(unit string) string {
	const size = 64 << 10
	return strings.Repeat(unit, size/len(unit)+1)[:size]
}

// BenchmarkParseAttempt measures ParseAttempt on 64 KiB values: it reads
// each byte once, and stops at the first that is not a digit.
func BenchmarkParseAttempt(b *testing.B) {
	for _, tt := range []struct{ name, v string }{
		{name: "nines", v: hostileField("9")},
		{name: "zeros", v: hostileField("0")},
		{name: "digits then a letter", v: hostileField("1")[1:] + "x"},
	} {
		b.Run(tt.name, func(b *testing.B) {
			b.SetBytes(int64(len(tt.v)))
			for b.Loop() {
				shed.ParseAttempt(tt.v)
			}
		})
	}
}

// BenchmarkHandlerHostileFields measures the middleware on a request
// whose attempt fields and client key are 64 KiB each: the fields are
// read once, the key hashed once.
func BenchmarkHandlerHostileFields(b *testing.B) {
	s, err := shed.New(shed.Options{
		Quota:  shed.Quota{Limit: 1 << 40},
		Client: func(r *http.Request) string { return r.Header.Get("X-Client") },
	})
	if err != nil {
		b.Fatal(err)
	}
	h := s.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set("Retry-Attempt", hostileField("0"))
	req.Header.Set("X-Envoy-Attempt-Count", hostileField("9"))
	req.Header.Set("X-Client", hostileField("k"))
	for b.Loop() {
		h.ServeHTTP(discard{http.Header{}}, req)
	}
}

// discard is a ResponseWriter that keeps nothing.
type discard struct{ h http.Header }

func (w discard) Header() http.Header         { return w.h }
func (w discard) Write(p []byte) (int, error) { return len(p), nil }
func (w discard) WriteHeader(int)             {}
