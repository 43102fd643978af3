package redis_test

import (
	"encoding/json"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	retryredis "github.com/steadyhq/retry/redis"
	"github.com/steadyhq/retry/retryz"
)

// The Store, the Limiter and the Budget are what the live page shows of
// the fleet.
var (
	_ retryz.Fleet = (*retryredis.Store)(nil)
	_ retryz.Fleet = (*retryredis.Limiter)(nil)
	_ retryz.Fleet = (*retryredis.Budget)(nil)
)

// TestFleetStatus: each component reports whether it runs on the fleet's
// state, when a round trip to Redis last succeeded and how many failed,
// and the live page shows it: on the fleet while Redis answers, off it
// with errors counted once Redis is gone, the last sync kept. Nil
// components report zeros.
func TestFleetStatus(t *testing.T) {
	s := startServer(t)
	m := newMember(t, s.Client())
	page := retryz.New()
	page.AddFleet("breakers", m.store)
	page.AddFleet("rate limit", m.limiter)
	page.AddFleet("budget", m.budget)
	page.AddRetrier("fleet member", m.r)
	defer runtime.KeepAlive(m.r)
	srv := httptest.NewServer(page)
	defer srv.Close()
	// read reads the page once its last reading has aged out (500 ms),
	// after a call: a component is off the fleet only within two sync
	// intervals and a Timeout of a failed round trip.
	read := func(call bool) []retryz.Member {
		t.Helper()
		time.Sleep(600 * time.Millisecond)
		if call {
			_ = m.r.Run(t.Context(), flaky())
		}
		resp, err := srv.Client().Get(srv.URL + "/?format=json")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var snap retryz.Snapshot
		if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
			t.Fatal(err)
		}
		return snap.Fleet
	}
	fleet := read(false)
	for _, f := range fleet {
		if !f.LastSync.IsZero() || f.Errors != 0 {
			t.Errorf("%s before any call: %+v, want no sync and no error", f.Name, f)
		}
	}

	before := time.Now()
	if err := m.r.Run(t.Context(), flaky()); err != nil {
		t.Fatal(err)
	}
	if len(fleet) != 3 {
		t.Fatalf("the page shows %d fleet components, want 3", len(fleet))
	}
	components := map[string]retryz.Fleet{"breakers": m.store, "rate limit": m.limiter, "budget": m.budget}
	for name, c := range components {
		on, last, errs := c.FleetStatus()
		if !on || last.Before(before) || last.After(time.Now()) || errs != 0 {
			t.Errorf("%s with Redis up: on %v, last sync %v (the call started %v), %d errors", name, on, last, before, errs)
		}
	}
	for _, f := range read(true) {
		if !f.OnFleet || f.LastSync.Before(before) || f.Errors != 0 {
			t.Errorf("the page, Redis up: %+v", f)
		}
	}

	s.Stop()
	stopped := time.Now()
	time.Sleep(3 * storeSync) // the fleet's state goes stale
	for range 3 {
		_ = m.r.Run(t.Context(), flaky()) // through the fallbacks
	}
	for name, c := range components {
		on, last, errs := c.FleetStatus()
		if on || last.After(stopped) || last.Before(before) || errs == 0 {
			t.Errorf("%s with Redis down: on %v, last sync %v (stopped %v), %d errors; want off the fleet, the last sync before, errors", name, on, last, stopped, errs)
		}
	}
	for _, f := range read(true) {
		if f.OnFleet || f.Errors == 0 || f.LastSync.After(stopped) {
			t.Errorf("the page, Redis down: %+v", f)
		}
	}

	var nilStore *retryredis.Store
	var nilLimiter *retryredis.Limiter
	var nilBudget *retryredis.Budget
	for _, c := range []retryz.Fleet{nilStore, nilLimiter, nilBudget} {
		if on, last, errs := c.FleetStatus(); on || !last.IsZero() || errs != 0 {
			t.Errorf("%T(nil): %v %v %d, want zeros", c, on, last, errs)
		}
	}
}
