package retry

import (
	"context"
	"testing"
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
