// Command typederror retries a function that returns typed errors: a
// payment gateway that times out is retried, a stolen card is not, because
// the policy names "payment.card_*" types as non-retryable.
//
//	go run ./examples/typederror
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

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "typederror:", err)
		os.Exit(1)
	}
}

// paymentError names its own type, which policies match.
type paymentError struct{ kind string }

func (e *paymentError) Error() string     { return "payment: " + e.kind }
func (e *paymentError) ErrorType() string { return "payment." + e.kind }

// gateway answers each charge with the next outcome of its script.
type gateway struct{ script []error }

func (g *gateway) charge(ctx context.Context) (string, error) {
	n := retry.AttemptFrom(ctx)
	if n > len(g.script) {
		return "receipt-" + fmt.Sprint(n), nil
	}
	if err := g.script[n-1]; err != nil {
		return "", err
	}
	return "receipt-" + fmt.Sprint(n), nil
}

func run(w io.Writer) error {
	p := retry.Policy{
		MaxAttempts:        5,
		InitialInterval:    20 * time.Millisecond,
		NonRetryableErrors: []string{"payment.card_stolen", "payment.card_expired"},
	}
	r := retry.New(retry.WithPolicy(p), retry.OnFailure(func(ev retry.Event) {
		fmt.Fprintf(w, "  attempt %d: %s (type %s)\n", ev.Attempt, ev.Message, ev.Type)
	}))
	ctx := context.Background()

	for _, c := range []struct {
		name   string
		script []error
	}{
		{"a gateway timing out twice", []error{&paymentError{"gateway_timeout"}, &paymentError{"gateway_timeout"}}},
		{"a stolen card", []error{&paymentError{"card_stolen"}}},
	} {
		fmt.Fprintf(w, "%s:\n", c.name)
		g := &gateway{script: c.script}
		receipt, err := retry.Do(ctx, g.charge, r)
		var re *retry.Error
		var pe *paymentError
		switch {
		case err == nil:
			fmt.Fprintf(w, "  charged: %s\n", receipt)
		case errors.As(err, &re) && errors.As(err, &pe):
			fmt.Fprintf(w, "  gave up (%s after %d attempt): %s\n", re.Reason, re.Attempts, pe.kind)
		default:
			return err
		}
	}
	s := r.Stats()
	fmt.Fprintf(w, "calls %d, attempts %d, retried %d, failed permanently %d\n", s.Calls, s.Attempts, s.Retried, s.FailedPermanently)
	return nil
}
