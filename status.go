package retry

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// retryableStatus reports whether an HTTP status is retried by default:
// 408, 425, 429 and every 5xx except 501 and 505.
func retryableStatus(code int) bool {
	switch code {
	case 408, 425, 429:
		return true
	case 501, 505:
		return false
	}
	return code >= 500 && code <= 599
}

// StatusError is an HTTP response status seen as an error. TypeOf reports it
// as "http.<class>.<code>", for example "http.5xx.503" or "http.4xx.429".
// RetryAfter, when positive, is the server's requested delay; the engine
// treats it like After.
type StatusError struct {
	StatusCode int
	// RetryAfter is the delay the server asked for, or zero: its
	// Retry-After, or the window of a used-up quota in its RateLimit
	// fields (r=0), the longer of the two.
	RetryAfter time.Duration
}

// Error returns a lowercase description of the status; a nil
// *StatusError says it is nil.
func (e *StatusError) Error() string {
	if e == nil {
		return "retry: nil *StatusError"
	}
	return "retry: http status " + strconv.Itoa(e.StatusCode)
}

var statusTypes = sync.OnceValue(func() []string {
	t := make([]string, 600)
	for code := 100; code < 600; code++ {
		t[code] = typeHTTPPrefix + statusClass(code) + "." + strconv.Itoa(code)
	}
	return t
})

// errNilResponse is ResponseError's error for a nil response.
var errNilResponse = errors.New("retry: ResponseError(nil): no response to judge (check the error of the call that returned it)")

func statusType(code int) string {
	if code >= 100 && code < 600 {
		return statusTypes()[code]
	}
	return typeHTTPPrefix + "xxx." + strconv.Itoa(code)
}

func statusClass(code int) string {
	if code < 100 || code > 599 {
		return "xxx"
	}
	return string(rune('0'+code/100)) + "xx"
}

// ResponseError returns the error the engine understands for resp, for
// functions given to Do that make HTTP calls: nil for a status below 400,
// and otherwise a *StatusError with the status and the wait the response
// asks for (its Retry-After, or the window of a used-up quota in its
// RateLimit fields, the longer), so that 5xx, 408, 425 and 429 are
// retried after at least the server's delay and other 4xx stop at once. A
// nil resp is an error that says so. It does not read or close the body.
func ResponseError(resp *http.Response) error {
	if resp == nil {
		return errNilResponse
	}
	if resp.StatusCode < 400 {
		return nil
	}
	return &StatusError{StatusCode: resp.StatusCode, RetryAfter: serverWait(resp.Header, time.Now())}
}
