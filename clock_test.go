package retry_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steadyhq/retry"
)

// virtualClock advances only when the engine sleeps on it.
type virtualClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func (v *virtualClock) Now() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.now
}

func (v *virtualClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.now = v.now.Add(d)
	v.sleeps = append(v.sleeps, d)
	return nil
}

// TestClock drives the engine on a virtual clock: the waits, MaxElapsed, the
// budget window and the rate limiter all read it, and nothing waits in real
// time.
func TestClock(t *testing.T) {
	fail := errors.New("boom")
	exact := retry.Policy{MaxAttempts: 5, InitialInterval: time.Second, Jitter: retry.Jitter{Kind: retry.JitterNone}}
	tests := []struct {
		name     string
		opts     []retry.Option
		calls    int
		reason   retry.Reason
		sleeps   []time.Duration
		attempts int
	}{
		{name: "backoff", calls: 1, reason: retry.ReasonExhausted, sleeps: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}, attempts: 5},
		{name: "max elapsed", opts: []retry.Option{retry.WithMaxElapsed(3500 * time.Millisecond)}, calls: 1, reason: retry.ReasonDeadline, sleeps: []time.Duration{time.Second, 2 * time.Second}, attempts: 3},
		// One token a second, no burst: the second call waits a virtual
		// second for its token, then backs off as usual.
		{name: "rate limit", opts: []retry.Option{retry.WithRateLimit(retry.RateLimit{Limit: 1, Burst: 1}), retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Second, Jitter: retry.Jitter{Kind: retry.JitterNone}})}, calls: 2, reason: retry.ReasonExhausted,
			sleeps: []time.Duration{time.Second, time.Second, time.Second}, attempts: 2},
		// Nothing earned from successes, a stock of one token: the first
		// call's retry is granted, the second call's denied.
		{name: "budget", opts: []retry.Option{retry.WithBudget(retry.Budget{Tokens: 1, Ratio: -1}), retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Second, Jitter: retry.Jitter{Kind: retry.JitterNone}})}, calls: 2, reason: retry.ReasonBudget,
			sleeps: []time.Duration{time.Second}, attempts: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &virtualClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			r := retry.New(append([]retry.Option{retry.WithPolicy(exact), retry.WithClock(clk)}, tt.opts...)...)
			var err error
			start := time.Now()
			for range tt.calls {
				err = r.Run(context.Background(), func(context.Context) error { return fail })
			}
			if real := time.Since(start); real > time.Second {
				t.Errorf("took %v of real time", real)
			}
			var e *retry.Error
			if !errors.As(err, &e) || e.Reason != tt.reason || e.Attempts != tt.attempts {
				t.Fatalf("err = %v, want reason %v after %d attempts", err, tt.reason, tt.attempts)
			}
			if !equalDurations(clk.sleeps, tt.sleeps) {
				t.Errorf("sleeps = %v, want %v", clk.sleeps, tt.sleeps)
			}
		})
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestOnGiveUp checks that every call ending without success reports once,
// with its reason, and that a success reports nothing.
func TestOnGiveUp(t *testing.T) {
	fail := errors.New("boom")
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name     string
		ctx      context.Context
		deadline time.Duration
		opts     []retry.Option
		errs     []error
		fired    bool
		reason   retry.Reason
		attempt  int
		typ      string
		withCall bool
	}{
		{name: "success", errs: []error{fail}},
		{name: "exhausted", errs: []error{fail, fail, fail}, fired: true, reason: retry.ReasonExhausted, attempt: 3, typ: "error"},
		{name: "permanent", errs: []error{retry.Permanent(fail)}, fired: true, reason: retry.ReasonNonRetryable, attempt: 1, typ: "error"},
		{name: "discard", errs: []error{retry.Discard(fail)}, fired: true, reason: retry.ReasonDiscarded, attempt: 1, typ: "error"},
		{name: "canceled before", ctx: canceled, fired: true, reason: retry.ReasonCanceled, typ: "context.canceled"},
		{name: "rate limited before", deadline: time.Minute, opts: []retry.Option{retry.WithRateLimit(retry.RateLimit{Limit: 0.001, Burst: 1})}, withCall: true, fired: true, reason: retry.ReasonRateLimited, typ: "ratelimit.local"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.deadline)
				defer cancel()
			}
			var got []retry.Event
			opts := append([]retry.Option{
				retry.WithPolicy(retry.Policy{InitialInterval: time.Millisecond, Jitter: retry.Jitter{Kind: retry.JitterNone}}),
				retry.OnGiveUp(func(ev retry.Event) { got = append(got, ev) }),
			}, tt.opts...)
			r := retry.New(opts...)
			if tt.withCall { // use the limiter's only token
				_ = r.Run(context.Background(), func(context.Context) error { return nil })
			}
			n := 0
			_ = r.Run(ctx, func(context.Context) error {
				n++
				if n <= len(tt.errs) {
					return tt.errs[n-1]
				}
				return nil
			})
			if !tt.fired {
				if len(got) != 0 {
					t.Fatalf("OnGiveUp fired %d times on success", len(got))
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("OnGiveUp fired %d times, want 1", len(got))
			}
			ev := got[0]
			if ev.Reason != tt.reason || ev.Attempt != tt.attempt || ev.Type != tt.typ || ev.Err == nil || ev.Message == "" {
				t.Errorf("event = %+v, want reason %v, attempt %d, type %q", ev, tt.reason, tt.attempt, tt.typ)
			}
		})
	}
}

// TestImmediateOffset pins the wait of the immediate strategy with an
// offset: the offset, not zero.
func TestImmediateOffset(t *testing.T) {
	clk := &virtualClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	p := retry.Policy{MaxAttempts: 3, Backoff: retry.Immediate, Offset: 2 * time.Second, Jitter: retry.Jitter{Kind: retry.JitterNone}}
	err := retry.Run(context.Background(), func(context.Context) error { return errors.New("x") }, retry.WithPolicy(p), retry.WithClock(clk))
	if err == nil {
		t.Fatal("want an error")
	}
	if want := []time.Duration{2 * time.Second, 2 * time.Second}; !equalDurations(clk.sleeps, want) {
		t.Fatalf("sleeps = %v, want %v", clk.sleeps, want)
	}
}

// TestGiveUpAfterAttemptTimeout: the caller cancels during the wait that
// follows a timed-out attempt; the call's type and the OnGiveUp event keep
// the attempt's timeout as the last failure's type.
func TestGiveUpAfterAttemptTimeout(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var gaveUp []retry.Event
	err := retry.Run(ctx, func(actx context.Context) error {
		<-actx.Done()
		return actx.Err()
	}, retry.WithAttemptTimeout(5*time.Millisecond),
		retry.WithPolicy(retry.Policy{InitialInterval: time.Hour, Jitter: retry.Jitter{Kind: retry.JitterNone}}),
		retry.OnRetry(func(retry.Event) { cancel() }),
		retry.OnGiveUp(func(ev retry.Event) { gaveUp = append(gaveUp, ev) }))
	var e *retry.Error
	if !errors.As(err, &e) || e.Reason != retry.ReasonCanceled {
		t.Fatalf("err = %v, want canceled", err)
	}
	if got := retry.TypeOf(err); got != retry.TypeAttemptTimeout {
		t.Errorf("TypeOf = %q, want %q", got, retry.TypeAttemptTimeout)
	}
	if len(gaveUp) != 1 || gaveUp[0].Type != retry.TypeAttemptTimeout {
		t.Errorf("OnGiveUp events = %+v, want one of type %q", gaveUp, retry.TypeAttemptTimeout)
	}
}

// timesBudget is a SharedBudget that grants every retry and records the
// times it is asked at.
type timesBudget struct {
	mu    sync.Mutex
	times []time.Time
}

func (b *timesBudget) Won(string, int) {}

func (b *timesBudget) Retry(_ context.Context, _ string, _ bool, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.times = append(b.times, now)
	return true
}

// TestSharedBudgetTime: a shared budget is asked with the Retrier's clock
// reading even when nothing else on the failure path needs the time (no
// deadline, no hook, no sink).
func TestSharedBudgetTime(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := &virtualClock{now: start}
	b := &timesBudget{}
	p := retry.Policy{MaxAttempts: 3, InitialInterval: time.Second, Jitter: retry.Jitter{Kind: retry.JitterNone}}
	_ = retry.Run(context.Background(), func(context.Context) error { return errors.New("x") },
		retry.WithPolicy(p), retry.WithClock(clk), retry.WithBudget(retry.Budget{Shared: b}))
	want := []time.Time{start, start.Add(time.Second)}
	if len(b.times) != len(want) {
		t.Fatalf("Retry asked %d times, want %d", len(b.times), len(want))
	}
	for i := range want {
		if !b.times[i].Equal(want[i]) {
			t.Errorf("Retry %d asked at %v, want %v", i+1, b.times[i], want[i])
		}
	}
}

// TestBreakerOnClock: the circuit breaker's window and open period run on
// the Retrier's Clock. An hour-long open period ends when the virtual
// clock passes it, and failures slide out of the window as it moves, with
// no real time passing.
func TestBreakerOnClock(t *testing.T) {
	fail := errors.New("down")
	tests := []struct {
		name    string
		advance time.Duration // virtual time between the trip and the next call
		want    retry.Reason  // "" for success
		changes []string
	}{
		{name: "open period not over", advance: time.Hour - time.Second, want: retry.ReasonBreakerOpen, changes: []string{"closed>open"}},
		{name: "open period over: a probe closes it", advance: time.Hour, changes: []string{"closed>open", "open>half_open", "half_open>closed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &virtualClock{now: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)}
			var changes []string
			r := retry.New(retry.WithClock(clk), retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
				retry.WithBreaker(retry.Breaker{MinRequests: 2, Window: time.Minute, OpenTimeout: time.Hour, MaxWait: -1,
					OnChange: func(_, from, to string) { changes = append(changes, from+">"+to) }}))
			for range 2 {
				_ = r.Run(t.Context(), func(context.Context) error { return fail })
			}
			clk.mu.Lock()
			clk.now = clk.now.Add(tt.advance)
			clk.mu.Unlock()
			err := r.Run(t.Context(), func(context.Context) error { return nil })
			var re *retry.Error
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("err = %v, want success", err)
			case tt.want != "" && (!errors.As(err, &re) || re.Reason != tt.want):
				t.Fatalf("err = %v, want reason %v", err, tt.want)
			}
			if got := strings.Join(changes, " "); got != strings.Join(tt.changes, " ") {
				t.Errorf("changes %q, want %q", got, strings.Join(tt.changes, " "))
			}
		})
	}
	// The window slides on the clock: two failures a minute apart never
	// trip a breaker of MinRequests 2 over a 30 s window.
	clk := &virtualClock{now: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)}
	r := retry.New(retry.WithClock(clk), retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
		retry.WithBreaker(retry.Breaker{MinRequests: 2, Window: 30 * time.Second, MaxWait: -1}))
	for range 3 {
		_ = r.Run(t.Context(), func(context.Context) error { return fail })
		clk.mu.Lock()
		clk.now = clk.now.Add(time.Minute)
		clk.mu.Unlock()
	}
	if st := r.Stats().Breakers[""]; st != retry.BreakerClosed {
		t.Errorf("breaker %s after failures a minute apart, want closed", st)
	}
}

// farClock reads a fixed time, far in the past or the future.
type farClock struct{ t time.Time }

func (c farClock) Now() time.Time                                   { return c.t }
func (c farClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// TestClockOutOfRange: a Clock that reads a time before 1970, or past 2262
// where UnixNano overflows, makes no gate panic: the budget, the breaker,
// adaptive throttling and the concurrency limit all index their windows
// by it.
func TestClockOutOfRange(t *testing.T) {
	for _, at := range []time.Time{
		time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2500, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		t.Run(at.Format("2006"), func(t *testing.T) {
			r := retry.New(retry.WithClock(farClock{at}), retry.WithPolicy(retry.Policy{MaxAttempts: 3, Backoff: retry.Immediate}),
				retry.WithBreaker(retry.Breaker{MinRequests: 2}), retry.WithThrottle(retry.Throttle{}),
				retry.WithConcurrency(retry.Concurrency{}), retry.WithBudget(retry.Budget{PerKey: true}))
			for i := range 20 {
				fail := i%2 == 0
				_ = r.Run(t.Context(), func(context.Context) error {
					if fail {
						return errors.New("down")
					}
					return nil
				})
			}
			_ = r.Stats()
		})
	}
}

// TestBreakerProbeFreedByLaterRefusal: a half-open breaker lets its one
// probe through, and the concurrency limit, a later gate, refuses it: the
// probe never ran, so the breaker frees its place, and the next call
// probes and closes it (were it kept, the breaker would stay half-open,
// refusing every call).
func TestBreakerProbeFreedByLaterRefusal(t *testing.T) {
	clk := &virtualClock{now: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)}
	r := retry.New(retry.WithClock(clk), retry.WithPolicy(retry.Policy{MaxAttempts: 1}), retry.WithBudget(retry.Budget{Off: true}),
		retry.WithBreaker(retry.Breaker{MinRequests: 1, FailureRatio: 1, OpenTimeout: time.Second, Probes: 1, MaxWait: -1}),
		retry.WithConcurrency(retry.Concurrency{Initial: 1, Min: 1, Max: 1, PerKey: true}))
	hold, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() { // holds key x's only permit
		defer close(done)
		_ = retry.Run(context.Background(), func(context.Context) error { close(hold); <-release; return nil }, r, retry.WithKey("x"))
	}()
	<-hold
	_ = retry.Run(context.Background(), func(context.Context) error { return errors.New("down") }, r, retry.WithKey("y"))
	if st := r.Stats().Breakers[""]; st != retry.BreakerOpen {
		t.Fatalf("breaker %s after a failure, want open", st)
	}
	clk.mu.Lock()
	clk.now = clk.now.Add(time.Second)
	clk.mu.Unlock()
	if err := retry.Run(context.Background(), func(context.Context) error { return nil }, r, retry.WithKey("x")); retry.TypeOf(err) != "concurrency.limit" {
		t.Fatalf("the probe on x: %v, want the concurrency limit's refusal", err)
	}
	if err := retry.Run(context.Background(), func(context.Context) error { return nil }, r, retry.WithKey("y")); err != nil {
		t.Errorf("the next probe, on y: %v, want success", err)
	}
	if st := r.Stats().Breakers[""]; st != retry.BreakerClosed {
		t.Errorf("breaker %s after a successful probe, want closed", st)
	}
	close(release)
	<-done
}

// timerClock is the real clock with AfterFunc: the engine runs its own
// timers and hedges through it, and records the delays it was asked for.
type timerClock struct {
	mu     sync.Mutex
	afters []time.Duration
}

func (*timerClock) Now() time.Time { return time.Now() }

func (*timerClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *timerClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	c.afters = append(c.afters, d)
	c.mu.Unlock()
	return time.AfterFunc(d, f).Stop
}

func (c *timerClock) asked() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.afters...)
}

// TestClockTimers: on a Clock with AfterFunc, the per-attempt timeout is
// a timer of the clock, and the attempt's context has its deadline on it
// and ends with context.DeadlineExceeded; a hedged call's delay is a timer
// of the clock and its hedge starts through AfterFunc(0, ...), and the
// call waits for its hedges by sleeping on the clock, woken when they
// end.
func TestClockTimers(t *testing.T) {
	t.Run("attempt timeout", func(t *testing.T) {
		clk := &timerClock{}
		var types []string
		var errs []error
		var late []time.Duration
		err := retry.New(retry.WithClock(clk), retry.WithAttemptTimeout(20*time.Millisecond),
			retry.WithPolicy(retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond}),
			retry.OnFailure(func(e retry.Event) { types = append(types, e.Type) }),
		).Run(context.Background(), func(ctx context.Context) error {
			dl, ok := ctx.Deadline()
			if !ok {
				t.Error("the attempt's context has no deadline")
			}
			<-ctx.Done()
			late = append(late, time.Since(dl))
			errs = append(errs, ctx.Err())
			return ctx.Err()
		})
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonExhausted {
			t.Fatalf("error %v, want exhausted", err)
		}
		for i := range errs {
			if errs[i] != context.DeadlineExceeded || types[i] != retry.TypeAttemptTimeout || late[i] < 0 {
				t.Errorf("attempt %d ended with %v (type %s) %v after its deadline; want context.DeadlineExceeded, %s, not before",
					i+1, errs[i], types[i], late[i], retry.TypeAttemptTimeout)
			}
		}
		if got := clk.asked(); len(got) != 2 || got[0] != 20*time.Millisecond {
			t.Errorf("the clock was asked for %v, want two timers of 20ms", got)
		}
	})
	t.Run("hedge", func(t *testing.T) {
		clk := &timerClock{}
		r := retry.New(retry.WithClock(clk), retry.WithHedge(retry.Hedge{Delay: 10 * time.Millisecond}))
		var canceled bool
		v, err := retry.Hedged(context.Background(), func(ctx context.Context) (int, error) {
			if retry.AttemptFrom(ctx) == 1 {
				<-ctx.Done() // the hedge wins, and this one is canceled
				canceled = true
				return 0, ctx.Err()
			}
			return 2, nil
		}, r)
		if err != nil || v != 2 || !canceled {
			t.Errorf("Hedged = %v, %v; first attempt canceled %v; want the hedge's 2", v, err, canceled)
		}
		got := clk.asked()
		if len(got) < 2 || got[0] != 10*time.Millisecond || !slices.Contains(got, 0) {
			t.Errorf("the clock was asked for %v, want the 10ms delay and the hedge's start (0)", got)
		}
		if st := r.Stats(); st.Hedges != 1 || st.HedgeWins != 1 {
			t.Errorf("%d hedges, %d won; want 1 and 1", st.Hedges, st.HedgeWins)
		}
	})
}

// readsClock counts its readings.
type readsClock struct {
	virtualClock
	reads int
}

func (c *readsClock) Now() time.Time {
	c.reads++
	return c.virtualClock.Now()
}

// TestSuccessReadsNoClock: a call that succeeds reads no clock, through
// the breaker (local or shared through a store), a rate limiter with tokens to spare and the retry budget,
// whether or not its context has a deadline (the limiter reads it once it
// has handed out the tokens it found, not here).
func TestSuccessReadsNoClock(t *testing.T) {
	deadline, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	tests := []struct {
		name string
		ctx  context.Context
		opts []retry.Option
	}{
		{name: "defaults", ctx: context.Background()},
		{name: "guarded", ctx: context.Background(), opts: []retry.Option{
			retry.WithBreaker(retry.Breaker{}), retry.WithRateLimit(retry.RateLimit{Limit: 1e6, Burst: 1e6})}},
		{name: "guarded, with a deadline", ctx: deadline, opts: []retry.Option{
			retry.WithBreaker(retry.Breaker{}), retry.WithRateLimit(retry.RateLimit{Limit: 1e6, Burst: 1e6})}},
		// The fleet's state is read on the real clock, the store's; the
		// process's own breaker standing in counts the success unread.
		{name: "a breaker shared through a store", ctx: context.Background(), opts: []retry.Option{
			retry.WithBreaker(retry.Breaker{Store: newMemStore(time.Hour)})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &readsClock{virtualClock: virtualClock{now: time.Unix(1e9, 0)}}
			r := retry.New(append(tt.opts, retry.WithClock(clk))...)
			ok := func(context.Context) error { return nil }
			if err := r.Run(tt.ctx, ok); err != nil { // the first reads the gates' state
				t.Fatal(err)
			}
			before := clk.reads
			const calls = 200
			for range calls {
				if err := r.Run(tt.ctx, ok); err != nil {
					t.Fatal(err)
				}
			}
			if n := clk.reads - before; n != 0 {
				t.Errorf("%d calls that succeeded read the clock %d times, want none", calls, n)
			}
		})
	}
}
