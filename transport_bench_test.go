package retry_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/steadyhq/retry"
)

// BenchmarkTransportCanned measures the Transport's own cost on a request
// that succeeds at once, over a base that answers from memory: with the
// caller's context, and with a deadline (which the pacing of RateLimit
// fields must not make read the clock while no key is paced).
func BenchmarkTransportCanned(b *testing.B) {
	base := memoryRT{&http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	for _, bc := range []struct {
		name string
		ctx  context.Context
	}{
		{name: "background", ctx: context.Background()},
		{name: "deadline", ctx: ctx},
	} {
		b.Run(bc.name, func(b *testing.B) {
			tr := retry.NewTransport(base)
			req, _ := http.NewRequestWithContext(bc.ctx, http.MethodGet, "http://127.0.0.1:1/", nil)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tr.RoundTrip(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// memoryRT answers every request with the same response, allocating nothing.
type memoryRT struct{ resp *http.Response }

func (m memoryRT) RoundTrip(*http.Request) (*http.Response, error) { return m.resp, nil }
