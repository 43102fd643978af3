package grpc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	retrygrpc "github.com/steadyhq/retry/grpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// watcher is every observer of a Retrier turned on: the hooks, a logger
// at Debug and a dead-letter sink with its alert, keeping what they saw.
type watcher struct {
	mu     sync.Mutex
	events []retry.Event
	logs   bytes.Buffer
}

func (w *watcher) see(ev retry.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ev.Err = nil // the real error is for programs; the rest is what is shown
	w.events = append(w.events, ev)
}

func (w *watcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.logs.Write(p)
}

func (w *watcher) options() []retry.Option {
	return []retry.Option{
		retry.OnFailure(w.see), retry.OnRetry(w.see), retry.OnGiveUp(w.see),
		retry.WithLogger(slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		retry.WithDeadLetter(retry.DeadLetters{
			Sink:  func(_ context.Context, ev retry.Event) error { w.see(ev); return nil },
			Alert: w.see,
		}),
		retry.WithPolicy(retry.Policy{
			MaxAttempts: 3, InitialInterval: time.Millisecond, MaxInterval: time.Millisecond,
			Jitter: retry.Jitter{Kind: retry.JitterNone}, OnExhaustion: retry.ExhaustDeadLetter,
		}),
	}
}

// shown returns everything the observers showed: events (without Err) in
// fmt and JSON, and the log lines.
func (w *watcher) shown() (string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	for _, ev := range w.events {
		fmt.Fprintf(&b, "%+v\n", ev)
		js, _ := json.Marshal(ev)
		b.Write(js)
	}
	b.Write(w.logs.Bytes())
	return b.String(), len(w.events)
}

// A server that answers UNAVAILABLE with a message of 60 KiB of '@' cannot
// hold a call past its deadline with every observer on: a call allowed 1 s
// returns within 2 s, with the server's status as it sent it. The message
// of each event took 5.6 s to sanitize before.
func TestHostileStatusMessageKeepsDeadline(t *testing.T) {
	const deadline, slack = time.Second, time.Second
	msg := strings.Repeat("@", 60<<10)
	srv := &server{check: func(context.Context, int) error { return status.Error(codes.Unavailable, msg) }}
	var w watcher
	client, _ := start(t, srv, retry.New(w.options()...))
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	_, err := client.Check(ctx, check)
	if took := time.Since(start); took > deadline+slack {
		t.Fatalf("the call took %v with every observer on, past its deadline of %v", took, deadline)
	}
	if st, _ := status.FromError(err); st.Code() != codes.Unavailable || st.Message() != msg {
		t.Errorf("status %v with a message of %d bytes, want UNAVAILABLE with the server's %d", st.Code(), len(st.Message()), len(msg))
	}
	if shown, n := w.shown(); n < 5 || !strings.Contains(shown, "@@@") {
		t.Errorf("%d events: the observers were not all exercised", n)
	}
}

// The dial target goes into the key of events, logs, Stats and dead
// letters without the credentials it carries.
func TestTargetKeyHasNoCredentials(t *testing.T) {
	addr := listen(t, &server{check: failing(codes.Unavailable, 1<<30)})
	tests := []struct {
		name, target, secret, want string
	}{
		{name: "endpoint userinfo", target: "passthrough:///svc:Hunter2pw@" + addr, secret: "Hunter2pw", want: "passthrough:///[REDACTED]@" + addr},
		{name: "resolver userinfo", target: "dns://svc:Hunter2pw@127.0.0.1:53/" + addr, secret: "Hunter2pw", want: "dns://127.0.0.1:53/" + addr},
		{name: "token in the query", target: "passthrough:///" + addr + "?token=T0kenValue99", secret: "T0kenValue99", want: "passthrough:///" + addr + "?token=[REDACTED]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w watcher
			r := retry.New(append(w.options(),
				retry.WithBreaker(retry.Breaker{PerKey: true}), retry.WithBudget(retry.Budget{PerKey: true}))...)
			// Every target reaches the test's server, whatever it names.
			dialer := func(ctx context.Context, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			}
			cc, err := grpc.NewClient(tt.target, grpc.WithContextDialer(dialer),
				grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithUnaryInterceptor(retrygrpc.UnaryClientInterceptor(r)))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := grpc_health_v1.NewHealthClient(cc).Check(ctx, check); status.Code(err) != codes.Unavailable {
				t.Fatalf("err = %v, want UNAVAILABLE from the server", err)
			}
			shown, n := w.shown()
			if n < 5 {
				t.Fatalf("%d events: the observers were not all exercised", n)
			}
			stats, _ := json.Marshal(r.Stats())
			for what, text := range map[string]string{"events and logs": shown, "Stats": string(stats)} {
				if strings.Contains(text, tt.secret) {
					t.Errorf("%s hold the secret %q:\n%s", what, tt.secret, text)
				}
			}
			if _, ok := r.Stats().Breakers[tt.want]; !ok || !strings.Contains(shown, `"key":"`+tt.want+`"`) {
				t.Errorf("key %q not in Stats' breakers %v or in the events", tt.want, r.Stats().Breakers)
			}
		})
	}
}
