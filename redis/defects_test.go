package redis_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/steadyhq/retry"
	retryredis "github.com/steadyhq/retry/redis"
)

// TestBreakerStateExpires: the smallest way a store loses a breaker's
// state, with no fault at all: two Retrier trip the fleet, it heals, they
// stay quiet past StateTTL, and call again. Both are back on the fleet's
// state at once: no decision falls back to the process's own breaker, and
// the fleet still trips on its summed counts.
func TestBreakerStateExpires(t *testing.T) {
	s := startServer(t)
	ms := make([]*member, 2)
	for i := range ms {
		// Round trips bounded by 1 s, not faultTimeout: the fault here is
		// the expiry, and a loaded machine's stall must not pass for a
		// slow Redis, which the process would rightly decide without.
		store, err := retryredis.NewStore(s.Client(), retryredis.Options{Timeout: time.Second, SyncInterval: faultSync, StateTTL: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		m := &member{}
		r := retry.New(
			retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
			retry.WithBreaker(retry.Breaker{Store: store, MinRequests: 20, Window: 100 * time.Millisecond, OpenTimeout: breakerOpen, StoreWait: time.Second}),
			retry.WithBudget(retry.Budget{Off: true}),
		)
		m.call = func(ctx context.Context, key string) error {
			return r.Run(ctx, func(context.Context) error {
				if m.fail.Load() {
					return errDown
				}
				return nil
			})
		}
		m.onFleet = func() bool { return r.Stats().BreakersOnFleet[""] }
		m.fellBack = func() int64 { return r.Stats().BreakerFallbacks }
		ms[i] = m
	}
	keys := []string{""}
	tripFleet(t, ms, keys)
	for _, m := range ms {
		m.fail.Store(false)
	}
	time.Sleep(breakerOpen + 300*time.Millisecond) // open, then quiet past StateTTL
	if n, _ := s.Client().Exists(t.Context(), "retry:{breaker:}").Result(); n != 0 {
		t.Fatalf("the breaker's state outlived StateTTL")
	}
	end := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(end) {
		for _, m := range ms {
			m.call(t.Context(), "")
		}
		time.Sleep(time.Millisecond)
	}
	for i, m := range ms {
		if n := m.fellBack(); n != 0 || !m.onFleet() {
			t.Errorf("process %d: %d decisions on its own breaker, onFleet %v, after the state expired", i, n, m.onFleet())
		}
	}
	tripFleet(t, ms, keys)
}

// TestClusterKeys: on a 3-master Redis Cluster every component works
// without error, per key and not: each keeps the keys one script touches
// in one slot (the budget's were spread over slots, and every call failed
// with CROSSSLOT).
func TestClusterKeys(t *testing.T) {
	cc := startCluster(t)
	for _, perKey := range []bool{false, true} {
		t.Run(map[bool]string{false: "one for all", true: "per key"}[perKey], func(t *testing.T) {
			// Timeout 1 s: the claim is "no CROSSSLOT", and a loaded
			// machine's stall must not pass for a Redis error.
			opts := retryredis.Options{Prefix: "cluster:" + map[bool]string{false: "all:", true: "key:"}[perKey], Timeout: time.Second}
			store, err := retryredis.NewStore(cc, opts)
			if err != nil {
				t.Fatal(err)
			}
			lim, err := retryredis.NewLimiter(cc, 10_000, 100, perKey, opts)
			if err != nil {
				t.Fatal(err)
			}
			bud, err := retryredis.NewBudget(cc, retry.Budget{PerKey: perKey, Tokens: 1000}, opts)
			if err != nil {
				t.Fatal(err)
			}
			dl, err := retryredis.NewDeadLetters(cc, "cluster", 0, opts)
			if err != nil {
				t.Fatal(err)
			}
			r := retry.New(
				retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond, OnExhaustion: retry.ExhaustDeadLetter}),
				retry.WithBreaker(retry.Breaker{Store: store, PerKey: perKey, MinRequests: 1000}),
				retry.WithRateLimit(retry.RateLimit{Shared: lim}),
				retry.WithBudget(retry.Budget{Shared: bud}),
				retry.WithDeadLetter(retry.DeadLetters{Sink: dl.Sink}),
			)
			for i := range 200 {
				key := []string{"a", "b", "c", "d"}[i%4]
				retry.Run(t.Context(), flaky(), r, retry.WithKey(key))
				if i%20 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
			// A call that fails both attempts goes to dead letter.
			retry.Run(t.Context(), func(context.Context) error { return errDown }, r, retry.WithKey("dead"))
			ss, ls, bs, st := store.Stats(), lim.Stats(), bud.Stats(), r.Stats()
			t.Logf("store %+v; limiter %+v; budget %+v; dead letters failed %d", ss, ls, bs, st.DeadLetterFailed)
			if ss.Errors != 0 || ss.Syncs == 0 || !ss.OnFleet {
				t.Errorf("store: %+v, want syncs without error", ss)
			}
			if ls.Errors != 0 || ls.Fallbacks != 0 || ls.Leases == 0 {
				t.Errorf("limiter: %+v, want leases without error or fallback", ls)
			}
			if bs.Errors != 0 || bs.Fallbacks != 0 || bs.Granted == 0 {
				t.Errorf("budget: %+v, want retries granted without error or failing open", bs)
			}
			if n, err := dl.Len(t.Context()); err != nil || n != 1 || st.DeadLetterFailed != 0 {
				t.Errorf("dead letters: %d records (%v), %d failed; want 1 and none", n, err, st.DeadLetterFailed)
			}
		})
	}
}

// TestNewProcessDuringOpen: a process started while the fleet's breaker is
// open reads the fleet's state before its first decision: none of its 16
// first concurrent calls reaches the dependency.
func TestNewProcessDuringOpen(t *testing.T) {
	s := startServer(t)
	newRetrier := func() *retry.Retrier {
		store, err := retryredis.NewStore(s.Client(), retryredis.Options{SyncInterval: faultSync})
		if err != nil {
			t.Fatal(err)
		}
		return retry.New(
			retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
			retry.WithBreaker(retry.Breaker{Store: store, MinRequests: 10, OpenTimeout: 10 * time.Second, StoreWait: 200 * time.Millisecond}),
			retry.WithBudget(retry.Budget{Off: true}),
		)
	}
	old := newRetrier()
	waitFor(t, 2*time.Second, "the fleet's breaker to open", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		err := old.Run(ctx, func(context.Context) error { return errDown })
		var re *retry.Error
		return errors.As(err, &re) && re.Reason == retry.ReasonBreakerOpen
	})
	time.Sleep(2 * faultSync) // the state is on Redis

	fresh := newRetrier()
	var reached atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			defer cancel()
			errs[i] = fresh.Run(ctx, func(context.Context) error { reached.Add(1); return nil })
		})
	}
	wg.Wait()
	if n := reached.Load(); n != 0 {
		t.Errorf("%d of 16 first calls of a new process reached the dependency the fleet opened against, want 0", n)
	}
	for i, err := range errs {
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonBreakerOpen {
			t.Errorf("call %d: %v, want Reason %s", i, err, retry.ReasonBreakerOpen)
		}
	}
	if st := fresh.Stats(); st.BreakerFallbacks != 0 || !st.BreakersOnFleet[""] || st.Breakers[""] != "open" {
		t.Errorf("new process: %d fallbacks, on fleet %v, state %q; want 0, true, open", st.BreakerFallbacks, st.BreakersOnFleet[""], st.Breakers[""])
	}
}

// TestNilComponents: the typed nils that this package's constructors
// return with their error, set as a Retrier's components, make the
// Retrier report a configuration error; nothing panics, and a call returns
// the error without an attempt. Their methods called on nil give zero
// Stats, an error or a refusal; a nil *DeadLetters's return an error.
func TestNilComponents(t *testing.T) {
	store, err1 := retryredis.NewStore(nil, retryredis.Options{})
	lim, err2 := retryredis.NewLimiter(nil, 10, 1, false, retryredis.Options{})
	bud, err3 := retryredis.NewBudget((*goredis.Client)(nil), retry.Budget{}, retryredis.Options{})
	dl, err4 := retryredis.NewDeadLetters(nil, "s", 0, retryredis.Options{})
	for i, err := range []error{err1, err2, err3, err4} {
		if err == nil || !strings.Contains(err.Error(), "client is nil") {
			t.Errorf("constructor %d: error %v, want one saying the client is nil", i, err)
		}
	}
	tests := []struct {
		name string
		opt  retry.Option
		want string
	}{
		{name: "Store", opt: retry.WithBreaker(retry.Breaker{Store: store}), want: "Store = nil: is a nil *redis.Store"},
		{name: "Limiter", opt: retry.WithRateLimit(retry.RateLimit{Shared: lim}), want: "Shared = nil: is a nil *redis.Limiter"},
		{name: "Budget", opt: retry.WithBudget(retry.Budget{Shared: bud}), want: "Shared = nil: is a nil *redis.Budget"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := retry.New(tt.opt)
			if err := r.Err(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Err() = %v, want one containing %q", err, tt.want)
			}
			ran := false
			if err := r.Run(t.Context(), func(context.Context) error { ran = true; return nil }); err == nil || ran {
				t.Errorf("Run: %v, ran %v; want the configuration error and no attempt", err, ran)
			}
		})
	}
	// Their methods called directly, as code polling Stats for metrics
	// does: zero Stats, an error from Sync, a refusal from Reserve and
	// Retry.
	t.Run("methods", func(t *testing.T) {
		if st := store.Stats(); st != (retryredis.StoreStats{}) || store.SyncInterval() != 0 {
			t.Errorf("nil *Store: Stats %+v, SyncInterval %v; want zero", st, store.SyncInterval())
		}
		if _, err := syncOne(t.Context(), store, "", retry.Breaker{}, retry.BreakerSync{}); err == nil || !strings.Contains(err.Error(), "nil *Store") {
			t.Errorf("nil *Store: Sync error %v, want one naming the nil *Store", err)
		}
		if st := lim.Stats(); st != (retryredis.LimiterStats{}) {
			t.Errorf("nil *Limiter: Stats %+v, want zero", st)
		}
		if _, _, ok := lim.Reserve(t.Context(), "", time.Now(), time.Second); ok {
			t.Error("nil *Limiter: Reserve granted a token")
		}
		bud.Won("", 1)
		if st := bud.Stats(); st != (retryredis.BudgetStats{}) || bud.Retry(t.Context(), "", false, time.Now()) {
			t.Errorf("nil *Budget: Stats %+v, or a retry allowed; want zero and none", st)
		}
	})
	t.Run("DeadLetters", func(t *testing.T) {
		r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1, OnExhaustion: retry.ExhaustDeadLetter}), retry.WithDeadLetter(retry.DeadLetters{Sink: dl.Sink}))
		err := r.Run(t.Context(), func(context.Context) error { return errDown })
		if err == nil || !strings.Contains(err.Error(), "nil *DeadLetters") {
			t.Errorf("Run: %v, want the sink's error naming the nil *DeadLetters", err)
		}
		if _, err := dl.List(t.Context(), "", 1); err == nil {
			t.Error("List on a nil *DeadLetters: no error")
		}
		if err := dl.Replay(t.Context(), "1", func(context.Context, retryredis.Record) error { return nil }); err == nil {
			t.Error("Replay on a nil *DeadLetters: no error")
		}
	})
}

// TestReplayOnce: two operators (each its own client, as two processes)
// replay the same record at the same time, four times each: it is sent
// once, the others get ErrClaimed while it is sent or ErrNoRecord after,
// and the record is gone. A replay that fails releases its claim, so the
// record can be replayed again at once.
func TestReplayOnce(t *testing.T) {
	s := startServer(t)
	ops := make([]*retryredis.DeadLetters, 2)
	for i := range ops {
		dl, err := retryredis.NewDeadLetters(s.Client(), "replay-once", 0, retryredis.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ops[i] = dl
	}
	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1, OnExhaustion: retry.ExhaustDeadLetter}), retry.WithDeadLetter(retry.DeadLetters{Sink: ops[0].Sink}))
	retry.Run(t.Context(), func(context.Context) error { return errDown }, r, retry.WithKey("order-1"))
	p, err := ops[0].List(t.Context(), "", 10)
	if err != nil || len(p.Records) != 1 {
		t.Fatalf("List: %+v, %v; want one record", p, err)
	}
	id := p.Records[0].ID

	// A failed replay keeps the record and releases the claim.
	err = ops[1].Replay(t.Context(), id, func(context.Context, retryredis.Record) error { return errDown }, retry.WithPolicy(retry.Policy{MaxAttempts: 1}))
	if err == nil || errors.Is(err, retryredis.ErrClaimed) {
		t.Fatalf("a failing replay: %v, want the send's error", err)
	}

	var sent atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			<-start
			errs[i] = ops[i%2].Replay(t.Context(), id, func(context.Context, retryredis.Record) error {
				sent.Add(1)
				time.Sleep(20 * time.Millisecond) // the others arrive while it is sent
				return nil
			})
		})
	}
	close(start)
	wg.Wait()
	if n := sent.Load(); n != 1 {
		t.Errorf("the record was sent %d times by 8 concurrent replays, want once", n)
	}
	var ok int
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, retryredis.ErrClaimed), errors.Is(err, retryredis.ErrNoRecord):
		default:
			t.Errorf("replay %d: %v, want nil, ErrClaimed or ErrNoRecord", i, err)
		}
	}
	if ok != 1 {
		t.Errorf("%d replays succeeded, want 1: %v", ok, errs)
	}
	if n, err := ops[0].Len(t.Context()); n != 0 || err != nil {
		t.Errorf("%d records left (%v), want 0", n, err)
	}
	keys, _ := s.Client().Keys(t.Context(), "*claim*").Result()
	if len(keys) != 0 {
		t.Errorf("claims left behind: %v", keys)
	}
}

// TestLimiterZeroWait: reservations that may not wait (a hedge's, with
// maxWait 0), after a quiet spell and mixed with ordinary ones, neither
// count as Redis failures nor keep the Limiter off the fleet's bucket: a
// request that cannot give Redis a tenth of Timeout does not ask it.
func TestLimiterZeroWait(t *testing.T) {
	s := startServer(t)
	l, err := retryredis.NewLimiter(s.Client(), 1000, 100, false, retryredis.Options{Timeout: 50 * time.Millisecond, SyncInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // quiet for more than an interval
	if _, _, ok := l.Reserve(t.Context(), "", time.Now(), 0); ok {
		t.Error("a zero-wait reservation with no leased token was granted: it cannot ask Redis")
	}
	if st := l.Stats(); !st.OnFleet || st.Errors != 0 || st.Denied != 1 || st.Fallbacks != 0 {
		t.Fatalf("after one zero-wait reservation: %+v, want it refused (Denied 1), on the fleet, without errors", st)
	}
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		l.Reserve(t.Context(), "", time.Now(), 0)           // a hedge
		l.Reserve(t.Context(), "", time.Now(), time.Second) // a first attempt
	}
	if st := l.Stats(); !st.OnFleet || st.Errors != 0 || st.Fallbacks != 0 || st.Leases < 1 {
		t.Errorf("hedges mixed with first attempts for 300 ms: %+v, want leases on the fleet's bucket, none on the local one, and no errors", st)
	}
}

// TestLimiterWaitBound: a reservation waits at most Timeout for a Redis
// that does not answer, whether it waits on another's request or its own:
// behind a request to a Redis slower than Timeout, it runs on the local
// bucket at Timeout, and asks Redis no more.
func TestLimiterWaitBound(t *testing.T) {
	s := startServer(t)
	c := s.Client()
	// Redis answers after 4 Timeouts; a waiter that outwaits Timeout by
	// half of it is held by the request it waits on.
	const timeout = 200 * time.Millisecond
	// Leases of an interval (a Heartbeat as short): the first lapses
	// before the next reservation, which must ask Redis.
	l, err := retryredis.NewLimiter(c, 1000, 1000, false, retryredis.Options{Timeout: timeout, SyncInterval: 100 * time.Millisecond, Heartbeat: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l.Reserve(t.Context(), "", time.Now(), time.Second) // loads the script; a batch of one
	time.Sleep(time.Second)                             // the demand ages and the lease lapses
	slow := &started{latency: latency(4 * timeout), first: make(chan struct{})}
	c.AddHook(slow)
	var wg sync.WaitGroup
	wg.Go(func() { l.Reserve(context.Background(), "", time.Now(), time.Second) })
	<-slow.first // the first reservation's request is in flight: it is the fetcher
	start := time.Now()
	_, _, ok := l.Reserve(t.Context(), "", time.Now(), time.Second)
	waited := time.Since(start)
	wg.Wait()
	st := l.Stats()
	t.Logf("the second reservation waited %v (Timeout %v): %+v", waited, timeout, st)
	if waited > timeout+timeout/2 || !ok || st.Fallbacks != 2 || st.Errors != 1 {
		t.Errorf("waited %v, ok %v, %+v; want at most Timeout %v and half of it, both on the local bucket, one round trip failed", waited, ok, st, timeout)
	}
}

// started is the latency hook that also closes first when the first
// command reaches it.
type started struct {
	latency
	once  sync.Once
	first chan struct{}
}

func (s *started) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	hold := s.latency.ProcessHook(next)
	return func(ctx context.Context, cmd goredis.Cmder) error {
		s.once.Do(func() { close(s.first) })
		return hold(ctx, cmd)
	}
}

// TestLimiterSaturated: with Redis healthy and the limit saturated (30
// callers against 20 a second, each willing to wait 10 s), reservations
// wait their turn on the fleet's bucket: none runs on the local bucket,
// none is refused, and the admitted stay within the limit, Redis a
// millisecond away or on loopback.
func TestLimiterSaturated(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 2 s of saturated traffic a case")
	}
	for _, rtt := range []time.Duration{0, time.Millisecond} {
		t.Run("rtt "+rtt.String(), func(t *testing.T) {
			s := startServer(t)
			c := s.ClientWith(func(o *goredis.Options) { o.ReadTimeout, o.WriteTimeout = time.Second, time.Second })
			if rtt > 0 {
				c.AddHook(latency(rtt))
			}
			const limit, dur = 20.0, 2 * time.Second
			// The claim is about leases under saturation, not about the
			// round-trip bound: a Timeout of 1 s keeps a loaded machine's
			// stall from counting as a Redis failure, and the logger names
			// any error that still happens.
			logs := &records{}
			l, err := retryredis.NewLimiter(c, limit, 1, false, retryredis.Options{Timeout: time.Second, Logger: slog.New(logs)})
			if err != nil {
				t.Fatal(err)
			}
			var admitted, refused atomic.Int64
			// Reserve is given no deadline: one within Timeout of its end
			// rightly takes a local token instead of asking Redis.
			ctx := t.Context()
			stop := time.Now().Add(dur)
			var wg sync.WaitGroup
			for range 30 {
				wg.Go(func() {
					for time.Now().Before(stop) {
						w, _, ok := l.Reserve(ctx, "", time.Now(), 10*time.Second)
						switch {
						case !time.Now().Before(stop):
							return
						case !ok:
							refused.Add(1)
							continue
						}
						time.Sleep(w)
						admitted.Add(1)
					}
				})
			}
			wg.Wait()
			st := l.Stats()
			most := int64(limit*dur.Seconds()) + 2
			t.Logf("admitted %d in %v (at most %d), refused %d: %+v", admitted.Load(), dur, most, refused.Load(), st)
			if st.Fallbacks != 0 || refused.Load() != 0 || admitted.Load() > most {
				t.Errorf("%d fallbacks, %d refused, %d admitted (at most %d), with Redis healthy; logged: %v", st.Fallbacks, refused.Load(), admitted.Load(), most, logs.lines())
			}
		})
	}
}

// TestReplayCanceledAfterSend: a caller canceled as the send succeeds
// still has the record deleted: a second Replay does not send it again.
func TestReplayCanceledAfterSend(t *testing.T) {
	s := startServer(t)
	dl, err := retryredis.NewDeadLetters(s.Client(), "canceled", 0, retryredis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := dl.Sink(t.Context(), retry.Event{Key: "k"}); err != nil {
		t.Fatal(err)
	}
	p, err := dl.List(t.Context(), "", 10)
	if err != nil || len(p.Records) != 1 {
		t.Fatalf("List: %+v, %v", p, err)
	}
	id := p.Records[0].ID
	once := retry.WithPolicy(retry.Policy{MaxAttempts: 1})
	sent := 0
	ctx, cancel := context.WithCancel(t.Context())
	err1 := dl.Replay(ctx, id, func(context.Context, retryredis.Record) error { sent++; cancel(); return nil }, once)
	err2 := dl.Replay(t.Context(), id, func(context.Context, retryredis.Record) error { sent++; return nil }, once)
	if sent != 1 || !errors.Is(err2, retryredis.ErrNoRecord) {
		t.Errorf("sent %d times (first replay: %v; second: %v), want once and ErrNoRecord", sent, err1, err2)
	}
}

// TestStoreRests: after a round trip that failed as a whole (Redis
// stopped), the Store leaves Redis alone for one SyncInterval: five syncs
// of a breaker and one of another make one round trip, one error, and the
// syncs not sent say why; one interval after Redis answers again, they
// sync. A key that fails alone rests alone (TestOneKeyFails).
func TestStoreRests(t *testing.T) {
	s := startServer(t)
	const interval = 20 * time.Millisecond
	st, err := retryredis.NewStore(s.Client(), retryredis.Options{SyncInterval: interval})
	if err != nil {
		t.Fatal(err)
	}
	b := retry.Breaker{Window: time.Second, OpenTimeout: time.Second, Probes: 1, MinRequests: 1, FailureRatio: 0.5}
	s.Stop()
	for range 5 {
		if _, err := syncOne(t.Context(), st, "a", b, retry.BreakerSync{}); err == nil {
			t.Fatal("Sync with Redis stopped: no error")
		}
	}
	_, err = syncOne(t.Context(), st, "b", b, retry.BreakerSync{})
	if got := st.Stats(); got.Syncs != 1 || got.Errors != 1 || got.OnFleet {
		t.Errorf("six syncs with Redis stopped: %+v, want one round trip failed and the rest not sent", got)
	}
	if err == nil || !strings.Contains(err.Error(), "not asked") || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("a sync not sent: %v, want it to say so, and the round trip's failure", err)
	}
	s.Start()
	time.Sleep(interval)
	for _, k := range []string{"a", "b"} {
		if _, err := syncOne(t.Context(), st, k, b, retry.BreakerSync{}); err != nil {
			t.Errorf("Sync %s one interval after Redis answered: %v", k, err)
		}
	}
	if !st.Stats().OnFleet {
		t.Error("not on the fleet after syncs that succeeded")
	}
}

// TestOneKeyFails: per key, a key that fails (here of the wrong type;
// on a Cluster, a master down) rests alone: the other keys stay on the
// fleet's state, Redis answering for them.
func TestOneKeyFails(t *testing.T) {
	s := startServer(t)
	c := s.Client()
	plant := func(keys ...string) {
		for _, k := range keys {
			if err := c.HSet(t.Context(), k, "f", "x").Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	opts := retryredis.Options{SyncInterval: 10 * time.Millisecond}
	tests := []struct {
		name string
		// build returns the component's option and its check, given the
		// calls made on key bad so far.
		build func(t *testing.T) (retry.Option, func(bad int64) (good bool, st any))
	}{
		{name: "breaker", build: func(t *testing.T) (retry.Option, func(int64) (bool, any)) {
			// A string where the Store keeps a hash.
			if err := c.Set(t.Context(), "retry:{breaker:bad}", "x", 0).Err(); err != nil {
				t.Fatal(err)
			}
			store, err := retryredis.NewStore(c, opts)
			if err != nil {
				t.Fatal(err)
			}
			r := retry.New(retry.WithBreaker(retry.Breaker{Store: store, PerKey: true}))
			return r, func(int64) (bool, any) {
				on := r.Stats().BreakersOnFleet
				return on["good"] && !on["bad"], on
			}
		}},
		{name: "limiter", build: func(t *testing.T) (retry.Option, func(int64) (bool, any)) {
			plant("retry:{limit:bad}")
			l, err := retryredis.NewLimiter(c, 1000, 10, true, opts)
			if err != nil {
				t.Fatal(err)
			}
			var before int64 = -1
			return retry.WithRateLimit(retry.RateLimit{Shared: l}), func(int64) (bool, any) {
				st := l.Stats()
				grew := before >= 0 && st.Leases > before
				before = st.Leases
				return grew && st.Errors > 0, st
			}
		}},
		{name: "budget", build: func(t *testing.T) (retry.Option, func(int64) (bool, any)) {
			// A hash where the budget keeps its balance.
			plant("retry:{budget:bad}:t")
			b, err := retryredis.NewBudget(c, retry.Budget{PerKey: true, Tokens: 10000}, opts)
			if err != nil {
				t.Fatal(err)
			}
			var before int64 = -1
			return retry.WithBudget(retry.Budget{Shared: b}), func(bad int64) (bool, any) {
				st := b.Stats()
				grew := before >= 0 && st.Granted > before
				before = st.Granted
				// Only key bad's retries fall back.
				return grew && st.Errors > 0 && st.Fallbacks <= bad, st
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opt, good := tt.build(t)
			r := retry.New(opt, retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond}))
			var ok bool
			var st any
			var bad int64
			for range 3 { // three rounds of calls, each of 30 ms
				for end := time.Now().Add(30 * time.Millisecond); time.Now().Before(end); time.Sleep(time.Millisecond) {
					for _, k := range []string{"bad", "good"} {
						ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
						retry.Run(ctx, flaky(), r, retry.WithKey(k))
						cancel()
					}
					bad++
				}
				ok, st = good(bad)
			}
			if !ok {
				t.Errorf("with key bad failing, key good is off the fleet's state: %+v", st)
			}
		})
	}
}

// TestLimiterFetcherCanceled: the caller whose lease request is in flight
// is canceled; the calls waiting on that request ask Redis themselves,
// which answers: none runs on the local bucket.
func TestLimiterFetcherCanceled(t *testing.T) {
	s := startServer(t)
	c := s.ClientWith(func(o *goredis.Options) { o.ReadTimeout, o.WriteTimeout = time.Second, time.Second })
	// Leases of an interval (a Heartbeat as short): the first lapses
	// before the next reservation, which must ask Redis.
	l, err := retryredis.NewLimiter(c, 1000, 1000, false, retryredis.Options{Timeout: 100 * time.Millisecond, Heartbeat: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l.Reserve(t.Context(), "", time.Now(), time.Second) // loads the script
	time.Sleep(1200 * time.Millisecond)                 // the demand ages and the lease lapses
	c.AddHook(latency(20 * time.Millisecond))
	ctx, cancel := context.WithCancel(t.Context())
	var fetcher, waiters sync.WaitGroup
	fetcher.Go(func() { l.Reserve(ctx, "", time.Now(), time.Second) })
	time.Sleep(3 * time.Millisecond)
	for range 10 {
		waiters.Go(func() { l.Reserve(t.Context(), "", time.Now(), time.Second) })
	}
	time.Sleep(3 * time.Millisecond)
	cancel()
	fetcher.Wait()
	waiters.Wait()
	if st := l.Stats(); st.Fallbacks != 0 || st.Errors != 0 || !st.OnFleet {
		t.Errorf("%+v: want no reservation on the local bucket, Redis healthy", st)
	}
}
