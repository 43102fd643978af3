package retry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

func closeBody(req *http.Request) {
	if req.Body != nil && req.Body != http.NoBody {
		req.Body.Close()
	}
}

// deliver returns the final response; the attempt's context is released when
// its body is closed, so a per-attempt timeout never cuts the body short.
func deliver(resp *http.Response, cancel context.CancelFunc) *http.Response {
	if cancel != nil {
		c := cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
		if w, ok := resp.Body.(io.Writer); ok {
			// A 101 Switching Protocols body is also the connection's writer.
			resp.Body = &cancelOnCloseWriter{c, w}
		} else {
			resp.Body = &c
		}
	}
	return resp
}

// hold reads a response being retried, up to drainLimit, and closes it, so
// that its connection can be reused. A body that stalls is closed after
// drainTimeout, giving up the connection rather than the caller's time.
// When the whole body was read, hold returns a copy of the response that
// serves it from memory, to return should the retry be refused; otherwise
// nil.
func hold(resp *http.Response) *http.Response {
	body := resp.Body
	t := time.AfterFunc(drainTimeout, func() {
		defer func() { recover() }() // a body whose Close panics must not end the process
		body.Close()
	})
	b, err := io.ReadAll(io.LimitReader(body, drainLimit+1))
	t.Stop()
	body.Close()
	if err != nil || len(b) > drainLimit {
		return nil
	}
	kept := *resp
	kept.Body = io.NopCloser(bytes.NewReader(b))
	return &kept
}

// heldOr returns the held response with a nil error when stop refuses a
// retry, and stop itself otherwise (the caller's context ended, or no
// response is held).
func heldOr(held *http.Response, stop error) (*http.Response, error) {
	var e *Error
	if held != nil && errors.As(stop, &e) && e.Reason != ReasonCanceled {
		return held, nil
	}
	return nil, stop
}

// drainTimeout bounds the drain of a response being retried.
const drainTimeout = 200 * time.Millisecond

// cancelOnClose releases an attempt's context when the response body closes.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// cancelOnCloseWriter is cancelOnClose for a body that is also a writer.
type cancelOnCloseWriter struct {
	cancelOnClose
	w io.Writer
}

func (b *cancelOnCloseWriter) Write(p []byte) (int, error) { return b.w.Write(p) }

// retryAfter parses a Retry-After header: delay-seconds or an HTTP-date
// (RFC 9110, 10.2.3). It returns 0 when the header is absent or invalid.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	d, ok := parseRetryAfter(v, now)
	if !ok {
		return 0
	}
	return d
}

// serverWait returns the least wait the server asked for in h: the longer
// of its Retry-After and of the window of a used-up quota in its RateLimit
// fields (see rateLimitWait); 0 when it asked for none.
func serverWait(h http.Header, now time.Time) time.Duration {
	return max(retryAfter(h, now), rateLimitWait(h))
}

// parseRetryAfter parses the value of a Retry-After header, delay-seconds or
// an HTTP-date, into a delay from now. A date in the past is a zero delay.
// ok is false for a value that is neither.
func parseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		secs, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			if ne, isNum := err.(*strconv.NumError); isNum && ne.Err == strconv.ErrRange {
				return maxDuration, true
			}
			return 0, false
		}
		if secs > uint64(maxDuration/time.Second) {
			return maxDuration, true
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}
