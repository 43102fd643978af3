package redis_test

import (
	"testing"
	"time"

	retryredis "github.com/steadyhq/retry/redis"
)

// TestLimiterSlowRenewal: a lease's renewal ahead that Redis answers later
// than Timeout does not take the key off the fleet's bucket. While the
// lease it renews has tokens, the calls spend them, none falling back or
// waiting; a renewal answered within the larger of Timeout and
// SyncInterval joins the lease, with no error; one not answered by then
// is counted in Errors and leaves the key on the fleet (OnFleet) until the
// lease is spent; then the calls take the local bucket, counted in
// Fallbacks, none waiting past Timeout; a lease spent within an interval
// of the failed renewal rests the key until then, as after any failure:
// its calls take the local bucket without asking Redis, off the fleet.
//
// The lease renewed is about 150 tokens (3 calls counted over an interval
// of 200 ms, for a Heartbeat of 10 s), spent at once with Redis healthy
// down to a few tokens more than the eighth left at which it is renewed
// ahead; then Redis is slowed by a proxy that holds its replies, and the
// last 20 or so tokens are spent one every 30 ms: about 600 ms, against a
// renewal held 100 ms (answered within its bound of 200 ms) or 600 ms
// (not). The bounds on
// a call's time are Timeout plus the scheduling slack of a loaded machine
// (faultSlack); a spent token returns in microseconds.
func TestLimiterSlowRenewal(t *testing.T) {
	const (
		timeout  = 50 * time.Millisecond
		interval = 200 * time.Millisecond // the renewal's bound
		pace     = 30 * time.Millisecond
	)
	cases := []struct {
		name    string
		delay   time.Duration // each reply of Redis held
		renewed bool          // the renewal is answered within its bound
		// rush: once the renewal failed, the tokens left are spent at
		// once, within the interval after the failure.
		rush bool
		// inFlight: the tokens left are spent at once, while the
		// renewal is in flight.
		inFlight bool
	}{
		{name: "answered after Timeout, within the renewal's bound", delay: 2 * timeout, renewed: true},
		{name: "answered after the renewal's bound", delay: 3 * interval},
		{name: "answered after the renewal's bound, the lease spent within an interval", delay: 3 * interval, rush: true},
		{name: "answered after the renewal's bound, the lease spent while it is in flight", delay: 3 * interval, inFlight: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFaulty(t)
			l, err := retryredis.NewLimiter(f.client(t), 1e6, 1e6, false,
				retryredis.Options{Prefix: t.Name() + ":", Timeout: timeout, SyncInterval: interval, Heartbeat: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			spent := int64(0)
			reserve := func() (time.Duration, bool) {
				start := time.Now()
				_, _, ok := l.Reserve(t.Context(), "", start, time.Second)
				return time.Since(start), ok
			}
			// The first lease (4 tokens), and its renewal when they are
			// spent, with Redis healthy.
			for range 5 {
				if _, ok := reserve(); !ok {
					t.Fatal("refused with Redis healthy")
				}
				spent++
			}
			waitFor(t, time.Second, "the first renewal", func() bool { return l.Stats().Leases == 2 })
			st := l.Stats()
			// The lease renewed: the tokens granted after the first 4,
			// spent when the renewal was asked.
			size := st.Allowed - 4
			if st.Fallbacks != 0 || st.Errors != 0 || size < 32 {
				t.Fatalf("after the first renewal: %+v, want a lease of at least 32 tokens, no fallback, no error", st)
			}
			// Spend it, Redis healthy, down to a few tokens more than the
			// eighth left at which it is renewed ahead.
			for st.Allowed-spent > size/8+3 {
				if _, ok := reserve(); !ok {
					t.Fatal("refused with Redis healthy")
				}
				spent++
			}
			if st := l.Stats(); st.Leases != 2 {
				t.Fatalf("%+v: renewed before Redis was slowed", st)
			}

			f.p.Delay(tc.delay)
			slowSince := time.Now()
			sawError := false
			for {
				st := l.Stats()
				if st.Allowed-st.GivenBack-spent == 0 || tc.renewed && st.Leases == 3 {
					break
				}
				if st.Errors > 0 {
					sawError = true
					if !st.OnFleet {
						t.Fatalf("%v after Redis slowed, %d tokens of the lease left: %+v, want the key on the fleet", time.Since(slowSince), st.Allowed-st.GivenBack-spent, st)
					}
				}
				took, ok := reserve()
				if !ok || took > timeout {
					t.Fatalf("a call with %d tokens of the lease left: ok %v after %v, want a token at once", st.Allowed-st.GivenBack-spent, ok, took)
				}
				spent++
				if !tc.inFlight && (!tc.rush || !sawError) {
					time.Sleep(pace)
				}
			}
			st = l.Stats()
			t.Logf("%v after Redis slowed by %v: %d calls, %+v", time.Since(slowSince), tc.delay, spent, st)
			if st.Fallbacks != 0 {
				t.Errorf("%d fallbacks while the lease had tokens", st.Fallbacks)
			}
			if tc.renewed {
				if st.Leases != 3 || st.Errors != 0 || !st.OnFleet {
					t.Errorf("%+v: want the renewal granted (3 leases), no error, on the fleet", st)
				}
				return
			}
			if tc.inFlight {
				// The first call waits for the renewal until Timeout
				// after it began, the others not at all: 5 calls within
				// Timeout and slack, where 5 waits of Timeout each
				// would take 250 ms (or the renewal's bound, 200 ms).
				start := time.Now()
				for range 5 {
					if _, ok := reserve(); !ok {
						t.Fatal("refused on the local bucket")
					}
				}
				took := time.Since(start)
				if st := l.Stats(); took > timeout+faultSlack || st.Fallbacks != 5 {
					t.Errorf("5 calls with the lease spent and its renewal slower than Timeout: %v, %+v; want the local bucket (5 fallbacks), within Timeout %v and slack", took, st, timeout)
				}
				return
			}
			if !sawError {
				t.Errorf("%+v: the renewal did not fail while the lease had tokens", st)
			}
			// The lease is spent: the call takes the local bucket, within
			// Timeout; within an interval of the failed renewal, without
			// asking Redis, the key resting (off the fleet) as after any
			// failure.
			took, ok := reserve()
			st = l.Stats()
			if !ok || took > timeout+faultSlack || st.Fallbacks != 1 {
				t.Errorf("the call after the lease was spent: ok %v after %v, %+v; want the local bucket (1 fallback) within Timeout %v", ok, took, st, timeout)
			}
			if tc.rush && (st.Errors != 1 || st.OnFleet) {
				t.Errorf("the call after the lease was spent within an interval of the failed renewal: %+v; want 1 error (Redis not asked again), off the fleet", st)
			}
		})
	}
}
