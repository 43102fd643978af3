package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/redact"
)

// get's exit statuses, as curl's: a response of 400 or more with --fail,
// and, when no response came, why.
const (
	exitHTTPError = 22 // a final status of 400 or more, with --fail
	exitResolve   = 6  // the host could not be resolved
	exitConnect   = 7  // no connection could be made
	exitTimeout   = 28 // the time ran out: --timeout, or --attempt-timeout on the last attempt
	exitTLS       = 35 // the TLS handshake failed
	exitTLSCert   = 60 // the server's certificate was not trusted
	exitRecv      = 56 // the connection failed before a response: reset or closed
)

// noResponseStatus is get's exit status for the error of a request that
// got no response, by its last attempt's error: as curl's where curl has
// one, else exitFailure. A request stopped because the wait before its
// next attempt could not fit --timeout is judged by its last attempt's
// error, as curl, which does not retry, would have ended with it: a name
// that does not resolve exits 6, not 28.
func noResponseStatus(err error) int {
	if re := (*retry.Error)(nil); errors.As(err, &re) && re.Reason == retry.ReasonDeadline && re.Err != nil {
		err = re.Err
	}
	var (
		dns  *net.DNSError
		op   *net.OpError
		cert *tls.CertificateVerificationError
		rec  tls.RecordHeaderError
		alrt tls.AlertError
		ne   net.Error
	)
	switch {
	case errors.Is(err, context.Canceled):
		return exitFailure
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return exitTimeout
	case errors.As(err, &dns):
		return exitResolve
	case errors.As(err, &op) && op.Op == "dial":
		return exitConnect
	case errors.As(err, &cert) || errors.As(err, new(x509.UnknownAuthorityError)) ||
		errors.As(err, new(x509.HostnameError)) || errors.As(err, new(x509.CertificateInvalidError)):
		return exitTLSCert
	case errors.As(err, &rec) || errors.As(err, &alrt) || strings.HasPrefix(retry.TypeOf(err), "tls."):
		return exitTLS
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.As(err, &op) || retry.TypeOf(err) == "net.eof" || retry.TypeOf(err) == "net.connection_reset":
		return exitRecv
	}
	return exitFailure
}

func newGet(e *env) *cobra.Command {
	var (
		pf             policyFlags
		method         string
		headers        []string
		bodyFile       string
		output         string
		include        bool
		fail           bool
		timeout        string
		attemptTimeout string
		retryAny       bool
		idempotencyKey bool
	)
	cmd := &cobra.Command{
		Use:   "get [flags] URL",
		Short: "Send a request through retry.Transport, the attempt log on stderr",
		Long: `Send one request through retry.Transport, as curl would: the response body goes to standard
output (or --output), and each attempt, with its outcome and the wait before the next, to
standard error. The Transport's rules apply: only GET, HEAD, OPTIONS, TRACE, PUT, DELETE and
requests with an Idempotency-Key are retried after they may have been sent (--retry-any and
--idempotency-key change that), and Retry-After is honoured.

The exit status is 0 when a response arrived, whatever its status (22 with --fail and a status
of 400 or more). When none did, it says why, by the last attempt's error, as curl's does:
   6  the host could not be resolved
   7  no connection could be made (refused, unreachable)
  28  the time ran out in an attempt: --timeout, or --attempt-timeout on the last attempt
  35  the TLS handshake failed
  56  the connection failed before a response (reset, or closed by the server)
  60  the server's certificate was not trusted
When the wait before the next attempt cannot fit --timeout, the last attempt's error decides:
a host that does not resolve exits 6 whether or not --timeout is given.
and 1 for any other failure, such as an interrupt.

` + presetHelp(),
		Example: `  retry get http://127.0.0.1:8080/health
  retry get -X PUT -H 'Content-Type: application/json' --data-file order.json http://127.0.0.1:8080/orders/7
  retry get --attempts 6 --initial 100ms --fail -o out.json http://127.0.0.1:8080/report`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("get: give one URL, as in: retry get http://127.0.0.1:8080/")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			p, _, err := pf.policy(e.stdin)
			if err != nil {
				return err
			}
			u, err := url.Parse(args[0])
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return usagef("URL %q: must be an absolute http or https URL", showURL(args[0]))
			}
			hdr, err := parseHeaders(headers)
			if err != nil {
				return err
			}
			if method == "" {
				method = http.MethodGet
				if bodyFile != "" {
					method = http.MethodPost
				}
			}
			method = strings.ToUpper(method)
			d, err := positiveDuration("timeout", timeout)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), d)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
			if err != nil {
				return usagef("flag --request = %q: %v", method, err)
			}
			req.Header = hdr
			if bodyFile != "" {
				if err := setBody(req, bodyFile, e.stdin); err != nil {
					return err
				}
			}
			opts := []retry.Option{retry.WithPolicy(p), retry.WithBudget(retry.Budget{Off: true}),
				retry.OnFailure(func(ev retry.Event) {
					// The line has the prefix; the core's own errors repeat it.
					msg := printable(strings.TrimPrefix(ev.Message, "retry: "))
					if ev.Reason == "" {
						fmt.Fprintf(e.stderr, "retry: attempt %d: %s (%s); next attempt in %s\n", ev.Attempt, msg, ev.Type, human(ev.Delay))
					} else {
						fmt.Fprintf(e.stderr, "retry: attempt %d: %s (%s); %s\n", ev.Attempt, msg, ev.Type, ev.Reason)
					}
				})}
			if attemptTimeout != "" {
				at, err := positiveDuration("attempt-timeout", attemptTimeout)
				if err != nil {
					return err
				}
				opts = append(opts, retry.WithAttemptTimeout(at))
			}
			if retryAny {
				opts = append(opts, retry.WithHTTP(retry.HTTP{AllMethods: true}))
			}
			if idempotencyKey {
				opts = append(opts, retry.WithHTTP(retry.HTTP{IdempotencyKey: true}))
			}
			r := retry.New(opts...)
			t := retry.NewTransport(nil, r)
			defer t.CloseIdleConnections()
			client := &http.Client{Transport: t}
			start := time.Now()
			resp, err := client.Do(req)
			attempts := r.Stats().Attempts
			if err != nil {
				return &exitStatus{code: noResponseStatus(err),
					err: fmt.Errorf("%s %s: %s", method, redact.SanitizeURL(u), printable(strings.TrimPrefix(unwrapURL(err).Error(), "retry: ")))}
			}
			defer resp.Body.Close()
			fmt.Fprintf(e.stderr, "retry: %s %s after %d %s in %s\n", printable(resp.Proto), printable(resp.Status), attempts,
				plural(int(attempts), "attempt", "attempts"), human(time.Since(start)))
			out := e.stdout
			if output != "" && output != "-" {
				f, err := os.Create(output)
				if err != nil {
					return failed(fmt.Errorf("flag --output = %q: %v", output, unwrapPath(err)))
				}
				defer f.Close()
				out = f
			}
			if include {
				fmt.Fprintf(out, "%s %s\r\n", printable(resp.Proto), printable(resp.Status))
				shown := make(http.Header, len(resp.Header))
				for name, vs := range resp.Header {
					for _, v := range vs {
						shown[printable(name)] = append(shown[printable(name)], printable(v))
					}
				}
				shown.Write(out)
				fmt.Fprint(out, "\r\n")
			}
			if _, err := io.Copy(out, resp.Body); err != nil {
				return failed(fmt.Errorf("reading the body: %w", err))
			}
			if fail && resp.StatusCode >= 400 {
				return &exitStatus{code: exitHTTPError}
			}
			return nil
		},
	}
	pf.register(cmd.Flags())
	f := cmd.Flags()
	f.StringVarP(&method, "request", "X", "", "method (default GET, or POST with --data-file)")
	f.StringArrayVarP(&headers, "header", "H", nil, "a header, as 'Name: value' (repeatable)")
	f.StringVar(&bodyFile, "data-file", "", "send this file as the body; - for stdin")
	f.StringVarP(&output, "output", "o", "", "write the body to this file")
	f.BoolVarP(&include, "include", "i", false, "write the status line and headers before the body")
	f.BoolVar(&fail, "fail", false, "exit 22 when the final status is 400 or more")
	f.StringVar(&timeout, "timeout", "60s", "bound on the whole request, retries included")
	f.StringVar(&attemptTimeout, "attempt-timeout", "", "bound on each attempt")
	f.BoolVar(&retryAny, "retry-any", false, "retry any method, even when it may have been sent")
	f.BoolVar(&idempotencyKey, "idempotency-key", false, "add an Idempotency-Key, the same on every attempt")
	return cmd
}

// setBody makes the request's body the file, reopened for each attempt so
// that any size can be retried; stdin is read as it is sent and replayed
// by the Transport within its bounds.
func setBody(req *http.Request, file string, stdin io.Reader) error {
	if file == "-" {
		req.Body = io.NopCloser(stdin)
		req.ContentLength = -1
		return nil
	}
	f, err := os.Open(file)
	if err != nil {
		return usagef("flag --data-file = %q: %v", file, unwrapPath(err))
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return usagef("flag --data-file = %q: must be a regular file", file)
	}
	req.Body, req.ContentLength = f, st.Size()
	req.GetBody = func() (io.ReadCloser, error) { return os.Open(file) }
	return nil
}

// unwrapURL drops the *url.Error wrapper, whose text repeats the URL.
func unwrapURL(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// showURL renders a URL given by the user for an error message: its
// userinfo dropped and secret-looking parameters redacted, as
// redact.SanitizeURL does, or, when it does not parse, its userinfo, query
// and fragment dropped and the rest passed through redact.Sanitize.
func showURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return redact.SanitizeURL(u)
	}
	prefix, rest := "", raw
	if i := strings.Index(raw, "://"); i >= 0 {
		prefix, rest = raw[:i+3], raw[i+3:]
	}
	host := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		host = rest[:i]
	}
	if i := strings.LastIndexByte(host, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest = rest[:i+1] + redact.Redacted
	}
	return redact.Sanitize(prefix + rest)
}

// The errors of parseHeaders: none shows a value.
const (
	errHeaderColon = "flag --header #%d: must be Name: value, with a colon (its text is not shown, as it may hold a secret)"
	errHeaderName  = "flag --header #%d: the name must be a token of letters, digits and !#$%%&'*+-.^_`|~ (RFC 9110; the header is not shown, as it may hold a secret)"
	errHeaderValue = "flag --header %s: the value must be visible characters, spaces and tabs, no control characters (RFC 9110 field-value; the value is not shown)"
)

// parseHeaders reads the --header flags, each "Name: value", checking the
// name and the value against RFC 9110. Its errors name the header by its
// name, or by its place when the name is not valid, and never show a value.
func parseHeaders(headers []string) (http.Header, error) {
	hdr := http.Header{}
	for i, h := range headers {
		k, v, ok := strings.Cut(h, ":")
		if !ok {
			return nil, usagef(errHeaderColon, i+1)
		}
		k, v = strings.TrimSpace(k), strings.Trim(v, " \t")
		if !validHeaderName(k) {
			return nil, usagef(errHeaderName, i+1)
		}
		if !validHeaderValue(v) {
			return nil, usagef(errHeaderValue, k)
		}
		hdr.Add(k, v)
	}
	return hdr, nil
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// validHeaderValue reports whether s is an RFC 9110 field-value: visible
// ASCII, obs-text (bytes from 0x80), spaces and tabs; no other control
// character.
func validHeaderValue(s string) bool {
	for i := range len(s) {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// printable returns text a server sent (a status line, a header, an error
// that quotes it) fit for a terminal: each control character (C0, DEL and
// C1: ESC starts the sequences that move the cursor, retitle the window or
// rewrite what was printed) is written as \x and its code in hex, each
// bidirectional control (which reorders what is shown) as \u and its
// code, and invalid UTF-8 as U+FFFD. Tabs are kept.
func printable(s string) string {
	if !strings.ContainsFunc(s, unprintable) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case !unprintable(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, "\\x%02x", r)
		default:
			fmt.Fprintf(&b, "\\u%04x", r)
		}
	}
	return b.String()
}

// unprintable reports whether r is a control character other than a tab,
// or a bidirectional control.
func unprintable(r rune) bool {
	return r != '\t' && unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
}
