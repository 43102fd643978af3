package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestDemo runs the whole demo, progress bars forced on: it ends by itself
// well within 30 s, and retry.Transport does better than the plain client
// without adding load during the outage.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo takes about 20 s")
	}
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, progress: "always"}
	start := time.Now()
	rep, err := runDemo(context.Background(), e)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
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
	if p.Retries != 0 || q.Retries == 0 || q.Waited <= 0 {
		t.Errorf("waits: plain %d, retry %d (%v)", p.Retries, q.Retries, q.Waited)
	}
	if q.BreakerTrips == 0 {
		t.Errorf("the breaker never tripped during a 2 s outage")
	}
	if q.OutageHits > p.OutageHits*3/2 {
		t.Errorf("load during the outage: %d hits with retry.Transport, %d without; want the budget and breaker to hold it", q.OutageHits, p.OutageHits)
	}
	for _, w := range []string{"plain client", "retry.Transport", "requests that succeeded", "attempts (server hits)",
		"waits before a retry", "breaker trips", "server load during the outage"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("summary lacks %q:\n%s", w, out.String())
		}
	}
	if s := errb.String(); !strings.Contains(s, "plain client") || !strings.Contains(s, "retry.Transport") || !strings.Contains(s, "/240)") {
		t.Errorf("no progress bars on stderr: %q", s)
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
