package grpc

import (
	"context"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/steadyhq/retry"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Metadata keys of gRFC A6.
const (
	// PushbackKey is the trailer in which a server tells the client when to
	// retry: a whole number of milliseconds, the least wait before the next
	// attempt. A negative or malformed value, or more than one value,
	// means "do not retry".
	PushbackKey = "grpc-retry-pushback-ms"
	// PreviousAttemptsKey is the request metadata that tells the server how
	// many attempts of the same call came before this one. It is sent on
	// retries, and on every attempt of a call made while serving a retry
	// (see the package doc); never on a plain first attempt.
	PreviousAttemptsKey = "grpc-previous-rpc-attempts"
)

// codeTypes are the error types of the status codes, indexed by code.
var codeTypes = [...]string{
	codes.OK:                 "grpc.ok",
	codes.Canceled:           "grpc.canceled",
	codes.Unknown:            "grpc.unknown",
	codes.InvalidArgument:    "grpc.invalid_argument",
	codes.DeadlineExceeded:   "grpc.deadline_exceeded",
	codes.NotFound:           "grpc.not_found",
	codes.AlreadyExists:      "grpc.already_exists",
	codes.PermissionDenied:   "grpc.permission_denied",
	codes.ResourceExhausted:  "grpc.resource_exhausted",
	codes.FailedPrecondition: "grpc.failed_precondition",
	codes.Aborted:            "grpc.aborted",
	codes.OutOfRange:         "grpc.out_of_range",
	codes.Unimplemented:      "grpc.unimplemented",
	codes.Internal:           "grpc.internal",
	codes.Unavailable:        "grpc.unavailable",
	codes.DataLoss:           "grpc.data_loss",
	codes.Unauthenticated:    "grpc.unauthenticated",
}

// Type returns the error type of the status code c: "grpc." followed by the
// code's name in snake case ("grpc.unavailable", "grpc.resource_exhausted"),
// or "grpc.code_<n>" for a code outside the 17 that gRPC defines. These are
// the types retry.TypeOf reports for the errors of the interceptors, and the
// ones a policy's non_retryable_errors match ("grpc.*" matches them all).
func Type(c codes.Code) string {
	if int(c) < len(codeTypes) {
		return codeTypes[c]
	}
	return "grpc.code_" + strconv.FormatUint(uint64(c), 10)
}

// statusError is the error of an attempt that ended with a gRPC status: the
// error grpc-go returned, typed by its code.
type statusError struct {
	err error          // the error as grpc-go returned it
	st  *status.Status // its status
	typ string         // Type(code), or "" when cause is set
	// cause is the error of the attempt's context when that context ended
	// the RPC (the caller's cancellation or deadline, or the attempt's
	// timeout): the engine then types the error by its context, as it does
	// for any function.
	cause error
	// The attempt's header, trailer and peer, for a hedged call, which
	// gives the caller those of the attempt whose outcome it returns.
	header, trailer metadata.MD
	peer            *peer.Peer
}

// Error returns the text of the status error, as grpc-go wrote it.
func (e *statusError) Error() string { return e.err.Error() }

// ErrorType returns the type of the status code, such as "grpc.unavailable",
// or "" when the attempt's context ended the RPC, so that retry.TypeOf types
// the error by that context.
func (e *statusError) ErrorType() string { return e.typ }

// GRPCStatus returns the status, for status.FromError and status.Code.
func (e *statusError) GRPCStatus() *status.Status { return e.st }

// Unwrap returns the status error and, when the attempt's context ended the
// RPC, that context's error, so that errors.Is reaches both.
func (e *statusError) Unwrap() []error {
	if e.cause != nil {
		return []error{e.err, e.cause}
	}
	return []error{e.err}
}

// classify turns the error of one attempt into what the engine decides on.
// ctx is the attempt's context; committed says the server's response headers
// had arrived; trailer is the attempt's trailer metadata, for pushback; cs
// is the set of retryable codes (see retryable).
//
// An error that carries no status goes to the engine as it is. A status
// caused by the end of ctx is typed by ctx: any status that arrives once
// ctx's deadline has passed, and CANCELED or DEADLINE_EXCEEDED once ctx
// has ended. Otherwise the error is typed by its code. It is marked
// Permanent when the RPC was committed, and otherwise, when typed by its
// code, when the server said not to retry or the code is not retried;
// After when the server pushed back with a delay.
func classify(ctx context.Context, err error, committed bool, trailer metadata.MD, cs map[codes.Code]bool) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	code := st.Code()
	if dl, ok := ctx.Deadline(); ok && ctx.Err() == nil && !time.Now().Before(dl) {
		// The server, whose deadline is ours, answered once it had
		// passed, before our context's timer fired, which is due: wait
		// for it, so that the context (and the engine) tell that the
		// deadline struck, whatever the status (a handler may wrap its
		// context's error in INTERNAL).
		<-ctx.Done()
	}
	se := &statusError{err: err, st: st, typ: Type(code)}
	if cerr := ctx.Err(); cerr == context.DeadlineExceeded || cerr != nil && (code == codes.Canceled || code == codes.DeadlineExceeded) {
		se.typ, se.cause = "", cerr
	}
	if committed {
		return retry.Permanent(se)
	}
	if se.cause != nil {
		return se
	}
	wait, pushed, ok := pushback(trailer)
	switch {
	case !ok:
		// The server said "do not retry": no retry, and, in a hedged
		// call, no further hedge, the attempts in flight going on (A6).
		return retry.After(retry.Permanent(se), math.MaxInt64)
	case retryable(cs, code):
	case code == codes.ResourceExhausted && pushed:
	default:
		return retry.Permanent(se)
	}
	if pushed {
		return retry.After(se, wait)
	}
	return se
}

// pushback reads the server's pushback from trailer: the wait it asks for
// and whether it sent one. ok is false when the server said not to retry:
// a value that is not a whole number of milliseconds (a negative one
// included), or more than one value. A wait too long for a time.Duration is
// the longest one, which the engine refuses to sleep.
func pushback(trailer metadata.MD) (wait time.Duration, pushed, ok bool) {
	vs := trailer[PushbackKey]
	switch len(vs) {
	case 0:
		return 0, false, true
	case 1:
	default:
		return 0, true, false
	}
	v := vs[0]
	if v == "" {
		return 0, true, false
	}
	const maxMillis = math.MaxInt64 / int64(time.Millisecond)
	var ms int64
	saturated := false
	for i := 0; i < len(v); i++ {
		d := v[i]
		if d < '0' || d > '9' {
			return 0, true, false // malformed, however many digits came first
		}
		if saturated || ms > (maxMillis-int64(d-'0'))/10 {
			saturated = true
			continue
		}
		ms = ms*10 + int64(d-'0')
	}
	if saturated {
		return math.MaxInt64, true, true
	}
	return time.Duration(ms) * time.Millisecond, true, true
}

// callError is the error of a call that failed: the engine's *retry.Error,
// which errors.As reaches, with the status a gRPC caller sees.
type callError struct {
	err *retry.Error
	st  *status.Status
}

// Error returns the engine's error text: why the call stopped, after how
// many attempts, and the last attempt's error.
func (e *callError) Error() string { return e.err.Error() }

// Unwrap returns the engine's *retry.Error.
func (e *callError) Unwrap() error { return e.err }

// GRPCStatus returns the status of the call (see final), for
// status.FromError, status.Convert and status.Code.
func (e *callError) GRPCStatus() *status.Status { return e.st }

// final returns the error the interceptors give the caller for the error of
// a call whose context is ctx. Its status, in this order:
//
//   - the caller's context ended: codes.Canceled or codes.DeadlineExceeded;
//   - the wait before the next attempt could not end before the caller's
//     deadline or the policy's MaxElapsed: codes.DeadlineExceeded;
//   - an attempt reached the server: the last attempt's status, exactly
//     (code, message, details), whatever stopped the call;
//   - no attempt ran (the breaker or the rate limiter refused the call):
//     codes.Unavailable, with the engine's text naming the refusal.
func final(ctx context.Context, err error) error {
	re, ok := err.(*retry.Error)
	if !ok {
		// Not a call's end but the engine refusing to start it: an
		// invalid Retrier, a nil context.
		return &configError{err}
	}
	var se *statusError
	hasStatus := errors.As(re.Err, &se)
	var st *status.Status
	switch {
	case re.Reason == retry.ReasonCanceled:
		st = contextStatus(ctx)
	case re.Reason == retry.ReasonDeadline && errors.Is(re, context.DeadlineExceeded):
		// Not a server's delay over MaxServerDelay, which the engine does
		// not count as a deadline: that reports the server's status.
		msg := "retry: the wait before attempt " + strconv.Itoa(re.Attempts+1) + " could not end before the deadline"
		if re.Err != nil {
			msg += "; last attempt: " + re.Err.Error()
		}
		st = status.New(codes.DeadlineExceeded, msg)
	case hasStatus:
		st = se.st
	case re.Attempts == 0:
		st = status.New(codes.Unavailable, re.Error())
	default:
		st = status.Convert(re.Err)
	}
	return &callError{err: re, st: st}
}

// contextStatus is the status of a call whose context ended: codes.Canceled
// or codes.DeadlineExceeded, with the context's error and, when it differs,
// its cause as the message.
func contextStatus(ctx context.Context) *status.Status {
	cerr := ctx.Err()
	if cerr == nil { // not reached: the engine says canceled only then
		cerr = context.Canceled
	}
	msg := cerr.Error()
	if cause := context.Cause(ctx); cause != nil && cause != cerr {
		msg += ": " + cause.Error()
	}
	code := codes.Canceled
	if errors.Is(cerr, context.DeadlineExceeded) {
		code = codes.DeadlineExceeded
	}
	return status.New(code, msg)
}

// configError is an invalid configuration of an interceptor or a call:
// every call it applies to fails with codes.Internal and the error's text,
// which names the option, the value and the rule.
type configError struct{ err error }

// Error returns the configuration error's text.
func (e *configError) Error() string { return e.err.Error() }

// Unwrap returns the configuration error.
func (e *configError) Unwrap() error { return e.err }

// GRPCStatus returns codes.Internal with the error's text, as grpc-go
// reports a client that cannot send a call.
func (e *configError) GRPCStatus() *status.Status {
	return status.New(codes.Internal, e.err.Error())
}
