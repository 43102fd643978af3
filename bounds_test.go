package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// zeros is a request body of n zero bytes, generated as it is read and
// never held in memory.
type zeros struct{ n int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.n <= 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), z.n))
	clear(p[:n])
	z.n -= int64(n)
	return n, nil
}

func (z *zeros) Close() error { return nil }

// heapPeak samples the bytes of live heap objects until stop is called, and
// returns the largest sample.
func heapPeak() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak atomic.Uint64
	read := func() {
		metrics.Read(sample)
		if v := sample[0].Value.Uint64(); v > peak.Load() {
			peak.Store(v)
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			read()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		read()
		return peak.Load()
	}
}

// TestLargeBodyBoundedMemory streams a 1 GiB request body, produced by a
// reader and never held whole, through the Transport to a loopback server,
// and checks that memory stays bounded while it streams, then that a failure
// after more than MaxReplayBytes were sent is not retried.
func TestLargeBodyBoundedMemory(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("streams 1 GiB over loopback")
	}
	const (
		size  = 1 << 30
		bound = 64 << 20
	)
	tests := []struct {
		name string
		// cutAt makes the server stop reading after that many bytes; 0
		// reads the whole body.
		cutAt int64
		// answer503 answers 503 at the cut instead of dropping the
		// connection.
		answer503 bool
	}{
		{name: "whole body"},
		{name: "connection dropped past the replay limit", cutAt: 8 << 20},
		{name: "503 past the replay limit", cutAt: 8 << 20, answer503: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var requests, received atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				if tt.cutAt == 0 {
					n, err := io.Copy(io.Discard, r.Body)
					received.Add(n)
					if err != nil {
						panic(http.ErrAbortHandler)
					}
					w.WriteHeader(http.StatusNoContent)
					return
				}
				n, _ := io.CopyN(io.Discard, r.Body, tt.cutAt)
				received.Add(n)
				if tt.answer503 {
					w.Header().Set("Retry-After", "0")
					w.Header().Set("Connection", "close")
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				conn, _, err := http.NewResponseController(w).Hijack()
				if err != nil {
					panic(http.ErrAbortHandler)
				}
				conn.Close()
			}))
			defer srv.Close()
			var events []Event
			base := &http.Transport{}
			defer base.CloseIdleConnections()
			tr := NewTransport(base,
				WithPolicy(Policy{MaxAttempts: 3, InitialInterval: time.Millisecond}),
				OnFailure(func(ev Event) { events = append(events, ev) }))

			req, err := http.NewRequest(http.MethodPut, srv.URL+"/upload", &zeros{n: size})
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = size

			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			stop := heapPeak()
			start := time.Now()
			resp, err := tr.RoundTrip(req)
			if resp != nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			elapsed := time.Since(start)
			peak := stop()
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d MiB body: round trip %v; server got %d MiB in %d request(s); allocated %.1f MiB; live heap peak %.1f MiB (%.1f MiB before)",
				size>>20, elapsed.Round(time.Millisecond), received.Load()>>20, requests.Load(),
				float64(alloc)/(1<<20), float64(peak)/(1<<20), float64(before.HeapAlloc)/(1<<20))
			if alloc > bound {
				t.Errorf("allocated %d bytes streaming the body, want < %d", alloc, bound)
			}
			if peak > before.HeapAlloc+bound {
				t.Errorf("live heap peaked at %d bytes, want < %d over the %d before", peak, bound, before.HeapAlloc)
			}

			switch {
			case tt.cutAt == 0:
				if err != nil || resp.StatusCode != http.StatusNoContent || received.Load() != size {
					t.Fatalf("got %v, %v; server received %d bytes, want %d", resp, err, received.Load(), size)
				}
			case tt.answer503:
				// The final response is returned, its status intact.
				if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
					t.Fatalf("got %v, %v; want the 503", resp, err)
				}
			default:
				var re *Error
				if !errors.As(err, &re) || TypeOf(err) != typeBodyNotReplayable || re.Attempts != 1 {
					t.Fatalf("got %v (type %q), want a *Error of type %s after 1 attempt", err, TypeOf(err), typeBodyNotReplayable)
				}
			}
			if tt.cutAt != 0 {
				if n := requests.Load(); n != 1 {
					t.Errorf("server saw %d requests, want 1: the body could not be replayed", n)
				}
				if len(events) != 1 || events[0].Type != typeBodyNotReplayable || events[0].Reason != ReasonNonRetryable {
					t.Errorf("failure events %v, want one of type %s, reason non_retryable", eventTypes(events), typeBodyNotReplayable)
				}
			}
		})
	}
}

func eventTypes(evs []Event) []string {
	var s []string
	for _, ev := range evs {
		s = append(s, ev.Type+"/"+ev.Reason.String())
	}
	return s
}

// TestManyKeysBounded runs calls for 20,000 distinct keys through one
// Retrier with per-key breakers, rate limits and budgets, and checks that
// none of the per-key maps grows past its cap.
func TestManyKeysBounded(t *testing.T) {
	const keys = 20_000
	r := New(
		WithPolicy(Policy{MaxAttempts: 2, Backoff: Immediate}),
		WithBreaker(Breaker{PerKey: true}),
		WithRateLimit(RateLimit{Limit: 1e9, Burst: 10, PerKey: true}),
		WithBudget(Budget{PerKey: true}),
	)
	ctx := context.Background()
	boom := errors.New("boom")
	start := time.Now()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range keys {
		failed := false
		// Every tenth key fails once, so that failures are counted too.
		err := Run(ctx, func(context.Context) error {
			if i%10 == 0 && !failed {
				failed = true
				return boom
			}
			return nil
		}, r, WithKey("tenant-"+strconv.Itoa(i)))
		if err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
		if i%2_000 == 0 {
			cfg := r.config()
			for name, n := range map[string]int{"breakers": cfg.breakers.keys.len(), "budgets": cfg.budget.keys.len(), "rate limiters": cfg.limiter.l.(*rateLimiter).keys.len()} {
				if n > maxKeys {
					t.Fatalf("after %d keys: %d %s kept, cap %d", i+1, n, name, maxKeys)
				}
			}
		}
	}
	elapsed := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	st := r.Stats()
	cfg := r.config()
	limiterKeys := cfg.limiter.l.(*rateLimiter).keys.len()
	t.Logf("%d keys in %v: %d breakers, %d budgets, %d rate limiters kept (cap %d); live heap %.1f MiB before, %.1f MiB after",
		keys, elapsed.Round(time.Millisecond), len(st.Breakers), len(st.Budgets), limiterKeys, maxKeys,
		float64(before.HeapAlloc)/(1<<20), float64(after.HeapAlloc)/(1<<20))
	for _, c := range []struct {
		name string
		n    int
	}{{name: "breakers", n: len(st.Breakers)}, {name: "budgets", n: len(st.Budgets)}, {name: "rate limiters", n: limiterKeys}} {
		if c.n > maxKeys || c.n == 0 {
			t.Errorf("%s: %d kept, want 1..%d", c.name, c.n, maxKeys)
		}
	}
	if st.Calls != keys || st.Retried != keys/10 {
		t.Errorf("calls %d, retried %d; want %d and %d", st.Calls, st.Retried, keys, keys/10)
	}
	if _, ok := st.Breakers[fmt.Sprintf("tenant-%d", keys-1)]; !ok {
		t.Errorf("the breaker of the last key used is not kept")
	}
}

// BenchmarkNewKeys measures a call with a key never seen before on a
// Retrier whose per-key breakers, limiters and budgets are full.
func BenchmarkNewKeys(b *testing.B) {
	r := New(WithBreaker(Breaker{PerKey: true}), WithRateLimit(RateLimit{Limit: 1e9, Burst: 10, PerKey: true}), WithBudget(Budget{PerKey: true}))
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	for i := range 2 * maxKeys {
		Run(ctx, ok, r, WithKey("warm-"+strconv.Itoa(i)))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Run(ctx, ok, r, WithKey("key-"+strconv.Itoa(i)))
	}
}
