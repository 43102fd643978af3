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
		{name: "nil"},
		{name: "plain", err: errors.New("boom"), want: "error"},
		{name: "canceled", err: context.Canceled, want: "context.canceled"},
		{name: "wrapped deadline", err: fmt.Errorf("query: %w", context.DeadlineExceeded), want: "context.deadline_exceeded"},
		{name: "named type", err: typed{"payment.card_stolen"}, want: "payment.card_stolen"},
		{name: "named type deep in the chain", err: fmt.Errorf("a: %w", fmt.Errorf("b: %w", typed{"payment.card_expired"})), want: "payment.card_expired"},
		{name: "outermost named type wins", err: typed2{"outer", typed{"inner"}}, want: "outer"},
		{name: "named type beats built-in", err: typed2{"db.locked", context.Canceled}, want: "db.locked"},
		{name: "empty named type falls through", err: typed2{"", io.EOF}, want: "net.eof"},
		{name: "named type inside a join", err: errors.Join(errors.New("x"), typed{"auth.forbidden"}), want: "auth.forbidden"},
		{name: "verdicts are transparent", err: retry.Permanent(retry.After(typed{"a.b"}, time.Second)), want: "a.b"},
		{name: "real connection refused", err: refused, want: "net.connection_refused"},
		{name: "connection reset", err: &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, want: "net.connection_reset"},
		{name: "broken pipe", err: &net.OpError{Op: "write", Err: os.NewSyscallError("write", syscall.EPIPE)}, want: "net.connection_reset"},
		{name: "dns not found", err: &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}, want: "net.dns.not_found"},
		{name: "dns temporary", err: &net.DNSError{Err: "server misbehaving", Name: "x", IsTemporary: true}, want: "net.dns.temporary"},
		{name: "dns timeout", err: &net.DNSError{Err: "timeout", Name: "x", IsTimeout: true}, want: "net.dns.temporary"},
		{name: "dns other", err: &net.DNSError{Err: "bad", Name: "x"}, want: "net.dns.error"},
		{name: "dns inside url and op errors", err: &url.Error{Op: "Get", URL: "http://x", Err: &net.OpError{Op: "dial", Err: &net.DNSError{IsNotFound: true}}}, want: "net.dns.not_found"},
		{name: "os deadline", err: fmt.Errorf("read: %w", os.ErrDeadlineExceeded), want: "net.timeout"},
		{name: "net.Error timeout", err: timeoutErr{}, want: "net.timeout"},
		{name: "url.Error timeout", err: &url.Error{Op: "Get", URL: "http://x", Err: timeoutErr{}}, want: "net.timeout"},
		{name: "op error without cause", err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("weird")}, want: "net.error"},
		{name: "eof", err: io.EOF, want: "net.eof"},
		{name: "unexpected eof", err: fmt.Errorf("body: %w", io.ErrUnexpectedEOF), want: "net.eof"},
		{name: "bad conn", err: fmt.Errorf("exec: %w", driver.ErrBadConn), want: "sql.bad_conn"},
		{name: "unknown authority", err: &url.Error{Op: "Get", Err: &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}}, want: "tls.certificate"},
		{name: "hostname", err: x509.HostnameError{Host: "x"}, want: "tls.certificate"},
		{name: "record header", err: tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, want: "tls.handshake"},
		{name: "alert", err: tls.AlertError(40), want: "tls.handshake"},
		{name: "redirect limit", err: &url.Error{Op: "Get", URL: "http://x", Err: errors.New("stopped after 10 redirects")}, want: "redirect.too_many"},
		{name: "not a redirect limit", err: &url.Error{Op: "Get", URL: "http://x", Err: errors.New("stopped after ten redirects")}, want: "error"},
		{name: "status 503", err: &retry.StatusError{StatusCode: 503}, want: "http.5xx.503"},
		{name: "status 429", err: fmt.Errorf("api: %w", &retry.StatusError{StatusCode: 429}), want: "http.4xx.429"},
		{name: "odd status", err: &retry.StatusError{StatusCode: 999}, want: "http.xxx.999"},
		{name: "http2 goaway sentinel", err: errors.New("http2: Transport received Server's graceful shutdown GOAWAY"), want: "http2.goaway"},
		{name: "context beats a network error in the same chain", err: errors.Join(&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, context.Canceled), want: "context.canceled"},
		{name: "specific beats generic", err: &url.Error{Op: "Get", Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}, want: "net.connection_refused"},
		{name: "deep chain", err: deepChain(500), want: "error"},
		{name: "cyclic chain ends", err: cyclic{}, want: "error"},
		{name: "shared causes do not explode", err: diamond(60), want: "net.eof"},
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
		{pattern: "auth.*", typ: "auth.token_expired", want: true},
		{pattern: "auth.*", typ: "auth.forbidden", want: true},
		{pattern: "auth.*", typ: "auth.token.expired", want: true},
		{pattern: "auth.*", typ: "auth"},
		{pattern: "auth.*", typ: "auth."},
		{pattern: "auth.*", typ: "external.auth.failure"},
		{pattern: "auth.*", typ: "authx.y"},
		{pattern: "validation.payload_invalid", typ: "validation.payload_invalid", want: true},
		{pattern: "validation.payload_invalid", typ: "validation.payload_invalid.x"},
		{pattern: "validation", typ: "validation.x"},
		{pattern: "http.4xx.*", typ: "http.4xx.404", want: true},
		{pattern: "*", typ: "anything"},
		{pattern: ".*", typ: ".x"},
		{want: true},
		{pattern: "a.*"},
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
		{err: errors.New("x"), retry: true},
		{err: context.Canceled},
		{err: context.DeadlineExceeded, retry: true}, // raised inside fn, the caller's context alive: TypeTimeout
		{err: typed{"context.anything"}},
		{err: typed{"tls.certificate"}},
		{err: typed{"tls.handshake"}, retry: true},
		{err: typed{"request.invalid"}},
		{err: typed{"redirect.too_many"}},
		{err: typed{"body.not_replayable"}},
		{err: typed{"net.connection_refused"}, retry: true},
		{err: typed{"http2.goaway"}, retry: true},
		{err: typed{retry.TypeAttemptTimeout}, retry: true},
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
