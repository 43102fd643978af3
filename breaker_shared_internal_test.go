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
// a probe claim run at once); one of an older generation than the view's
// never takes the view back.
func TestSharedBreakerStaleReply(t *testing.T) {
	tests := []struct {
		name    string
		replies []BreakerFleet
		want    string
		gen     uint64
	}{
		{name: "in order", replies: []BreakerFleet{{State: stateOpen, Generation: 1, OpenFor: time.Minute}, {State: stateHalfOpen, Generation: 2}}, want: stateHalfOpen, gen: 2},
		{name: "a late closed reply after the open one", replies: []BreakerFleet{{State: stateOpen, Generation: 3, OpenFor: time.Minute}, {State: stateClosed, Generation: 2}}, want: stateOpen, gen: 3},
		{name: "same generation: the later reply", replies: []BreakerFleet{{State: stateHalfOpen, Generation: 4}, {State: stateHalfOpen, Generation: 4}}, want: stateHalfOpen, gen: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var changes []string
			bs := newBreakers(Breaker{Store: nopStore{}, OnChange: func(_, from, to string) { changes = append(changes, from+">"+to) }}.withDefaults())
			sb := newSharedBreaker(nopStore{}, bs, "")
			for _, r := range tt.replies {
				sb.update(r)
			}
			bs.flush()
			if v := sb.view.Load(); v.state != tt.want || v.gen != tt.gen {
				t.Errorf("view %s generation %d, want %s generation %d (changes %v)", v.state, v.gen, tt.want, tt.gen, changes)
			}
		})
	}
}
