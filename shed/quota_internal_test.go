package shed

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// TestQuotaPastTheBound: with maxQuotaKeys clients in live windows, new
// clients share one window; the map grows no further; a request of such a
// client shed for overload is given back to the shared window, as any
// other client's is; once the windows end, new clients get their own.
func TestQuotaPastTheBound(t *testing.T) {
	s, err := New(Options{Initial: 1, Min: 1, Max: 1, Quota: Quota{Limit: 1, Window: 8 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return clock }
	ctx := context.Background()
	hold, no := s.Admit(ctx, Request{})
	if no != nil {
		t.Fatal(no)
	}
	for i := range maxQuotaKeys {
		if _, no := s.Admit(ctx, Request{Key: strconv.Itoa(i), Attempt: 2}); no == nil || no.Reason != ReasonLow {
			t.Fatalf("client %d: %v, want %v", i, no, ReasonLow)
		}
	}
	// New clients share the overflow window; each is shed for overload
	// and given back, so none is over the quota; so is a client of its own.
	for i, key := range []string{"new-1", "new-2", "new-3", "0", "new-4", "new-5"} {
		if _, no := s.Admit(ctx, Request{Key: key, Attempt: 2}); no == nil || no.Reason != ReasonLow {
			t.Errorf("step %d, client %q: %v, want %v", i, key, no, ReasonLow)
		}
	}
	s.Done(hold)
	// The shared window's one request, then the next new client is over.
	if tk, no := s.Admit(ctx, Request{Key: "new-11"}); no != nil {
		t.Errorf("new-11: %v, want admitted", no)
	} else {
		s.Done(tk)
	}
	if _, no := s.Admit(ctx, Request{Key: "new-12", Attempt: 2}); no == nil || no.Reason != ReasonQuota {
		t.Errorf("new-12: %v, want %v", no, ReasonQuota)
	}
	if n := len(s.quota.m); n > maxQuotaKeys+1 {
		t.Errorf("%d windows kept, want at most %d", n, maxQuotaKeys+1)
	}
	// After the windows end, a new client has a window of its own again,
	// and the old ones are swept.
	clock = clock.Add(8 * time.Second)
	if tk, no := s.Admit(ctx, Request{Key: "later"}); no != nil {
		t.Errorf("later: %v, want admitted", no)
	} else {
		s.Done(tk)
	}
	if n := len(s.quota.m); n != 1 {
		t.Errorf("%d windows kept after they all ended, want 1", n)
	}
}
