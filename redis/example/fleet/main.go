// Command fleet runs three workers, each with its own Redis client as three
// processes would have, against one flaky dependency: they share one
// circuit breaker, one rate limit and one retry budget on Redis, and their
// failed work goes to one dead-letter stream, which it then replays.
//
//	go run ./redis/example/fleet -addr 127.0.0.1:6379
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/steadyhq/retry"
	retryredis "github.com/steadyhq/retry/redis"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "Redis address")
	dur := flag.Duration("for", 3*time.Second, "how long the workers run")
	flag.Parse()
	if err := run(*addr, *dur); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

// dependency fails every attempt while down, and one in ten otherwise.
type dependency struct {
	down  atomic.Bool
	calls atomic.Int64
}

func (d *dependency) call(context.Context) error {
	d.calls.Add(1)
	if d.down.Load() || rand.IntN(10) == 0 {
		return errors.New("dependency: 503")
	}
	return nil
}

type worker struct {
	r      *retry.Retrier
	client *goredis.Client
	dl     *retryredis.DeadLetters
}

func run(addr string, dur time.Duration) error {
	ctx := context.Background()
	prefix := fmt.Sprintf("fleet-example:%d:", time.Now().UnixNano())
	opts := retryredis.Options{Prefix: prefix}
	workers := make([]worker, 3)
	for i := range workers {
		c := goredis.NewClient(&goredis.Options{
			Addr: addr, DialTimeout: 100 * time.Millisecond,
			ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond,
			ContextTimeoutEnabled: true, DialerRetries: 1,
		})
		defer c.Close()
		if err := c.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("redis at %s: %w", addr, err)
		}
		store, err := retryredis.NewStore(c, opts)
		if err != nil {
			return err
		}
		limiter, err := retryredis.NewLimiter(c, 200, 10, false, opts)
		if err != nil {
			return err
		}
		budget, err := retryredis.NewBudget(c, retry.Budget{}, opts)
		if err != nil {
			return err
		}
		dl, err := retryredis.NewDeadLetters(c, "dead-letters", 1000, opts)
		if err != nil {
			return err
		}
		workers[i] = worker{client: c, dl: dl, r: retry.New(
			retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: 20 * time.Millisecond, OnExhaustion: retry.ExhaustDeadLetter}),
			retry.WithBreaker(retry.Breaker{Store: store, MinRequests: 20, OpenTimeout: 500 * time.Millisecond}),
			retry.WithRateLimit(retry.RateLimit{Shared: limiter}),
			retry.WithBudget(retry.Budget{Shared: budget}),
			retry.WithDeadLetter(retry.DeadLetters{Sink: dl.Sink}),
			retry.WithKey("dependency"),
		)}
	}

	dep := &dependency{}
	time.AfterFunc(dur/3, func() { dep.down.Store(true) })
	time.AfterFunc(2*dur/3, func() { dep.down.Store(false) })
	var logical, ok atomic.Int64
	wctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	var wg sync.WaitGroup
	for _, w := range workers {
		for range 4 {
			wg.Go(func() {
				for wctx.Err() == nil {
					cctx, ccancel := context.WithTimeout(wctx, time.Second)
					logical.Add(1)
					if w.r.Run(cctx, dep.call) == nil {
						ok.Add(1)
					}
					ccancel()
				}
			})
		}
	}
	wg.Wait()

	fmt.Printf("%d calls, %d succeeded, %d attempts on the dependency (%.2f per call); the dependency was down for the middle third\n",
		logical.Load(), ok.Load(), dep.calls.Load(), float64(dep.calls.Load())/float64(max(logical.Load(), 1)))
	for i, w := range workers {
		s := w.r.Stats()
		fmt.Printf("worker %d: attempts %d, breaker waits %d, denied %d, fallbacks %d, dead letters %d\n",
			i, s.Attempts, s.BreakerWaits, s.BreakerDenied, s.BreakerFallbacks, s.DeadLettered)
	}

	dl := workers[0].dl
	page, err := dl.List(ctx, "", 5)
	if err != nil {
		return err
	}
	recs := page.Records
	n, _ := dl.Len(ctx)
	fmt.Printf("%d dead letters in the stream; replaying the first %d\n", n, len(recs))
	for _, rec := range recs {
		err := dl.Replay(ctx, rec.ID, func(ctx context.Context, rec retryredis.Record) error { return dep.call(ctx) },
			retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: 10 * time.Millisecond}))
		fmt.Printf("  %s (%s, %d attempts, %s): replayed: %v\n", rec.ID, rec.Reason, rec.Attempts, rec.Message, err)
	}
	// Leave the shared Redis as it was.
	var keys []string
	iter := workers[0].client.Scan(ctx, 0, prefix+"*", 0).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if len(keys) > 0 {
		workers[0].client.Del(ctx, keys...)
	}
	return iter.Err()
}
