package redis_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	retryredis "github.com/steadyhq/retry/redis"
)

// records keeps the records of a Logger (a component's Options.Logger).
type records struct {
	mu  sync.Mutex
	all []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, rec.Clone())
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// counts returns the number of Warn and Info records.
func (r *records) counts() (warn, info int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.all {
		switch rec.Level {
		case slog.LevelWarn:
			warn++
		case slog.LevelInfo:
			info++
		}
	}
	return warn, info
}

// lines returns each record's level and message.
func (r *records) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.all {
		out = append(out, rec.Level.String()+" "+rec.Message)
	}
	return out
}

// TestLoggerRateLimited: with Redis down for 1.2 s, a Budget's Logger gets
// one Warn record a second, the later one counting the errors left out in
// "suppressed" and naming the error; when Redis answers again, one Info
// record says so. A stopped Redis refuses at once: Timeout and the
// client's timeouts are 1 s, so that no round trip is cut while Redis is
// up, and the Warn records counted are those of the outage.
func TestLoggerRateLimited(t *testing.T) {
	s := startServer(t)
	logs := &records{}
	b, err := retryredis.NewBudget(s.Client(), retry.Budget{Tokens: 10000}, retryredis.Options{Timeout: time.Second, SyncInterval: 10 * time.Millisecond, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond}), retry.WithBudget(retry.Budget{Shared: b}))
	call := func() { r.Run(t.Context(), flaky()) }
	call()
	s.Stop()
	for end := time.Now().Add(1200 * time.Millisecond); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		call()
	}
	logs.mu.Lock()
	outage := len(logs.all) // the records of the outage
	logs.mu.Unlock()
	s.Start()
	// After repeated dial errors the client's pool dials again once a
	// second (go-redis's tryDial): Redis is reached within about a second.
	waitFor(t, 3*time.Second, "the budget back on Redis", func() bool {
		call()
		return b.Stats().OnFleet
	})
	logs.mu.Lock()
	defer logs.mu.Unlock()
	var warns, infos []slog.Record
	for i, rec := range logs.all {
		switch rec.Level {
		case slog.LevelWarn:
			if i < outage {
				warns = append(warns, rec)
			}
		case slog.LevelInfo:
			infos = append(infos, rec)
		}
	}
	errs := b.Stats().Errors
	t.Logf("%d errors: %d Warn records, %d Info", errs, len(warns), len(infos))
	if len(warns) != 2 {
		t.Fatalf("%d Warn records in 1.2 s of errors, want 2 (one a second)", len(warns))
	}
	var suppressed int64
	var msg string
	warns[1].Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "suppressed":
			suppressed = a.Value.Int64()
		case "error":
			msg = a.Value.String()
		}
		return true
	})
	// The errors of the second between the two records; those after the
	// second wait for a third.
	if suppressed < 10 || suppressed > errs-2 {
		t.Errorf("the second Warn record counts %d suppressed, want the errors left out since the first (10 to %d)", suppressed, errs-2)
	}
	if msg == "" {
		t.Error("the Warn record names no error")
	}
	if len(infos) != 1 {
		t.Errorf("%d Info records after Redis answered again, want 1", len(infos))
	}
}

// TestKeyNames: every key a component writes is the prefix followed by a
// hash tag naming the component and its key, or, for the Store's list of
// breakers that are not quiet, {breakers}.
func TestKeyNames(t *testing.T) {
	s := startServer(t)
	c := s.Client()
	opts := retryredis.Options{Prefix: "p:"}
	store, err := retryredis.NewStore(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	lim, err := retryredis.NewLimiter(c, 1000, 10, true, opts)
	if err != nil {
		t.Fatal(err)
	}
	bud, err := retryredis.NewBudget(c, retry.Budget{PerKey: true}, opts)
	if err != nil {
		t.Fatal(err)
	}
	dl, err := retryredis.NewDeadLetters(c, "s", 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	r := retry.New(
		retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond, OnExhaustion: retry.ExhaustDeadLetter}),
		retry.WithBreaker(retry.Breaker{Store: store, PerKey: true}),
		retry.WithRateLimit(retry.RateLimit{Shared: lim}),
		retry.WithBudget(retry.Budget{Shared: bud}),
		retry.WithDeadLetter(retry.DeadLetters{Sink: dl.Sink}),
		retry.WithKey("k"),
	)
	for range 20 {
		r.Run(t.Context(), func(context.Context) error { return errDown })
		time.Sleep(5 * time.Millisecond)
	}
	keys, err := c.Keys(t.Context(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, k := range keys {
		ok := false
		for _, tag := range []string{"p:{breaker:k}", "p:{breakers}", "p:{limit:k}", "p:{budget:k}", "p:{deadletters:s}"} {
			if len(k) >= len(tag) && k[:len(tag)] == tag {
				ok, seen[tag] = true, true
			}
		}
		if !ok {
			t.Errorf("key %q: want the prefix and a hash tag naming the component", k)
		}
	}
	if len(seen) != 5 || dl.Stream() != "p:{deadletters:s}" {
		t.Errorf("keys %v (stream %q), want one of each component's", keys, dl.Stream())
	}
}

// TestLoggerWrongType: a key of the wrong type (written by another
// program) is a Redis error like any other: logged at level Warn with
// Redis's message, counted, and the component falls back; calls go on.
func TestLoggerWrongType(t *testing.T) {
	s := startServer(t)
	tests := []struct {
		name  string
		build func(t *testing.T, opts retryredis.Options) (retry.Option, func() (errors, fellBack int64))
	}{
		{name: "breaker", build: func(t *testing.T, opts retryredis.Options) (retry.Option, func() (int64, int64)) {
			st, err := retryredis.NewStore(s.Client(), opts)
			if err != nil {
				t.Fatal(err)
			}
			r := retry.New(retry.WithBreaker(retry.Breaker{Store: st}))
			return r, func() (int64, int64) { return st.Stats().Errors, r.Stats().BreakerFallbacks }
		}},
		{name: "limiter", build: func(t *testing.T, opts retryredis.Options) (retry.Option, func() (int64, int64)) {
			l, err := retryredis.NewLimiter(s.Client(), 1000, 10, false, opts)
			if err != nil {
				t.Fatal(err)
			}
			return retry.WithRateLimit(retry.RateLimit{Shared: l}), func() (int64, int64) { return l.Stats().Errors, l.Stats().Fallbacks }
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := "wrongtype:" + tt.name + ":"
			// The component's key, of another type than it keeps.
			key := map[string]string{"breaker": prefix + "{breaker:}", "limiter": prefix + "{limit:}"}[tt.name]
			val := map[string][]any{"breaker": {"SET", key, "x"}, "limiter": {"HSET", key, "f", "x"}}[tt.name]
			if err := s.Client().Do(t.Context(), val...).Err(); err != nil {
				t.Fatal(err)
			}
			logs := &records{}
			opt, stats := tt.build(t, retryredis.Options{Prefix: prefix, SyncInterval: 10 * time.Millisecond, Logger: slog.New(logs)})
			r := retry.New(opt, retry.WithPolicy(retry.Policy{MaxAttempts: 1}))
			for range 20 {
				if err := r.Run(t.Context(), func(context.Context) error { return nil }); err != nil {
					t.Fatalf("a call with the component's key of the wrong type: %v", err)
				}
				time.Sleep(2 * time.Millisecond)
			}
			errs, fell := stats()
			lines := logs.lines()
			if errs == 0 || fell == 0 || len(lines) == 0 || !strings.Contains(strings.Join(lines, " "), "WARN") {
				t.Errorf("%d errors, %d fallbacks, log %q; want them counted and logged", errs, fell, lines)
			}
			logs.mu.Lock()
			defer logs.mu.Unlock()
			var msg string
			logs.all[0].Attrs(func(a slog.Attr) bool {
				if a.Key == "error" {
					msg = a.Value.String()
				}
				return true
			})
			if !strings.Contains(msg, "WRONGTYPE") || !strings.Contains(msg, key) {
				t.Errorf("the Warn record's error %q, want Redis's WRONGTYPE and the key %s", msg, key)
			}
		})
	}
}
