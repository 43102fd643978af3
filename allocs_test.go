//go:build !race

package retry_test

// The allocation tests. The race detector allocates, and sync.Pool drops
// items under it, so they build without -race only: `make test` runs them
// in a pass of their own (go test -run 'Allocs$').

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/steadyhq/retry"
)

// TestClassifyAllocs: classifying a failure allocates nothing.
func TestClassifyAllocs(t *testing.T) {
	errs := []error{
		&url.Error{Op: "Get", URL: "http://x", Err: &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}},
		fmt.Errorf("w: %w", retry.Permanent(typed{"a.b"})),
		errors.Join(io.EOF, &retry.StatusError{StatusCode: 503}),
		x509.HostnameError{},
	}
	for _, err := range errs {
		if a := testing.AllocsPerRun(100, func() { _ = retry.TypeOf(err) }); a != 0 {
			t.Errorf("TypeOf(%v): %v allocs", err, a)
		}
	}
}

// TestTimerReuseAllocs: one call with many waits allocates a bounded number of
// objects (one timer), not one per wait.
func TestTimerReuseAllocs(t *testing.T) {
	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 50, InitialInterval: time.Nanosecond, MaxInterval: time.Nanosecond, Jitter: retry.Jitter{Kind: retry.JitterNone}}))
	few := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Nanosecond, MaxInterval: time.Nanosecond, Jitter: retry.Jitter{Kind: retry.JitterNone}}))
	fail := func(context.Context) error { return errTransient }
	ctx := context.Background()
	many := testing.AllocsPerRun(20, func() { _ = r.Run(ctx, fail) })
	one := testing.AllocsPerRun(20, func() { _ = few.Run(ctx, fail) })
	// Each extra attempt carries its number in a context (one allocation).
	if perAttempt := (many - one) / 48; perAttempt > 1.01 {
		t.Fatalf("%.2f allocations per extra attempt, want at most 1 (the timer must be reused)", perAttempt)
	}
}

// TestSuccessAllocs: the success path allocates nothing.
func TestSuccessAllocs(t *testing.T) {
	r := retry.New()
	ctx := context.Background()
	var n atomic.Int64
	fn := func(context.Context) error { n.Add(1); return nil }
	for name, f := range map[string]func(){
		"retrier":    func() { _ = r.Run(ctx, fn) },
		"no options": func() { _ = retry.Run(ctx, fn) },
		"do with r":  func() { _, _ = retry.Do(ctx, func(context.Context) (int, error) { return 1, nil }, r) },
	} {
		if a := testing.AllocsPerRun(100, f); a != 0 {
			t.Errorf("%s: %v allocs per call, want 0", name, a)
		}
	}
}

// cannedRT answers every request at once with the same empty 200, so that
// it allocates nothing itself.
type cannedRT struct{ resp *http.Response }

func (c cannedRT) RoundTrip(*http.Request) (*http.Response, error) { return c.resp, nil }

// TestTransportAllocs: a request that succeeds at once costs the Transport
// no allocation beyond its base's, hedging set or not.
func TestTransportAllocs(t *testing.T) {
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/", nil)
	base := cannedRT{&http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody}}
	for name, tr := range map[string]http.RoundTripper{
		"plain":                   retry.NewTransport(base),
		"a POST with hedging set": retry.NewTransport(base, retry.WithHedge(retry.Hedge{Delay: time.Second})),
		"with a breaker":          retry.NewTransport(base, retry.WithBreaker(retry.Breaker{})),
	} {
		a := testing.AllocsPerRun(200, func() { _, _ = tr.RoundTrip(req) })
		if a > 0 {
			t.Errorf("%s: %v allocs per request, want none", name, a)
		}
	}
}

// TestHedgedAllocs: a hedged call that ends before its delay costs at most
// four allocations more than Do.
func TestHedgedAllocs(t *testing.T) {
	r := retry.New(retry.WithHedge(retry.Hedge{Delay: time.Second}))
	ctx := context.Background()
	fn := func(context.Context) (int, error) { return 1, nil }
	do := testing.AllocsPerRun(200, func() { _, _ = retry.Do(ctx, fn, r) })
	hedged := testing.AllocsPerRun(200, func() { _, _ = retry.Hedged(ctx, fn, r) })
	if hedged-do > 4 {
		t.Errorf("Hedged: %v allocs per call, Do %v: want at most 4 more", hedged, do)
	}
}
