// Package retry applies one retry policy engine inline: to any function with
// Do and Run, to any http.Client with NewTransport, and to loops that are not
// a single call with Retrier.Attempts.
//
// A call runs its function until it succeeds or the engine decides to stop.
// After each failure the engine classifies the error into a dot-namespaced
// type (TypeOf), then decides in a fixed order, first answer winning:
//
//  1. the caller's context is done: stop (ReasonCanceled);
//  2. an explicit verdict on the error: Discard, DeadLetter and Fail stop at
//     once; Retryable says the error is transient: it overrides Permanent and
//     the built-in classification (a 409 the handler knows to be transient),
//     but not the policy's non_retryable_errors (the OJS RETRY verdict means
//     the normal policy applies) nor the steps after 4;
//  3. Permanent: stop, routed by the policy's on_exhaustion;
//  4. the type matches the policy's non_retryable_errors (exact, or
//     "prefix.*"), or a built-in non-retryable type such as context.* or an
//     HTTP 4xx: stop, routed by on_exhaustion;
//  5. the attempts are used up: stop (ReasonExhausted);
//  6. the Decider, if any, vetoes the retry;
//  7. the wait: the Decider's delay, else the server's (After, Retry-After),
//     else the policy's backoff with jitter. A wait that cannot fit the
//     deadline is not slept: the call stops at once (ReasonDeadline).
//
// A failed call returns an *Error carrying the attempts, the Reason and the
// last attempt's error; errors.Is and errors.As reach that error, the
// context's error and its cause, and a failed dead-letter sink's error. A
// call stopped because its next wait could not fit the deadline matches
// context.DeadlineExceeded. A nil context is an error, never a panic.
//
// A function that makes HTTP calls turns the response into the engine's
// error with ResponseError, so that the server's Retry-After is honoured:
//
//	status, err := retry.Do(ctx, func(ctx context.Context) (int, error) {
//		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
//		if err != nil {
//			return 0, retry.Permanent(err)
//		}
//		resp, err := http.DefaultClient.Do(req)
//		if err != nil {
//			return 0, err // connection refused, reset, timeouts: retried
//		}
//		defer resp.Body.Close()
//		if err := retry.ResponseError(resp); err != nil {
//			return 0, err // 5xx, 408, 425, 429 retried after Retry-After; other 4xx stop
//		}
//		return resp.StatusCode, nil
//	}, r)
//
// # Policies
//
// A Policy is the Open Job Spec retry policy: attempts, initial and maximum
// interval, coefficient, strategy (constant, linear, exponential, polynomial,
// immediate), jitter, offset, non-retryable error types and what happens on
// exhaustion. Zero fields take the OJS defaults, and ParsePolicy reads the
// OJS JSON form:
//
//	p, err := retry.ParsePolicy([]byte(`{"max_attempts": 5, "initial_interval": "PT0.2S"}`))
//	if err != nil {
//		return err // names the field, the value and the rule
//	}
//	r := retry.New(retry.WithPolicy(p))
//	body, err := retry.Do(ctx, fetch, r)
//
// # Errors with types
//
// An error names its own type with a method ErrorType() string; the policy's
// non_retryable_errors match it:
//
//	type cardError struct{ reason string }
//
//	func (e cardError) Error() string     { return "card: " + e.reason }
//	func (e cardError) ErrorType() string { return "payment.card_" + e.reason }
//
//	p := retry.Policy{NonRetryableErrors: []string{"payment.*"}}
//
// # Shared state and events
//
// A Retrier built once with New is safe for concurrent use and shares its
// counters (Stats) and dead-letter alert window among its calls. Hooks
// (OnRetry, OnFailure, OnGiveUp, and the dead-letter alert) receive an Event
// whose Message is sanitized; WithLogger logs through log/slog from the same events. The
// dead-letter sink (WithDeadLetter) receives every record routed to it, and
// its failure is never silent. What a peer sends is read in time linear in
// its length: each event's message is sanitized once (redact.Sanitize reads
// at most 64 KiB and keeps at most 1 KiB), and Retry-After and the RateLimit
// fields are parsed in one pass, so no answer can hold a call past its
// deadline by its size or shape. WithClock runs the engine on another clock,
// such as the virtual one of the simulator (package
// github.com/steadyhq/retry/sim).
//
// # HTTP
//
// NewTransport wraps an http.RoundTripper with the same engine:
//
//	client := &http.Client{Transport: retry.NewTransport(nil,
//		retry.WithPolicy(retry.Policy{MaxAttempts: 4}),
//		retry.WithBreaker(retry.Breaker{PerKey: true}))}
//
// It never changes the caller's request, returns the last response whatever
// its status, closes the request body exactly once, retries only requests
// that are safe to repeat, replays bodies through GetBody or a bounded copy,
// and honours Retry-After. Once a response is in hand, whatever stops the
// retry (budget, breaker, rate limiter, deadline, MaxElapsed, MaxServerDelay)
// returns that response with a nil error and its body intact: the next
// attempt is admitted or refused before the response is drained.
//
// # Outages
//
// Every Retrier has a retry budget (see Budget): retries may reach a share of
// the calls that succeed, so that an outage does not multiply the load on the
// failing dependency, at any request rate. WithBreaker adds a circuit breaker, which reschedules
// attempts while it is open without consuming them; by default a call waits
// at most 1 s for it (Breaker.MaxWait), so an inline caller is never held
// for the breaker's open time, and stops with ReasonBreakerOpen instead.
// A hung dependency trips it: an attempt cut off by the caller's deadline
// counts as a timeout failure. Its refusals are sony/gobreaker's
// ErrOpenState to errors.Is, and WithGoBreaker puts a user's gobreaker
// breakers in its place. WithRateLimit paces attempts with a token
// bucket of golang.org/x/time/rate, or with a caller's own *rate.Limiter;
// neither sleeps into a deadline it cannot meet. Against overload that
// sustains itself, WithThrottle sheds attempts locally by the share the
// dependency refuses (Google SRE's adaptive throttling), and
// WithConcurrency limits the attempts in flight to what the dependency's
// latency says it serves. RateLimit.Shared and
// Budget.Shared, with a Breaker's Store, share these defences across a
// fleet (see the github.com/steadyhq/retry/redis module).
//
// Nothing is logged unless a hook does it, and a call that succeeds at once
// allocates nothing and, unless a breaker, a rate limiter, the concurrency
// limit, per-key budgets or MaxElapsed are set, reads no clock.
package retry
