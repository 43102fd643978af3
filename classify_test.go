package retry_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/steadyhq/retry"
)

// timeoutErr is a net.Error that timed out.
type timeoutErr struct{}

func (timeoutErr) Error() string { return "i/o timeout" }
func (timeoutErr) Timeout() bool { return true }
func (timeoutErr) Temporary() bool {
	return true
}

func TestTypeOf(t *testing.T) {
	refused := dialClosedPort(t)
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"plain", errors.New("boom"), "error"},
		{"canceled", context.Canceled, "context.canceled"},
		{"wrapped deadline", fmt.Errorf("query: %w", context.DeadlineExceeded), "context.deadline_exceeded"},
		{"named type", typed{"payment.card_stolen"}, "payment.card_stolen"},
		{"named type deep in the chain", fmt.Errorf("a: %w", fmt.Errorf("b: %w", typed{"payment.card_expired"})), "payment.card_expired"},
		{"outermost named type wins", typed2{"outer", typed{"inner"}}, "outer"},
		{"named type beats built-in", typed2{"db.locked", context.Canceled}, "db.locked"},
		{"empty named type falls through", typed2{"", io.EOF}, "net.eof"},
		{"named type inside a join", errors.Join(errors.New("x"), typed{"auth.forbidden"}), "auth.forbidden"},
		{"verdicts are transparent", retry.Permanent(retry.After(typed{"a.b"}, time.Second)), "a.b"},
		{"real connection refused", refused, "net.connection_refused"},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, "net.connection_reset"},
		{"broken pipe", &net.OpError{Op: "write", Err: os.NewSyscallError("write", syscall.EPIPE)}, "net.connection_reset"},
		{"dns not found", &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}, "net.dns.not_found"},
		{"dns temporary", &net.DNSError{Err: "server misbehaving", Name: "x", IsTemporary: true}, "net.dns.temporary"},
		{"dns timeout", &net.DNSError{Err: "timeout", Name: "x", IsTimeout: true}, "net.dns.temporary"},
		{"dns other", &net.DNSError{Err: "bad", Name: "x"}, "net.dns.error"},
		{"dns inside url and op errors", &url.Error{Op: "Get", URL: "http://x", Err: &net.OpError{Op: "dial", Err: &net.DNSError{IsNotFound: true}}}, "net.dns.not_found"},
		{"os deadline", fmt.Errorf("read: %w", os.ErrDeadlineExceeded), "net.timeout"},
		{"net.Error timeout", timeoutErr{}, "net.timeout"},
		{"url.Error timeout", &url.Error{Op: "Get", URL: "http://x", Err: timeoutErr{}}, "net.timeout"},
		{"op error without cause", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("weird")}, "net.error"},
		{"eof", io.EOF, "net.eof"},
		{"unexpected eof", fmt.Errorf("body: %w", io.ErrUnexpectedEOF), "net.eof"},
		{"bad conn", fmt.Errorf("exec: %w", driver.ErrBadConn), "sql.bad_conn"},
		{"unknown authority", &url.Error{Op: "Get", Err: &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}}, "tls.certificate"},
		{"hostname", x509.HostnameError{Host: "x"}, "tls.certificate"},
		{"record header", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, "tls.handshake"},
		{"alert", tls.AlertError(40), "tls.handshake"},
		{"redirect limit", &url.Error{Op: "Get", URL: "http://x", Err: errors.New("stopped after 10 redirects")}, "redirect.too_many"},
		{"not a redirect limit", &url.Error{Op: "Get", URL: "http://x", Err: errors.New("stopped after ten redirects")}, "error"},
		{"status 503", &retry.StatusError{StatusCode: 503}, "http.5xx.503"},
		{"status 429", fmt.Errorf("api: %w", &retry.StatusError{StatusCode: 429}), "http.4xx.429"},
		{"odd status", &retry.StatusError{StatusCode: 999}, "http.xxx.999"},
		{"http2 goaway sentinel", errors.New("http2: Transport received Server's graceful shutdown GOAWAY"), "http2.goaway"},
		{"context beats a network error in the same chain", errors.Join(&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, context.Canceled), "context.canceled"},
		{"specific beats generic", &url.Error{Op: "Get", Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}, "net.connection_refused"},
		{"deep chain", deepChain(500), "error"},
		{"cyclic chain ends", cyclic{}, "error"},
		{"shared causes do not explode", diamond(60), "net.eof"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retry.TypeOf(tt.err); got != tt.want {
				t.Fatalf("TypeOf(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

// TestTypeOfTLS classifies a real certificate failure against a loopback
// TLS server whose certificate the client does not trust.
func TestTypeOfTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	resp, err := c.Get(srv.URL)
	if err == nil {
		resp.Body.Close()
		t.Fatal("untrusted certificate accepted")
	}
	if got := retry.TypeOf(err); got != "tls.certificate" {
		t.Fatalf("TypeOf(%v) = %q, want tls.certificate", err, got)
	}
}

// TestTypeOfRedirects classifies http.Client's redirect limit.
func TestTypeOfRedirects(t *testing.T) {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, srv.URL+"/loop", http.StatusFound)
	}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err == nil {
		resp.Body.Close()
		t.Fatal("redirect loop followed")
	}
	if got := retry.TypeOf(err); got != "redirect.too_many" {
		t.Fatalf("TypeOf(%v) = %q", err, got)
	}
}

type typed2 struct {
	typ string
	err error
}

func (e typed2) Error() string     { return e.typ + ": " + e.err.Error() }
func (e typed2) ErrorType() string { return e.typ }
func (e typed2) Unwrap() error     { return e.err }

// cyclic unwraps to itself.
type cyclic struct{}

func (cyclic) Error() string   { return "cyclic" }
func (c cyclic) Unwrap() error { return c }

// diamond joins n levels of (e, e): 2^n paths to io.EOF.
func diamond(n int) error {
	err := error(io.EOF)
	for range n {
		err = errors.Join(err, err)
	}
	return err
}

func deepChain(n int) error {
	err := errors.New("root")
	for range n {
		err = fmt.Errorf("w: %w", err)
	}
	return err
}

// dialClosedPort returns the real error of dialing a loopback port nobody
// listens on.
func dialClosedPort(t *testing.T) error {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c, err := net.Dial("tcp", addr)
	if err == nil {
		c.Close()
		t.Fatal("dial to a closed port succeeded")
	}
	return err
}

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, typ string
		want         bool
	}{
		{"auth.*", "auth.token_expired", true},
		{"auth.*", "auth.forbidden", true},
		{"auth.*", "auth.token.expired", true},
		{"auth.*", "auth", false},
		{"auth.*", "auth.", false},
		{"auth.*", "external.auth.failure", false},
		{"auth.*", "authx.y", false},
		{"validation.payload_invalid", "validation.payload_invalid", true},
		{"validation.payload_invalid", "validation.payload_invalid.x", false},
		{"validation", "validation.x", false},
		{"http.4xx.*", "http.4xx.404", true},
		{"*", "anything", false},
		{".*", ".x", false},
		{"", "", true},
		{"a.*", "", false},
	}
	for _, tt := range tests {
		if got := retry.Match(tt.pattern, tt.typ); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.pattern, tt.typ, got, tt.want)
		}
	}
}

// TestDefaultNonRetryable pins the built-in non-retryable set through the
// engine: which types are retried by default.
func TestDefaultNonRetryable(t *testing.T) {
	tests := []struct {
		err   error
		retry bool
	}{
		{errors.New("x"), true},
		{context.Canceled, false},
		{context.DeadlineExceeded, true}, // raised inside fn, the caller's context alive: TypeTimeout
		{typed{"context.anything"}, false},
		{typed{"tls.certificate"}, false},
		{typed{"tls.handshake"}, true},
		{typed{"request.invalid"}, false},
		{typed{"redirect.too_many"}, false},
		{typed{"body.not_replayable"}, false},
		{typed{"net.connection_refused"}, true},
		{typed{"http2.goaway"}, true},
		{typed{"timeout.attempt"}, true},
	}
	for code := 400; code < 600; code++ {
		want := code >= 500 && code != 501 && code != 505 || code == 408 || code == 425 || code == 429
		tests = append(tests, struct {
			err   error
			retry bool
		}{&retry.StatusError{StatusCode: code}, want})
	}
	p := retry.WithPolicy(retry.Policy{MaxAttempts: 2, Backoff: retry.Immediate})
	for _, tt := range tests {
		calls := 0
		_ = retry.Run(t.Context(), func(context.Context) error { calls++; return tt.err }, p)
		if got := calls == 2; got != tt.retry {
			t.Errorf("%v (%s): retried = %v, want %v", tt.err, retry.TypeOf(tt.err), got, tt.retry)
		}
	}
}

func TestVerdictsOfNil(t *testing.T) {
	for name, f := range map[string]func(error) error{
		"Permanent": retry.Permanent, "Retryable": retry.Retryable, "Discard": retry.Discard,
		"DeadLetter": retry.DeadLetter, "Fail": retry.Fail,
		"After": func(err error) error { return retry.After(err, time.Second) },
	} {
		if f(nil) != nil {
			t.Errorf("%s(nil) != nil", name)
		}
		base := errors.New("base")
		if err := f(base); !errors.Is(err, base) || err.Error() != "base" {
			t.Errorf("%s(base) = %v, must wrap transparently", name, err)
		}
	}
}
