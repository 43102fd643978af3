package retry_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	"go.uber.org/goleak"
)

// hedgeServer answers request i after delays[i] (the last entry for later
// requests) with status statuses[i] (200 when unset), and a body naming the
// request and echoing the body it received. It notes the requests whose
// context ended before the answer.
type hedgeServer struct {
	*httptest.Server
	delays   []time.Duration
	statuses []int

	mu       sync.Mutex
	bodies   []string
	canceled int
}

func newHedgeServer(t *testing.T, delays []time.Duration, statuses []int) *hedgeServer {
	s := &hedgeServer{delays: delays, statuses: statuses}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, r.Method+" "+string(b))
		i := len(s.bodies)
		s.mu.Unlock()
		select {
		case <-time.After(s.delays[min(i, len(s.delays))-1]):
		case <-r.Context().Done():
			s.mu.Lock()
			s.canceled++
			s.mu.Unlock()
			return
		}
		if i <= len(s.statuses) && s.statuses[i-1] != 0 {
			w.WriteHeader(s.statuses[i-1])
		}
		fmt.Fprintf(w, "answer %d to %s", i, b)
	}))
	return s
}

// bodyCounter is a base transport that counts the response bodies it
// handed out and not yet closed.
type bodyCounter struct {
	base http.RoundTripper
	open atomic.Int32
}

func (b *bodyCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.base.RoundTrip(req)
	if err == nil {
		b.open.Add(1)
		resp.Body = &countedBody{ReadCloser: resp.Body, open: &b.open}
	}
	return resp, err
}

type countedBody struct {
	io.ReadCloser
	open *atomic.Int32
	once sync.Once
}

func (c *countedBody) Close() error {
	c.once.Do(func() { c.open.Add(-1) })
	return c.ReadCloser.Close()
}

// openFDs counts the process's open file descriptors.
func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

// TestHedgeTransport: the Transport hedges only requests safe to repeat;
// a hedge's body is the caller's (GetBody or the replay buffer); the
// winner's body is intact; losing responses are drained and closed; and no
// goroutine, connection or file descriptor outlives the requests.
func TestHedgeTransport(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name     string
		method   string
		body     string
		opaque   bool // a body without GetBody, of known length: replayed
		key      bool // an Idempotency-Key header
		delays   []time.Duration
		statuses []int
		status   int      // of the response returned
		answer   string   // its body
		seen     []string // requests the server saw
		hedges   int64
		canceled int // requests the server saw canceled
	}{
		{name: "GET: the hedge wins, the first is canceled", method: "GET", delays: []time.Duration{500 * ms, 0},
			status: 200, answer: "answer 2 to ", seen: []string{"GET ", "GET "}, hedges: 1, canceled: 1},
		{name: "POST without a key is never hedged", method: "POST", body: "order", delays: []time.Duration{60 * ms},
			status: 200, answer: "answer 1 to order", seen: []string{"POST order"}},
		{name: "POST with a key: the body again through GetBody", method: "POST", body: "order", key: true, delays: []time.Duration{500 * ms, 0},
			status: 200, answer: "answer 2 to order", seen: []string{"POST order", "POST order"}, hedges: 1, canceled: 1},
		{name: "PUT without GetBody: the body from the replay buffer", method: "PUT", body: "row", opaque: true, delays: []time.Duration{500 * ms, 0},
			status: 200, answer: "answer 2 to row", seen: []string{"PUT row", "PUT row"}, hedges: 1, canceled: 1},
		{name: "a failed hedge's response is drained, the next hedge starts at once, and the first wins", method: "GET",
			delays: []time.Duration{80 * ms, 0, time.Second}, statuses: []int{0, 503},
			status: 200, answer: "answer 1 to ", seen: []string{"GET ", "GET ", "GET "}, hedges: 2, canceled: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newHedgeServer(t, tc.delays, tc.statuses)
			base := &http.Transport{}
			counter := &bodyCounter{base: base}
			fds := openFDs(t)
			tr, trR := newCounted(counter, fast(3), retry.WithHedge(retry.Hedge{Delay: 20 * ms}))
			var body io.Reader
			var closes atomic.Int32
			switch {
			case tc.opaque:
				body = &countingBody{r: strings.NewReader(tc.body), closes: &closes}
			case tc.body != "":
				body = bytes.NewReader([]byte(tc.body))
			}
			req, _ := http.NewRequest(tc.method, srv.URL, body)
			if tc.opaque {
				req.ContentLength = int64(len(tc.body))
			}
			if tc.key {
				req.Header.Set("Idempotency-Key", "k1")
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || string(got) != tc.answer {
				t.Errorf("response %d %q, want %d %q", resp.StatusCode, got, tc.status, tc.answer)
			}
			if !waitFor(func() bool { return counter.open.Load() == 0 }) {
				t.Errorf("%d response bodies left open", counter.open.Load())
			}
			if tc.opaque && !waitFor(func() bool { return closes.Load() == 1 }) {
				t.Errorf("request body closed %d times, want 1", closes.Load())
			}
			if st := trR.Stats(); st.Hedges != tc.hedges {
				t.Errorf("%d hedges, want %d", st.Hedges, tc.hedges)
			}
			if !waitFor(func() bool { srv.mu.Lock(); defer srv.mu.Unlock(); return srv.canceled == tc.canceled }) {
				t.Errorf("server saw %d requests canceled, want %d", srv.canceled, tc.canceled)
			}
			srv.Close()
			srv.mu.Lock()
			seen := strings.Join(srv.bodies, "|")
			srv.mu.Unlock()
			if seen != strings.Join(tc.seen, "|") {
				t.Errorf("server saw %q, want %q", seen, strings.Join(tc.seen, "|"))
			}
			base.CloseIdleConnections()
			if !waitFor(func() bool { return openFDs(t) <= fds }) {
				t.Errorf("%d file descriptors open, %d before", openFDs(t), fds)
			}
			goleak.VerifyNone(t)
		})
	}
}
