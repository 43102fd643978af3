package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/steadyhq/retry"
)

// A dependency that refuses every attempt: once it has refused more than
// half of what it was sent (K = 2), the client sheds attempts itself, and
// the dependency sees only a trickle. The attempts shed are not counted:
// p = 2/3 after two refusals, whatever was shed since.
func ExampleWithThrottle() {
	r := retry.New(
		retry.WithThrottle(retry.Throttle{K: 2, Window: 10 * time.Second}),
		retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
		retry.WithRandom(func() float64 { return 0.5 }), // a fixed draw, for a repeatable example
	)
	ctx := context.Background()
	sent := 0
	down := func(context.Context) error { sent++; return &retry.StatusError{StatusCode: 503} }
	for range 20 {
		_ = r.Run(ctx, down)
	}
	fmt.Printf("%d of 20 attempts reached the dependency\n", sent)

	err := r.Run(ctx, down)
	var e *retry.Error
	if errors.As(err, &e) {
		fmt.Printf("reason %s, attempts %d, type %s\n", e.Reason, e.Attempts, retry.TypeOf(err))
		fmt.Println(err)
	}
	st := r.Stats()
	fmt.Printf("throttled %d, p now %.2f\n", st.Throttled, st.Throttle[""])
	// Output:
	// 2 of 20 attempts reached the dependency
	// reason throttled, attempts 0, type throttle.adaptive
	// retry: throttled after 0 attempts: retry: adaptive throttling shed the attempt (p = 0.67)
	// throttled 19, p now 0.67
}
