package shed

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestNewcomerHandsFreePermitToQueue pins a race between a permit given
// back and a request that tries the fast path. adaptive.Limit.Acquire
// counts a permit first and takes it back when over the limit, so a
// newcomer that read "nobody waits" just before a waiter queued can, for
// an instant, hold the permit that a Done is handing to the queue: the
// Done's dispatch finds none, and the newcomer, over the limit, gives it
// back. The test builds that state deterministically: the permit comes
// back without a dispatch (as the newcomer's Release does), then the
// newcomer, a retry, is refused. The permit must not sit free while a
// request waits: the refusal hands it to the queue.
func TestNewcomerHandsFreePermitToQueue(t *testing.T) {
	tests := []struct {
		name string
		req  Request
	}{
		{name: "retry", req: Request{Attempt: 2}},
		{name: "low", req: Request{Priority: Low}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, err := New(Options{Initial: 1, Min: 1, Max: 1, QueueWait: time.Second})
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				hold, no := s.Admit(ctx, Request{})
				if no != nil {
					t.Fatal(no)
				}
				start := time.Now()
				waited := make(chan time.Duration)
				go func() {
					tk, no := s.Admit(ctx, Request{})
					if no != nil {
						t.Errorf("waiter: %v", no)
					}
					waited <- time.Since(start)
					s.Done(tk)
				}()
				synctest.Wait()
				// The newcomer held the permit while the Done dispatched, and
				// gives it back without a dispatch.
				hold.held = false
				s.lim.Release()
				if _, no := s.Admit(ctx, tt.req); no == nil {
					t.Fatalf("the newcomer took the permit from the queue")
				}
				if d := <-waited; d != 0 {
					t.Errorf("the waiter was admitted after %v, want at once (a permit was free)", d)
				}
				synctest.Wait() // the waiter's Done, after it sent
				if st := s.Stats(); st.InFlight != 0 || st.Queued != 0 {
					t.Errorf("Stats() = %+v", st)
				}
			})
		})
	}
}
