package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sony/gobreaker/v2"
	"github.com/steadyhq/retry"
)

// A gobreaker breaker, tuned by its own Settings, guards the attempts of a
// Retrier: the second failure trips it, and the retry it then refuses ends
// the call with an error that is gobreaker's ErrOpenState, as a refusal of
// gobreaker's Execute would be.
func ExampleWithGoBreaker() {
	cb := gobreaker.NewTwoStepCircuitBreaker[any](gobreaker.Settings{
		Name:          "payments",
		Timeout:       30 * time.Second,
		ReadyToTrip:   func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 2 },
		IsExcluded:    func(err error) bool { return errors.Is(err, context.Canceled) },
		OnStateChange: func(name string, from, to gobreaker.State) { fmt.Println(name, from, "->", to) },
	})
	r := retry.New(
		retry.WithPolicy(retry.Policy{MaxAttempts: 5, InitialInterval: time.Millisecond}),
		// One breaker for every key; OpenTimeout is the Settings' Timeout.
		retry.WithGoBreaker(func(key string) *gobreaker.TwoStepCircuitBreaker[any] { return cb },
			retry.Breaker{OpenTimeout: 30 * time.Second}),
	)
	err := r.Run(context.Background(), func(context.Context) error {
		return errors.New("payments: 503")
	})
	fmt.Println(err)
	fmt.Println(errors.Is(err, gobreaker.ErrOpenState), r.Stats().Breakers[""])
	// Output:
	// payments closed -> open
	// retry: breaker_open after 2 attempts: payments: 503
	// true open
}
