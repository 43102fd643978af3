package retry

import (
	"sync"
	"time"
)

// keepRecent is how many breaker changes and denials a Retrier keeps for
// Stats: the latest, the older ones dropped.
const keepRecent = 32

// stateChange is a change of a circuit breaker's state, as
// Stats.BreakerChanges lists it (the same struct, spelled out there).
type stateChange = struct {
	Key  string    `json:"key"`
	From string    `json:"from"`
	To   string    `json:"to"`
	Time time.Time `json:"time"`
}

// recent keeps the last keepRecent values added, for Stats. Only what
// does not happen on the success path adds to one (a breaker's change of
// state, a call a gate stopped), so its lock is never taken by a call
// that succeeds. It is safe for concurrent use.
type recent[T any] struct {
	mu   sync.Mutex
	ring [keepRecent]T
	n    uint64 // values added, ever
}

// add keeps v, dropping the oldest value kept when full.
func (r *recent[T]) add(v T) {
	r.mu.Lock()
	r.ring[r.n%keepRecent] = v
	r.n++
	r.mu.Unlock()
}

// list returns the values kept, oldest first; nil when there are none.
func (r *recent[T]) list() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := min(r.n, keepRecent)
	if k == 0 {
		return nil
	}
	out := make([]T, 0, k)
	for i := r.n - k; i < r.n; i++ {
		out = append(out, r.ring[i%keepRecent])
	}
	return out
}

// denied keeps the call a gate stopped, with reason, for Stats.Denials:
// its key, its type (for the budget, the type of the failure whose retry
// it denied, as Event.Type has it), the time and the budget's balance.
func (c *call) denied(reason Reason, typ string, now time.Time, balance float64) {
	c.cfg.state.denials.add(Event{Attempt: c.attempt, Key: c.eventKey(), Type: typ, Reason: reason, Time: now, Balance: balance})
}
