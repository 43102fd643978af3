package shedload

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/steadyhq/retry"
)

// RequestHeader is the request header field in which the load generator
// numbers its logical requests, the same on every attempt, so that the
// server can tell a retry from a new request.
const RequestHeader = "Shedload-Request"

// HTTPServer is a server under test over HTTP: Wrap puts its shedding
// around the handler of fixed capacity (a nil Wrap: no shedding).
type HTTPServer struct {
	Name string
	Wrap func(http.Handler) (http.Handler, error)
}

// HTTP returns the Target that serves s on a loopback HTTP server and
// calls it through an http.Client whose Transport is this library's with
// its defaults (Retry-After honoured, a retry budget), over a connection
// pool large enough for every request in flight.
func HTTP(s HTTPServer) Target {
	return Target{Name: s.Name, Start: func(pool *Pool, rec *Recorder) (Caller, error) {
		var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if Serve(r.Context(), pool) {
				io.WriteString(w, "ok")
			}
		})
		if s.Wrap != nil {
			var err error
			if h, err = s.Wrap(h); err != nil {
				return nil, err
			}
		}
		srv := httptest.NewServer(recording(rec, h))
		base := &http.Transport{
			DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
			MaxIdleConns:        4096,
			MaxIdleConnsPerHost: 4096,
			IdleConnTimeout:     30 * time.Second,
		}
		return &httpCaller{
			url:    srv.URL,
			srv:    srv,
			base:   base,
			client: &http.Client{Transport: retry.NewTransport(base)},
		}, nil
	}}
}

// recording records every attempt that reaches the server in rec, before
// h (the shedding, then the pool) sees it.
func recording(rec *Recorder, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := strconv.ParseUint(r.Header.Get(RequestHeader), 10, 64)
		n, _ := strconv.Atoi(r.Header.Get(retry.AttemptHeader))
		ctx, a := rec.Arrive(r.Context(), id, n)
		h.ServeHTTP(&answerWriter{ResponseWriter: w, rec: rec, a: a}, r.WithContext(ctx))
		rec.End(a)
	})
}

// answerWriter records the status an attempt is answered with, and the
// Retry-After sent with it.
type answerWriter struct {
	http.ResponseWriter
	rec *Recorder
	a   *Attempt
}

func (w *answerWriter) WriteHeader(code int) {
	ra := time.Duration(-1)
	if v := w.Header().Get("Retry-After"); v != "" {
		if s, err := strconv.Atoi(v); err == nil && s >= 0 {
			ra = time.Duration(s) * time.Second
		}
	}
	w.rec.Answer(w.a, code, ra)
	w.ResponseWriter.WriteHeader(code)
}

func (w *answerWriter) Write(b []byte) (int, error) {
	if w.a.Status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController the writer underneath.
func (w *answerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// httpCaller calls an HTTP server under test.
type httpCaller struct {
	url    string
	srv    *httptest.Server
	base   *http.Transport
	client *http.Client
}

func (c *httpCaller) Call(ctx context.Context, id uint64) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return false
	}
	req.Header.Set(RequestHeader, strconv.FormatUint(id, 10))
	resp, err := c.client.Do(req)
	if err != nil {
		return false
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err == nil && resp.StatusCode == http.StatusOK
}

func (c *httpCaller) Close() {
	c.base.CloseIdleConnections()
	c.srv.Close()
}
