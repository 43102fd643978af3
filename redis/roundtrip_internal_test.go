package redis

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestHealthCuts: a round trip cut by the caller's short deadline says
// little of Redis: one, after a quiet spell, marks nothing down; cuts
// that go on for an interval without a success do; a success between
// them starts the count again. Each case runs in a synctest bubble: the
// cuts that must fall within one interval do, however loaded the machine.
func TestHealthCuts(t *testing.T) {
	const interval = 20 * time.Millisecond
	cut := context.DeadlineExceeded
	tests := []struct {
		name   string
		steps  []string // "cut", "ok", or "wait" (one interval)
		down   bool
		errors int64
	}{
		{name: "one cut after a quiet spell", steps: []string{"wait", "cut"}},
		{name: "cuts within an interval", steps: []string{"cut", "cut", "cut"}},
		{name: "cuts for an interval", steps: []string{"cut", "wait", "cut"}, down: true, errors: 1},
		{name: "a success between", steps: []string{"cut", "wait", "ok", "cut"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHealth("test", Options{SyncInterval: interval, Timeout: interval})
				k := h.key()
				for _, s := range tt.steps {
					switch s {
					case "cut":
						k.failed(context.Background(), cut, true, "k")
					case "ok":
						k.ok()
					case "wait":
						time.Sleep(interval)
					}
				}
				if k.down.Load() != tt.down || h.errors.Load() != tt.errors || h.onFleet() == tt.down {
					t.Errorf("down %v, errors %d, onFleet %v; want down %v, errors %d", k.down.Load(), h.errors.Load(), h.onFleet(), tt.down, tt.errors)
				}
			})
		})
	}
}

// logged keeps the records of a Logger.
type logged struct {
	mu  sync.Mutex
	all []slog.Record
}

func (l *logged) Enabled(context.Context, slog.Level) bool { return true }
func (l *logged) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, r.Clone())
	return nil
}
func (l *logged) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logged) WithGroup(string) slog.Handler      { return l }

// TestHealthSuppressed: the errors left out of the log are counted in the
// record that ends the outage, and the next outage's first record counts
// none of them.
func TestHealthSuppressed(t *testing.T) {
	logs := &logged{}
	h := newHealth("test", Options{SyncInterval: time.Millisecond, Timeout: time.Millisecond, Logger: slog.New(logs)})
	k := h.key()
	down := context.Canceled // an error of Redis's, not of the caller's context
	for range 3 {
		k.failed(context.Background(), down, false, "k")
	}
	k.ok()
	h.mu.Lock()
	h.logged = time.Time{} // a second later
	h.mu.Unlock()
	k.failed(context.Background(), down, false, "k")
	logs.mu.Lock()
	defer logs.mu.Unlock()
	var got []string
	for _, r := range logs.all {
		var n int64 = -1
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "suppressed" {
				n = a.Value.Int64()
			}
			return true
		})
		got = append(got, r.Level.String()+" "+string(rune('0'+n)))
	}
	want := []string{"WARN 0", "INFO 2", "WARN 0"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("records (level, suppressed) %v, want %v", got, want)
	}
}
