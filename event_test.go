package retry_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadyhq/retry"
)

// TestEvents checks what the hooks receive.
func TestEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		calls := 0
		start := time.Now()
		err := retry.Run(t.Context(),
			script(&calls, fmt.Errorf("GET https://bob:hunter2@api.example.com/v1: %w", errTransient), errTransient, errTransient),
			append(rec.options(),
				retry.WithPolicy(retry.Policy{MaxAttempts: 3, Jitter: retry.Jitter{Kind: retry.JitterNone}, OnExhaustion: retry.ExhaustDeadLetter}),
				retry.WithKey("billing"))...)
		if err == nil {
			t.Fatal("want failure")
		}
		if len(rec.failures) != 3 || len(rec.retries) != 2 {
			t.Fatalf("failures %d, retries %d; want 3 and 2", len(rec.failures), len(rec.retries))
		}
		for i, e := range rec.failures {
			if e.Attempt != i+1 || e.Key != "billing" || e.Type != "error" || !errors.Is(e.Err, errTransient) {
				t.Errorf("failure %d = %+v", i, e)
			}
		}
		if m := rec.failures[0].Message; strings.Contains(m, "hunter2") {
			t.Errorf("message not sanitized: %q", m)
		}
		if r := rec.retries[1]; r.Delay != 2*time.Second || r.Reason != "" {
			t.Errorf("second retry = %+v", r)
		}
		if len(rec.records) != 1 {
			t.Fatalf("records = %d", len(rec.records))
		}
		rc := rec.records[0]
		if rc.Reason != retry.ReasonExhausted || rc.Attempt != 3 || !rc.First.Equal(start) || !rc.Time.Equal(start.Add(3*time.Second)) {
			t.Errorf("record = %+v, want exhausted after 3, first at start, last 3 s later", rc)
		}
	})
}
