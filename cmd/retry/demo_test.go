package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/retryz"
)

// TestDemo runs the whole demo, progress bars forced on: it ends by itself
// well within 30 s, and retry.Transport does better than the plain client
// without adding load during the outage. With --debug-addr and
// --debug-wait, the live page shows the Transport as the demo runs, its
// breaker opening and closing, and is served after the demo until the
// demo is interrupted.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo takes about 20 s")
	}
	var out lockedBuffer
	var errb bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, progress: "always"}
	ctx, interrupt := context.WithCancel(t.Context())
	defer interrupt()
	watched := make(chan pageSeen, 1)
	dbg := demoDebug{addr: "127.0.0.1:0", wait: true, listening: func(url string) {
		go func() {
			defer interrupt()
			seen := watchPage(ctx, url)
			// The report is out, and the page still served.
			for i := 0; i < 600 && !strings.Contains(out.String(), "until interrupted (Ctrl-C)"); i++ {
				time.Sleep(100 * time.Millisecond)
			}
			var s retryz.Snapshot
			seen.servedAfter = strings.Contains(out.String(), "until interrupted") && getJSON(ctx, url+"?format=json", &s) == nil && len(s.Clients) == 1
			watched <- seen
		}()
	}}
	start := time.Now()
	rep, err := runDemo(ctx, e, dbg)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	seen := <-watched
	if seen.err != nil {
		t.Fatal(seen.err)
	}
	if !seen.open || !seen.closedAgain || seen.calls != 240 {
		t.Errorf("the page showed: breaker open %v, closed again %v, %d calls at the end; want open, closed again, 240", seen.open, seen.closedAgain, seen.calls)
	}
	if !seen.servedAfter {
		t.Error("the page was not served after the demo's report")
	}
	if elapsed > 30*time.Second {
		t.Errorf("the demo took %v, want under 30 s", elapsed)
	}
	if first, _, _ := strings.Cut(out.String(), "\n"); first != demoIntro {
		t.Errorf("first line %q, want %q", first, demoIntro)
	}
	p, q := rep.Plain, rep.Retry
	t.Logf("plain %+v", p.Failures)
	t.Logf("retry %+v", q.Failures)
	if p.Requests != 240 || q.Requests != 240 || len(p.Latencies) != 240 || len(q.Latencies) != 240 {
		t.Fatalf("requests %d and %d, latencies %d and %d, want 240 each", p.Requests, q.Requests, len(p.Latencies), len(q.Latencies))
	}
	rate := func(ok, n int) float64 { return float64(ok) / float64(n) }
	if rate(q.Succeeded, q.Requests) <= rate(p.Succeeded, p.Requests) {
		t.Errorf("retry.Transport succeeded %d times, the plain client %d: want more", q.Succeeded, p.Succeeded)
	}
	if r := rate(p.OutageSucceeded, p.OutageRequests); p.OutageRequests < 60 || r > 0.1 {
		t.Errorf("plain client: %d of %d requests succeeded during the outage", p.OutageSucceeded, p.OutageRequests)
	}
	if p.Retries != 0 || q.Retries == 0 || q.Waited <= 0 || q.LongestWait <= 0 || q.LongestWait > q.Waited {
		t.Errorf("waits: plain %d, retry %d (%v, longest %v)", p.Retries, q.Retries, q.Waited, q.LongestWait)
	}
	// The table's account of the server hits: the plain client's are its
	// requests and net/http's own re-sends; retry.Transport adds its retries.
	if p.Hits < p.Requests || p.Hits > p.Requests+p.Resent {
		t.Errorf("plain client: %d server hits for %d requests and %d re-sent by net/http", p.Hits, p.Requests, p.Resent)
	}
	if q.Hits > q.Requests+q.Retries+q.Resent {
		t.Errorf("retry.Transport: %d server hits for %d requests, %d retries and %d re-sent by net/http", q.Hits, q.Requests, q.Retries, q.Resent)
	}
	if q.BreakerTrips == 0 {
		t.Errorf("the breaker never tripped during a 2 s outage")
	}
	if q.OutageHits > p.OutageHits*3/2 {
		t.Errorf("load during the outage: %d hits with retry.Transport, %d without; want the budget and breaker to hold it", q.OutageHits, p.OutageHits)
	}
	for _, w := range []string{"plain client", "retry.Transport", "requests that succeeded", "server hits (attempts received)",
		"re-sent by net/http itself *", "retries by retry.Transport", "wait before one, mean / longest", "breaker trips",
		"server load during the outage", "* net/http's Transport sends a GET again"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("summary lacks %q:\n%s", w, out.String())
		}
	}
	if s := errb.String(); !strings.Contains(s, "plain client") || !strings.Contains(s, "retry.Transport") || !strings.Contains(s, "/240)") {
		t.Errorf("no progress bars on stderr: %q", s)
	}
}

// TestWireCount: net/http sends a GET again by itself when the keep-alive
// connection it reused is reset before any response, and wireCount counts
// it: a server that resets the second request on every connection sees
// three requests for two GETs of a plain client, one of them re-sent.
func TestWireCount(t *testing.T) {
	type connKey struct{}
	var hits atomic.Int32
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Context().Value(connKey{}).(*atomic.Int32).Add(1) == 2 {
			reset(w)
			return
		}
		io.WriteString(w, "ok")
	}))
	ts.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, new(atomic.Int32))
	}
	ts.Start()
	defer ts.Close()
	tr := ts.Client().Transport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	wc := &wireCount{base: tr}
	client := &http.Client{Transport: wc}
	for i := range 2 {
		if why := get(context.Background(), client, ts.URL); why != "" {
			t.Fatalf("GET %d: %s", i+1, why)
		}
	}
	if h, r := hits.Load(), wc.resent.Load(); h != 3 || r != 1 {
		t.Errorf("%d server hits, %d re-sent by net/http; want 3 and 1", h, r)
	}
}

func TestShowProgress(t *testing.T) {
	for _, c := range []struct {
		progress string
		terminal bool
		want     bool
	}{
		{progress: "auto"}, {progress: "auto", terminal: true, want: true},
		{progress: "always", want: true}, {progress: "never", terminal: true},
	} {
		e := &env{progress: c.progress, terminal: c.terminal}
		if got := e.showProgress(); got != c.want {
			t.Errorf("progress %s, terminal %v: %v, want %v", c.progress, c.terminal, got, c.want)
		}
	}
}

// pageSeen is what watchPage saw of the demo's live page.
type pageSeen struct {
	open, closedAgain bool  // a breaker change to open, then one to closed
	calls             int64 // the Transport's calls, last seen
	servedAfter       bool  // the page answered after the demo's report
	err               error
}

// watchPage reads the page's JSON every 100 ms while the demo runs, until
// the Transport has made its 240 calls.
func watchPage(ctx context.Context, url string) (seen pageSeen) {
	deadline := time.Now().Add(60 * time.Second) // generous: the demo takes about 20 s
	for time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		var s retryz.Snapshot
		if err := getJSON(ctx, url+"?format=json", &s); err != nil {
			seen.err = err
			return seen
		}
		if len(s.Clients) != 1 {
			continue
		}
		c := s.Clients[0]
		for _, ch := range c.Changes {
			seen.open = seen.open || ch.To == retry.BreakerOpen
			seen.closedAgain = seen.closedAgain || (seen.open && ch.To == retry.BreakerClosed)
		}
		if seen.calls = c.Stats.Calls; seen.calls == 240 {
			return seen
		}
	}
	seen.err = fmt.Errorf("the page never showed the demo's 240 calls")
	return seen
}

// lockedBuffer is a bytes.Buffer safe for concurrent use.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
