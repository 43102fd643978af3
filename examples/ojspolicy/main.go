// Command ojspolicy loads a retry policy written in the Open Job Spec JSON
// form, prints the schedule it implies, and applies it to a flaky job; a
// broken policy is rejected with the field, the value and the rule.
//
//	go run ./examples/ojspolicy
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/steadyhq/retry"
)

// policyJSON is what a job's configuration would carry.
const policyJSON = `{
  "retry": {
    "max_attempts": 4,
    "initial_interval": "PT0.02S",
    "backoff_coefficient": 3.0,
    "max_interval": "PT0.5S",
    "jitter": false,
    "non_retryable_errors": ["validation.*"],
    "on_exhaustion": "dead_letter"
  }
}`

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "ojspolicy:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	p, err := retry.ParsePolicy([]byte(policyJSON))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%d attempts; waits before each retry:", p.MaxAttempts)
	for n := 1; n < p.MaxAttempts; n++ {
		fmt.Fprintf(w, " %v", p.Delay(n))
	}
	fmt.Fprintln(w)

	// on_exhaustion "dead_letter": a job that fails for good goes to the sink.
	var dead []retry.Event
	r := retry.New(retry.WithPolicy(p), retry.WithDeadLetter(retry.DeadLetters{Sink: func(_ context.Context, ev retry.Event) error {
		dead = append(dead, ev)
		return nil
	}}))
	start := time.Now()
	err = retry.Run(context.Background(), func(ctx context.Context) error {
		return errors.New("export service unavailable")
	}, r)
	fmt.Fprintf(w, "job: %v (after %v)\n", err, time.Since(start).Round(10*time.Millisecond))
	for _, ev := range dead {
		fmt.Fprintf(w, "dead letter: attempt %d, type %s, %q\n", ev.Attempt, ev.Type, ev.Message)
	}

	// A policy with a mistake is refused, naming what is wrong.
	_, err = retry.ParsePolicy([]byte(`{"max_attempts": 4, "backoff_coefficient": 0.5}`))
	var pe *retry.PolicyError
	if errors.As(err, &pe) {
		fmt.Fprintf(w, "rejected: field %s, value %s: %s\n", pe.Field, pe.Value, pe.Rule)
	}
	return nil
}
