package retryz_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/retryz"
)

// readEvent reads one event of a stream: its data lines, joined.
func readEvent(t *testing.T, sc *bufio.Scanner) string {
	t.Helper()
	var data []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "" && data != nil:
			return strings.Join(data, "\n")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		case line == "" || strings.HasPrefix(line, "retry: "):
		default:
			t.Fatalf("stream line %q", line)
		}
	}
	t.Fatalf("stream ended: %v", sc.Err())
	return ""
}

// TestEventStream: the page's stream sends the page's body at once, then
// once a second with what changed, and ends when its client goes.
func TestEventStream(t *testing.T) {
	r := retry.New()
	defer runtime.KeepAlive(r)
	h := retryz.New()
	h.AddRetrier("live", r)
	srv := serve(t, h)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/debug/retry/?format=events&name=live", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	start := time.Now()
	first := readEvent(t, sc)
	if !strings.Contains(first, `data-source="live"`) || !strings.Contains(first, "<dt>calls</dt><dd>0</dd>") {
		t.Fatalf("first event:\n%s", first)
	}
	for range 3 {
		_ = r.Run(t.Context(), func(context.Context) error { return nil })
	}
	// The next events come a second apart; one of the next two was read
	// after the calls (a reading serves for half a second).
	var second string
	for range 2 {
		second = readEvent(t, sc)
	}
	if !strings.Contains(second, "<dt>calls</dt><dd>3</dd>") {
		t.Fatalf("events after 3 calls:\n%s", second)
	}
	if took := time.Since(start); took < time.Second || took > 10*time.Second { // two ticks of a second; generous above
		t.Errorf("three events took %v, want about 2 s", took)
	}
	cancel() // goleak in TestMain checks that the stream's goroutine ends
}

// thousandsOfKeys serves five Retriers of 1,024 keys each, every gate per
// key, 11 breakers of each open.
func thousandsOfKeys(t *testing.T) (*retryz.Handler, *httptest.Server) {
	h := retryz.New()
	var keep []*retry.Retrier
	for i := range 5 {
		r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
			retry.WithBreaker(retry.Breaker{PerKey: true, MinRequests: 1, FailureRatio: 1, OpenTimeout: time.Hour, MaxWait: -1}),
			retry.WithBudget(retry.Budget{PerKey: true}), retry.WithRateLimit(retry.RateLimit{Limit: 1000, Burst: 10, PerKey: true}),
			retry.WithThrottle(retry.Throttle{PerKey: true}), retry.WithConcurrency(retry.Concurrency{PerKey: true}))
		for k := range 1024 {
			err := error(nil)
			if k%100 == 7 {
				err = errDown // opens the key's breaker
			}
			_ = retry.Run(t.Context(), func(context.Context) error { return err }, r, retry.WithKey(fmt.Sprintf("dependency-%04d.internal", k)))
		}
		keep = append(keep, r)
		h.AddRetrier(fmt.Sprint("r", i), r)
	}
	t.Cleanup(func() { runtime.KeepAlive(keep) })
	return h, serve(t, h)
}

// TestThousandsOfKeys: with five Retriers of 1,024 keys each, the page and
// its JSON show a page of 50 keys each, open breakers first, with the
// counts by state.
func TestThousandsOfKeys(t *testing.T) {
	_, srv := thousandsOfKeys(t)
	s := snapshot(t, srv, "")
	for _, c := range s.Clients {
		if c.KeysTotal != 1024 || len(c.Keys) != 50 || c.BreakerStates["open"] != 11 || c.Keys[0].Breaker != "open" || c.Keys[10].Breaker != "open" || c.Keys[11].Breaker != "closed" {
			t.Fatalf("%s: %d keys, %d shown, states %v, first %+v; want 1024, 50, 11 open, the open ones first", c.Name, c.KeysTotal, len(c.Keys), c.BreakerStates, c.Keys[0])
		}
	}
	_, _, page := get(t, srv, http.MethodGet, "/debug/retry/")
	if n := strings.Count(page, "<tr data-key="); n != 5*50 {
		t.Errorf("the page shows %d keys, want 250", n)
	}
}
