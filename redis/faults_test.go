package redis_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/steadyhq/retry"
	retryredis "github.com/steadyhq/retry/redis"
)

// The settings of the fault harness: every component's round trips are
// bounded by faultTimeout, processes sync every faultSync, and slack is
// the scheduling delay allowed on top of a bound (a loaded 2-core machine
// running the race detector, where a healthy round trip can take tens of
// milliseconds). A call held by the fault itself waits far longer than
// faultTimeout plus slack: the delayed replies come 5 faultTimeouts late,
// CLIENT PAUSE holds commands for faultFor and more, a partition until
// the client's 1 s ReadTimeout.
const (
	faultTimeout = 100 * time.Millisecond
	faultSync    = 50 * time.Millisecond
	faultSlack   = 100 * time.Millisecond
	faultFor     = 400 * time.Millisecond // how long a fault lasts
)

// fault is one of the faults Redis brings, injected and healed on a
// redis-server behind a proxy. answers says whether Redis answers
// throughout (it lost data), so that no component should leave it.
type fault struct {
	name    string
	answers bool
	// some: Redis answers some round trips within Timeout during the
	// fault, so that a component may end it on the fleet's state.
	some   bool
	inject func(t *testing.T, f *faulty)
	heal   func(t *testing.T, f *faulty) // returns once Redis answers
}

// faulty is a redis-server, a proxy in front of it through which the
// components reach it, and a client that reaches it directly; or a
// 3-master Cluster (masters) and a cluster client of it.
type faulty struct {
	s       *server
	p       *proxy
	admin   *goredis.Client
	masters []*server
	cc      *goredis.ClusterClient
	busy    func() // stops the clients that saturate Redis
}

func newFaulty(t *testing.T) *faulty {
	s := startServer(t)
	f := &faulty{s: s, p: startProxy(t, s.Addr()), admin: s.Client()}
	t.Cleanup(f.unsaturate)
	return f
}

func newClusterFaulty(t *testing.T) *faulty {
	cc, masters := startClusterServers(t)
	return &faulty{masters: masters, cc: cc}
}

// client is a process's client: through the proxy, or of the Cluster
// (short timeouts, no retries, ContextTimeoutEnabled).
func (f *faulty) client(t *testing.T) goredis.UniversalClient {
	if f.cc != nil {
		var addrs []string
		for _, m := range f.masters {
			addrs = append(addrs, m.Addr())
		}
		c := goredis.NewClusterClient(&goredis.ClusterOptions{
			Addrs:                 addrs,
			DialTimeout:           faultTimeout,
			ReadTimeout:           faultTimeout,
			WriteTimeout:          faultTimeout,
			MaxRetries:            -1,
			DialerRetries:         1,
			ContextTimeoutEnabled: true,
		})
		t.Cleanup(func() { c.Close() })
		// Load the slots, dial each master and load the command table (a
		// first keyed command fetches it with COMMAND, a large reply)
		// before the members use it: a first command on a cold client can
		// take longer than the harness's timeouts, which is not the faults
		// under test.
		waitFor(t, 2*time.Second, "the cluster client ready", func() bool {
			ctx := context.Background()
			if err := c.Exists(ctx, "warm").Err(); err != nil {
				return false
			}
			return c.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error {
				return m.Ping(ctx).Err()
			}) == nil
		})
		return c
	}
	// Through the proxy: a client that does not cut its commands at the
	// context's deadline (no ContextTimeoutEnabled, a ReadTimeout of 1 s),
	// so that only the components' own bound holds the calls to Timeout,
	// whatever the client's settings.
	c := goredis.NewClient(&goredis.Options{
		Addr:         f.p.Addr(),
		DialTimeout:  time.Second,
		ReadTimeout:  time.Second,
		WriteTimeout: time.Second,
		MaxRetries:   -1,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

var faults = []fault{
	{
		name:   "killed and restarted empty",
		inject: func(t *testing.T, f *faulty) { f.s.Stop() },
		heal:   func(t *testing.T, f *faulty) { f.s.Start() },
	},
	{
		name:    "FLUSHALL",
		answers: true,
		inject: func(t *testing.T, f *faulty) {
			if err := f.admin.FlushAll(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
		},
		heal: func(*testing.T, *faulty) {},
	},
	{
		// Every key's TTL ends: what a quiet spell longer than StateTTL,
		// or a lease's or a window's term, does.
		name:    "keys expire",
		answers: true,
		inject: func(t *testing.T, f *faulty) {
			ctx := context.Background()
			// A process's sync in flight may write a key again (with
			// the state it sent): it expires too.
			waitFor(t, time.Second, "the keys to expire", func() bool {
				keys, err := f.admin.Keys(ctx, "*").Result()
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range keys {
					f.admin.PExpire(ctx, k, time.Millisecond)
				}
				return len(keys) == 0
			})
		},
		heal: func(*testing.T, *faulty) {},
	},
	{
		// Redis blocks every client's commands for a while; CLIENT
		// UNPAUSE is blocked too, so the pause runs its term.
		name: "CLIENT PAUSE",
		inject: func(t *testing.T, f *faulty) {
			if err := f.admin.Do(context.Background(), "CLIENT", "PAUSE", (faultFor + 100*time.Millisecond).Milliseconds(), "ALL").Err(); err != nil {
				t.Fatal(err)
			}
		},
		heal: func(t *testing.T, f *faulty) {
			c := f.s.ClientWith(func(o *goredis.Options) { o.ReadTimeout = 2 * time.Second })
			if err := c.Ping(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
		},
	},
	{
		name:   "replies delayed",
		inject: func(t *testing.T, f *faulty) { f.p.Delay(5 * faultTimeout) },
		heal:   func(t *testing.T, f *faulty) { f.p.Delay(0) },
	},
	{
		name:   "replies dropped (partition)",
		inject: func(t *testing.T, f *faulty) { f.p.Partition() },
		heal:   func(t *testing.T, f *faulty) { f.p.Heal() },
	},
	{
		// Redis at its command limit: other clients keep it busy, each of
		// 16 with a 50 ms command back to back (DEBUG SLEEP, which holds
		// the server as a long script does, without burning a core of a
		// shared machine), so that every command waits in line for up to
		// 800 ms and is served in the end; one served after a single
		// command of theirs may make it within Timeout.
		name:   "Redis at its command limit",
		some:   true,
		inject: func(t *testing.T, f *faulty) { f.saturate(t) },
		heal:   func(t *testing.T, f *faulty) { f.unsaturate() },
	},
}

// saturate starts 16 clients that keep Redis busy until unsaturate.
func (f *faulty) saturate(t *testing.T) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 16 {
		c := f.s.ClientWith(func(o *goredis.Options) { o.ReadTimeout = 5 * time.Second })
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				c.Do(context.Background(), "DEBUG", "SLEEP", "0.05")
			}
		})
	}
	f.busy = func() {
		close(stop)
		wg.Wait()
	}
	// The busy clients hold Redis before the fault's clock starts.
	waitFor(t, time.Second, "Redis saturated", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		return f.admin.Ping(ctx).Err() != nil
	})
}

// unsaturate stops the busy clients and returns once their last commands
// have run.
func (f *faulty) unsaturate() {
	if f.busy != nil {
		f.busy()
		f.busy = nil
	}
}

// clusterFaults are the faults of a 3-master Cluster (no replicas).
var clusterFaults = []fault{
	{
		name: "Cluster: every master killed and restarted empty",
		inject: func(t *testing.T, f *faulty) {
			for _, m := range f.masters {
				m.Stop()
			}
		},
		heal: func(t *testing.T, f *faulty) {
			var addrs []string
			for _, m := range f.masters {
				m.Start()
				addrs = append(addrs, m.Addr())
			}
			clusterReady(t, addrs)
		},
	},
	{
		name:    "Cluster: FLUSHALL on every master",
		answers: true,
		inject: func(t *testing.T, f *faulty) {
			err := f.cc.ForEachMaster(context.Background(), func(ctx context.Context, c *goredis.Client) error {
				return c.FlushAll(ctx).Err()
			})
			if err != nil {
				t.Fatal(err)
			}
		},
		heal: func(*testing.T, *faulty) {},
	},
	{
		// The slots of every key the components use move to another
		// master while the processes call and sync: for a while each is
		// migrating (its keys answered by the old master or, once moved,
		// through ASK by the new), then it is the new master's. Redis
		// answers throughout.
		name:    "Cluster: slots migrated to another master mid-sync",
		answers: true,
		inject: func(t *testing.T, f *faulty) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				f.migrate(t, "{breaker:}", "{breaker:a}", "{breaker:b}", "{breakers}", "{limit:}", "{limit:a}", "{limit:b}",
					"{budget:}", "{budget:a}", "{budget:b}", "{deadletters:faults}")
			}()
			f.busy = func() { <-done }
		},
		heal: func(t *testing.T, f *faulty) { f.unsaturate() },
	},
}

// migrate moves the slot of each hash tag to the next master, the
// official way (IMPORTING on the new master, MIGRATING on the old, MIGRATE
// of the slot's keys in one command, then the slot's new owner told to
// every master), pausing 50 ms in each step so that the processes' round
// trips meet every one.
func (f *faulty) migrate(t *testing.T, tags ...string) {
	ctx := context.Background()
	ids := make([]string, len(f.masters))
	cs := make([]*goredis.Client, len(f.masters))
	for i, m := range f.masters {
		cs[i] = m.Client()
		id, err := cs[i].Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			t.Error(err)
			return
		}
		ids[i] = id
	}
	owner := func(slot int64) int {
		shards, err := cs[0].ClusterShards(ctx).Result()
		if err != nil {
			t.Error(err)
			return -1
		}
		for _, sh := range shards {
			for _, r := range sh.Slots {
				if r.Start <= slot && slot <= r.End {
					for _, n := range sh.Nodes {
						if i := slices.Index(ids, n.ID); i >= 0 && n.Role == "master" {
							return i
						}
					}
				}
			}
		}
		t.Errorf("no master owns slot %d", slot)
		return -1
	}
	moved := map[int64]bool{}
	for _, tag := range tags {
		slot, err := cs[0].ClusterKeySlot(ctx, tag).Result()
		if err != nil {
			t.Error(err)
			return
		}
		if moved[slot] {
			continue
		}
		moved[slot] = true
		from := owner(slot)
		if from < 0 {
			return
		}
		to := (from + 1) % len(cs)
		steps := [][]any{
			{to, "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[from]},
			{from, "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to]},
		}
		for _, st := range steps {
			if err := cs[st[0].(int)].Do(ctx, st[1:]...).Err(); err != nil {
				t.Errorf("%v: %v", st[1:], err)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		keys, err := cs[from].ClusterGetKeysInSlot(ctx, int(slot), 10_000).Result()
		if err != nil {
			t.Error(err)
			return
		}
		t.Logf("slot %d (%s): %d keys from master %d to %d", slot, tag, len(keys), from, to)
		if len(keys) > 0 {
			host, port, _ := strings.Cut(f.masters[to].Addr(), ":")
			args := append([]any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}, anys(keys)...)
			if err := cs[from].Do(ctx, args...).Err(); err != nil {
				t.Errorf("MIGRATE %d keys of slot %d: %v", len(keys), slot, err)
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
		for _, i := range []int{to, from, 3 - to - from} {
			if err := cs[i].Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", ids[to]).Err(); err != nil {
				t.Errorf("SETSLOT %d NODE on master %d: %v", slot, i, err)
				return
			}
		}
	}
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// member is one process's component under test, used as a user would:
// through a Retrier.
type member struct {
	call     func(ctx context.Context, key string) error
	onFleet  func() bool  // the component runs on the fleet's state
	fellBack func() int64 // decisions made without Redis
	errors   func() int64 // round trips that failed, as Stats count them; nil for dead letters
	logs     *records     // nil for a component without Options.Logger
	fail     atomic.Bool  // the breaker's calls fail
	// works checks, after the fault, that the fleet's state is the
	// component's again: a fleet-wide effect no process has alone.
	works func(t *testing.T, ms []*member, keys []string)
	// prepare, when set, brings the fleet's state to where a fault
	// hurts, before the fault.
	prepare func(t *testing.T, ms []*member, keys []string)
}

// breakerOpen is the harness breakers' OpenTimeout.
const breakerOpen = 150 * time.Millisecond

// tripFleet has each process fail 12 calls on each key, 24 of the
// breaker's 20 MinRequests between them, and waits until every process
// is refused by the fleet's open breaker: no process trips alone.
func tripFleet(t *testing.T, ms []*member, keys []string) {
	t.Helper()
	time.Sleep(100*time.Millisecond + 2*faultSync) // the window's successes age out
	for _, m := range ms {
		m.fail.Store(true)
	}
	for range 12 {
		for _, m := range ms {
			for _, k := range keys {
				m.call(t.Context(), k)
			}
		}
	}
	waitFor(t, 2*faultSync+faultSlack+100*time.Millisecond, "every process refused by the fleet's open breaker", func() bool {
		for _, m := range ms {
			for _, k := range keys {
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Millisecond)
				err := m.call(ctx, k)
				cancel()
				var re *retry.Error
				if !errors.As(err, &re) || re.Reason != retry.ReasonBreakerOpen {
					return false
				}
			}
		}
		return true
	})
}

// component builds a member on c.
type component struct {
	name  string
	build func(t *testing.T, c goredis.UniversalClient, prefix string, perKey bool) *member
}

func harnessOptions(prefix string, logs *records) retryredis.Options {
	return retryredis.Options{Prefix: prefix, Timeout: faultTimeout, SyncInterval: faultSync, Logger: slog.New(logs)}
}

var succeed = func(context.Context) error { return nil }

var components = []component{
	{name: "breaker", build: func(t *testing.T, c goredis.UniversalClient, prefix string, perKey bool) *member {
		logs := &records{}
		store, err := retryredis.NewStore(c, harnessOptions(prefix, logs))
		if err != nil {
			t.Fatal(err)
		}
		r := retry.New(
			retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
			retry.WithBreaker(retry.Breaker{Store: store, PerKey: perKey, MinRequests: 20, Window: 100 * time.Millisecond, OpenTimeout: breakerOpen, StoreWait: faultTimeout}),
			retry.WithBudget(retry.Budget{Off: true}),
		)
		m := &member{logs: logs}
		m.call = func(ctx context.Context, key string) error {
			return retry.Run(ctx, func(context.Context) error {
				if m.fail.Load() {
					return errDown
				}
				return nil
			}, r, retry.WithKey(key))
		}
		m.onFleet = func() bool {
			st := r.Stats()
			if !store.Stats().OnFleet {
				return false
			}
			for _, on := range st.BreakersOnFleet {
				if !on {
					return false
				}
			}
			return len(st.BreakersOnFleet) > 0
		}
		m.fellBack = func() int64 { return r.Stats().BreakerFallbacks }
		m.errors = func() int64 { return store.Stats().Errors }
		// The fleet trips on its summed counts: each process fails 12
		// calls of 20 MinRequests, and every process is refused after.
		m.works = func(t *testing.T, ms []*member, keys []string) {
			if m == ms[0] {
				tripFleet(t, ms, keys)
			}
		}
		// A breaker that opened and closed again before the fault: its
		// generation is past the one a store that lost it answers with.
		m.prepare = func(t *testing.T, ms []*member, keys []string) {
			if m != ms[0] {
				return
			}
			tripFleet(t, ms, keys)
			for _, m := range ms {
				m.fail.Store(false)
			}
			waitFor(t, breakerOpen+time.Second, "the fleet's breaker to close again", func() bool {
				for _, m := range ms {
					for _, k := range keys {
						// Time for a probe's claim: a shorter deadline
						// would have the local breaker stand in.
						ctx, cancel := context.WithTimeout(t.Context(), 10*faultTimeout)
						err := m.call(ctx, k)
						cancel()
						if err != nil {
							return false
						}
					}
				}
				return true
			})
		}
		return m
	}},
	{name: "limiter", build: func(t *testing.T, c goredis.UniversalClient, prefix string, perKey bool) *member {
		logs := &records{}
		l, err := retryredis.NewLimiter(c, 5000, 50, perKey, harnessOptions(prefix, logs))
		if err != nil {
			t.Fatal(err)
		}
		r := retry.New(
			retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
			retry.WithRateLimit(retry.RateLimit{Shared: l}),
			retry.WithBudget(retry.Budget{Off: true}),
		)
		m := &member{logs: logs}
		m.call = func(ctx context.Context, key string) error {
			return retry.Run(ctx, succeed, r, retry.WithKey(key))
		}
		m.onFleet = func() bool { return l.Stats().OnFleet }
		m.fellBack = func() int64 { return l.Stats().Fallbacks }
		m.errors = func() int64 { return l.Stats().Errors }
		// Tokens come from the fleet's bucket again: leases grow.
		m.works = func(t *testing.T, ms []*member, keys []string) {
			before := l.Stats().Leases
			waitFor(t, 2*faultSync+faultSlack, "a lease from the fleet's bucket", func() bool {
				for _, k := range keys {
					m.call(t.Context(), k)
				}
				return l.Stats().Leases > before
			})
		}
		return m
	}},
	{name: "budget", build: func(t *testing.T, c goredis.UniversalClient, prefix string, perKey bool) *member {
		logs := &records{}
		b, err := retryredis.NewBudget(c, retry.Budget{PerKey: perKey, Tokens: 10000}, harnessOptions(prefix, logs))
		if err != nil {
			t.Fatal(err)
		}
		r := retry.New(
			retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond, MaxInterval: time.Millisecond}),
			retry.WithBudget(retry.Budget{Shared: b}),
		)
		m := &member{logs: logs}
		m.call = func(ctx context.Context, key string) error {
			return retry.Run(ctx, flaky(), r, retry.WithKey(key))
		}
		m.onFleet = func() bool { return b.Stats().OnFleet }
		m.fellBack = func() int64 { return b.Stats().Fallbacks }
		m.errors = func() int64 { return b.Stats().Errors }
		// Retries are granted by the fleet's counters again.
		m.works = func(t *testing.T, ms []*member, keys []string) {
			before := b.Stats().Granted
			for _, k := range keys {
				m.call(t.Context(), k)
			}
			if st := b.Stats(); st.Granted <= before {
				t.Errorf("no retry granted from Redis after the fault: %+v", st)
			}
		}
		return m
	}},
	{name: "dead letters", build: func(t *testing.T, c goredis.UniversalClient, prefix string, perKey bool) *member {
		dl, err := retryredis.NewDeadLetters(c, "faults", 0, retryredis.Options{Prefix: prefix, Timeout: faultTimeout})
		if err != nil {
			t.Fatal(err)
		}
		var stored atomic.Bool
		r := retry.New(
			retry.WithPolicy(retry.Policy{MaxAttempts: 1, OnExhaustion: retry.ExhaustDeadLetter}),
			retry.WithDeadLetter(retry.DeadLetters{Sink: func(ctx context.Context, ev retry.Event) error {
				err := dl.Sink(ctx, ev)
				stored.Store(err == nil)
				return err
			}}),
		)
		m := &member{}
		m.call = func(ctx context.Context, key string) error {
			err := retry.Run(ctx, func(context.Context) error { return errDown }, r, retry.WithKey(key))
			// The sink's error is joined into the call's.
			if !stored.Load() && (err == nil || !strings.Contains(err.Error(), "redis: XADD")) {
				t.Errorf("a call whose record was not stored: %v, want the sink's error in it", err)
			}
			return err
		}
		m.onFleet = stored.Load
		m.fellBack = func() int64 { return r.Stats().DeadLetterFailed }
		// A record written now is listed.
		m.works = func(t *testing.T, ms []*member, keys []string) {
			m.call(t.Context(), "after-the-fault")
			p, err := dl.List(t.Context(), "", 100_000)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(p.Records); n == 0 || p.Records[n-1].Key != "after-the-fault" {
				t.Errorf("the record written after the fault is not the stream's last: %d records", n)
			}
		}
		return m
	}},
}

// TestFaults is the fault harness: for each fault Redis brings and each
// component, per key and not, two processes' members (each with its own
// client, through a proxy) call steadily while the fault lasts and after.
//
//   - No call waits on Redis longer than the component's bound (Timeout,
//     or Breaker.StoreWait) plus scheduling slack, while the fault lasts.
//   - A fault in which Redis does not answer moves each component to its
//     fallback, counted (fellBack) and said (onFleet false; a Warn record,
//     at most one a second); one in which Redis answers but lost the data
//     moves none.
//   - Within SyncInterval plus Timeout of Redis answering again (two
//     intervals here, plus slack),
//     every process is back on the fleet's state and stays there (nothing
//     more counted as fallback), the Logger says so at level Info, and
//     the fleet-wide effect works again (works).
func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("the fault harness runs in the full suite (make test)")
	}
	run := func(fl fault, env func(t *testing.T) *faulty) {
		for _, comp := range components {
			for _, perKey := range []bool{false, true} {
				if comp.name == "dead letters" && perKey {
					continue // a stream has no keys: one case
				}
				name := fmt.Sprintf("%s/%s/perKey=%v", fl.name, comp.name, perKey)
				t.Run(name, func(t *testing.T) { runFault(t, env(t), fl, comp, perKey) })
			}
		}
	}
	for _, fl := range faults {
		run(fl, newFaulty)
	}
	// One Cluster for all the cases of a fault (each its own prefix): a
	// Cluster takes seconds to start.
	for _, fl := range clusterFaults {
		t.Run(fl.name, func(t *testing.T) {
			f := newClusterFaulty(t)
			run(fl, func(*testing.T) *faulty { return f })
		})
	}
}

func runFault(t *testing.T, f *faulty, fl fault, comp component, perKey bool) {
	keys := []string{"a"}
	if perKey {
		keys = []string{"a", "b"}
	}
	prefix := strings.NewReplacer("/", ":", " ", "-").Replace(t.Name()) + ":"
	ms := []*member{comp.build(t, f.client(t), prefix, perKey), comp.build(t, f.client(t), prefix, perKey)}

	// drive has every member, each in its own goroutine as each process
	// runs on its own, call on every key in turn until stop, and returns
	// the longest call. (Members called in turn by one goroutine would each
	// wait on the others' calls held to Timeout, and ask Redis less often
	// than onFleet's two intervals and a Timeout: a fault would pass for
	// the quiet of a key nobody calls.)
	drive := func(stop <-chan struct{}) time.Duration {
		var longest atomic.Int64
		var wg sync.WaitGroup
		for _, m := range ms {
			wg.Go(func() {
				for {
					for _, k := range keys {
						start := time.Now()
						m.call(context.Background(), k)
						for took := int64(time.Since(start)); ; {
							old := longest.Load()
							if took <= old || longest.CompareAndSwap(old, took) {
								break
							}
						}
					}
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
				}
			})
		}
		wg.Wait()
		return time.Duration(longest.Load())
	}
	timed := func(d time.Duration) time.Duration {
		stop := make(chan struct{})
		time.AfterFunc(d, func() { close(stop) })
		return drive(stop)
	}

	if ms[0].prepare != nil {
		ms[0].prepare(t, ms, keys)
	}
	timed(2 * faultSync) // steady on Redis: leases and syncs under way
	for i, m := range ms {
		if !m.onFleet() || m.fellBack() != 0 {
			t.Fatalf("process %d before the fault: onFleet %v, %d fallbacks", i, m.onFleet(), m.fellBack())
		}
	}

	fl.inject(t, f)
	// What each member says of the fleet's state is read at the end of the
	// fault while the members still call, not after drive returns: drive
	// waits for the calls in flight, a round trip of up to Timeout each,
	// and a member whose last failure came just before that wait would
	// have passed the two intervals and a Timeout that OnFleet's rule
	// allows, as if it had stopped asking.
	onFleetAtEnd := make([]bool, len(ms))
	end := make(chan struct{})
	time.AfterFunc(faultFor, func() {
		for i, m := range ms {
			onFleetAtEnd[i] = m.onFleet()
		}
		close(end)
	})
	longest := drive(end)
	bound := faultTimeout + faultSlack
	if comp.name == "budget" {
		bound += time.Millisecond // the retry's backoff
	}
	t.Logf("the longest call during the fault took %v (bound %v)", longest.Round(time.Millisecond), bound)
	if longest > bound {
		t.Errorf("a call waited %v during the fault, want at most %v (the timeout %v and slack)", longest, bound, faultTimeout)
	}
	for i, m := range ms {
		switch n := m.fellBack(); {
		case fl.answers && n != 0:
			t.Errorf("process %d: %d decisions on the fallback with Redis answering", i, n)
		case !fl.answers && n == 0:
			t.Errorf("process %d: no decision on the fallback with Redis away", i)
		case !fl.answers && !fl.some && onFleetAtEnd[i]:
			t.Errorf("process %d: says it runs on the fleet's state with Redis away", i)
		}
		// Errors are counted; after one, Redis is asked again once an
		// interval for each key: the fault lasts faultFor/faultSync
		// intervals, and a request may hang for Timeout before it fails.
		if m.errors != nil {
			most := (int64(faultFor/faultSync) + 2) * int64(len(keys))
			switch n := m.errors(); {
			case fl.answers && n != 0:
				t.Errorf("process %d: %d Redis errors counted with Redis answering", i, n)
			case !fl.answers && (n == 0 || n > most):
				t.Errorf("process %d: %d Redis errors counted in %v, want 1 to %d (one an interval a key)", i, n, faultFor, most)
			}
		}
		if m.logs == nil {
			continue
		}
		switch warn, _ := m.logs.counts(); {
		case fl.answers && warn != 0:
			t.Errorf("process %d: %d Warn records with Redis answering", i, warn)
		case !fl.answers && (warn == 0 || warn > 1+int(faultFor/time.Second)):
			t.Errorf("process %d: %d Warn records in %v, want 1 to %d (one a second)", i, warn, faultFor, 1+int(faultFor/time.Second))
		}
	}

	fl.heal(t, f)
	healed := time.Now()
	var back time.Duration
	stop := make(chan struct{})
	done := make(chan time.Duration)
	go func() { done <- drive(stop) }()
	waitFor(t, time.Second, "every process back on the fleet's state", func() bool {
		for _, m := range ms {
			if !m.onFleet() {
				return false
			}
		}
		back = time.Since(healed)
		return true
	})
	// A round trip sent during the fault may still end, failing, up to
	// Timeout after it (at the command limit, one served in time may have
	// put a process back on the fleet's state first): from the bound on,
	// every process is back and stays there for two intervals.
	time.Sleep(time.Until(healed.Add(faultSync + faultTimeout + faultSlack)))
	fell := make([]int64, len(ms))
	for i, m := range ms {
		fell[i] = m.fellBack()
		if !m.onFleet() {
			t.Errorf("process %d: not on the fleet's state %v after Redis answered", i, faultSync+faultTimeout+faultSlack)
		}
	}
	time.Sleep(2 * faultSync)
	close(stop)
	<-done
	t.Logf("back on the fleet's state %v after Redis answered (bound %v)", back.Round(time.Millisecond), faultSync+faultTimeout+faultSlack)
	if back > faultSync+faultTimeout+faultSlack {
		t.Errorf("back on the fleet's state %v after Redis answered, want within SyncInterval plus Timeout (%v) and slack", back, faultSync+faultTimeout)
	}
	for i, m := range ms {
		if n := m.fellBack() - fell[i]; n != 0 {
			t.Errorf("process %d: %d more decisions on the fallback after it was back", i, n)
		}
		if m.logs != nil && !fl.answers {
			if _, info := m.logs.counts(); info == 0 {
				t.Errorf("process %d: no Info record when Redis answered again: %q", i, m.logs.lines())
			}
		}
	}
	for _, m := range ms {
		m.works(t, ms, keys)
	}
	if t.Failed() {
		for i, m := range ms {
			if m.logs != nil {
				t.Logf("process %d log: %s", i, strings.Join(m.logs.lines(), "; "))
			}
		}
	}
}
