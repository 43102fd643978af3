// Package redis keeps the outage defences of github.com/steadyhq/retry on
// Redis (github.com/redis/go-redis/v9), so that a fleet of processes shares
// them: the dependency sees the sum of the fleet's attempts, and so must the
// defences.
//
//   - Store shares a circuit breaker: set it as retry.Breaker.Store. Each
//     process decides its attempts locally and syncs all its breakers in
//     one round trip per Options.SyncInterval; the fleet trips on its
//     summed counts, opens until one instant for all, and lets Probes
//     attempts through half-open fleet-wide. An open breaker's wait is not
//     an attempt.
//   - Limiter is a rate limit for the whole fleet (GCRA, by
//     github.com/go-redis/redis_rate) for retry.RateLimit.Shared; each process
//     leases tokens in batches sized to its demand and spends them locally,
//     giving back what a lease leaves unspent.
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
// # What Redis carries
//
// Redis's work grows with failures, not with keys × processes. With P
// processes calling K keys each, a SyncInterval I and a heartbeat H (100
// ms and 2 s by default; for a breaker, H is at most a fifth of its
// Window), and counting commands as INFO commandstats does (a script and
// each command it runs):
//
//   - Store: each process makes one round trip an interval while it has
//     calls: it reads the list of breakers that are not quiet (3 commands),
//     and syncs a breaker (5 commands: the script, TIME, one read, one
//     write and a PEXPIRE of its hash) once a heartbeat while it is quiet
//     or open, and once an interval while it counts failures or is
//     listed: P·(3/I + 5·(K−F)/H + 5·F/I) commands a second, F the keys
//     that count failures (closed: not yet tripped, or failing below the
//     ratio). A trip, a close or a window's first failure adds a write of
//     the list; a key a process had not read, one sync.
//   - Limiter: a lease is 10 commands, once a heartbeat a key and process
//     while tokens are plentiful (10·P·K/H), and giving back a lease that
//     lapsed unspent for a key that fell quiet about 6; where tokens are
//     scarce, a lease at least once an interval, and as often as the
//     bucket runs dry.
//   - Budget: nothing while calls succeed; 4 to 6 commands a retry.
//
// So 10 processes calling 100 healthy keys ask 3·10/0.1 + 5·10·100/2 =
// 2,800 commands a second of the Store and 10·10·100/2 = 5,000 of the
// Limiter, where each (process, key) asked about 90 a second before
// (BenchmarkFleetScale measures both). One Redis core carries about
// 185,000 of the Store's commands a second (BenchmarkFleetCapacity: 5.4
// µs of Redis CPU each), and a Cluster of M masters about M times that,
// the list's master also serving every process's reads of it (3·P/I). At
// the defaults that is 1,000 processes × 60 keys for one Redis (180,000),
// and 1,000 × 180 for a 3-master Cluster (480,000, the list's master
// 180,000). 1,000 × 1,000 with 1% of the keys failing (open) ask
// 30,000 + 5·1,000·1,000/H commands a second: 2.5 million at the
// defaults, about 14 masters; with a Heartbeat of 15 s and a Window of
// 75 s, 363,000, a 3-master Cluster. While those 10 keys fail below the
// ratio instead, closed, every process syncs them once an interval:
// 500,000 commands a second more at I = 100 ms. A longer Window lets a
// breaker's successes count longer, and a longer Heartbeat holds a
// lease's tokens longer; see Store and Limiter.
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
// on as before (a Store's round trip that fails as a whole, Redis down or
// slow, rests the Store; a Limiter's renewal ahead that fails while the
// lease has tokens leaves the key on them until they are spent). A request not sent because its key rests says
// so, with the key's last failure. A value read from Redis that none of
// them wrote (a time out of range, a number that is not finite) is such a
// failure too, with the same fallback.
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
