package retry_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/redact"
)

// logRecords is a slog.Handler that keeps its records as text lines.
type logRecords struct {
	mu    sync.Mutex
	level slog.Level
	lines []string
}

func (h *logRecords) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *logRecords) WithGroup(string) slog.Handler                { return h }
func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%s", a.Key, a.Value)
		return true
	})
	h.mu.Lock()
	h.lines = append(h.lines, b.String())
	h.mu.Unlock()
	return nil
}

func TestWithLogger(t *testing.T) {
	secret := errors.New("connect https://bob:hunter2@db.internal/x?token=abc123: refused")
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	policy := retry.WithPolicy(retry.Policy{MaxAttempts: 3, Backoff: retry.Constant, InitialInterval: time.Millisecond, Jitter: retry.Jitter{Kind: retry.JitterNone}})
	tests := []struct {
		name  string
		level slog.Level
		ctx   context.Context
		fails int
		err   error
		opts  []retry.Option
		want  []string
	}{
		{name: "success at once logs nothing", level: slog.LevelDebug, err: secret},
		{name: "a debug record per retry", level: slog.LevelDebug, fails: 2, err: errors.New("busy"), want: []string{
			"DEBUG retry attempt=1 delay=1ms type=error error=busy key=inventory",
			"DEBUG retry attempt=2 delay=1ms type=error error=busy key=inventory",
		}},
		{name: "a warning when the call gives up", level: slog.LevelDebug, fails: 5, err: errors.New("busy"), want: []string{
			"DEBUG retry attempt=1 delay=1ms type=error error=busy key=inventory",
			"DEBUG retry attempt=2 delay=1ms type=error error=busy key=inventory",
			"WARN retry: gave up attempt=3 reason=exhausted type=error error=busy key=inventory",
		}},
		{name: "info level keeps the warning only", level: slog.LevelInfo, fails: 5, err: errors.New("busy"), want: []string{
			"WARN retry: gave up attempt=3 reason=exhausted type=error error=busy key=inventory",
		}},
		{name: "non-retryable", level: slog.LevelDebug, fails: 1, err: retry.Permanent(errors.New("bad card")), want: []string{
			"WARN retry: gave up attempt=1 reason=non_retryable type=error error=bad card key=inventory",
		}},
		{name: "canceled before any attempt is the caller's choice", level: slog.LevelDebug, ctx: canceled, want: []string{
			"DEBUG retry: gave up attempt=0 reason=canceled type=context.canceled error=context canceled key=inventory",
		}},
		{name: "a budget denial gives the balance", level: slog.LevelDebug, fails: 5, err: errors.New("busy"),
			opts: []retry.Option{retry.WithBudget(retry.Budget{Tokens: -1, Ratio: -1})}, want: []string{
				"WARN retry: gave up attempt=1 reason=budget type=error error=busy balance=0 key=inventory",
			}},
		{name: "a shadow budget's overdraft gives the balance", level: slog.LevelDebug, fails: 1, err: errors.New("busy"),
			opts: []retry.Option{retry.WithBudget(retry.Budget{Tokens: -1, Ratio: -1, Shadow: true})}, want: []string{
				"DEBUG retry attempt=1 delay=1ms type=error error=busy balance=-1 key=inventory",
			}},
		{name: "sanitized message", level: slog.LevelInfo, fails: 1, err: retry.Permanent(secret), want: []string{
			"WARN retry: gave up attempt=1 reason=non_retryable type=error error=" +
				redact.Sanitize(secret.Error()) + " key=inventory",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &logRecords{level: tt.level}
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			calls := 0
			retry.Run(ctx, func(context.Context) error {
				calls++
				if calls <= tt.fails {
					return tt.err
				}
				return nil
			}, append([]retry.Option{policy, retry.WithKey("inventory"), retry.WithLogger(slog.New(h))}, tt.opts...)...)
			if strings.Join(h.lines, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("logged:\n%s\nwant:\n%s", strings.Join(h.lines, "\n"), strings.Join(tt.want, "\n"))
			}
			for _, l := range h.lines {
				if strings.Contains(l, "hunter2") || strings.Contains(l, "abc123") {
					t.Errorf("a secret reached the log: %s", l)
				}
			}
		})
	}
}

// Without WithLogger nothing is logged, even through slog's default logger.
func TestNoLoggingByDefault(t *testing.T) {
	h := &logRecords{level: slog.LevelDebug}
	prev := slog.Default()
	slog.SetDefault(slog.New(h))
	defer slog.SetDefault(prev)
	retry.Run(context.Background(), func(context.Context) error { return errors.New("busy") },
		retry.WithPolicy(retry.Policy{MaxAttempts: 2, Backoff: retry.Immediate}), retry.WithLogger(nil))
	if len(h.lines) != 0 {
		t.Errorf("logged without a logger: %v", h.lines)
	}
}

func TestWithLoggerTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	h := &logRecords{level: slog.LevelDebug}
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: retry.NewTransport(base,
		retry.WithPolicy(retry.Policy{MaxAttempts: 2, Backoff: retry.Immediate}),
		retry.WithLogger(slog.New(h)))}
	resp, err := client.Get(srv.URL + "/items?api_key=s3cr3t")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(h.lines) != 2 {
		t.Fatalf("logged %d records, want 2: %v", len(h.lines), h.lines)
	}
	for _, l := range h.lines {
		if !strings.Contains(l, " method=GET ") || !strings.Contains(l, " url=http://127.0.0.1") || strings.Contains(l, "s3cr3t") {
			t.Errorf("record %q lacks the method or the sanitized URL", l)
		}
	}
}

func ExampleWithLogger() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // drop the time, for a stable output
			}
			return a
		},
	}))
	err := retry.Run(context.Background(), func(context.Context) error {
		return errors.New("dial db: password=hunter2 rejected")
	},
		retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond, Jitter: retry.Jitter{Kind: retry.JitterNone}}),
		retry.WithKey("db"),
		retry.WithLogger(logger))
	var re *retry.Error
	if errors.As(err, &re) {
		fmt.Println("returned:", re.Reason) // the caller still gets the real error in re.Err
	}
	// Output:
	// level=DEBUG msg=retry attempt=1 delay=1ms type=error error="dial db: password=[REDACTED] rejected" key=db
	// level=WARN msg="retry: gave up" attempt=2 reason=exhausted type=error error="dial db: password=[REDACTED] rejected" key=db
	// returned: exhausted
}
