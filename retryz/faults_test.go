package retryz

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadyhq/retry"
)

// fakeClock is the Handler's clock in these tests.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newTestHandler() (*Handler, *fakeClock) {
	clock := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	h := New()
	h.now = clock.Now
	return h, clock
}

// countingFleet counts the readings of its status.
type countingFleet struct{ reads atomic.Int64 }

func (f *countingFleet) FleetStatus() (bool, time.Time, int64) {
	f.reads.Add(1)
	return true, time.Time{}, 0
}

// serveJSON asks h for its JSON, directly.
func serveJSON(t *testing.T, h *Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/retry/?format=json", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("JSON: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// TestReadersShareReadings: however many readers ask at once, the sources
// are read once per maxAge.
func TestReadersShareReadings(t *testing.T) {
	h, clock := newTestHandler()
	f := &countingFleet{}
	h.AddFleet("f", f)
	h.AddRetrier("r", nil)
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() {
			for range 10 {
				rec := httptest.NewRecorder()
				q := []string{"?format=json", "", "?offset=1", "?name=f"}[i%4]
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/retry/"+q, nil))
				if rec.Code != http.StatusOK {
					t.Errorf("%s: %d", q, rec.Code)
				}
			}
		})
	}
	wg.Wait()
	if n := f.reads.Load(); n != 1 {
		t.Fatalf("1,000 requests read the sources %d times, want once", n)
	}
	clock.add(maxAge)
	serveJSON(t, h)
	if n := f.reads.Load(); n != 2 {
		t.Fatalf("after maxAge: %d readings, want 2", n)
	}
}

// blockedWriter is a client that reads nothing: its first Write blocks
// until release is closed.
type blockedWriter struct {
	header  http.Header
	entered chan struct{} // closed when a Write blocks
	release chan struct{}
	once    sync.Once
}

func (w *blockedWriter) Header() http.Header { return w.header }
func (w *blockedWriter) WriteHeader(int)     {}
func (w *blockedWriter) Flush()              {}
func (w *blockedWriter) Write(b []byte) (int, error) {
	w.once.Do(func() { close(w.entered) })
	<-w.release
	return 0, io.ErrClosedPipe
}

// TestStalledStream: an event stream whose client reads nothing holds
// nothing that calls or other readers need: while its write is blocked,
// calls through the Retrier it shows succeed, and the page and its JSON
// answer with new readings.
func TestStalledStream(t *testing.T) {
	h, clock := newTestHandler()
	r := retry.New(retry.WithBreaker(retry.Breaker{}), retry.WithConcurrency(retry.Concurrency{}))
	h.AddRetrier("r", r)
	w := &blockedWriter{header: http.Header{}, entered: make(chan struct{}), release: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/debug/retry/?format=events", nil))
	}()
	<-w.entered
	calls := make(chan error, 1)
	go func() {
		for range 100 {
			if err := r.Run(context.Background(), func(context.Context) error { return nil }); err != nil {
				calls <- err
				return
			}
		}
		calls <- nil
	}()
	select {
	case err := <-calls:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second): // generous: 100 calls take well under a millisecond
		t.Fatal("calls blocked while a stream's client stalled")
	}
	clock.add(maxAge)
	if js := serveJSON(t, h); !strings.Contains(js, `"calls": 100`) {
		t.Errorf("a new reading after the stall shows %s, want 100 calls", js)
	}
	close(w.release)
	<-done // the failed write ends the stream
	if n := h.streams.Load(); n != 0 {
		t.Errorf("%d streams counted after the stream ended", n)
	}
}

// TestLocksOffTheCallPath: with every lock of the Handler held, calls
// through a registered Retrier and Transport still succeed: the page adds
// no lock to their success path.
func TestLocksOffTheCallPath(t *testing.T) {
	h, _ := newTestHandler()
	dep := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer dep.Close()
	r := retry.New(retry.WithBreaker(retry.Breaker{PerKey: true}), retry.WithBudget(retry.Budget{PerKey: true}),
		retry.WithThrottle(retry.Throttle{PerKey: true}), retry.WithConcurrency(retry.Concurrency{PerKey: true}))
	tr := retry.NewTransport(dep.Client().Transport, r)
	h.AddRetrier("r", r)
	h.AddTransport("t", tr)
	serveJSON(t, h)
	rd := h.reading.Load()
	h.mu.Lock()
	h.readMu.Lock()
	rd.mu.Lock()
	calls := make(chan error, 1)
	go func() {
		client := &http.Client{Transport: tr}
		for range 20 {
			if err := r.Run(context.Background(), func(context.Context) error { return nil }); err != nil {
				calls <- err
				return
			}
			resp, err := client.Get(dep.URL)
			if err != nil {
				calls <- err
				return
			}
			resp.Body.Close()
		}
		calls <- nil
	}()
	select {
	case err := <-calls:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(10 * time.Second): // generous: 20 loopback requests take milliseconds
		t.Error("calls blocked on a lock of the Handler")
	}
	rd.mu.Unlock()
	h.readMu.Unlock()
	h.mu.Unlock()
	tr.CloseIdleConnections()
}

// TestStreamsBounded: past maxStreams open streams, a stream is refused
// with 503 and Retry-After, and the count is given back.
func TestStreamsBounded(t *testing.T) {
	h, _ := newTestHandler()
	h.streams.Store(maxStreams)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/retry/?format=events", nil))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("stream %d: %d, Retry-After %q; want 503 with Retry-After", maxStreams+1, rec.Code, rec.Header().Get("Retry-After"))
	}
	if n := h.streams.Load(); n != maxStreams {
		t.Errorf("%d streams counted, want %d", n, maxStreams)
	}
}

// register adds a Retrier and a Transport that only the Handler knows
// of; it returns what it keeps: a Transport built with another Retrier.
func register(h *Handler) *retry.Transport {
	h.AddRetrier("gone", retry.New())
	h.AddTransport("gone too", retry.NewTransport(nil))
	shared := retry.New(retry.WithKey("shared"))
	h.AddRetrier("shared", shared)
	return retry.NewTransport(nil, shared)
}

// TestCollected: a Retrier or Transport that nothing uses any more is
// collected though registered, and leaves the page, counted; a Retrier
// whose state a Transport still uses stays.
func TestCollected(t *testing.T) {
	h, clock := newTestHandler()
	kept := register(h)
	for i := 0; i < 20 && h.collectedNow() < 2; i++ {
		runtime.GC()
	}
	clock.add(maxAge)
	js := serveJSON(t, h)
	if strings.Contains(js, `"name": "gone`) || !strings.Contains(js, `"name": "shared"`) || !strings.Contains(js, `"collected": 2`) {
		t.Fatalf("after collection: %s; want shared alone, 2 collected", js)
	}
	runtime.KeepAlive(kept)
	for i := 0; i < 20 && h.collectedNow() < 3; i++ {
		runtime.GC()
	}
	clock.add(maxAge)
	if js := serveJSON(t, h); strings.Contains(js, `"name": "shared"`) || !strings.Contains(js, `"collected": 3`) {
		t.Fatalf("once its Transport is gone too: %s; want no client, 3 collected", js)
	}
}

// collectedNow drops the sources collected so far and counts them.
func (h *Handler) collectedNow() int64 {
	_, _, n := h.list()
	return n
}
