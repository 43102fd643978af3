package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
)

// scripted answers each request with the next status of a script (the last
// one repeats), and records the bodies it received.
type scripted struct {
	mu     sync.Mutex
	script []int
	hits   int
	bodies []string
	header http.Header
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	code := s.script[min(s.hits, len(s.script)-1)]
	s.hits++
	b, _ := io.ReadAll(r.Body)
	s.bodies = append(s.bodies, string(b))
	s.header = r.Header.Clone()
	s.mu.Unlock()
	if code == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "0")
	}
	w.WriteHeader(code)
	io.WriteString(w, http.StatusText(code))
}

func TestGet(t *testing.T) {
	dir := t.TempDir()
	body := filepath.Join(dir, "order.json")
	if err := os.WriteFile(body, []byte(`{"id": 7}`), 0o644); err != nil {
		t.Fatal(err)
	}
	fast := []string{"--initial", "1ms", "--max", "5ms"}
	cases := []struct {
		name   string
		script []int
		args   []string
		code   int
		stdout string
		hits   int
		stderr []string
		bodies string // every body received, joined by |
		header string // a header the server must have seen
	}{
		{name: "ok at once", script: []int{200}, stdout: "OK", hits: 1, stderr: []string{"retry: HTTP/1.1 200 OK after 1 attempt"}},
		{name: "503 twice then ok", script: []int{503, 503, 200}, args: fast, stdout: "OK", hits: 3,
			stderr: []string{"retry: attempt 1: http status 503 (http.5xx.503); next attempt in", "attempt 2:", "200 OK after 3 attempts"}},
		{name: "429 with Retry-After", script: []int{429, 200}, args: fast, stdout: "OK", hits: 2, stderr: []string{"(http.4xx.429)", "after 2 attempts"}},
		{name: "exhausted: the last 503 is returned", script: []int{503}, args: fast, stdout: "Service Unavailable", hits: 3,
			stderr: []string{"retry: attempt 3: http status 503 (http.5xx.503); exhausted", "503 Service Unavailable after 3 attempts"}},
		{name: "--fail on a final 503, after the retries", script: []int{503}, args: append(fast, "--fail"), code: exitHTTPError, stdout: "Service Unavailable", hits: 3,
			stderr: []string{"503 Service Unavailable after 3 attempts"}},
		{name: "--fail on a 200 after a 503", script: []int{503, 200}, args: append(fast, "--fail"), stdout: "OK", hits: 2},
		{name: "--fail on 404, not retried", script: []int{404}, args: append(fast, "--fail"), code: exitHTTPError, stdout: "Not Found", hits: 1,
			stderr: []string{"404 Not Found after 1 attempt"}},
		{name: "POST is not retried", script: []int{503, 200}, args: append(fast, "--data-file", body), stdout: "Service Unavailable", hits: 1,
			stderr: []string{"after 1 attempt"}, bodies: `{"id": 7}`},
		{name: "PUT replays the file", script: []int{503, 200}, args: append(fast, "-X", "put", "--data-file", body, "-H", "Content-Type: application/json"), stdout: "OK", hits: 2,
			bodies: `{"id": 7}|{"id": 7}`, header: "Content-Type: application/json"},
		{name: "POST with an idempotency key", script: []int{503, 200}, args: append(fast, "--data-file", body, "--idempotency-key"), stdout: "OK", hits: 2,
			bodies: `{"id": 7}|{"id": 7}`, header: "Idempotency-Key"},
		{name: "POST from stdin with --retry-any", script: []int{503, 200}, args: append(fast, "--data-file", "-", "--retry-any"), stdout: "OK", hits: 2,
			bodies: "from stdin|from stdin"},
		{name: "include headers", script: []int{200}, args: []string{"-i"}, stdout: "HTTP/1.1 200 OK\r\n", hits: 1},
		{name: "a tab and obs-text inside a value", script: []int{200}, args: []string{"-H", "X-T: a\tb\xe9"}, stdout: "OK", hits: 1, header: "X-T: a\tb\xe9"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &scripted{script: c.script}
			ts := httptest.NewServer(s)
			defer ts.Close()
			stdout, stderr, code := cli(t, "from stdin", append(append([]string{"get"}, c.args...), ts.URL+"/x")...)
			if code != c.code {
				t.Errorf("status %d, want %d; stderr:\n%s", code, c.code, stderr)
			}
			if !strings.Contains(stdout, c.stdout) {
				t.Errorf("stdout %q, want %q in it", stdout, c.stdout)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.hits != c.hits {
				t.Errorf("%d requests reached the server, want %d", s.hits, c.hits)
			}
			for _, w := range c.stderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if c.bodies != "" {
				if got := strings.Join(s.bodies, "|"); got != c.bodies {
					t.Errorf("bodies %q, want %q", got, c.bodies)
				}
			}
			if c.header != "" {
				k, v, _ := strings.Cut(c.header, ": ")
				if got := s.header.Get(k); got == "" || (v != "" && got != v) {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

// rawServer listens on loopback and hands each connection to serve, which
// owns it; it stops with the test, closing what serve left open.
func rawServer(t *testing.T, serve func(c net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { serve(c) })
		}
	})
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

// readRequest reads the request's head from c.
func readRequest(c net.Conn) {
	buf := make([]byte, 4096)
	var got []byte
	for !strings.Contains(string(got), "\r\n\r\n") {
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		got = append(got, buf[:n]...)
	}
}

// TestGetExitStatus: when no response came, get's exit status says why,
// as curl's does, against real loopback servers: a closed port, a name
// that does not resolve, a server that never answers, one that resets or
// closes the connection, one that does not speak TLS, one whose
// certificate is not trusted. Each ends with one line on stderr.
func TestGetExitStatus(t *testing.T) {
	// A closed port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	silent := rawServer(t, func(c net.Conn) { readRequest(c) })
	reset := rawServer(t, func(c net.Conn) {
		readRequest(c)
		c.(*net.TCPConn).SetLinger(0)
		c.Close()
	})
	hangUp := rawServer(t, func(c net.Conn) {
		readRequest(c)
		c.Close()
	})
	plain := httptest.NewServer(&scripted{script: []int{200}})
	defer plain.Close()
	untrusted := httptest.NewTLSServer(&scripted{script: []int{200}})
	defer untrusted.Close()
	// A name with a label over 63 bytes (RFC 1035) is never sent to DNS:
	// Go's resolver reports no such host at once, offline or not.
	unresolvable := strings.Repeat("x", 64) + ".invalid"
	defer func(v bool) { net.DefaultResolver.PreferGo = v }(net.DefaultResolver.PreferGo)
	net.DefaultResolver.PreferGo = true

	cases := []struct {
		name string
		url  string
		args []string
		code int
		last string // in the last line
	}{
		{name: "connection refused", url: "http://" + closed + "/", code: exitConnect, last: "connection refused"},
		{name: "unknown host", url: "http://" + unresolvable + "/", code: exitResolve, last: "no such host"},
		// The next attempt's wait cannot fit --timeout: the last
		// attempt's failure decides, as curl's would.
		{name: "unknown host in --timeout", url: "http://" + unresolvable + "/", args: []string{"--attempts", "3", "--initial", "1s", "--timeout", "100ms"}, code: exitResolve, last: "deadline after 1 attempt"},
		{name: "connection refused in --timeout", url: "http://" + closed + "/", args: []string{"--attempts", "3", "--initial", "1s", "--timeout", "100ms"}, code: exitConnect, last: "deadline after 1 attempt"},
		{name: "no answer in --timeout", url: "http://" + silent + "/", args: []string{"--timeout", "100ms"}, code: exitTimeout},
		{name: "no answer in --attempt-timeout", url: "http://" + silent + "/", args: []string{"--attempt-timeout", "50ms"}, code: exitTimeout},
		{name: "connection reset", url: "http://" + reset + "/", code: exitRecv},
		{name: "connection closed", url: "http://" + hangUp + "/", code: exitRecv, last: "EOF"},
		{name: "not TLS", url: strings.Replace(plain.URL, "http:", "https:", 1), code: exitTLS},
		{name: "untrusted certificate", url: untrusted.URL, code: exitTLSCert, last: "certificate"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"get", "--attempts", "1"}, c.args...)
			stdout, stderr, code := cli(t, "", append(args, c.url)...)
			if code != c.code || stdout != "" {
				t.Errorf("status %d, want %d; stdout %q", code, c.code, stdout)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if last := lines[len(lines)-1]; len(lines) != 2 || !strings.HasPrefix(last, "retry: GET ") || !strings.Contains(last, c.last) {
				t.Errorf("stderr, want an attempt's line then the outcome's with %q:\n%s", c.last, stderr)
			}
		})
	}
}

// TestGetInterrupted: a request cut short by an interrupt (the command's
// context canceled, as main does on SIGINT) exits 1, no curl status.
func TestGetInterrupted(t *testing.T) {
	silent := rawServer(t, func(c net.Conn) { readRequest(c) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(20*time.Millisecond, cancel)
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb}
	if code := execute(ctx, e, []string{"get", "--attempts", "1", "http://" + silent + "/"}); code != exitFailure {
		t.Errorf("status %d, want %d; stderr:\n%s", code, exitFailure, errb.String())
	}
}

// TestGetNoResponse: nothing listening: every attempt is refused, and get
// ends with one line and status 7, as curl's.
func TestGetNoResponse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	stdout, stderr, code := cli(t, "", "get", "--initial", "1ms", "--attempts", "2", "http://"+addr+"/")
	if code != exitConnect || stdout != "" {
		t.Errorf("status %d, stdout %q", code, stdout)
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	last := lines[len(lines)-1]
	if len(lines) != 3 || !strings.Contains(last, "retry: GET http://"+addr+"/: exhausted after 2 attempts") || !strings.Contains(stderr, "net.connection_refused") {
		t.Errorf("stderr:\n%s", stderr)
	}
}

func TestGetUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{args: []string{"get"}, want: "give one URL"},
		{args: []string{"get", "ftp://127.0.0.1/"}, want: `URL "ftp://127.0.0.1/": must be an absolute http or https URL`},
		{args: []string{"get", "-H", "NoColon", "http://127.0.0.1:1/"}, want: `flag --header #1: must be Name: value, with a colon`},
		{args: []string{"get", "-H", "X-A: a\tb\x01", "http://127.0.0.1:1/"}, want: `flag --header X-A: the value must be visible characters, spaces and tabs`},
		{args: []string{"get", "-H", "X-A: a\r\nX-B: b", "http://127.0.0.1:1/"}, want: `flag --header X-A: the value must be`},
		{args: []string{"get", "-H", "X-A: 1", "-H", "X-(B): 2", "http://127.0.0.1:1/"}, want: `flag --header #2: the name must be a token`},
		{args: []string{"get", "-H", "X-\x00: 2", "http://127.0.0.1:1/"}, want: `flag --header #1: the name must be a token`},
		{args: []string{"get", "-H", ": v", "http://127.0.0.1:1/"}, want: `flag --header #1: the name must be a token`},
		{args: []string{"get", "--data-file", "testdata/none", "http://127.0.0.1:1/"}, want: `flag --data-file = "testdata/none": no such file or directory`},
		{args: []string{"get", "--timeout", "0", "http://127.0.0.1:1/"}, want: `flag --timeout = "0": must be a duration > 0`},
		{args: []string{"get", "-X", "GE T", "http://127.0.0.1:1/"}, want: `flag --request = "GE T"`},
	} {
		stdout, stderr, code := cli(t, "", c.args...)
		if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: status %d, stderr %q, want one line with %q", c.args, code, stderr, c.want)
		}
	}
}

// TestGetPrintsNoControlCharacters: what a server sends (the reason
// phrase, header names and values, the text of an error that quotes it)
// reaches the terminal with its control characters written out, so that
// no escape sequence a server chose runs in the user's terminal.
func TestGetPrintsNoControlCharacters(t *testing.T) {
	// net/http takes any byte but CR and LF in a reason phrase, and bytes
	// from 0x80 in a header's value: C1 controls and bidirectional ones
	// written in UTF-8.
	const evil, evilHeader = "\x1b]0;pwned\x07\x1b[2J\u202e\u009b31m", "\u202e\u009b31m"
	answer := func(status string) string {
		return rawServer(t, func(c net.Conn) {
			readRequest(c)
			io.WriteString(c, "HTTP/1.1 "+status+"\r\nX-Note: a"+evilHeader+"b\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi")
			c.Close()
		})
	}
	cases := []struct {
		name string
		args []string
		url  string
		code int
	}{
		{name: "reason phrase", url: "http://" + answer("200 OK"+evil) + "/", code: 0},
		{name: "reason phrase and headers with --include", args: []string{"-i"}, url: "http://" + answer("200 OK"+evil) + "/", code: 0},
		{name: "retried status", args: []string{"--attempts", "2", "--initial", "1ms"}, url: "http://" + answer("503 Busy"+evil) + "/", code: 0},
		{name: "malformed status line", args: []string{"--attempts", "1"}, url: "http://" + answer("2"+evil+"00 OK") + "/", code: exitFailure},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := cli(t, "", append(append([]string{"get"}, c.args...), c.url)...)
			if code != c.code {
				t.Errorf("status %d, want %d; stderr %q", code, c.code, stderr)
			}
			for name, out := range map[string]string{"stdout": stdout, "stderr": stderr} {
				for _, r := range out {
					if r != '\n' && r != '\r' && r != '\t' && unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
						t.Errorf("%s holds the control character %U: %q", name, r, out)
						break
					}
				}
			}
			if !strings.Contains(stdout+stderr, `\x1b`) || c.code == 0 && !strings.Contains(stderr, `\u202e\x9b31m`) {
				t.Errorf("the server's controls are not written out:\nstdout %q\nstderr %q", stdout, stderr)
			}
		})
	}
}
