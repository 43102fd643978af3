package retry_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadyhq/retry"
)

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestTransportAttemptTimeoutAtHeaders: a response arriving just as the
// per-attempt timer fires is either returned whole or turned into a
// timeout, never a nil response with a nil error nor a body cut short.
func TestTransportAttemptTimeoutAtHeaders(t *testing.T) {
	const d = 200 * time.Microsecond
	var n atomic.Int64
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		// Half the answers come well before the timer, half around it.
		if n.Add(1)%2 == 0 {
			time.Sleep(d)
		}
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
	})
	tr := retry.NewTransport(base, retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
		retry.WithAttemptTimeout(d), retry.WithBudget(retry.Budget{Off: true}))
	var whole, timedOut int
	for range 300 {
		req, _ := http.NewRequest("GET", "http://127.0.0.1/", nil)
		resp, err := tr.RoundTrip(req)
		switch {
		case err == nil && resp != nil:
			b, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != "ok" || rerr != nil {
				t.Fatalf("body %q, %v: a returned response must be whole", b, rerr)
			}
			whole++
		case err != nil && resp == nil:
			if typ := retry.TypeOf(err); typ != retry.TypeAttemptTimeout {
				t.Fatalf("err %v of type %q, want %q", err, typ, retry.TypeAttemptTimeout)
			}
			timedOut++
		default:
			t.Fatalf("resp %v, err %v: want exactly one of them", resp, err)
		}
	}
	t.Logf("%d whole responses, %d timeouts", whole, timedOut)
}

// writeFrame writes one HTTP/2 frame.
func writeFrame(w io.Writer, typ, flags byte, stream uint32, payload []byte) {
	var h [9]byte
	h[0], h[1], h[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	h[3], h[4] = typ, flags
	binary.BigEndian.PutUint32(h[5:], stream)
	w.Write(h[:])
	w.Write(payload)
}

// TestTransportGoAwayAfterReceipt: an HTTP/2 server that received a whole
// POST, then sent GOAWAY naming that stream as received and closed, may
// have processed it: the POST is not sent again.
func TestTransportGoAwayAfterReceipt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var processed atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			func() {
				defer c.Close()
				br := bufio.NewReader(c)
				if _, err := io.ReadFull(br, make([]byte, 24)); err != nil { // the preface
					return
				}
				writeFrame(c, 0x4, 0, 0, nil) // SETTINGS
				for {
					var h [9]byte
					if _, err := io.ReadFull(br, h[:]); err != nil {
						return
					}
					n := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
					io.CopyN(io.Discard, br, int64(n))
					typ, flags := h[3], h[4]
					stream := binary.BigEndian.Uint32(h[5:]) & 0x7fffffff
					if typ == 0x4 && flags&1 == 0 {
						writeFrame(c, 0x4, 1, 0, nil) // SETTINGS ack
					}
					if (typ == 0x0 || typ == 0x1) && stream == 1 && flags&1 != 0 { // END_STREAM
						processed.Add(1)
						ga := make([]byte, 8)
						binary.BigEndian.PutUint32(ga, 1) // last stream 1: received
						writeFrame(c, 0x7, 0, 0, ga)
						return
					}
				}
			}()
		}
	}()
	base := &http.Transport{Protocols: new(http.Protocols)}
	base.Protocols.SetUnencryptedHTTP2(true)
	defer base.CloseIdleConnections()
	var types []string
	tr := retry.NewTransport(base, fast(3), retry.OnFailure(func(ev retry.Event) { types = append(types, ev.Type) }))
	req, _ := http.NewRequest("POST", "http://"+ln.Addr().String()+"/charge", strings.NewReader("amount=5"))
	_, err = tr.RoundTrip(req)
	if err == nil {
		t.Fatal("want an error")
	}
	if n := processed.Load(); n != 1 {
		t.Fatalf("the POST was processed %d times, want 1 (failure types %v)", n, types)
	}
	if len(types) != 1 || types[0] != "http2.goaway_closed" {
		t.Errorf("failure types %v, want [%s]", types, "http2.goaway_closed")
	}
	ln.Close()
	<-done
}

// TestTransportBodyStillStreaming: when the response comes back while the
// base is still sending the body (as net/http does), the decision to retry
// waits to see whether the body could be kept; a body that could not is not
// retried, and the response is returned intact.
func TestTransportBodyStillStreaming(t *testing.T) {
	t.Parallel()
	t.Run("late reader, body over the limit", func(t *testing.T) {
		var calls atomic.Int32
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			calls.Add(1)
			go func() {
				time.Sleep(10 * time.Millisecond)
				io.Copy(io.Discard, r.Body)
				r.Body.Close()
			}()
			return &http.Response{StatusCode: 503, Body: io.NopCloser(strings.NewReader("busy")), Request: r}, nil
		})
		var closes atomic.Int32
		body := &countingBody{r: bytes.NewReader(make([]byte, 4096)), closes: &closes}
		req, _ := http.NewRequest("PUT", "http://127.0.0.1/", body)
		resp, err := retry.NewTransport(base, fast(3), retry.WithHTTP(retry.HTTP{MaxReplayBytes: 1024})).RoundTrip(req)
		if err != nil {
			t.Fatalf("want the 503, got %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 503 || string(b) != "busy" || calls.Load() != 1 {
			t.Errorf("status %d body %q after %d attempts; want the 503 after 1", resp.StatusCode, b, calls.Load())
		}
		if !waitFor(func() bool { return closes.Load() == 1 }) {
			t.Errorf("body closed %d times", closes.Load())
		}
	})
	t.Run("late reader, body within the limit", func(t *testing.T) {
		var calls atomic.Int32
		var got [][]byte
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			n := calls.Add(1)
			if n == 1 {
				go func() {
					time.Sleep(10 * time.Millisecond)
					b, _ := io.ReadAll(r.Body)
					got = append(got, b)
					r.Body.Close()
				}()
				return &http.Response{StatusCode: 503, Body: io.NopCloser(strings.NewReader("busy")), Request: r}, nil
			}
			b, _ := io.ReadAll(r.Body)
			got = append(got, b)
			r.Body.Close()
			return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
		})
		payload := bytes.Repeat([]byte("p"), 800)
		req, _ := http.NewRequest("PUT", "http://127.0.0.1/", io.NopCloser(bytes.NewReader(payload)))
		resp, err := retry.NewTransport(base, fast(3), retry.WithHTTP(retry.HTTP{MaxReplayBytes: 1024})).RoundTrip(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v, %v: want the retry to succeed", resp, err)
		}
		resp.Body.Close()
		if len(got) != 2 || !bytes.Equal(got[0], payload) || !bytes.Equal(got[1], payload) {
			t.Errorf("bodies sent: %d, want the same 800 bytes twice", len(got))
		}
	})
	t.Run("real server answering before reading 8 MiB", func(t *testing.T) {
		var hits atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			w.WriteHeader(503)
			io.WriteString(w, "busy")
			http.NewResponseController(w).Flush()
			io.Copy(io.Discard, r.Body)
		}))
		defer srv.Close()
		var closes atomic.Int32
		body := &countingBody{r: bytes.NewReader(make([]byte, 8<<20)), closes: &closes}
		req, _ := http.NewRequest("PUT", srv.URL, body)
		resp, err := retry.NewTransport(newBase(t), fast(3)).RoundTrip(req)
		if err != nil {
			t.Fatalf("want the 503, got %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 503 || string(b) != "busy" || hits.Load() != 1 {
			t.Errorf("status %d body %q hits %d; want the 503 after one request", resp.StatusCode, b, hits.Load())
		}
	})
}

// TestTransportGetBodyFails: GetBody failing before a retry returns the
// response in hand.
func TestTransportGetBodyFails(t *testing.T) {
	srv := newScripted(t, step{status: 503, body: "busy"}, step{body: "ok"})
	req, _ := http.NewRequest("PUT", srv.URL, strings.NewReader("x"))
	req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("gone") }
	resp, err := retry.NewTransport(newBase(t), fast(3)).RoundTrip(req)
	if err != nil {
		t.Fatalf("want the 503, got %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || string(b) != "busy" || len(srv.requests()) != 1 {
		t.Errorf("status %d body %q after %d requests", resp.StatusCode, b, len(srv.requests()))
	}
}

// TestTransportDrainStall: a retried response whose body stalls is given up
// after a short drain, not waited on.
func TestTransportDrainStall(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) > 1 {
			io.WriteString(w, "ok")
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(100))
		w.WriteHeader(503)
		io.WriteString(w, "partial")
		http.NewResponseController(w).Flush()
		select {
		case <-time.After(3 * time.Second):
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	tr := retry.NewTransport(newBase(t), fast(3))
	req, _ := http.NewRequest("GET", srv.URL, nil)
	start := time.Now()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if el := time.Since(start); el > time.Second || resp.StatusCode != 200 {
		t.Errorf("status %d after %v: the stalled 503 held the retry", resp.StatusCode, el)
	}
}

// TestTransportIdempotencyKeyPresence: a key present with a nil value marks
// the request idempotent without sending it, as in net/http, and stops the
// Transport from adding one.
func TestTransportIdempotencyKeyPresence(t *testing.T) {
	for _, opts := range [][]retry.Option{{fast(3)}, {fast(3), retry.WithHTTP(retry.HTTP{IdempotencyKey: true})}} {
		srv := newScripted(t, step{status: 503}, step{body: "ok"})
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader("x"))
		req.Header["Idempotency-Key"] = nil
		resp, err := retry.NewTransport(newBase(t), opts...).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		reqs := srv.requests()
		if resp.StatusCode != 200 || len(reqs) != 2 {
			t.Fatalf("status %d after %d requests, want 200 after 2", resp.StatusCode, len(reqs))
		}
		for _, r := range reqs {
			if _, sent := r.header["Idempotency-Key"]; sent {
				t.Errorf("a suppressed Idempotency-Key was sent: %q", r.header.Get("Idempotency-Key"))
			}
		}
	}
}

// TestTransportUpgrade: a 101 response keeps its writable body, with or
// without a per-attempt timeout.
func TestTransportUpgrade(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
		buf.Flush()
		line, _ := buf.ReadString('\n')
		buf.WriteString("echo " + line)
		buf.Flush()
		c.Close()
	}))
	defer srv.Close()
	for _, opts := range [][]retry.Option{{fast(3)}, {fast(3), retry.WithAttemptTimeout(time.Second)}} {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "test")
		resp, err := retry.NewTransport(newBase(t), opts...).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		rw, ok := resp.Body.(io.ReadWriteCloser)
		if !ok {
			t.Fatalf("with %d options: 101 body %T is not an io.ReadWriteCloser", len(opts), resp.Body)
		}
		io.WriteString(rw, "hi\n")
		got, _ := bufio.NewReader(rw).ReadString('\n')
		rw.Close()
		if got != "echo hi\n" {
			t.Errorf("through the upgraded connection: %q", got)
		}
	}
}

// TestTransportGiveUpNamesRequest: a request refused before any attempt
// still names its method and URL (without credentials) to OnGiveUp.
func TestTransportGiveUpNamesRequest(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	var got []retry.Event
	tr := retry.NewTransport(nil, retry.OnGiveUp(func(ev retry.Event) { got = append(got, ev) }))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, strings.Replace(srv.URL, "http://", "http://alice:pw123@", 1)+"/a", nil)
	if resp, err := tr.RoundTrip(req); err == nil {
		resp.Body.Close()
		t.Fatal("want an error")
	}
	if len(got) != 1 {
		t.Fatalf("OnGiveUp fired %d times, want 1", len(got))
	}
	if ev := got[0]; ev.Method != http.MethodGet || ev.URL != srv.URL+"/a" || ev.Reason != retry.ReasonCanceled {
		t.Errorf("event method %q url %q reason %v; want GET %s/a canceled", ev.Method, ev.URL, ev.Reason, srv.URL)
	}
}

// TestTransportNilReceiver: a nil *Transport set as an http.Client's
// Transport fails each request with an error naming it, nothing sent and
// the request's body closed once, as a nil *redis.Store's methods do; it
// never panics, and CloseIdleConnections does nothing.
func TestTransportNilReceiver(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	var tr *retry.Transport
	client := &http.Client{Transport: tr}
	body := &closeCount{r: strings.NewReader("x")}
	req, _ := http.NewRequest(http.MethodPut, srv.URL, body)
	resp, err := client.Do(req)
	if resp != nil || err == nil || !strings.Contains(err.Error(), "nil *retry.Transport") {
		t.Errorf("Do = %v, %v; want an error naming the nil *retry.Transport", resp, err)
	}
	if n := body.closes.Load(); n != 1 {
		t.Errorf("the request's body closed %d times, want 1", n)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server saw %d requests, want none", n)
	}
	tr.CloseIdleConnections() // must not panic
	if resp, err := tr.RoundTrip(nil); resp != nil || err == nil {
		t.Errorf("RoundTrip(nil) = %v, %v; want an error", resp, err)
	}
}
