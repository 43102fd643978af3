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
//   - Budget is a retry budget for the whole fleet, retry.Budget's rule for
//     the fleet as one client, one bucket kept by a Lua script, for
//     retry.Budget.Shared.
//   - DeadLetters keeps dead-letter records in a Redis Stream: its Sink for
//     retry.DeadLetters, List to read them and Replay to send one again,
//     once however many operators replay it at the same time.
//
// Every key is Options.Prefix followed by a hash tag naming the component
// and its key ({breaker:NAME}, {limit:KEY}, {budget:KEY},
// {deadletters:STREAM}), so that all the keys one script touches sit in
// one slot, and all of it works on a Redis Cluster, per key or not.
//
// # When Redis fails
//
// When Redis is down, slow, paused or cut off, each component goes on
// without it within its bound (Options.Timeout, or Breaker.StoreWait for
// the breaker's reads on a call's path): the breaker falls back to the
// process's own (retry.Stats.BreakerFallbacks), the limiter to a local
// token bucket paced at the process's last share of the limit
// (LimiterStats.Fallbacks, LimiterStats.Share), the budget decides on the
// process's own bucket (BudgetStats.Fallbacks), and the dead-letter sink
// returns its error, which the Retrier counts in Stats.DeadLetterFailed and
// joins into the call's error. The Store, the Limiter and the Budget each say whether
// they run on the fleet's state (retry.Stats.BreakersOnFleet,
// StoreStats.OnFleet, LimiterStats.OnFleet, BudgetStats.OnFleet), count
// their Redis errors, and log them to Options.Logger, at most once a
// second; after a failure for a key, each leaves Redis alone for that key
// for one SyncInterval, then one request asks again, the other keys going
// on as before.
//
// When Redis answers again, after a restart with empty data, a FLUSHALL or
// a key's expiry too, every process is back on the fleet's state within
// SyncInterval plus Timeout (less than two sync intervals with the
// defaults): a breaker whose state Redis lost starts again closed, and
// every process takes that state, whatever generation it had seen. After
// an outage long enough for the go-redis client's pool to stop dialing
// (PoolSize failed dials in a row), the pool dials again only once a
// second, which adds up to about a second to that (1.1 s measured with
// PoolSize 1). A process that has never read a breaker's state reads it,
// within StoreWait, before its first attempt.
//
// Give the go-redis client ContextTimeoutEnabled: true so that a command
// cut at Timeout frees its connection; the components return at Timeout
// whatever the client's settings, but without it a command to a hung
// server runs on in the background, holding a connection, until the
// client's ReadTimeout (3 s by default); MaxRetries (3 by default) may
// repeat it, and DialerRetries (5 by default) repeats each failed dial.
// MaxRetries: -1 and DialerRetries: 1 suit these components, which ask
// Redis again on their own schedule.
//
//	c := goredis.NewClient(&goredis.Options{
//		Addr:                  "127.0.0.1:6379",
//		ContextTimeoutEnabled: true,
//		MaxRetries:            -1,
//		DialerRetries:         1,
//	})
//	opts := retryredis.Options{Logger: slog.Default()}
//	store, err := retryredis.NewStore(c, opts)
//	if err != nil {
//		return err
//	}
//	limiter, err := retryredis.NewLimiter(c, 100, 10, false, opts)
//	if err != nil {
//		return err
//	}
//	budget, err := retryredis.NewBudget(c, retry.Budget{}, opts)
//	if err != nil {
//		return err
//	}
//	r := retry.New(
//		retry.WithBreaker(retry.Breaker{Store: store}),
//		retry.WithRateLimit(retry.RateLimit{Shared: limiter}),
//		retry.WithBudget(retry.Budget{Shared: budget}),
//	)
//
// A nil *Store, *Limiter or *Budget (the nil a constructor returns with
// its error) makes the Retrier report a configuration error (Retrier.Err),
// and every call returns it. Called on nil, their methods give zero Stats,
// Sync an error, Reserve and Retry a refusal; every method of a nil
// *DeadLetters returns an error. Nothing panics.
//
// The example in example/fleet runs three workers on a local Redis.
package redis
