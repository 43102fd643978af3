package retry

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// nopStore is a BreakerStore that is never reached in these tests.
type nopStore struct{}

func (nopStore) Sync(_ context.Context, _ Breaker, in []BreakerSync) ([]BreakerFleet, error) {
	return make([]BreakerFleet, len(in)), nil
}
func (nopStore) SyncInterval() time.Duration { return time.Hour }

// TestSharedBreakerStaleReply: replies may answer out of order (a sync and
// a probe claim run at once); a reply of an older generation never takes
// the view back, unless its request was sent after the view was taken:
// then the store lost the breaker's state (a restart with empty data, a
// flush, an expired key), and its answer is the fleet's state.
func TestSharedBreakerStaleReply(t *testing.T) {
	type reply struct {
		fl   BreakerFleet
		seq  uint64 // the number of the request it answers
		sent uint64 // the requests sent when it arrives
	}
	open := func(gen uint64) BreakerFleet {
		return BreakerFleet{State: BreakerOpen, Generation: gen, OpenFor: time.Minute}
	}
	tests := []struct {
		name    string
		replies []reply
		want    string
		gen     uint64
	}{
		{name: "in order", replies: []reply{{fl: open(1), seq: 1, sent: 1}, {fl: BreakerFleet{State: BreakerHalfOpen, Generation: 2}, seq: 2, sent: 2}}, want: BreakerHalfOpen, gen: 2},
		{name: "a late closed reply after the open one", replies: []reply{{fl: open(3), seq: 2, sent: 2}, {fl: BreakerFleet{State: BreakerClosed, Generation: 2}, seq: 1, sent: 2}}, want: BreakerOpen, gen: 3},
		{name: "a late reply of a newer generation", replies: []reply{{fl: open(3), seq: 2, sent: 2}, {fl: BreakerFleet{State: BreakerHalfOpen, Generation: 4}, seq: 1, sent: 2}}, want: BreakerHalfOpen, gen: 4},
		{name: "same generation: the later reply", replies: []reply{{fl: BreakerFleet{State: BreakerHalfOpen, Generation: 4}, seq: 1, sent: 2}, {fl: BreakerFleet{State: BreakerHalfOpen, Generation: 4}, seq: 2, sent: 2}}, want: BreakerHalfOpen, gen: 4},
		{name: "a claim run before an earlier sync that reopened, its reply last", replies: []reply{{fl: open(3), seq: 5, sent: 6}, {fl: BreakerFleet{State: BreakerHalfOpen, Generation: 2}, seq: 6, sent: 6}}, want: BreakerOpen, gen: 3},
		{name: "the store lost the state: a request sent after the view answers generation 0", replies: []reply{{fl: open(7), seq: 1, sent: 1}, {fl: BreakerFleet{State: BreakerClosed, Generation: 0}, seq: 2, sent: 2}}, want: BreakerClosed, gen: 0},
		{name: "lost, then the old state's late reply", replies: []reply{{fl: BreakerFleet{State: BreakerClosed, Generation: 1}, seq: 3, sent: 3}, {fl: BreakerFleet{State: BreakerClosed, Generation: 0}, seq: 2, sent: 3}}, want: BreakerClosed, gen: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var changes []string
			bs := newBreakers(Breaker{Store: nopStore{}, OnChange: func(_, from, to string) { changes = append(changes, from+">"+to) }}.withDefaults())
			sb := bs.single.shared
			for _, r := range tt.replies {
				sb.fs.seq.Store(r.sent)
				sb.update(r.fl, r.seq)
			}
			bs.flush()
			if v := sb.view.Load(); v.state != tt.want || v.gen != tt.gen {
				t.Errorf("view %s generation %d, want %s generation %d (changes %v)", v.state, v.gen, tt.want, tt.gen, changes)
			}
		})
	}
}

// halfOpenStore answers every sync with a half-open breaker of
// generation 2, as the fleet's store does once the open time has passed.
type halfOpenStore struct{}

func (halfOpenStore) Sync(_ context.Context, _ Breaker, in []BreakerSync) ([]BreakerFleet, error) {
	out := make([]BreakerFleet, len(in))
	for i := range out {
		out[i] = BreakerFleet{State: BreakerHalfOpen, Generation: 2}
	}
	return out, nil
}
func (halfOpenStore) SyncInterval() time.Duration { return 10 * time.Millisecond }

// pausedCtx is a context whose Deadline, the first thing a call asks of it
// once it knows it must wait for the store, first waits for pause to close.
type pausedCtx struct {
	context.Context
	pause <-chan struct{}
}

func (c pausedCtx) Deadline() (time.Time, bool) {
	<-c.pause
	return c.Context.Deadline()
}

// TestSharedBreakerSyncEndsMidCall: a call that read a stale view while
// another call's sync was under way, and looks for that sync only after it
// ended, decides on the state the sync read, never on the local breaker
// (whose own counts may let the attempt through while the fleet has a
// probe out). The race let two probes through a fleet whose Probes was 1,
// about one run in 2,000 of TestSharedBreakerOpensForAll.
func TestSharedBreakerSyncEndsMidCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(Breaker{Store: halfOpenStore{}, StoreWait: 50 * time.Millisecond}.withDefaults())
		sb := bs.single.shared
		sb.update(BreakerFleet{State: BreakerOpen, Generation: 1, OpenFor: time.Second}, sb.fs.seq.Add(1))
		time.Sleep(time.Second) // the open time ends; the view is stale
		f := sb.fs.kick(true)   // another call's sync
		v := sb.current(pausedCtx{Context: t.Context(), pause: f.done}, time.Now().UnixNano())
		if v == nil {
			t.Fatal("the call fell back to the local breaker, want the state the sync read")
		}
		if v.state != BreakerHalfOpen || v.gen != 2 {
			t.Errorf("the call decided on %s generation %d, want half-open generation 2", v.state, v.gen)
		}
	})
}
