package retry

// The built-in error types: what one error of a chain is, ignoring what it
// wraps, from the standard library's sentinels, its error types, and the
// unexported errors of net/http and crypto/tls known by their type or text.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	sqldriver "database/sql/driver"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"syscall"
)

// sentinelType recognises the sentinel errors of the standard library.
func sentinelType(err error) (string, int) {
	switch err {
	case context.Canceled:
		return typeCanceled, prioContext
	case context.DeadlineExceeded:
		return typeDeadlineExceeded, prioContext
	case sqldriver.ErrBadConn:
		return typeBadConn, prioSpecific
	case os.ErrDeadlineExceeded:
		return typeNetTimeout, prioDeadline
	case io.EOF, io.ErrUnexpectedEOF:
		return typeEOF, prioEOF
	}
	return "", prioNone
}

// builtinType classifies one error of a chain, ignoring what it wraps.
func builtinType(err error) (string, int) {
	if typ, prio := sentinelType(err); prio != prioNone {
		return typ, prio
	}
	switch e := err.(type) {
	case syscall.Errno:
		switch e {
		case syscall.ECONNREFUSED:
			return typeConnectionRefused, prioErrno
		case syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE:
			return typeConnectionReset, prioErrno
		}
	case *net.DNSError:
		switch {
		case e.IsNotFound:
			return typeDNSNotFound, prioDNS
		case e.IsTimeout || e.IsTemporary:
			return typeDNSTemporary, prioDNS
		}
		return typeDNS, prioDNS
	case *tls.CertificateVerificationError, x509.UnknownAuthorityError, x509.HostnameError,
		x509.CertificateInvalidError, x509.SystemRootsError,
		*x509.UnknownAuthorityError, *x509.HostnameError, *x509.CertificateInvalidError:
		return typeTLSCertificate, prioSpecific
	case tls.RecordHeaderError, tls.AlertError, *tls.AlertError:
		return typeTLSHandshake, prioSpecific
	case *url.Error:
		if isRedirectLimit(e) {
			return typeTooManyRedirects, prioRedirect
		}
	}
	if t := reflectedType(err); t != "" {
		return t, prioSpecific
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return typeNetTimeout, prioTimeout
	}
	if _, ok := err.(*net.OpError); ok {
		return typeNet, prioNetOp
	}
	return "", prioNone
}

// http2GoAwayMessage is the text of net/http's unexported error for a request
// cut off by a graceful GOAWAY; the request was never processed.
const http2GoAwayMessage = "http2: Transport received Server's graceful shutdown GOAWAY"

// http2RefusedStream is the HTTP/2 REFUSED_STREAM error code (RFC 9113, 7).
const http2RefusedStream = 0x7

// reflectedType recognises the unexported error types of net/http (its bundled
// HTTP/2 client and request validation) and the exported ones of
// golang.org/x/net/http2 by their type identity, without importing them.
func reflectedType(err error) string {
	t := reflect.TypeOf(err)
	if t == errorStringType { // errors.New and fmt.Errorf without %w
		return errorStringKind(err.Error())
	}
	v := reflect.ValueOf(err)
	if t.Kind() == reflect.Pointer {
		if v.IsNil() {
			return ""
		}
		t, v = t.Elem(), v.Elem()
	}
	switch t.PkgPath() {
	case "net/http", "golang.org/x/net/http2":
		switch t.Name() {
		case "http2StreamError", "StreamError":
			if f := v.FieldByName("Code"); f.IsValid() && f.CanUint() && f.Uint() == http2RefusedStream {
				return typeHTTP2RefusedStream
			}
		case "http2GoAwayError", "GoAwayError":
			// Given to streams the server said it received: they may
			// have been processed, unlike the graceful-GOAWAY error.
			return typeHTTP2GoAwayClosed
		case "badStringError":
			return typeRequestInvalid
		}
	}
	return ""
}

// requestInvalidPrefixes are the messages of net/http's request validation,
// which returns plain errors.New values: an unsupported scheme, a missing
// host, an invalid method or header. Such a request fails the same way on
// every attempt.
var requestInvalidPrefixes = [...]string{
	"unsupported protocol scheme ",
	"http: no Host in request URL",
	"net/http: nil Request.",
	"net/http: invalid method ",
	"net/http: invalid header ",
	"net/http: invalid trailer ",
}

// kindFirstBytes holds the first bytes of the messages errorStringKind
// knows, so that most messages are turned away at their first byte.
var kindFirstBytes = func() (first [256]bool) {
	first[http2GoAwayMessage[0]] = true
	for _, p := range requestInvalidPrefixes {
		first[p[0]] = true
	}
	return first
}()

// errorStringKind types the plain errors.New values of net/http that carry no
// type of their own.
func errorStringKind(msg string) string {
	if msg == "" || !kindFirstBytes[msg[0]] {
		return ""
	}
	if msg == http2GoAwayMessage {
		return typeHTTP2GoAway
	}
	for _, p := range requestInvalidPrefixes {
		if strings.HasPrefix(msg, p) {
			return typeRequestInvalid
		}
	}
	return ""
}

// errorStringType is the type of errors.New's errors.
var errorStringType = reflect.TypeOf(errors.New(""))

// isRedirectLimit recognises the error of http.Client's default redirect
// policy ("stopped after 10 redirects"), which has no type of its own.
func isRedirectLimit(ue *url.Error) bool {
	if ue.Err == nil || reflect.TypeOf(ue.Err) != errorStringType {
		return false
	}
	n, ok := strings.CutPrefix(ue.Err.Error(), "stopped after ")
	if !ok {
		return false
	}
	n, ok = strings.CutSuffix(n, " redirects")
	if !ok {
		return false
	}
	_, convErr := strconv.Atoi(n)
	return convErr == nil
}
