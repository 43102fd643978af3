// Package retryablehttp lets a github.com/hashicorp/go-retryablehttp Client
// decide as the retry Transport does: the Policy's attempts and backoff,
// classification into types and the policy's non_retryable_errors,
// verdicts, the idempotency rule and Retry-After.
//
//	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 4}))
//	c := hcretry.NewClient() // github.com/hashicorp/go-retryablehttp
//	retryablehttp.Configure(c, r)
//
// Configure sets the client's RetryMax, CheckRetry, Backoff and
// ErrorHandler, and wraps the transport of (a copy of) its HTTP client so
// that a failure without a response still names its request. The functions
// can also be set one by one.
//
// The client keeps its own loop, so what only the engine's loop knows is
// not applied: the retry budget, circuit breakers, rate limits, hooks,
// counters, per-attempt timeouts and MaxElapsed. retryablehttp does not tell
// CheckRetry which attempt failed: CheckRetry decides as after a first
// attempt (so a Decider's ShouldRetry sees attempt 1, and the check that the
// wait fits the context's deadline is made with the first wait), the
// attempt limit is RetryMax, and Backoff, which does know the attempt,
// computes its wait. With jitter, Backoff draws the wait again. As with the
// Transport, the last response is returned whatever its status.
package retryablehttp
