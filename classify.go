package retry

import (
	"context"
	sqldriver "database/sql/driver"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unsafe"
)

// TypeAttemptTimeout is the type (TypeOf, Event.Type) of an attempt that
// WithAttemptTimeout cut off; it is retried.
const TypeAttemptTimeout = "timeout.attempt"

// Built-in error types: the ones TypeOf's documentation lists.
const (
	typeUnknown            = "error"
	typeCanceled           = "context.canceled"
	typeDeadlineExceeded   = "context.deadline_exceeded"
	typeTimeout            = "timeout.deadline_exceeded" // a deadline inside fn, the caller's context alive
	typeNetTimeout         = "net.timeout"
	typeConnectionRefused  = "net.connection_refused"
	typeConnectionReset    = "net.connection_reset"
	typeDNSNotFound        = "net.dns.not_found"
	typeDNSTemporary       = "net.dns.temporary"
	typeDNS                = "net.dns.error"
	typeNet                = "net.error"
	typeEOF                = "net.eof"
	typeHTTP2RefusedStream = "http2.refused_stream"
	typeHTTP2GoAway        = "http2.goaway"        // a graceful GOAWAY before the stream was sent: never processed
	typeHTTP2GoAwayClosed  = "http2.goaway_closed" // the server sent GOAWAY and closed: the stream may have been processed
	typeBadConn            = "sql.bad_conn"
	typeTLSCertificate     = "tls.certificate"
	typeTLSHandshake       = "tls.handshake"
	typeRequestInvalid     = "request.invalid"
	typeTooManyRedirects   = "redirect.too_many"
	typeBodyNotReplayable  = "body.not_replayable"
	typeBreakerOpen        = "breaker.open"
	typeRateLimited        = "ratelimit.local"
	typeBudgetExhausted    = "budget.exhausted"
	typeHTTPPrefix         = "http."
	typeHTTP504            = "http.5xx.504"           // a gateway's timeout
	typeGRPCDeadline       = "grpc.deadline_exceeded" // the gRPC interceptors' DEADLINE_EXCEEDED
)

// TypeOf returns the dot-namespaced type of err, used to match the policy's
// non_retryable_errors and reported in events.
//
// An error anywhere in err's chain with a method ErrorType() string names its
// own type; the outermost such error wins. Otherwise the chain is matched
// against the built-in types (context, network, DNS, TLS, HTTP/2, SQL driver,
// HTTP status), the most specific one found anywhere in the chain winning.
// Anything else is "error", which is retried by default. TypeOf(nil) is "".
// TypeOf does not allocate.
//
// The built-in types, retried by default unless marked otherwise (a
// policy's non_retryable_errors and Retryable change that):
//
//	context.canceled            the caller canceled (stops the call)
//	context.deadline_exceeded   the caller's deadline passed (stops the call)
//	timeout.deadline_exceeded   a deadline inside fn, the caller's context alive
//	timeout.attempt             the attempt outlived WithAttemptTimeout
//	net.timeout                 a network timeout
//	net.connection_refused      dial refused: nothing was sent
//	net.connection_reset        the connection was reset
//	net.dns.not_found           no such host
//	net.dns.temporary           a temporary DNS failure
//	net.dns.error               another DNS failure
//	net.eof                     the connection closed early (io.EOF, io.ErrUnexpectedEOF)
//	net.error                   another network error
//	http2.refused_stream        HTTP/2 REFUSED_STREAM: never processed
//	http2.goaway                a graceful GOAWAY before the stream was sent
//	http2.goaway_closed         GOAWAY and close: the stream may have been processed
//	sql.bad_conn                database/sql/driver.ErrBadConn
//	tls.certificate             a certificate the client rejects (not retried)
//	tls.handshake               a failed TLS handshake
//	request.invalid             a request that cannot be sent (not retried)
//	redirect.too_many           too many redirects (not retried)
//	http.<class>.<code>         an HTTP status, such as http.5xx.503 (see StatusError);
//	                            4xx except 408, 425 and 429, and 501 and 505, not retried
//	body.not_replayable         the request body cannot be sent again (not retried)
//	breaker.open                an open breaker stopped the call
//	ratelimit.local             the rate limiter's wait could not fit
//	budget.exhausted            the retry budget denied the retry
func TypeOf(err error) string {
	if err == nil {
		return ""
	}
	return inspect(err).typ
}

// maxNodes bounds the walk of an error chain: a cyclic chain, or joins of
// joins sharing their causes, end the walk instead of running forever.
const maxNodes = 1024

// Priorities of built-in types when several appear in one chain.
const (
	prioNone = iota
	prioNetOp
	prioTimeout
	prioRedirect
	prioEOF
	prioDeadline
	prioErrno
	prioDNS
	prioSpecific
	prioContext
)

// outcome is what one walk of a failed attempt's error chain tells the engine.
type outcome struct {
	typ       string        // the error's type
	hint      time.Duration // the outermost server-directed delay, or 0
	verdict   verdict       // the first explicit verdict (retry, discard, dead letter, fail)
	permanent bool          // Permanent somewhere in the chain
}

// walk is the state of one walk of an error chain.
type walk struct {
	outcome
	named   string // the outermost ErrorType, if any
	builtin string // the best built-in type found
	prio    int    // the priority of builtin
	budget  int    // errors left to visit
}

// inspect classifies err and collects its verdicts and server hint in one
// walk of its chain, without allocating.
func inspect(err error) outcome {
	if reflect.TypeOf(err) == errorStringType {
		// errors.New values, the commonest failures: no chain, no verdict,
		// no method but Error. This is what the walk below concludes for
		// them, without its type assertions.
		return outcome{typ: plainType(err)}
	}
	return inspectChain(err)
}

// inspectChain is inspect's walk of the whole chain.
func inspectChain(err error) outcome {
	w := walk{budget: maxNodes}
	w.visit(err)
	switch {
	case w.named != "":
		w.typ = w.named
	case w.builtin != "":
		w.typ = w.builtin
	default:
		w.typ = typeUnknown
	}
	return w.outcome
}

// plainType types an errors.New value: a sentinel of the standard library,
// one of net/http's untyped messages, or typeUnknown.
func plainType(err error) string {
	// err == io.EOF would call the runtime to compare the values; with the
	// type known, comparing the pointers is the same test.
	switch p := dataOf(err); p {
	case dataOf(context.Canceled):
		return typeCanceled
	case dataOf(io.EOF), dataOf(io.ErrUnexpectedEOF):
		return typeEOF
	case dataOf(sqldriver.ErrBadConn):
		return typeBadConn
	case dataOf(context.DeadlineExceeded), dataOf(os.ErrDeadlineExceeded):
		// Not errors.New values today, but sentinels may change type.
		if typ, _ := sentinelType(err); typ != "" {
			return typ
		}
	}
	if typ := errorStringKind(err.Error()); typ != "" {
		return typ
	}
	return typeUnknown
}

// visit walks err's chain depth-first, in the order errors.As uses, visiting
// at most w.budget errors.
func (w *walk) visit(err error) {
	for ; err != nil && w.budget > 0; w.budget-- {
		w.node(err)
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			w.budget--
			for _, e := range u.Unwrap() {
				w.visit(e)
			}
			return
		default:
			return
		}
	}
}

// node records what one error of the chain says.
func (w *walk) node(err error) {
	switch e := err.(type) {
	case *verdictError:
		if e.v == verdictPermanent {
			w.permanent = true
		} else if w.verdict == verdictNone {
			w.verdict = e.v
		}
		return
	case *afterError:
		if w.hint == 0 {
			w.hint = max(e.d, 0)
		}
		return
	case *StatusError:
		if e == nil {
			return // a typed nil: a failure that says nothing
		}
		if w.hint == 0 {
			w.hint = max(e.RetryAfter, 0)
		}
		if w.named == "" {
			w.named = statusType(e.StatusCode)
		}
		return
	case *Error:
		if e == nil {
			return // a typed nil: a failure that says nothing
		}
		if w.named == "" {
			w.named = e.typ
		}
		if w.named != "" {
			return
		}
	}
	if w.named != "" {
		return // the outermost named type wins; nothing deeper changes it
	}
	if t, ok := err.(interface{ ErrorType() string }); ok {
		if w.named = t.ErrorType(); w.named != "" {
			return
		}
	}
	if typ, prio := builtinType(err); prio > w.prio {
		w.builtin, w.prio = typ, prio
	}
}

// dataOf returns the data word of an error interface: for a pointer type,
// the pointer itself.
func dataOf(err error) unsafe.Pointer {
	return (*[2]unsafe.Pointer)(unsafe.Pointer(&err))[1]
}

// builtinNonRetryable reports whether typ is non-retryable by default:
// context.*, tls.certificate, request.invalid, redirect.too_many,
// body.not_replayable, every 4xx status except 408, 425 and 429, and the
// 5xx statuses 501 and 505.
func builtinNonRetryable(typ string) bool {
	switch typ {
	case typeTLSCertificate, typeRequestInvalid, typeTooManyRedirects, typeBodyNotReplayable:
		return true
	}
	if strings.HasPrefix(typ, "context.") && len(typ) > len("context.") {
		return true
	}
	if rest, ok := strings.CutPrefix(typ, typeHTTPPrefix); ok && len(rest) == len("4xx.404") {
		code, err := strconv.Atoi(rest[4:])
		if err != nil || rest[:4] != statusClass(code)+"." {
			return false
		}
		return !retryableStatus(code)
	}
	return false
}

const (
	verdictNone verdict = iota
	verdictRetry
	verdictDiscard
	verdictDeadLetter
	verdictFail
	verdictPermanent
)

// attemptOutcome classifies the error of an attempt run with the caller's
// context ctx: a deadline that struck inside fn while ctx is alive is
// typeTimeout, and the attempt's own timeout (timedOut) TypeAttemptTimeout.
func attemptOutcome(ctx context.Context, err error, timedOut bool) outcome {
	o := inspect(err)
	if o.typ == typeDeadlineExceeded || o.typ == typeCanceled {
		switch {
		case timedOut:
			o.typ = TypeAttemptTimeout
		case o.typ == typeDeadlineExceeded && ctx.Err() == nil:
			o.typ = typeTimeout
		}
	}
	return o
}

// unanswered reports whether typ says an attempt ended without an answer
// from the dependency: its context ended, or a timeout struck.
func unanswered(typ string) bool {
	switch typ {
	case typeCanceled, typeDeadlineExceeded, typeTimeout, TypeAttemptTimeout, typeNetTimeout:
		return true
	}
	return false
}
