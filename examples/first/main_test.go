package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestREADME: this program is README's first example, word for word, and
// against a loopback server that answers 503 with Retry-After: 1 it waits
// the server's second before its retry.
func TestREADME(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	_, block, _ := strings.Cut(string(readme), "```go\n")
	block, _, _ = strings.Cut(block, "```")
	if block != string(src) {
		t.Fatalf("README's first Go block differs from examples/first/main.go:\n%s", block)
	}

	defer goleak.VerifyNone(t)
	var mu sync.Mutex
	var times []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		times = append(times, time.Now())
		n := len(times)
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	defer http.DefaultClient.CloseIdleConnections()
	target = srv.URL

	out := captureStdout(t, main)
	if out != "200 <nil>\n" {
		t.Errorf("printed %q, want %q", out, "200 <nil>\n")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(times) != 2 {
		t.Fatalf("server saw %d requests, want 2", len(times))
	}
	// A server hint is a minimum, spread upward by at most 10% (held
	// exactly, in virtual time, by the root package's TestDelays); on
	// this real clock the bound leaves 0.4 s more for a loaded machine to
	// deliver the second request (1.27 s was seen at a load of 12).
	if gap := times[1].Sub(times[0]); gap < time.Second || gap > 1500*time.Millisecond {
		t.Errorf("retried after %v, want the server's Retry-After: 1s (up to 1.1s, and the machine's delay)", gap)
	}
}

// captureStdout runs f with os.Stdout sent to a pipe and returns what it
// printed.
func captureStdout(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	defer func() { os.Stdout = stdout }()
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() { io.Copy(&buf, r); close(done) }()
	f()
	w.Close()
	<-done
	r.Close()
	return buf.String()
}
