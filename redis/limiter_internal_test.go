package redis

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/steadyhq/retry"
)

// TestGCRALimit: every limit NewLimiter takes becomes a Rate of at least 1
// with the limit's emission interval; a limit too small for a Duration is
// refused with an error naming the value and the rule.
func TestGCRALimit(t *testing.T) {
	tests := []struct {
		limit float64
		tol   float64 // relative error allowed on the emission interval
		err   string
	}{
		{limit: 100},
		{limit: 1},
		{limit: 2.5},
		{limit: 1.0005, tol: 5e-4},
		{limit: 1e9 - 0.5, tol: 5e-4},
		{limit: 1.0 / 3, tol: 1e-9},
		{limit: 0.0004, tol: 1e-9},
		{limit: 0.0001234, tol: 1e-9},
		{limit: 1e-9, tol: 1e-9},
		{limit: 1e-10, err: "redis: NewLimiter: limit = 1e-10: must be >= 1e-9 attempts per second (one in about 32 years)"},
	}
	for _, tt := range tests {
		l, err := gcraLimit(tt.limit, 3)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("limit %v: error %v, want %q", tt.limit, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("limit %v: %v", tt.limit, err)
			continue
		}
		want := float64(time.Second) / tt.limit
		got := float64(l.Period) / float64(l.Rate)
		if l.Rate < 1 || l.Burst != 3 || math.Abs(got-want) > tt.tol*want {
			t.Errorf("limit %v: %+v, emission interval %v ns, want %v ns", tt.limit, l, got, want)
		}
	}
}

// TestLeaseKeysBounded: a per-key Limiter keeps at most maxLeaseKeys
// leases however many keys it sees.
func TestLeaseKeysBounded(t *testing.T) {
	l := &Limiter{perKey: true}
	for i := range 3 * maxLeaseKeys {
		if l.lease(strconv.Itoa(i)) == nil {
			t.Fatalf("key %d: no lease", i)
		}
		n := 0
		l.keys.Range(func(any, any) bool { n++; return true })
		if n > maxLeaseKeys || int(l.nkeys.Load()) != n {
			t.Fatalf("after %d keys: %d leases kept (counted %d), bound %d", i+1, n, l.nkeys.Load(), maxLeaseKeys)
		}
	}
	if a, b := l.lease("same"), l.lease("same"); a != b {
		t.Errorf("one key, two leases")
	}
}

// TestBudgetKeysBounded: a per-key Budget keeps the unsent successes of at
// most maxLeaseKeys keys however many keys it sees.
func TestBudgetKeysBounded(t *testing.T) {
	b := &Budget{spec: retry.Budget{PerKey: true}.WithDefaults(), health: newHealth("budget", Options{})}
	for i := range 3 * maxLeaseKeys {
		b.Won(strconv.Itoa(i), 0)
		n := 0
		b.keys.Range(func(any, any) bool { n++; return true })
		if n > maxLeaseKeys || int(b.nkeys.Load()) != n {
			t.Fatalf("after %d keys: %d tallies kept (counted %d), bound %d", i+1, n, b.nkeys.Load(), maxLeaseKeys)
		}
	}
	if a, c := b.tally("same"), b.tally("same"); a != c {
		t.Errorf("one key, two tallies")
	}
}
