package retry

import (
	"context"
	"log/slog"
)

// WithLogger logs the engine's decisions to l: one record at level Debug
// before each retry, and one when a call ends without success, at level Warn
// (Debug when the caller's context ended, which is the caller's choice, not
// a failure). Nothing is logged without this option, nor with a nil l.
//
// Records carry the sanitized message (Event.Message), never the raw error
// text: attributes attempt, delay (retries), reason (give-ups), type, error,
// balance (the retry budget's, when it denied the retry or a Shadow budget
// would have), and key, method and url when set. The hooks run on the calling goroutine,
// after the OnRetry and OnGiveUp hooks given before this option.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		if l == nil {
			return
		}
		OnRetry(func(ev Event) { logEvent(l, slog.LevelDebug, "retry", ev) }).apply(c)
		OnGiveUp(func(ev Event) {
			level := slog.LevelWarn
			if ev.Reason == ReasonCanceled {
				level = slog.LevelDebug
			}
			logEvent(l, level, "retry: gave up", ev)
		}).apply(c)
	})
}

// logEvent writes ev to l at level, with its sanitized fields only.
func logEvent(l *slog.Logger, level slog.Level, msg string, ev Event) {
	ctx := context.Background()
	if !l.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 8)
	attrs = append(attrs, slog.Int("attempt", ev.Attempt))
	if ev.Reason == reasonNone {
		attrs = append(attrs, slog.Duration("delay", ev.Delay))
	} else {
		attrs = append(attrs, slog.String("reason", ev.Reason.String()))
	}
	attrs = append(attrs, slog.String("type", ev.Type), slog.String("error", ev.Message))
	if ev.Reason == ReasonBudget || ev.Balance < 0 {
		// A denial, or a retry a Shadow budget would have denied.
		attrs = append(attrs, slog.Float64("balance", ev.Balance))
	}
	for _, a := range [...]struct{ k, v string }{{"key", ev.Key}, {"method", ev.Method}, {"url", ev.URL}} {
		if a.v != "" {
			attrs = append(attrs, slog.String(a.k, a.v))
		}
	}
	l.LogAttrs(ctx, level, msg, attrs...)
}
