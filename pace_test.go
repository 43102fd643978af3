package retry_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	"go.uber.org/goleak"
)

// pacedReply is one scripted answer of a pacing test's server.
type pacedReply struct {
	status     int    // 0 means 200
	rateLimit  string // the RateLimit field, if any
	retryAfter string // the Retry-After field, if any
}

// TestTransportPacing: a real server sends RateLimit fields; the Transport
// runs on a virtual clock, so that its waits are recorded, not slept. A
// first request gets the first replies; a second request, sent gap later,
// to path2 when set, gets the next.
func TestTransportPacing(t *testing.T) {
	exact := retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond, Jitter: retry.Jitter{Kind: retry.JitterNone}})
	byPath := retry.WithHTTP(retry.HTTP{Key: func(r *http.Request) string { return r.URL.Path }})
	tests := []struct {
		name     string
		opts     []retry.Option
		replies  []pacedReply
		gap      time.Duration // virtual time between the two requests
		path2    string
		deadline time.Duration // the second request's deadline, if any
		// want: the waits slept by the second request (the first
		// request's for "retry" cases, whose second request is none),
		// the requests the server saw, and the second request's stop.
		second     bool
		sleeps     []time.Duration
		requests   int
		reason     retry.Reason
		typ        string
		wantStatus int
	}{
		{name: "exhausted: the next request waits t", replies: []pacedReply{{rateLimit: `"default";r=0;t=1`}, {}},
			second: true, sleeps: []time.Duration{time.Second}, requests: 2, wantStatus: 200},
		{name: "exhausted, then t passed", replies: []pacedReply{{rateLimit: `"default";r=0;t=1`}, {}}, gap: 2 * time.Second,
			second: true, sleeps: []time.Duration{2 * time.Second}, requests: 2, wantStatus: 200},
		{name: "deadline shorter than t: stop at once", replies: []pacedReply{{rateLimit: `"default";r=0;t=1`}, {}}, deadline: 500 * time.Millisecond,
			second: true, requests: 1, reason: retry.ReasonRateLimited, typ: "ratelimit.remote"},
		{name: "MaxServerDelay shorter than t: stop at once", opts: []retry.Option{retry.WithMaxServerDelay(2 * time.Second)},
			replies: []pacedReply{{rateLimit: `"default";r=0;t=5`}, {}},
			second:  true, requests: 1, reason: retry.ReasonRateLimited, typ: "ratelimit.remote"},
		{name: "a reset far off: held for MaxServerDelay only, then sent", opts: []retry.Option{retry.WithMaxServerDelay(2 * time.Second)},
			replies: []pacedReply{{rateLimit: `"default";r=0;t=9999999999`}, {}}, gap: 3 * time.Second,
			second: true, sleeps: []time.Duration{3 * time.Second}, requests: 2, wantStatus: 200},
		{name: "quota left: nothing", replies: []pacedReply{{rateLimit: `"default";r=5;t=1`}, {}},
			second: true, requests: 2, wantStatus: 200},
		{name: "malformed: ignored", replies: []pacedReply{{rateLimit: `"default";r=zero;t=1`}, {}},
			second: true, requests: 2, wantStatus: 200},
		{name: "two policies, one exhausted", replies: []pacedReply{{rateLimit: `"permin";r=10;t=60, "persec";r=0;t=2`}, {}},
			second: true, sleeps: []time.Duration{2 * time.Second}, requests: 2, wantStatus: 200},
		{name: "another key is not held", opts: []retry.Option{byPath}, replies: []pacedReply{{rateLimit: `"default";r=0;t=1`}, {}},
			path2: "/other", second: true, requests: 2, wantStatus: 200},
		{name: "the same key is", opts: []retry.Option{byPath}, replies: []pacedReply{{rateLimit: `"default";r=0;t=1`}, {}},
			second: true, sleeps: []time.Duration{time.Second}, requests: 2, wantStatus: 200},
		{name: "retry after a 429: the longer of Retry-After 2 and t=5",
			replies: []pacedReply{{status: 429, retryAfter: "2", rateLimit: `"default";r=0;t=5`}, {}},
			sleeps:  []time.Duration{5 * time.Second}, requests: 2, wantStatus: 200},
		{name: "retry after a 429: Retry-After longer than t",
			replies: []pacedReply{{status: 429, retryAfter: "3", rateLimit: `"default";r=0;t=1`}, {}},
			sleeps:  []time.Duration{3 * time.Second}, requests: 2, wantStatus: 200},
		{name: "retry after a 503 with t only", replies: []pacedReply{{status: 503, rateLimit: `"default";r=0;t=4`}, {}},
			sleeps: []time.Duration{4 * time.Second}, requests: 2, wantStatus: 200},
		{name: "retry whose t passes MaxServerDelay: the 429 is returned", opts: []retry.Option{retry.WithMaxServerDelay(2 * time.Second)},
			replies:  []pacedReply{{status: 429, rateLimit: `"default";r=0;t=5`}, {}},
			requests: 1, wantStatus: 429},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			requests := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				rep := tt.replies[min(requests, len(tt.replies)-1)]
				requests++
				mu.Unlock()
				if rep.rateLimit != "" {
					w.Header().Set("RateLimit", rep.rateLimit)
				}
				if rep.retryAfter != "" {
					w.Header().Set("Retry-After", rep.retryAfter)
				}
				if rep.status != 0 {
					w.WriteHeader(rep.status)
				}
			}))
			defer srv.Close()
			clk := &virtualClock{now: time.Now()}
			base := &http.Transport{}
			defer base.CloseIdleConnections()
			tr := retry.NewTransport(base, append([]retry.Option{exact, retry.WithClock(clk)}, tt.opts...)...)

			resp, err := send(context.Background(), tr, srv.URL+"/a")
			if tt.second {
				if err != nil {
					t.Fatalf("first request: %v", err)
				}
				resp.Body.Close()
				if tt.gap > 0 {
					clk.Sleep(context.Background(), tt.gap)
				}
				ctx := context.Background()
				if tt.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.deadline)
					defer cancel()
				}
				path := "/a"
				if tt.path2 != "" {
					path = tt.path2
				}
				start := time.Now()
				resp, err = send(ctx, tr, srv.URL+path)
				if took := time.Since(start); tt.reason != "" && took > 100*time.Millisecond {
					t.Errorf("the refused request took %v: it must stop at once", took)
				}
			}
			switch {
			case tt.reason != "":
				var e *retry.Error
				if !errors.As(err, &e) || e.Reason != tt.reason || retry.TypeOf(err) != tt.typ {
					t.Fatalf("error %v (type %q), want reason %s and type %s", err, retry.TypeOf(err), tt.reason, tt.typ)
				}
			case err != nil:
				t.Fatal(err)
			default:
				resp.Body.Close()
				if resp.StatusCode != tt.wantStatus {
					t.Errorf("status %d, want %d", resp.StatusCode, tt.wantStatus)
				}
			}
			clk.mu.Lock()
			sleeps := clk.sleeps
			clk.mu.Unlock()
			if !slices.Equal(sleeps, tt.sleeps) {
				t.Errorf("waits %v, want %v", sleeps, tt.sleeps)
			}
			mu.Lock()
			defer mu.Unlock()
			if requests != tt.requests {
				t.Errorf("the server saw %d requests, want %d", requests, tt.requests)
			}
		})
	}
}

func send(ctx context.Context, rt http.RoundTripper, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	return rt.RoundTrip(req)
}

// TestTransportPacingHedge: a hedge is not started on a key that another
// request's response held while the first attempt was in flight; without
// that response it is.
func TestTransportPacingHedge(t *testing.T) {
	tests := []struct {
		name      string
		rateLimit string // of the response that arrives during the first attempt
		slow      int    // requests the slow path should see
	}{
		{name: "held: no hedge", rateLimit: `"default";r=0;t=60`, slow: 1},
		{name: "quota left: hedged", rateLimit: `"default";r=3;t=60`, slow: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			arrived := make(chan struct{}, 2)
			var mu sync.Mutex
			slow := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/fast" {
					w.Header().Set("RateLimit", tt.rateLimit)
					return
				}
				mu.Lock()
				slow++
				mu.Unlock()
				arrived <- struct{}{}
				select {
				case <-time.After(400 * time.Millisecond):
				case <-r.Context().Done():
				}
			}))
			defer srv.Close()
			base := &http.Transport{}
			defer base.CloseIdleConnections()
			clk := &virtualClock{now: time.Now()}
			tr := retry.NewTransport(base, retry.WithClock(clk), retry.WithHedge(retry.Hedge{Delay: 150 * time.Millisecond}))
			done := make(chan error, 1)
			go func() {
				resp, err := send(context.Background(), tr, srv.URL+"/slow")
				if err == nil {
					resp.Body.Close()
				}
				done <- err
			}()
			<-arrived
			resp, err := send(context.Background(), tr, srv.URL+"/fast")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			srv.Close()
			mu.Lock()
			defer mu.Unlock()
			if slow != tt.slow {
				t.Errorf("the slow path saw %d requests, want %d", slow, tt.slow)
			}
		})
	}
}

// TestTransportPacingCanceled: a request held for a server's quota reset
// ends when its context is canceled with a cause, at once, with the cause
// reachable, and is never sent.
func TestTransportPacingCanceled(t *testing.T) {
	var mu sync.Mutex
	requests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests++
		mu.Unlock()
		w.Header().Set("RateLimit", `"default";r=0;t=30`)
	}))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	tr := retry.NewTransport(base, retry.WithMaxServerDelay(time.Minute))
	resp, err := send(context.Background(), tr, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cause := errors.New("the user went away")
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(20*time.Millisecond, func() { cancel(cause) })
	start := time.Now()
	_, err = send(ctx, tr, srv.URL)
	took := time.Since(start)
	var e *retry.Error
	if !errors.As(err, &e) || e.Reason != retry.ReasonCanceled || !errors.Is(err, cause) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want canceled with its cause", err)
	}
	if took > 5*time.Second {
		t.Errorf("the held request ended %v after it began, want soon after the cancel at 20ms", took)
	}
	mu.Lock()
	defer mu.Unlock()
	if requests != 1 {
		t.Errorf("the server saw %d requests, want 1: the held one is never sent", requests)
	}
}

// gateClock is a Clock whose sleeps wait for open, then move now on by
// their length: the test sees who waits, and when they all go.
type gateClock struct {
	mu     sync.Mutex
	now    time.Time
	asleep int
	open   chan struct{}
}

func (c *gateClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *gateClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.asleep++
	c.mu.Unlock()
	select {
	case <-c.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.now.Add(d); t.After(c.now) {
		c.now = t
	}
	return nil
}

// TestTransportPacingReleasesAll: requests held for a quota's reset all
// wait, none sent, and at the reset they all go out: the Transport does not
// meter them to the new window's quota, which it does not know.
func TestTransportPacingReleasesAll(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			w.Header().Set("RateLimit", `"default";r=0;t=1`)
		}
	}))
	defer srv.Close()
	clk := &gateClock{now: time.Now(), open: make(chan struct{})}
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	tr := retry.NewTransport(base, retry.WithClock(clk))
	resp, err := send(t.Context(), tr, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	const held = 5
	var wg sync.WaitGroup
	errs := make(chan error, held)
	for range held {
		wg.Go(func() {
			resp, err := send(t.Context(), tr, srv.URL)
			if err == nil {
				resp.Body.Close()
			}
			errs <- err
		})
	}
	if !waitFor(func() bool { clk.mu.Lock(); defer clk.mu.Unlock(); return clk.asleep == held }) {
		t.Fatalf("%d requests waiting for the reset, want %d", clk.asleep, held)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("the server saw %d requests while %d were held, want 1", n, held)
	}
	close(clk.open) // the reset
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a held request: %v", err)
		}
	}
	if n := requests.Load(); n != 1+held {
		t.Errorf("the server saw %d requests after the reset, want %d: every held one", n, 1+held)
	}
	base.CloseIdleConnections()
	srv.Close()
	goleak.VerifyNone(t)
}
