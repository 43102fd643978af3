package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/steadyhq/retry"
)

// A flaky function succeeds on its third attempt.
func ExampleDo() {
	ctx := context.Background()
	attempts := 0
	greeting, err := retry.Do(ctx, func(ctx context.Context) (string, error) {
		attempts++
		if attempts < 3 {
			return "", errors.New("connection reset")
		}
		return "hello", nil
	}, retry.WithPolicy(retry.Policy{InitialInterval: time.Millisecond}))
	fmt.Println(greeting, err, attempts)
	// Output: hello <nil> 3
}

// An OJS JSON policy, as it would come from configuration.
func ExampleParsePolicy_retrier() {
	p, err := retry.ParsePolicy([]byte(`{"retry": {
		"max_attempts": 4,
		"initial_interval": "PT0.001S",
		"jitter": false,
		"non_retryable_errors": ["validation.*"]
	}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	r := retry.New(retry.WithPolicy(p), retry.OnRetry(func(e retry.Event) {
		fmt.Printf("attempt %d failed (%s), next in %v\n", e.Attempt, e.Message, e.Delay)
	}))
	err = r.Run(context.Background(), func(context.Context) error {
		return errors.New("upstream busy")
	})
	fmt.Println(err)
	// Output:
	// attempt 1 failed (upstream busy), next in 1ms
	// attempt 2 failed (upstream busy), next in 2ms
	// attempt 3 failed (upstream busy), next in 4ms
	// retry: exhausted after 4 attempts: upstream busy
}

// cardError names its own type, so a policy can list it as non-retryable.
type cardError struct{ reason string }

func (e cardError) Error() string     { return "card " + e.reason }
func (e cardError) ErrorType() string { return "payment.card_" + e.reason }

// A typed error listed in non_retryable_errors stops the call at once.
func ExampleTypeOf() {
	policy := retry.Policy{NonRetryableErrors: []string{"payment.card_stolen", "validation.*"}}
	attempts := 0
	err := retry.Run(context.Background(), func(context.Context) error {
		attempts++
		return fmt.Errorf("charge invoice 42: %w", cardError{"stolen"})
	}, retry.WithPolicy(policy))

	var re *retry.Error
	errors.As(err, &re)
	fmt.Println(retry.TypeOf(err), re.Reason, attempts)
	var ce cardError
	fmt.Println(errors.As(err, &ce), ce.reason)
	// Output:
	// payment.card_stolen non_retryable 1
	// true stolen
}

// Exhausted calls go to the dead-letter sink when the policy says so; the
// record's message is sanitized.
func ExampleWithDeadLetter() {
	sink := func(_ context.Context, rec retry.Event) error {
		fmt.Printf("dead letter %q after %d attempts (%s): %s\n", rec.Key, rec.Attempt, rec.Reason, rec.Message)
		return nil
	}
	r := retry.New(
		retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond, OnExhaustion: retry.ExhaustDeadLetter}),
		retry.WithDeadLetter(retry.DeadLetters{Sink: sink}),
	)
	err := retry.Run(context.Background(), func(context.Context) error {
		return errors.New("dial postgres://app:s3cret@db.internal/orders: connection refused")
	}, r, retry.WithKey("order-42"))
	s := r.Stats()
	fmt.Println(s.DeadLettered, s.DeadLetterFailed, err != nil)
	// Output:
	// dead letter "order-42" after 2 attempts (exhausted): dial postgres://[REDACTED]@db.internal/orders: connection refused
	// 1 0 true
}

// A handler verdict overrides the policy: DeadLetter escalates at once.
func ExampleDeadLetter() {
	r := retry.New(retry.WithDeadLetter(retry.DeadLetters{Sink: func(_ context.Context, rec retry.Event) error {
		fmt.Println("escalated:", rec.Message)
		return nil
	}}))
	err := r.Run(context.Background(), func(context.Context) error {
		return retry.DeadLetter(errors.New("card reported stolen"))
	})
	var re *retry.Error
	errors.As(err, &re)
	fmt.Println(re.Reason, re.Attempts)
	// Output:
	// escalated: card reported stolen
	// dead_lettered 1
}

// A reconnect loop that is not a single function call.
func ExampleRetrier_Attempts() {
	var err error
	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 5, InitialInterval: time.Millisecond}))
	for attempt := range r.Attempts(context.Background(), &err) {
		if attempt < 3 {
			err = fmt.Errorf("dial attempt %d: connection refused", attempt)
			continue
		}
		fmt.Println("connected on attempt", attempt)
	}
	fmt.Println(err)
	// Output:
	// connected on attempt 3
	// <nil>
}

// While a circuit breaker is open the attempt is neither run nor counted:
// the call waits for the breaker to let a probe through, so a three-attempt
// call that meets an open breaker twice still gets three real attempts.
func ExampleWithBreaker() {
	r := retry.New(
		retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond, Jitter: retry.Jitter{Kind: retry.JitterNone}}),
		// Opens on the first failure, for 20 ms.
		retry.WithBreaker(retry.Breaker{MinRequests: 1, FailureRatio: 1, OpenTimeout: 20 * time.Millisecond,
			OnChange: func(_, from, to string) { fmt.Println("breaker", from, "->", to) }}),
	)
	err := r.Run(context.Background(), func(ctx context.Context) error {
		n := retry.AttemptFrom(ctx)
		fmt.Println("attempt", n)
		if n < 3 {
			return errors.New("upstream unavailable")
		}
		return nil
	})
	s := r.Stats()
	fmt.Println(err, s.Attempts, s.BreakerWaits)
	// Output:
	// attempt 1
	// breaker closed -> open
	// breaker open -> half_open
	// attempt 2
	// breaker half_open -> open
	// breaker open -> half_open
	// attempt 3
	// breaker half_open -> closed
	// <nil> 3 2
}

// A retry budget bounds the retries to what the calls that succeed earn:
// here 0.1 a success and no stock. 100 calls succeed and earn 10 tokens; an
// outage follows, and its 100 calls make 110 attempts instead of 300: the
// first 5 calls of the outage take the 10 tokens, two each, and the other
// 95 are denied their retry. Zero fields take the defaults; -1 means none.
func ExampleWithBudget() {
	r := retry.New(
		retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond, Jitter: retry.Jitter{Kind: retry.JitterNone}}),
		retry.WithBudget(retry.Budget{Tokens: -1, Ratio: 0.1, Window: time.Minute}),
	)
	for range 100 {
		_ = r.Run(context.Background(), func(context.Context) error { return nil })
	}
	for range 100 {
		_ = r.Run(context.Background(), func(context.Context) error { return errors.New("outage") })
	}
	s := r.Stats()
	fmt.Println(s.Calls, s.Attempts-100, s.BudgetDenied)
	// Output: 200 110 95
}
