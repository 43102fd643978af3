package redis_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/steadyhq/retry"
	retryredis "github.com/steadyhq/retry/redis"
)

// TestStoreValuesDistrusted: a breaker's state in Redis that no Store
// wrote (another program, a hand edit, a bad restore) with times out of
// range or numbers that are not finite is a failure of the store, counted
// and with the process's own breaker deciding: calls to a healthy
// dependency go on. Such a state kept the fleet's breaker open for good
// (an opened-until time of inf or nan), or overflowed the time it said
// the breaker stays open (an opened-until time thirty thousand years
// ahead).
func TestStoreValuesDistrusted(t *testing.T) {
	s := startServer(t)
	c := s.Client()
	nowMs := strconv.FormatInt(time.Now().UnixMilli(), 10)
	tests := []struct {
		name   string
		fields []any // of the breaker's hash
		fail   bool  // the dependency fails: counts are read only when failures come
	}{
		{name: "until far ahead", fields: []any{"st", 2, "gen", 5, "until", strconv.FormatInt(time.Now().UnixMilli()+1e15, 10)}},
		{name: "until inf", fields: []any{"st", 2, "gen", 5, "until", "inf"}},
		{name: "until nan", fields: []any{"st", 2, "gen", 5, "until", "nan"}},
		{name: "until -inf, half-open", fields: []any{"st", 1, "gen", 5, "until", "-inf"}},
		{name: "generation nan", fields: []any{"st", 0, "gen", "nan", "until", nowMs}},
		{name: "generation inf", fields: []any{"st", 0, "gen", "inf", "until", nowMs}},
		{name: "state 7", fields: []any{"st", 7, "gen", 5, "until", nowMs}},
		{name: "claims nan", fields: []any{"st", 1, "gen", 5, "until", nowMs, "claimed", "nan"}},
		{name: "counts inf", fail: true, fields: append([]any{"st", 0, "gen", 5, "until", nowMs}, ring("inf")...)},
		{name: "counts nan", fail: true, fields: append([]any{"st", 0, "gen", 5, "until", nowMs}, ring("nan")...)},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := fmt.Sprintf("distrust:%d:", i)
			if err := c.HSet(t.Context(), prefix+"{breaker:}", tt.fields...).Err(); err != nil {
				t.Fatal(err)
			}
			store := mustStore(t, s.Client(), retryredis.Options{Prefix: prefix, SyncInterval: 10 * time.Millisecond, Timeout: time.Second})
			r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
				retry.WithBreaker(retry.Breaker{Store: store, StoreWait: time.Second}), retry.WithBudget(retry.Budget{Off: true}))
			var failed int
			var last error
			// Ten calls: with the dependency failing, fewer than the
			// local breaker's 20 MinRequests, which keeps it closed.
			for range 10 {
				err := r.Run(t.Context(), func(context.Context) error {
					if tt.fail {
						return errDown
					}
					return nil
				})
				var re *retry.Error
				if err != nil && (!tt.fail || !errors.As(err, &re) || re.Reason != retry.ReasonExhausted) {
					failed++
					last = err
				}
				time.Sleep(10 * time.Millisecond)
			}
			st, sst := r.Stats(), store.Stats()
			if failed != 0 || st.BreakerFallbacks == 0 || sst.Errors == 0 || st.BreakersOnFleet[""] {
				t.Errorf("%d calls refused or failed otherwise than by the dependency (last: %v); %d fallbacks, %d store errors, on the fleet %v: want none, the state counted as a store failure and the local breaker deciding",
					failed, last, st.BreakerFallbacks, sst.Errors, st.BreakersOnFleet[""])
			}
		})
	}
}

// ring is a breaker's window, every slice's counts v.
func ring(v string) []any {
	var f []any
	e := time.Now().UnixMilli() / 100 // slices of the default window's tenth
	for j := range int64(10) {
		f = append(f, fmt.Sprintf("e%d", (e-j)%10), e-j, fmt.Sprintf("s%d", (e-j)%10), v, fmt.Sprintf("f%d", (e-j)%10), v)
	}
	return f
}

// TestStoreRestingCause: after a round trip for a breaker failed, the
// breaker's syncs of the next interval are not sent, and their error says
// why Redis failed, so that an operator can tell a key of the wrong type
// from a server that is down.
func TestStoreRestingCause(t *testing.T) {
	s := startServer(t)
	c := s.Client()
	if err := c.Set(t.Context(), "retry:{breaker:wrong}", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	store := mustStore(t, c, retryredis.Options{SyncInterval: time.Minute})
	b := retry.Breaker{Window: time.Second, OpenTimeout: time.Second, Probes: 1, MinRequests: 1, FailureRatio: 0.5}
	var errs []error
	for range 2 {
		_, err := syncOne(t.Context(), store, "wrong", b, retry.BreakerSync{})
		errs = append(errs, err)
	}
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "WRONGTYPE") {
		t.Fatalf("the first sync: %v, want Redis's WRONGTYPE", errs[0])
	}
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "not asked") || !strings.Contains(errs[1].Error(), "WRONGTYPE") {
		t.Errorf("the sync not sent: %v, want it to say it was not asked and the last failure (WRONGTYPE)", errs[1])
	}
	if errors.Is(errs[1], context.DeadlineExceeded) {
		t.Errorf("the sync not sent: %v matches context.DeadlineExceeded", errs[1])
	}
}

// TestBreakerStateBounded: the state Redis keeps for a fleet's breakers
// follows the breakers in use: 3,000 keys called once each (a process
// keeps 1,024 of them) leave no hash in Redis once twice their Window has
// passed since their last sync; each stayed StateTTL (24 h) before.
func TestBreakerStateBounded(t *testing.T) {
	s := startServer(t)
	c := s.Client()
	store := mustStore(t, s.Client(), retryredis.Options{SyncInterval: 10 * time.Millisecond, Heartbeat: 50 * time.Millisecond, Timeout: time.Second})
	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}), retry.WithBudget(retry.Budget{Off: true}),
		retry.WithBreaker(retry.Breaker{Store: store, PerKey: true, Window: 50 * time.Millisecond, StoreWait: time.Second}))
	hashes := func() int {
		keys, err := c.Keys(t.Context(), "retry:{breaker:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return len(keys)
	}
	most := 0
	for i := range 3000 {
		if err := retry.Run(t.Context(), func(context.Context) error { return nil }, r, retry.WithKey(fmt.Sprintf("host-%d", i))); err != nil {
			t.Fatal(err)
		}
		if i%500 == 499 {
			most = max(most, hashes())
		}
	}
	time.Sleep(30 * time.Millisecond) // the last syncs
	most = max(most, hashes())
	if most == 0 {
		t.Fatal("no breaker's state in Redis while the calls ran")
	}
	end := time.Now()
	waitFor(t, time.Second, "the breakers' states to expire", func() bool { return hashes() == 0 })
	t.Logf("at most %d breakers' states in Redis while 3,000 keys were called; none %v after the calls ended (twice the Window: 100 ms after each one's last sync)",
		most, time.Since(end).Round(time.Millisecond))
}
