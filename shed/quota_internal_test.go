package shed

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// TestQuotaEvictsLeastRecent: with maxQuotaKeys clients in live windows,
// a new client gets a window of its own, in place of the client seen least
// recently, and no more windows are kept; a client seen since keeps its
// window, used up or not; the evicted client starts a new window.
func TestQuotaEvictsLeastRecent(t *testing.T) {
	s, err := New(Options{Quota: Quota{Limit: 1, Window: 8 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return clock }
	ctx := context.Background()
	admit := func(key string) *Refusal {
		t.Helper()
		tk, no := s.Admit(ctx, Request{Key: key})
		s.Done(tk)
		return no
	}
	for i := range maxQuotaKeys {
		if no := admit(strconv.Itoa(i)); no != nil {
			t.Fatalf("client %d: %v, want admitted", i, no)
		}
	}
	// Client 0 comes back over its quota, and is now the most recent.
	if no := admit("0"); no == nil || no.Reason != ReasonQuota {
		t.Fatalf("client 0 again: %v, want %v", no, ReasonQuota)
	}
	// Newcomers each get their own window, evicting 1 and 2, the least
	// recently seen.
	for _, key := range []string{"new-1", "new-2"} {
		if no := admit(key); no != nil {
			t.Errorf("%s: %v, want admitted with a window of its own", key, no)
		}
		if no := admit(key); no == nil || no.Reason != ReasonQuota {
			t.Errorf("%s again: %v, want %v: its own window, used up", key, no, ReasonQuota)
		}
	}
	if n := len(s.quota.index); n != maxQuotaKeys || len(s.quota.entries) != maxQuotaKeys {
		t.Errorf("%d windows kept, want %d", n, maxQuotaKeys)
	}
	if no := admit("0"); no == nil || no.Reason != ReasonQuota {
		t.Errorf("client 0, seen recently: %v, want %v: its window kept", no, ReasonQuota)
	}
	if no := admit("1"); no != nil {
		t.Errorf("client 1, evicted: %v, want admitted in a new window", no)
	}
	// Client 1's return evicted client 3; client 4 keeps its window.
	if no := admit("4"); no == nil || no.Reason != ReasonQuota {
		t.Errorf("client 4, not evicted: %v, want %v", no, ReasonQuota)
	}
}
