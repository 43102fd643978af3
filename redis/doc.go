// Package redis keeps the outage defences of github.com/steadyhq/retry on
// Redis (github.com/redis/go-redis/v9), so that a fleet of processes shares
// them: the dependency sees the sum of the fleet's attempts, and so must the
// defences.
//
//   - Store shares a circuit breaker: set it as retry.Breaker.Store. Each
//     process decides its attempts locally and syncs its counts once per
//     Options.SyncInterval; the fleet trips on its summed counts, opens
//     until one instant for all, and lets Probes attempts through
//     half-open fleet-wide. An open breaker's wait is not an attempt.
//   - Limiter is a rate limit for the whole fleet (GCRA, by
//     github.com/go-redis/redis_rate) for retry.RateLimit.Shared; each process
//     leases tokens in batches sized to its demand and spends them locally.
//   - Budget is a retry budget for the whole fleet, retry.Budget's rule kept
//     by a Lua script over windowed counters, for retry.Budget.Shared.
//   - DeadLetters keeps dead-letter records in a Redis Stream: its Sink for
//     retry.DeadLetters, List to read them and Replay to send one again.
//
// When Redis is down or slow, each component does what its documentation
// states, within bounded timeouts (see Options): the breaker falls back to
// the process's own (retry.Stats.BreakerFallbacks, StoreStats.Errors), the limiter to a local
// token bucket (LimiterStats.Fallbacks), the budget allows the retry
// (BudgetStats.FailOpen), and the dead-letter sink returns its error, which
// the Retrier counts in Stats.DeadLetterFailed and joins into the call's
// error. All return to Redis as soon as it answers.
//
//	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, DialerRetries: 1})
//	store, _ := retryredis.NewStore(c, retryredis.Options{})
//	limiter, _ := retryredis.NewLimiter(c, 100, 10, false, retryredis.Options{})
//	budget, _ := retryredis.NewBudget(c, retry.Budget{}, retryredis.Options{})
//	r := retry.New(
//		retry.WithBreaker(retry.Breaker{Store: store}),
//		retry.WithRateLimit(retry.RateLimit{Shared: limiter}),
//		retry.WithBudget(retry.Budget{Shared: budget}),
//	)
//
// The example in example/fleet runs three workers on a local Redis.
package redis
