package retry_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry"
)

// TestDeadLetterSink covers sink failure, absence and alert deduplication.
func TestDeadLetterSink(t *testing.T) {
	dl := retry.WithPolicy(retry.Policy{MaxAttempts: 1, OnExhaustion: retry.ExhaustDeadLetter})
	t.Run("a failing sink is counted and joined", func(t *testing.T) {
		sinkErr := errors.New("queue full")
		r := retry.New(dl, retry.WithDeadLetter(retry.DeadLetters{Sink: func(context.Context, retry.Event) error { return sinkErr }}))
		err := r.Run(t.Context(), func(context.Context) error { return errTransient })
		if !errors.Is(err, sinkErr) || !errors.Is(err, errTransient) {
			t.Fatalf("err = %v: want the sink's error and the last error", err)
		}
		if s := r.Stats(); s.DeadLetterFailed != 1 || s.DeadLettered != 0 {
			t.Fatalf("stats = %+v", s)
		}
	})
	t.Run("no sink configured is never silent", func(t *testing.T) {
		r := retry.New(dl)
		err := r.Run(t.Context(), func(context.Context) error { return errTransient })
		if err == nil || !strings.Contains(err.Error(), "retry: no dead-letter sink configured") || !errors.Is(err, errTransient) || r.Stats().DeadLetterFailed != 1 {
			t.Fatalf("err = %v, stats %+v", err, r.Stats())
		}
	})
	t.Run("a panicking sink is an error, not a crash", func(t *testing.T) {
		r := retry.New(dl, retry.WithDeadLetter(retry.DeadLetters{Sink: func(context.Context, retry.Event) error { panic("boom") }}))
		err := r.Run(t.Context(), func(context.Context) error { return errTransient })
		if err == nil || !strings.Contains(err.Error(), "panic: boom") || r.Stats().DeadLetterFailed != 1 {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("the sink's context survives the caller's cancellation", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var sinkCtxErr error = errors.New("sink not called")
		r := retry.New(dl, retry.WithDeadLetter(retry.DeadLetters{Sink: func(sctx context.Context, _ retry.Event) error {
			cancel() // the caller gives up while the record is being written
			sinkCtxErr = sctx.Err()
			return nil
		}}))
		_ = r.Run(ctx, func(context.Context) error { return retry.DeadLetter(errTransient) })
		if sinkCtxErr != nil {
			t.Fatalf("sink context err = %v, want live", sinkCtxErr)
		}
	})
	t.Run("repeated alerts are suppressed within the window, records are not", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var rec recorder
			r := retry.New(append(rec.options(), dl, retry.WithKey("job-7"))...)
			fail := func(context.Context) error { return errTransient }
			for range 3 {
				_ = r.Run(t.Context(), fail)
			}
			_ = retry.Run(t.Context(), fail, r, retry.WithKey("job-8")) // another key alerts
			time.Sleep(time.Hour)
			_ = r.Run(t.Context(), fail) // the window has passed
			if len(rec.records) != 5 || len(rec.alerts) != 3 {
				t.Fatalf("records %d, alerts %d; want 5 and 3", len(rec.records), len(rec.alerts))
			}
			if s := r.Stats(); s.AlertsSuppressed != 2 || s.DeadLettered != 5 {
				t.Fatalf("stats %+v", s)
			}
		})
	})
}
