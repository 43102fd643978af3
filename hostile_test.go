package retry_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadyhq/retry"
)

// hostileText is what a hostile peer puts where the library reads text:
// 60 KiB of '@', the shape that once made the sanitizer go back over what
// it read from every '@' (5.6 s of CPU a message on this machine).
var hostileText = strings.Repeat("@", 60<<10)

// observers returns every observer of a call turned on, each reading the
// sanitized message (the hooks, two loggers at Debug, a dead-letter sink
// and its alert), and a function that reports how many events and log
// bytes they saw.
func observers() ([]retry.Option, func() (events int, logged int64)) {
	var mu sync.Mutex
	events := 0
	var logged atomic.Int64
	see := func(ev retry.Event) {
		mu.Lock()
		defer mu.Unlock()
		events++
		_ = len(ev.Message)
	}
	out := writerFunc(func(p []byte) (int, error) { logged.Add(int64(len(p))); return len(p), nil })
	opts := []retry.Option{
		retry.OnFailure(see), retry.OnRetry(see), retry.OnGiveUp(see),
		retry.WithLogger(slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		retry.WithLogger(slog.New(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		retry.WithDeadLetter(retry.DeadLetters{
			Sink:  func(_ context.Context, ev retry.Event) error { see(ev); return nil },
			Alert: see,
		}),
	}
	return opts, func() (int, int64) {
		mu.Lock()
		defer mu.Unlock()
		return events, logged.Load()
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// hostilePolicy makes three attempts a millisecond apart and routes the
// failure to dead letter, so that every observer sees the message.
var hostilePolicy = retry.WithPolicy(retry.Policy{
	MaxAttempts: 3, InitialInterval: time.Millisecond, MaxInterval: time.Millisecond,
	Jitter: retry.Jitter{Kind: retry.JitterNone}, OnExhaustion: retry.ExhaustDeadLetter,
})

// hostileStatusLine serves every connection a status line whose code is
// hostileText: net/http's error quotes it ("malformed HTTP status code").
func hostileStatusLine(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	// A connection the client dialed but never used (its call ended
	// first) would hold its reader forever: close them all.
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				http.ReadRequest(bufio.NewReader(c))
				io.WriteString(c, "HTTP/1.1 "+hostileText+"\r\n\r\n")
			})
		}
	})
	return "http://" + ln.Addr().String()
}

// A hostile server's text in an error message, or a hostile client's in a
// URL the Transport describes, cannot hold a call past its deadline, with
// every observer on: the message of each event is sanitized in time linear
// in its length. A call allowed 1 s returns within 2 s; the message of
// 60 KiB of '@' took 5.6 s to sanitize, per event, before.
func TestHostileMessageKeepsDeadline(t *testing.T) {
	const deadline, slack = time.Second, time.Second
	status500 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer status500.Close()
	tests := []struct {
		name string
		call func(ctx context.Context, opts []retry.Option) error
	}{
		{name: "Transport: server's malformed status line", call: func(ctx context.Context, opts []retry.Option) error {
			url := hostileStatusLine(t)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/", nil)
			resp, err := retry.NewTransport(newBase(t), opts...).RoundTrip(req)
			if err == nil {
				resp.Body.Close()
				return errors.New("a response from a server that sends none")
			}
			return nil
		}},
		{name: "Transport: client's path, server's 500", call: func(ctx context.Context, opts []retry.Option) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, status500.URL+"/"+hostileText, nil)
			resp, err := retry.NewTransport(newBase(t), opts...).RoundTrip(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			return nil
		}},
		{name: "Do: dependency's error message", call: func(ctx context.Context, opts []retry.Option) error {
			_, err := retry.Do(ctx, func(context.Context) (int, error) {
				return 0, errors.New("rpc error: code = Unavailable desc = " + hostileText)
			}, opts...)
			if err == nil {
				return errors.New("no error from a failing function")
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts, seen := observers()
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			start := time.Now()
			err := tt.call(ctx, append(opts, hostilePolicy))
			if took := time.Since(start); took > deadline+slack {
				t.Fatalf("the call took %v with every observer on, past its deadline of %v", took, deadline)
			}
			if err != nil {
				t.Fatal(err)
			}
			if events, logged := seen(); events < 5 || logged == 0 {
				t.Errorf("%d events, %d bytes logged: the observers were not all exercised", events, logged)
			}
		})
	}
}
