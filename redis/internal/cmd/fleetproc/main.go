// Command fleetproc is one process of a fleet, for the tests of package
// redis that run several as OS processes: its workers call a dependency
// over HTTP through a Retrier whose breaker is shared on Redis
// (retry.Breaker{Store: retryredis.NewStore(...)}). Every request carries
// the process's name in the X-Fleet-Proc header, so that the dependency
// can tell the processes apart.
//
// It runs until its standard input closes (the parent stops it, or dies)
// or for -for at most, then prints one JSON line on standard output: its
// attempts, calls, the breaker's changes as it saw them and its Stats.
// Each line it reads on standard input before that makes it print the
// same report of the moment, as one JSON line.
//
//	fleetproc -redis 127.0.0.1:6379 -url http://127.0.0.1:8080/ -name p0
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/steadyhq/retry"
	retryredis "github.com/steadyhq/retry/redis"
)

// Report is what a process prints when it ends.
type Report struct {
	Name     string   `json:"name"`
	Calls    int64    `json:"calls"`    // Retrier.Run calls
	Attempts int64    `json:"attempts"` // requests sent to the dependency
	Changes  []Change `json:"changes"`  // the breaker's changes, in order
	Fallback int64    `json:"fallback"` // Stats.BreakerFallbacks
	Denied   int64    `json:"denied"`   // Stats.BreakerDenied
	Syncs    int64    `json:"syncs"`    // StoreStats.Syncs
	Errors   int64    `json:"errors"`   // StoreStats.Errors
	Granted  int64    `json:"granted"`  // StoreStats.Granted: probes this process ran
	OnFleet  bool     `json:"on_fleet"` // Stats.BreakersOnFleet[""]
}

// Change is a change of the breaker's state seen by this process.
type Change struct {
	From string `json:"from"`
	To   string `json:"to"`
	At   int64  `json:"at"` // unix ns
}

func main() {
	var (
		addr    = flag.String("redis", "127.0.0.1:6379", "Redis address")
		url     = flag.String("url", "", "the dependency's URL")
		name    = flag.String("name", "p", "this process's name, sent in X-Fleet-Proc")
		prefix  = flag.String("prefix", "fleetproc:", "Options.Prefix")
		sync    = flag.Duration("sync", 20*time.Millisecond, "Options.SyncInterval")
		open    = flag.Duration("open", 200*time.Millisecond, "Breaker.OpenTimeout")
		window  = flag.Duration("window", 200*time.Millisecond, "Breaker.Window")
		minReq  = flag.Uint("min", 10, "Breaker.MinRequests")
		probes  = flag.Uint("probes", 1, "Breaker.Probes")
		workers = flag.Int("workers", 4, "concurrent callers")
		pause   = flag.Duration("pause", time.Millisecond, "each worker's pause between calls")
		limit   = flag.Duration("for", 30*time.Second, "the longest this process runs")
	)
	flag.Parse()
	if *url == "" {
		fmt.Fprintln(os.Stderr, "fleetproc: -url is required")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *limit)
	defer cancel()
	asks := make(chan struct{})
	go func() { // report on each line; stop when the parent closes standard input, or dies
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			select {
			case asks <- struct{}{}:
			case <-ctx.Done():
			}
		}
		cancel()
	}()
	rep, err := run(ctx, asks, config{
		addr: *addr, url: *url, name: *name, prefix: *prefix, sync: *sync,
		breaker: retry.Breaker{
			FailureRatio: 0.5, MinRequests: uint32(*minReq), Window: *window,
			OpenTimeout: *open, Probes: uint32(*probes),
			// Refused at once while open, so the workers keep pressing.
			MaxWait: -1,
			// Room for a loaded machine: the probe claims are the fleet's.
			StoreWait: 500 * time.Millisecond,
		},
		workers: *workers, pause: *pause,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetproc:", err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		fmt.Fprintln(os.Stderr, "fleetproc:", err)
		os.Exit(1)
	}
}

type config struct {
	addr, url, name, prefix string
	sync                    time.Duration
	breaker                 retry.Breaker
	workers                 int
	pause                   time.Duration
}

func run(ctx context.Context, asks <-chan struct{}, cfg config) (Report, error) {
	rep := Report{Name: cfg.name}
	c := goredis.NewClient(&goredis.Options{
		Addr: cfg.addr, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
		ContextTimeoutEnabled: true, DialerRetries: 1, MaxRetries: -1,
	})
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		return rep, fmt.Errorf("redis at %s: %w", cfg.addr, err)
	}
	store, err := retryredis.NewStore(c, retryredis.Options{Prefix: cfg.prefix, SyncInterval: cfg.sync, Timeout: time.Second})
	if err != nil {
		return rep, err
	}
	b := cfg.breaker
	b.Store = store
	var mu sync.Mutex
	b.OnChange = func(_, from, to string) {
		mu.Lock()
		rep.Changes = append(rep.Changes, Change{From: from, To: to, At: time.Now().UnixNano()})
		mu.Unlock()
	}
	r := retry.New(
		retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
		retry.WithBreaker(b),
	)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.workers}}
	defer client.CloseIdleConnections()
	var calls, attempts atomic.Int64
	var wg sync.WaitGroup
	for range cfg.workers {
		wg.Go(func() {
			pause := time.NewTicker(cfg.pause)
			defer pause.Stop()
			for ctx.Err() == nil {
				calls.Add(1)
				_ = r.Run(ctx, func(ctx context.Context) error {
					attempts.Add(1)
					return get(ctx, client, cfg.url, cfg.name)
				})
				select {
				case <-pause.C:
				case <-ctx.Done():
				}
			}
		})
	}
	report := func() Report {
		st := r.Stats()
		ss := store.Stats()
		mu.Lock()
		defer mu.Unlock()
		rep.Calls, rep.Attempts = calls.Load(), attempts.Load()
		rep.Fallback, rep.Denied = st.BreakerFallbacks, st.BreakerDenied
		rep.Syncs, rep.Errors, rep.Granted = ss.Syncs, ss.Errors, ss.Granted
		rep.OnFleet = st.BreakersOnFleet[""]
		out := rep
		out.Changes = append([]Change(nil), rep.Changes...)
		return out
	}
	enc := json.NewEncoder(os.Stdout)
	for ctx.Err() == nil {
		select {
		case <-asks:
			if err := enc.Encode(report()); err != nil {
				return rep, err
			}
		case <-ctx.Done():
		}
	}
	wg.Wait()
	return report(), nil
}

var errStatus = errors.New("dependency failed")

// get sends one request to the dependency; a status of 500 or more is a
// failure.
func get(ctx context.Context, client *http.Client, url, name string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return retry.Permanent(err)
	}
	req.Header.Set("X-Fleet-Proc", name)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode >= 500 {
		return fmt.Errorf("%w: %s", errStatus, resp.Status)
	}
	return nil
}
