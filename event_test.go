package retry_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// TestOnGiveUpOrder: OnGiveUp runs once, after OnFailure and after the
// dead-letter sink and alert of the same call, as its documentation says.
func TestOnGiveUpOrder(t *testing.T) {
	var order []string
	add := func(hook string) func(retry.Event) { return func(retry.Event) { order = append(order, hook) } }
	err := retry.Run(t.Context(), func(context.Context) error { return errors.New("boom") },
		retry.WithPolicy(retry.Policy{MaxAttempts: 1, OnExhaustion: retry.ExhaustDeadLetter}),
		retry.OnGiveUp(add("giveup")), // given first, run last
		retry.OnFailure(add("failure")),
		retry.WithDeadLetter(retry.DeadLetters{
			Sink:  func(_ context.Context, ev retry.Event) error { add("sink")(ev); return nil },
			Alert: add("alert"),
		}))
	if err == nil {
		t.Fatal("the call succeeded")
	}
	// The order of the others is not OnGiveUp's to say.
	first := slices.Sorted(slices.Values(order[:max(len(order)-1, 0)]))
	if len(order) != 4 || order[3] != "giveup" || !slices.Equal(first, []string{"alert", "failure", "sink"}) {
		t.Errorf("hooks ran in the order %q, want failure, sink and alert, each once, then giveup", order)
	}
}
