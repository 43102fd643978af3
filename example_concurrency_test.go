package retry_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/steadyhq/retry"
)

// Two calls hold the only two permits of a dependency (Max: 2 caps the
// adaptive limit, for a repeatable example): a third is refused at once,
// before it reaches the dependency, and the permits come back as the two
// calls end.
func ExampleWithConcurrency() {
	r := retry.New(
		retry.WithConcurrency(retry.Concurrency{Initial: 2, Max: 2}),
		retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
	)
	ctx := context.Background()
	release := make(chan struct{})
	var running, done sync.WaitGroup
	for range 2 {
		running.Add(1)
		done.Go(func() {
			_ = r.Run(ctx, func(context.Context) error {
				running.Done()
				<-release // a slow dependency
				return nil
			})
		})
	}
	running.Wait()
	st := r.Stats()
	fmt.Printf("in flight %d of %d\n", st.InFlight[""], st.ConcurrencyLimit[""])

	err := r.Run(ctx, func(context.Context) error { return nil })
	var e *retry.Error
	if errors.As(err, &e) {
		fmt.Printf("reason %s, attempts %d, type %s\n", e.Reason, e.Attempts, retry.TypeOf(err))
		fmt.Println(err)
	}
	close(release)
	done.Wait()
	st = r.Stats()
	fmt.Printf("in flight %d, refused %d\n", st.InFlight[""], st.ConcurrencyDenied)
	// Output:
	// in flight 2 of 2
	// reason throttled, attempts 0, type concurrency.limit
	// retry: throttled after 0 attempts: retry: concurrency limit reached (at most 2 attempts in flight)
	// in flight 0, refused 1
}
