// Command fleet runs three workers, each with its own Redis client as three
// processes would have, against one flaky dependency: they share one
// circuit breaker, one rate limit and one retry budget on Redis, and their
// failed work goes to one dead-letter stream, which it then replays.
//
// The workers offer 150, 75 and 75 calls a second, more than the fleet's
// limit of 200 attempts a second, so the shared limiter makes calls wait
// and refuses those whose wait cannot fit their 200 ms. The dependency fails
// one attempt in ten, and every attempt in the middle third of the run: the
// shared breaker opens for the whole fleet, its probes fail and reopen it
// until the dependency is back, and then it closes for all. The output
// gives each worker's counters from retry.Stats and the redis module's
// LimiterStats, BudgetStats and StoreStats, and when each worker saw the
// shared breaker change state.
//
//	go run ./redis/example/fleet -addr 127.0.0.1:6379
//
// Without a Redis at -addr it prints one line and exits with status 1.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/steadyhq/retry"
	retryredis "github.com/steadyhq/retry/redis"
)

// The scenario. The breaker trips on half the attempts failing, once 20
// are counted in its window, and stays open for openFor; the processes
// sync with Redis every syncEvery, so that each sees a change within two.
const (
	limit     = 200 // fleet-wide attempts per second
	callTime  = 200 * time.Millisecond
	openFor   = 250 * time.Millisecond
	window    = 500 * time.Millisecond
	syncEvery = 20 * time.Millisecond
)

// rates are the calls per second each worker offers.
var rates = []int{150, 75, 75}

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "Redis address")
	dur := flag.Duration("for", 3*time.Second, "how long the workers run")
	flag.Parse()
	// go-redis logs each failed dial; the error returned says it once.
	goredis.SetLogger(quiet{})
	if err := run(os.Stdout, *addr, *dur); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

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
	r       *retry.Retrier
	client  *goredis.Client
	store   *retryredis.Store
	limiter *retryredis.Limiter
	budget  *retryredis.Budget
	dl      *retryredis.DeadLetters

	offered, ok atomic.Int64
	mu          sync.Mutex
	stopped     map[retry.Reason]int // calls that failed, by reason
	seen        []string             // the shared breaker's changes as this worker saw them
}

func run(out io.Writer, addr string, dur time.Duration) error {
	ctx := context.Background()
	probe := goredis.NewClient(clientOptions(addr))
	err := probe.Ping(ctx).Err()
	probe.Close()
	if err != nil {
		return fmt.Errorf("no Redis at %s (%v): start one (redis-server --port 6379) or give its address with -addr", addr, err)
	}

	prefix := fmt.Sprintf("fleet-example:%d:", time.Now().UnixNano())
	opts := retryredis.Options{Prefix: prefix, SyncInterval: syncEvery}
	var start time.Time // set before the first call
	workers := make([]*worker, len(rates))
	for i := range workers {
		w := &worker{client: goredis.NewClient(clientOptions(addr)), stopped: map[retry.Reason]int{}}
		defer w.client.Close()
		workers[i] = w
		if w.store, err = retryredis.NewStore(w.client, opts); err != nil {
			return err
		}
		if w.limiter, err = retryredis.NewLimiter(w.client, limit, 20, false, opts); err != nil {
			return err
		}
		if w.budget, err = retryredis.NewBudget(w.client, retry.Budget{}, opts); err != nil {
			return err
		}
		if w.dl, err = retryredis.NewDeadLetters(w.client, "dead-letters", 1000, opts); err != nil {
			return err
		}
		w.r = retry.New(
			retry.WithPolicy(retry.Policy{MaxAttempts: 3, InitialInterval: 20 * time.Millisecond, OnExhaustion: retry.ExhaustDeadLetter}),
			retry.WithBreaker(retry.Breaker{
				Store: w.store, MinRequests: 20, FailureRatio: 0.5, Window: window, OpenTimeout: openFor,
				OnChange: func(_, _, to string) {
					w.mu.Lock()
					w.seen = append(w.seen, fmt.Sprintf("%s %.2fs", to, time.Since(start).Seconds()))
					w.mu.Unlock()
				},
			}),
			retry.WithRateLimit(retry.RateLimit{Shared: w.limiter}),
			retry.WithBudget(retry.Budget{Shared: w.budget}),
			retry.WithDeadLetter(retry.DeadLetters{Sink: w.dl.Sink}),
			retry.WithKey("dependency"),
		)
		if err := w.r.Err(); err != nil {
			return err
		}
	}

	fmt.Fprintf(out, "%d workers offer %s calls/s for %v, each call allowed %v; on Redis they share\n",
		len(rates), joinInts(rates), dur, callTime)
	fmt.Fprintf(out, "a limit of %d attempts/s, a retry budget and a breaker that opens for %v on 50%% failures\n", limit, openFor)
	fmt.Fprintf(out, "the dependency fails 1 attempt in 10, and all from %.2fs to %.2fs\n\n", (dur / 3).Seconds(), (2 * dur / 3).Seconds())

	dep := &dependency{}
	start = time.Now()
	time.AfterFunc(dur/3, func() { dep.down.Store(true) })
	time.AfterFunc(2*dur/3, func() { dep.down.Store(false) })
	var calls sync.WaitGroup
	var arrivals sync.WaitGroup
	for i, w := range workers {
		arrivals.Go(func() {
			tick := time.NewTicker(time.Second / time.Duration(rates[i]))
			defer tick.Stop()
			for range tick.C {
				if time.Since(start) >= dur {
					return
				}
				w.offered.Add(1)
				calls.Go(func() { w.call(dep) })
			}
		})
	}
	arrivals.Wait()
	calls.Wait()
	elapsed := time.Since(start)

	var offered, ok int64
	stopped := map[retry.Reason]int{}
	for _, w := range workers {
		offered += w.offered.Load()
		ok += w.ok.Load()
		for r, n := range w.stopped {
			stopped[r] += n
		}
	}
	fmt.Fprintf(out, "%d calls, %d succeeded, %d stopped: %s\n", offered, ok, offered-ok, reasons(stopped))
	fmt.Fprintf(out, "the dependency saw %d attempts, %.0f/s on average; the fleet's limit is %d/s\n\n",
		dep.calls.Load(), float64(dep.calls.Load())/elapsed.Seconds(), limit)
	for i, w := range workers {
		s, ls, bs := w.r.Stats(), w.limiter.Stats(), w.budget.Stats()
		fmt.Fprintf(out, "worker %d: %d calls, %d attempts, %d dead letters; limiter: %d tokens leased, %d refused; budget: %d retries granted, %d refused\n",
			i, w.offered.Load(), s.Attempts, s.DeadLettered, ls.Allowed, ls.Denied, bs.Granted, bs.Denied)
		fmt.Fprintf(out, "  breaker: %d calls waited, %d refused; seen %s\n", s.BreakerWaits, s.BreakerDenied, strings.Join(w.seen, ", "))
	}

	dl := workers[0].dl
	n, err := dl.Len(ctx)
	if err != nil {
		return err
	}
	page, err := dl.List(ctx, "", 3)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n%d dead letters in the stream; replaying the first %d\n", n, len(page.Records))
	for _, rec := range page.Records {
		err := dl.Replay(ctx, rec.ID, func(ctx context.Context, rec retryredis.Record) error { return dep.call(ctx) },
			retry.WithPolicy(retry.Policy{MaxAttempts: 5, InitialInterval: 10 * time.Millisecond}))
		res := "ok"
		if err != nil {
			res = err.Error()
		}
		fmt.Fprintf(out, "  %s (%s after %s: %s): replayed: %s\n", rec.ID, rec.Reason, plural(rec.Attempts, "attempt"), rec.Message, res)
	}
	// Leave the shared Redis as it was.
	var keys []string
	c := workers[0].client
	iter := c.Scan(ctx, 0, prefix+"*", 0).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if len(keys) > 0 {
		c.Del(ctx, keys...)
	}
	return iter.Err()
}

// call runs one call of w with its own deadline and counts its outcome.
func (w *worker) call(dep *dependency) {
	ctx, cancel := context.WithTimeout(context.Background(), callTime)
	defer cancel()
	err := w.r.Run(ctx, dep.call)
	if err == nil {
		w.ok.Add(1)
		return
	}
	var re *retry.Error
	if errors.As(err, &re) {
		w.mu.Lock()
		w.stopped[re.Reason]++
		w.mu.Unlock()
	}
}

// clientOptions are a client's, with timeouts short enough that a Redis
// away is told at once, and the components' own schedule for asking again.
func clientOptions(addr string) *goredis.Options {
	return &goredis.Options{
		Addr: addr, DialTimeout: 100 * time.Millisecond,
		ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond,
		ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1,
	}
}

// reasons says how many calls stopped for each reason, most first.
func reasons(stopped map[retry.Reason]int) string {
	says := map[retry.Reason]string{
		retry.ReasonRateLimited: "by the limiter",
		retry.ReasonBreakerOpen: "by the breaker",
		retry.ReasonBudget:      "by the budget",
		retry.ReasonDeadline:    "with no time left for a retry",
		retry.ReasonCanceled:    "out of time while waiting",
		retry.ReasonExhausted:   "out of attempts",
	}
	rs := slices.Collect(maps.Keys(stopped))
	slices.SortFunc(rs, func(a, b retry.Reason) int {
		return cmp.Or(stopped[b]-stopped[a], strings.Compare(string(a), string(b)))
	})
	var parts []string
	for _, r := range rs {
		parts = append(parts, strings.TrimSpace(fmt.Sprintf("%d %s (%s)", stopped[r], says[r], r)))
	}
	return strings.Join(parts, ", ")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}
