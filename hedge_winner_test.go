package retry_test

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry"
	"go.uber.org/goleak"
)

// TestHedgeFirstSuccessWins: the first success wins whichever attempt
// returns it. The first attempt here finishes its work after a hedge has
// won and canceled it, and returns a success of its own: that later
// success is released, never returned, and the events and counters say
// the hedge won, when it won.
func TestHedgeFirstSuccessWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu       sync.Mutex
			events   []string
			released []any
			seen     []string // the events attempt 1 had seen when it returned
		)
		r := retry.New(retry.WithHedge(retry.Hedge{
			Delay:   10 * time.Millisecond,
			Release: func(v any) { mu.Lock(); released = append(released, v); mu.Unlock() },
			OnEvent: func(ev retry.Event) { mu.Lock(); events = append(events, ev.Type); mu.Unlock() },
		}))
		v, err := retry.Hedged(t.Context(), func(ctx context.Context) (string, error) {
			if retry.AttemptFrom(ctx) == 1 {
				<-ctx.Done() // the hedge won and canceled this attempt
				mu.Lock()
				seen = slices.Clone(events)
				mu.Unlock()
				return "first", nil // its in-flight work ends in a success all the same
			}
			return "hedge", nil
		}, r)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if err != nil || v != "hedge" {
			t.Errorf("Hedged = %q, %v; want the hedge's %q", v, err, "hedge")
		}
		if !slices.Equal(released, []any{"first"}) {
			t.Errorf("released %v, want the first attempt's later success alone", released)
		}
		if st := r.Stats(); st.Hedges != 1 || st.HedgeWins != 1 || st.Attempts != 2 {
			t.Errorf("stats: %d attempts, %d hedges, %d won; want 2, 1, 1", st.Attempts, st.Hedges, st.HedgeWins)
		}
		if want := []string{retry.TypeHedgeStarted, retry.TypeHedgeWon}; !slices.Equal(seen, want) {
			t.Errorf("events seen when the first attempt returned: %v, want %v as they happened", seen, want)
		}
	})
}

// hedgeProtos are the protocols the Transport's hedging tests run over:
// HTTP/1.1 on a plain loopback server, HTTP/2 over TLS.
var hedgeProtos = []struct {
	name  string
	start func(h http.Handler) (*httptest.Server, *http.Transport)
}{
	{name: "HTTP/1.1", start: func(h http.Handler) (*httptest.Server, *http.Transport) {
		srv := httptest.NewServer(h)
		return srv, &http.Transport{}
	}},
	{name: "HTTP/2", start: func(h http.Handler) (*httptest.Server, *http.Transport) {
		srv := httptest.NewUnstartedServer(h)
		srv.EnableHTTP2 = true
		srv.StartTLS()
		return srv, srv.Client().Transport.(*http.Transport).Clone()
	}},
}

// lateFirst is a base transport that sends every request through base but
// holds the first request's response until its context has ended: the
// first attempt has its whole response in hand when a hedge wins and
// cancels it, the race that is rare in the wild made certain.
type lateFirst struct {
	base http.RoundTripper
	n    atomic.Int32
}

func (l *lateFirst) RoundTrip(req *http.Request) (*http.Response, error) {
	first := l.n.Add(1) == 1
	resp, err := l.base.RoundTrip(req)
	if first && err == nil {
		select {
		case <-req.Context().Done():
		case <-time.After(5 * time.Second):
			resp.Body.Close()
			return nil, errors.New("the hedge never canceled the first attempt")
		}
	}
	return resp, err
}

// TestHedgeTransportWinnerBody: when the first attempt's response arrives
// after a hedge's success has won, the hedge's response is returned with
// its body intact and the first one is drained and closed; no goroutine
// or file descriptor is left behind.
func TestHedgeTransportWinnerBody(t *testing.T) {
	body := make([]byte, 256<<10)
	rand.Read(body)
	for _, proto := range hedgeProtos {
		t.Run(proto.name, func(t *testing.T) {
			fds := openFDs(t)
			srv, base := proto.start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Write(body)
			}))
			counter := &bodyCounter{base: base}
			tr := retry.NewTransport(&lateFirst{base: counter}, retry.WithHedge(retry.Hedge{Delay: 5 * time.Millisecond}))
			resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || len(got) != len(body) || string(got) != string(body) {
				t.Errorf("body: %d of %d bytes, %v; want it whole", len(got), len(body), err)
			}
			if !waitFor(func() bool { return counter.open.Load() == 0 }) {
				t.Errorf("%d response bodies left open", counter.open.Load())
			}
			shutDown(t, srv, base, fds)
		})
	}
}

// shutDown closes the server and the base's idle connections, then checks
// that the file descriptors open before the test, fds, are all that are
// left, and that no goroutine is.
func shutDown(t *testing.T, srv *httptest.Server, base *http.Transport, fds int) {
	t.Helper()
	srv.Close()
	base.CloseIdleConnections()
	if !waitFor(func() bool { return openFDs(t) <= fds }) {
		t.Errorf("%d file descriptors open, %d before", openFDs(t), fds)
	}
	goleak.VerifyNone(t)
}

// closeCount is a request body that counts its reads and closes.
type closeCount struct {
	r      io.Reader
	read   atomic.Int64
	closes atomic.Int32
}

func (b *closeCount) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *closeCount) Close() error { b.closes.Add(1); return nil }

// TestHedgeTransportCallerBody: with hedging on, the first attempt sends
// the caller's own body and it is closed exactly once, whether a hedge
// starts or not; every body GetBody hands out is closed once too.
func TestHedgeTransportCallerBody(t *testing.T) {
	const payload = "row 42"
	cases := []struct {
		name    string
		getBody bool          // GetBody set, else a known length for the replay buffer
		slow    time.Duration // how long the server holds the first request
		hedges  int64
	}{
		{name: "GetBody, no hedge starts", getBody: true},
		{name: "a known length, no hedge starts"},
		{name: "GetBody, a hedge wins", getBody: true, slow: 300 * time.Millisecond, hedges: 1},
		{name: "a known length, a hedge wins", slow: 300 * time.Millisecond, hedges: 1},
	}
	for _, proto := range hedgeProtos {
		for _, tc := range cases {
			t.Run(proto.name+"/"+tc.name, func(t *testing.T) {
				fds := openFDs(t)
				var n atomic.Int32
				var bodies sync.Map
				srv, base := proto.start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					b, _ := io.ReadAll(r.Body)
					bodies.Store(string(b), true)
					if n.Add(1) == 1 && tc.slow > 0 {
						select {
						case <-time.After(tc.slow):
						case <-r.Context().Done():
						}
					}
				}))
				delay := time.Second
				if tc.slow > 0 {
					delay = 20 * time.Millisecond
				}
				r := retry.New(retry.WithHedge(retry.Hedge{Delay: delay}))
				tr := retry.NewTransport(base, r)
				caller := &closeCount{r: stringsReader(payload)}
				req, _ := http.NewRequest(http.MethodPut, srv.URL, caller)
				req.ContentLength = int64(len(payload))
				var got []*closeCount
				var mu sync.Mutex
				if tc.getBody {
					req.GetBody = func() (io.ReadCloser, error) {
						b := &closeCount{r: stringsReader(payload)}
						mu.Lock()
						got = append(got, b)
						mu.Unlock()
						return b, nil
					}
				}
				resp, err := (&http.Client{Transport: tr}).Do(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if !waitFor(func() bool { return caller.closes.Load() >= 1 }) || caller.closes.Load() != 1 {
					t.Errorf("the caller's body closed %d times, want 1", caller.closes.Load())
				}
				if tc.getBody && caller.read.Load() != int64(len(payload)) {
					t.Errorf("the caller's body read %d bytes, want %d: the first attempt sends it", caller.read.Load(), len(payload))
				}
				if _, ok := bodies.Load(payload); !ok {
					t.Errorf("the server never received %q", payload)
				}
				mu.Lock()
				for i, b := range got {
					if !waitFor(func() bool { return b.closes.Load() == 1 }) {
						t.Errorf("GetBody's body %d closed %d times, want 1", i, b.closes.Load())
					}
				}
				mu.Unlock()
				if st := r.Stats(); st.Hedges != tc.hedges {
					t.Errorf("%d hedges, want %d", st.Hedges, tc.hedges)
				}
				shutDown(t, srv, base, fds)
			})
		}
	}
}

// blockingLimiter lets every attempt through at once, except that the
// reservation of the second attempt, a hedge, waits until release is
// closed: a gate that waits on a store.
type blockingLimiter struct {
	calls   atomic.Int32
	entered chan struct{}
	release chan struct{}
}

func (l *blockingLimiter) Reserve(ctx context.Context, _ string, _ time.Time, _ time.Duration) (time.Duration, func(time.Time), bool) {
	if l.calls.Add(1) == 2 {
		close(l.entered)
		<-l.release
	}
	return 0, nil, true
}

// TestHedgeAdmissionOffTheCaller: a hedge's admission runs on the turn's
// own goroutine: a gate that blocks while admitting a hedge never holds
// the caller, whose first attempt returns its success at once.
func TestHedgeAdmissionOffTheCaller(t *testing.T) {
	lim := &blockingLimiter{entered: make(chan struct{}), release: make(chan struct{})}
	r := retry.New(retry.WithRateLimit(retry.RateLimit{Shared: lim}), retry.WithHedge(retry.Hedge{Delay: time.Millisecond}))
	done := make(chan string, 1)
	go func() {
		v, _ := retry.Hedged(t.Context(), func(ctx context.Context) (string, error) {
			if retry.AttemptFrom(ctx) == 1 {
				<-lim.entered // the hedge is being admitted
				return "first", nil
			}
			return "hedge", nil
		}, r)
		done <- v
	}()
	select {
	case v := <-done:
		if v != "first" {
			t.Errorf("Hedged = %q, want the first attempt's %q", v, "first")
		}
	case <-time.After(5 * time.Second):
		t.Error("the caller waited on a hedge's admission")
	}
	close(lim.release)
	goleak.VerifyNone(t)
}

// TestHedgeFailureStartsNext: a hedge that fails while the first attempt
// runs starts the next one at once, not a Delay later.
func TestHedgeFailureStartsNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		began := map[int]time.Duration{}
		r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 5}), retry.WithHedge(retry.Hedge{Delay: 100 * time.Millisecond, Max: 3}))
		v, err := retry.Hedged(t.Context(), func(ctx context.Context) (int, error) {
			n := retry.AttemptFrom(ctx)
			mu.Lock()
			began[n] = time.Since(start)
			mu.Unlock()
			switch n {
			case 1:
				<-ctx.Done()
				return 0, ctx.Err()
			case 2:
				return 0, errors.New("node down")
			}
			return n, nil
		}, r)
		if err != nil || v != 3 {
			t.Errorf("Hedged = %d, %v; want attempt 3's value", v, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if began[2] != 100*time.Millisecond || began[3] != began[2] {
			t.Errorf("attempts began at %v; want the hedge at 100ms and the next at once after its failure", began)
		}
	})
}

func stringsReader(s string) io.Reader { return &stringReader{s: s} }

// stringReader is strings.Reader without WriterTo or Len, so that net/http
// sees a body of its own kind and cannot size it.
type stringReader struct{ s string }

func (r *stringReader) Read(p []byte) (int, error) {
	if r.s == "" {
		return 0, io.EOF
	}
	n := copy(p, r.s)
	r.s = r.s[n:]
	return n, nil
}

// closeDuring is a base transport that, on its second request, closes the
// body of a response held from the first before it sends the request.
type closeDuring struct {
	base http.RoundTripper
	n    atomic.Int32
	held chan *http.Response
}

func (c *closeDuring) RoundTrip(req *http.Request) (*http.Response, error) {
	if c.n.Add(1) == 2 {
		(<-c.held).Body.Close()
	}
	return c.base.RoundTrip(req)
}

// TestHedgeTransportBodiesApart: closing the body of a hedged request's
// response, while the next request runs on the same Transport, ends that
// response's own request and never the next one's, whose body arrives
// whole.
func TestHedgeTransportBodiesApart(t *testing.T) {
	body := make([]byte, 64<<10)
	for _, proto := range hedgeProtos {
		t.Run(proto.name, func(t *testing.T) {
			srv, base := proto.start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Write(body)
			}))
			defer srv.Close()
			defer base.CloseIdleConnections()
			cd := &closeDuring{base: base, held: make(chan *http.Response, 1)}
			client := &http.Client{Transport: retry.NewTransport(cd, retry.WithHedge(retry.Hedge{Delay: time.Second}))}
			first, err := client.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			io.ReadAll(first.Body)
			cd.held <- first // closed while the second request runs
			second, err := client.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(second.Body)
			second.Body.Close()
			if err != nil || len(got) != len(body) {
				t.Errorf("the second response: %d of %d bytes, %v; want it whole", len(got), len(body), err)
			}
		})
	}
}

// TestHedgeCanceledWithCause: the caller's context canceled with a cause
// while a hedge runs ends the call at once with Reason canceled, the cause
// and context.Canceled both reachable, and a hedge that ignores its
// context neither holds the caller nor outlives its own return.
func TestHedgeCanceledWithCause(t *testing.T) {
	cause := errors.New("operator stopped the job")
	stubborn := make(chan struct{})
	ctx, cancel := context.WithCancelCause(t.Context())
	r := retry.New(retry.WithHedge(retry.Hedge{Delay: time.Millisecond}))
	hedging := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		_, err := retry.Hedged(ctx, func(ctx context.Context) (int, error) {
			if retry.AttemptFrom(ctx) == 2 {
				close(hedging)
				<-stubborn // ignores its context
				return 2, nil
			}
			<-ctx.Done()
			return 0, context.Cause(ctx)
		}, r)
		errc <- err
	}()
	<-hedging
	cancel(cause)
	select {
	case err := <-errc:
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonCanceled || !errors.Is(err, cause) || !errors.Is(err, context.Canceled) {
			t.Errorf("Hedged: %v; want Reason canceled with the cause and context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the caller waited for a hedge that ignores its context")
	}
	close(stubborn)
	goleak.VerifyNone(t)
	if st := r.Stats(); st.Hedges != 1 || st.HedgeWins != 0 {
		t.Errorf("%d hedges, %d won; want 1, and no win for a success that came after the call ended", st.Hedges, st.HedgeWins)
	}
}

// lateHedge is a base transport that sends the first request at once, lets
// it win, and holds the second request's response until the second
// request's context has ended: the hedge's success arrives after the
// first attempt's.
type lateHedge struct {
	base http.RoundTripper
	n    atomic.Int32
	slow time.Duration // how long the first request takes, so that a hedge starts
}

func (l *lateHedge) RoundTrip(req *http.Request) (*http.Response, error) {
	if l.n.Add(1) == 1 {
		time.Sleep(l.slow)
		return l.base.RoundTrip(req)
	}
	resp, err := l.base.RoundTrip(req)
	if err == nil {
		<-req.Context().Done() // the first attempt won and canceled the hedge
	}
	return resp, err
}

// TestHedgeTransportLateHedgeSuccess: a hedge whose success arrives after
// the first attempt's has won is drained and closed, and the first
// response comes back whole.
func TestHedgeTransportLateHedgeSuccess(t *testing.T) {
	body := make([]byte, 64<<10)
	rand.Read(body)
	for _, proto := range hedgeProtos {
		t.Run(proto.name, func(t *testing.T) {
			fds := openFDs(t)
			srv, base := proto.start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Write(body)
			}))
			counter := &bodyCounter{base: base}
			r := retry.New(retry.WithHedge(retry.Hedge{Delay: 5 * time.Millisecond}))
			tr := retry.NewTransport(&lateHedge{base: counter, slow: 30 * time.Millisecond}, r)
			resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(got) != string(body) {
				t.Errorf("body: %d of %d bytes, %v; want the first response whole", len(got), len(body), err)
			}
			if !waitFor(func() bool { return counter.open.Load() == 0 }) {
				t.Errorf("%d response bodies left open: the hedge's late success was not drained", counter.open.Load())
			}
			if st := r.Stats(); st.Hedges != 1 || st.HedgeWins != 0 {
				t.Errorf("%d hedges, %d won; want 1 and 0", st.Hedges, st.HedgeWins)
			}
			shutDown(t, srv, base, fds)
		})
	}
}

// TestHedgeFirstSuccessAfterCancel: the caller's context ends while a hedge
// runs, and the first attempt, which had already done its work, returns a
// success: that success is returned, and the hedge's later one released.
// The bubble orders the two: the hedge returns only once every other
// goroutine is blocked, so after the first attempt has reported.
func TestHedgeFirstSuccessAfterCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		hedging := make(chan struct{})
		var released atomic.Int32
		r := retry.New(retry.WithHedge(retry.Hedge{Delay: time.Millisecond, Release: func(any) { released.Add(1) }}))
		v, err := retry.Hedged(ctx, func(ctx context.Context) (string, error) {
			if retry.AttemptFrom(ctx) == 2 {
				close(hedging)
				<-ctx.Done()
				synctest.Wait()     // the first attempt has returned its success
				return "hedge", nil // its work done too, after the cancel
			}
			<-hedging
			cancel()
			<-ctx.Done()
			return "first", nil // the work had finished; the cancel came after
		}, r)
		if err != nil || v != "first" {
			t.Errorf("Hedged = %q, %v; want the first attempt's success", v, err)
		}
		if !waitFor(func() bool { return released.Load() == 1 }) {
			t.Errorf("%d values released, want the hedge's alone", released.Load())
		}
	})
	goleak.VerifyNone(t)
}

// hedgeNilBodies is a stub base that answers 200 with a nil Body, as some stub
// transports and middlewares do; its first answer comes only once its
// request's context has ended, after the hedge's.
type hedgeNilBodies struct{ n atomic.Int32 }

func (b *hedgeNilBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	if b.n.Add(1) == 1 {
		<-req.Context().Done()
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Request: req}, nil
}

// TestHedgeTransportNilBodies: hedged responses with nil bodies, winner and
// loser, are empty bodies: nothing panics and the winner reads as empty.
func TestHedgeTransportNilBodies(t *testing.T) {
	tr := retry.NewTransport(&hedgeNilBodies{}, retry.WithHedge(retry.Hedge{Delay: time.Millisecond}))
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(got) != 0 || err != nil {
		t.Errorf("response %d, %q, %v; want an empty 200", resp.StatusCode, got, err)
	}
	goleak.VerifyNone(t)
}

// TestHedgeTransportFatalResponse: a response the Transport does not
// retry (a 404) is an answer: it ends a hedged request when it arrives,
// with its body whole, while a hedge still runs, and the hedge is
// canceled.
func TestHedgeTransportFatalResponse(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var n atomic.Int32
	hedgeIn, hedgeDone := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if r.Header.Get(retry.AttemptHeader) == "" { // the first attempt: a 404 once the hedge runs
			select {
			case <-hedgeIn:
			case <-time.After(5 * time.Second):
			}
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, "no such thing")
			return
		}
		// The hedge: slower still, until canceled.
		defer close(hedgeDone)
		close(hedgeIn)
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
			io.WriteString(w, "late success")
		}
	}))
	defer srv.Close()
	tr := retry.NewTransport(http.DefaultTransport.(*http.Transport).Clone(),
		retry.WithHedge(retry.Hedge{Delay: 20 * time.Millisecond}))
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	start := time.Now()
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the request took %v: the 404 did not end it", took)
	}
	if resp.StatusCode != http.StatusNotFound || string(body) != "no such thing" || err != nil {
		t.Errorf("got %d %q (%v); want the first attempt's 404 whole", resp.StatusCode, body, err)
	}
	select {
	case <-hedgeDone:
	case <-time.After(2 * time.Second):
		t.Error("the hedge was not canceled")
	}
	if got := n.Load(); got != 2 {
		t.Errorf("%d requests reached the server, want 2", got)
	}
}

// TestHedgeBothSucceedWonOnce: when the first attempt and its hedge both
// succeed, in either order, the call is won once: the budget earns one
// success's share (the hedge keeps the token it took, as Hedge's doc
// says), and Stats counts one call, with a hedge win when the hedge
// answered first.
func TestHedgeBothSucceedWonOnce(t *testing.T) {
	tests := []struct {
		name      string
		hedgeWins bool
		want      string
		wins      int64
	}{
		{name: "hedge first", hedgeWins: true, want: "hedge", wins: 1},
		{name: "first attempt first", want: "first"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := retry.New(
					retry.WithPolicy(retry.Policy{MaxAttempts: 3, Backoff: retry.Constant, InitialInterval: time.Millisecond, Jitter: retry.Jitter{Kind: retry.JitterNone}}),
					retry.WithHedge(retry.Hedge{Delay: 10 * time.Millisecond}))
				// A call that fails three times spends two of the budget's 12
				// tokens and gets nothing back.
				_ = r.Run(t.Context(), func(context.Context) error { return errTransient })
				before := r.Stats().BudgetBalance
				if before != 10 {
					t.Fatalf("balance after a failed call = %v, want 10", before)
				}
				started, first := make(chan struct{}), make(chan struct{})
				v, err := retry.Hedged(t.Context(), func(ctx context.Context) (string, error) {
					if retry.AttemptFrom(ctx) == 1 {
						<-started // the hedge is on its way
						if !tt.hedgeWins {
							defer close(first)
						} else {
							<-first // answers, with a success, just after the hedge
						}
						return "first", nil
					}
					close(started)
					if tt.hedgeWins {
						defer close(first)
					} else {
						<-first // answers, with a success, just after the first attempt
					}
					return "hedge", nil
				}, r)
				synctest.Wait()
				if err != nil || v != tt.want {
					t.Fatalf("Hedged = %q, %v; want %q", v, err, tt.want)
				}
				st := r.Stats()
				// The hedge took a token and keeps it; the win earns 0.2, once.
				if want := before - 1 + 0.2; st.BudgetBalance < want-1e-9 || st.BudgetBalance > want+1e-9 {
					t.Errorf("balance after the hedged call = %v, want %v (a token spent, 0.2 earned once)", st.BudgetBalance, want)
				}
				if st.Calls != 2 || st.Hedges != 1 || st.HedgeWins != tt.wins || st.FailedPermanently != 1 {
					t.Errorf("stats: %d calls, %d hedges, %d hedge wins, %d failed; want 2, 1, %d, 1", st.Calls, st.Hedges, st.HedgeWins, st.FailedPermanently, tt.wins)
				}
			})
		})
	}
}
