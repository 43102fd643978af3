package retry

import (
	"context"
	"testing"
	"time"
)

// nopStore is a BreakerStore that is never reached in these tests.
type nopStore struct{}

func (nopStore) Sync(context.Context, string, Breaker, BreakerSync) (BreakerFleet, error) {
	return BreakerFleet{}, nil
}
func (nopStore) SyncInterval() time.Duration { return time.Hour }

// TestSharedBreakerStaleReply: replies may answer out of order (a sync and
// a probe claim run at once); the reply to an earlier request than the
// view's, of a generation no newer, never takes the view back. The reply
// to a later request is taken whatever its generation: the store lost the
// breaker's state (a restart with empty data, a flush, an expired key).
func TestSharedBreakerStaleReply(t *testing.T) {
	type reply struct {
		fl  BreakerFleet
		seq uint64 // the number of the request it answers
	}
	tests := []struct {
		name    string
		replies []reply
		want    string
		gen     uint64
	}{
		{name: "in order", replies: []reply{{fl: BreakerFleet{State: stateOpen, Generation: 1, OpenFor: time.Minute}, seq: 1}, {fl: BreakerFleet{State: stateHalfOpen, Generation: 2}, seq: 2}}, want: stateHalfOpen, gen: 2},
		{name: "a late closed reply after the open one", replies: []reply{{fl: BreakerFleet{State: stateOpen, Generation: 3, OpenFor: time.Minute}, seq: 2}, {fl: BreakerFleet{State: stateClosed, Generation: 2}, seq: 1}}, want: stateOpen, gen: 3},
		{name: "a late reply of a newer generation", replies: []reply{{fl: BreakerFleet{State: stateOpen, Generation: 3, OpenFor: time.Minute}, seq: 2}, {fl: BreakerFleet{State: stateHalfOpen, Generation: 4}, seq: 1}}, want: stateHalfOpen, gen: 4},
		{name: "same generation: the later reply", replies: []reply{{fl: BreakerFleet{State: stateHalfOpen, Generation: 4}, seq: 1}, {fl: BreakerFleet{State: stateHalfOpen, Generation: 4}, seq: 2}}, want: stateHalfOpen, gen: 4},
		{name: "the store lost the state: generation 0 answers a later request", replies: []reply{{fl: BreakerFleet{State: stateOpen, Generation: 7, OpenFor: time.Minute}, seq: 1}, {fl: BreakerFleet{State: stateClosed, Generation: 0}, seq: 2}}, want: stateClosed, gen: 0},
		{name: "lost, then the old state's late reply", replies: []reply{{fl: BreakerFleet{State: stateClosed, Generation: 1}, seq: 3}, {fl: BreakerFleet{State: stateClosed, Generation: 0}, seq: 2}}, want: stateClosed, gen: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var changes []string
			bs := newBreakers(Breaker{Store: nopStore{}, OnChange: func(_, from, to string) { changes = append(changes, from+">"+to) }}.withDefaults())
			sb := newSharedBreaker(nopStore{}, bs, "")
			for _, r := range tt.replies {
				sb.update(r.fl, r.seq)
			}
			bs.flush()
			if v := sb.view.Load(); v.state != tt.want || v.gen != tt.gen {
				t.Errorf("view %s generation %d, want %s generation %d (changes %v)", v.state, v.gen, tt.want, tt.gen, changes)
			}
		})
	}
}
