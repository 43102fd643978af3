// Command breakerbudget puts a circuit breaker and a retry budget around a
// dependency that goes down: the budget stops retries from multiplying the
// load, the breaker then stops calls from reaching it at all, and once it
// is back a probe closes the breaker again.
//
//	go run ./examples/breakerbudget
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync/atomic"
	"time"

	"github.com/steadyhq/retry"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "breakerbudget:", err)
		os.Exit(1)
	}
}

// dependency is a service that is either up or down.
type dependency struct {
	down atomic.Bool
	hits atomic.Int64
}

var errUnavailable = errors.New("inventory: unavailable")

func (d *dependency) call(context.Context) error {
	d.hits.Add(1)
	if d.down.Load() {
		return errUnavailable
	}
	return nil
}

func run(w io.Writer) error {
	dep := &dependency{}
	r := retry.New(
		retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: 2 * time.Millisecond, MaxInterval: 10 * time.Millisecond}),
		// A stock of 10 retry tokens, refilled by 0.1 for each call that
		// succeeds: nothing else refills it.
		retry.WithBudget(retry.Budget{Tokens: 10, Ratio: 0.1}),
		// Trip when half of at least 8 attempts fail; probe after 300 ms;
		// while open, fail at once rather than wait (MaxWait < 0).
		retry.WithBreaker(retry.Breaker{MinRequests: 8, OpenTimeout: 300 * time.Millisecond, MaxWait: -1,
			OnChange: func(_, from, to string) {
				fmt.Fprintf(w, "  breaker %s -> %s\n", from, to)
			}}),
	)
	ctx := context.Background()
	phase := func(name string, calls int) {
		before := dep.hits.Load()
		reasons := map[string]int{}
		ok := 0
		for range calls {
			err := r.Run(ctx, dep.call)
			var re *retry.Error
			switch {
			case err == nil:
				ok++
			case errors.As(err, &re):
				reasons[re.Reason.String()]++
			default:
				reasons[err.Error()]++
			}
		}
		keys := make([]string, 0, len(reasons))
		for k := range reasons {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintf(w, "%s: %d calls, %d succeeded, %d reached the dependency;", name, calls, ok, dep.hits.Load()-before)
		for _, k := range keys {
			fmt.Fprintf(w, " %s %d", k, reasons[k])
		}
		fmt.Fprintln(w)
	}

	phase("healthy", 20)
	dep.down.Store(true)
	fmt.Fprintln(w, "the dependency goes down")
	phase("outage", 40)
	dep.down.Store(false)
	fmt.Fprintln(w, "the dependency is back; the breaker probes it after its open timeout")
	time.Sleep(350 * time.Millisecond)
	phase("recovered", 20)

	s := r.Stats()
	fmt.Fprintf(w, "retries granted %d, denied by the budget %d; calls stopped by the breaker %d\n", s.Retried, s.BudgetDenied, s.BreakerDenied)
	return nil
}
