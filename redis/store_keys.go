package redis

import (
	"container/list"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/steadyhq/retry"
)

// maxStoreKeys bounds the breakers a Store keeps what it knows of; past
// it, the one synced least recently is dropped, with the successes it held.
const maxStoreKeys = 4096

// record is what a Store knows of one breaker: its state as Redis last
// answered for it alone, and the counts it holds for the next round trip.
type record struct {
	name   string
	health *keyHealth

	// Guarded by the Store's records.mu.
	known   bool // a reply of the script gave the fields below
	state   int
	gen     uint64
	untilMs int64     // while open: until when, on Redis's clock
	redisMs int64     // Redis's time at the reply
	at      time.Time // when the reply came
	sent    time.Time // when its counts last went to Redis (its heartbeat)

	pendGen        uint64    // the generation of the counts held
	pendF          uint64    // failures held (a round trip that failed, or the Store resting)
	pendFSince     time.Time // when the first of them was held
	held           [window]heldSlice
	listed         bool // the list of breakers that are not quiet named it at its last read
	lastFailedSent time.Time
}

// window is the number of slices of a breaker's window.
const window = 10

// heldSlice is the successes a record holds of one slice of the window,
// numbered on the local clock (unix ms / slice length).
type heldSlice struct {
	idx int64
	n   uint64
}

// merge takes the counts of a sync, of slice idx at now: successes are
// held, failures until the round trip that sends them. Counts of another
// generation than those held drop them, unless either is 0 (before a
// reply): they belong to a state that ended.
func (r *record) merge(e retry.BreakerSync, idx int64, now time.Time) {
	if e.Successes+e.Failures == 0 {
		return
	}
	if e.Generation != r.pendGen {
		if r.pendGen != 0 && e.Generation != 0 {
			r.dropHeld()
		}
		if e.Generation != 0 {
			r.pendGen = e.Generation
		}
	}
	if e.Successes > 0 {
		r.hold(idx, e.Successes)
	}
	if e.Failures > 0 && r.pendF == 0 {
		r.pendFSince = now
	}
	r.pendF += e.Failures
}

// takeFailures returns the failures held, and drops them: none if they
// have been held longer than the window (a long outage of Redis), which
// the fleet's window would have let go.
func (r *record) takeFailures(now time.Time, w time.Duration) uint64 {
	n := r.pendF
	r.pendF = 0
	if now.Sub(r.pendFSince) > w {
		return 0
	}
	return n
}

// hold adds n successes to the slice idx.
func (r *record) hold(idx int64, n uint64) {
	h := &r.held[idx%window]
	if h.idx != idx {
		*h = heldSlice{idx: idx}
	}
	h.n += n
}

// heldSuccesses reports whether the record holds successes of the window
// that ends with slice idx.
func (r *record) heldSuccesses(idx int64) bool {
	for _, h := range r.held {
		if h.n > 0 && h.idx > idx-window {
			return true
		}
	}
	return false
}

// takeHeld returns the successes held of the window that ends with slice
// idx as syncScript's pairs (slices ago, successes), and drops them all.
func (r *record) takeHeld(idx int64) []any {
	var pairs []any
	for i := range r.held {
		h := &r.held[i]
		if h.n > 0 && h.idx > idx-window && h.idx <= idx {
			pairs = append(pairs, idx-h.idx, h.n)
		}
		*h = heldSlice{}
	}
	return pairs
}

// putBack holds again the pairs of takeHeld, sent at slice idx, after a
// round trip that failed.
func (r *record) putBack(idx int64, pairs []any) {
	for j := 0; j+1 < len(pairs); j += 2 {
		r.hold(idx-pairs[j].(int64), pairs[j+1].(uint64))
	}
}

// dropHeld drops the counts held.
func (r *record) dropHeld() {
	r.held = [window]heldSlice{}
	r.pendF = 0
}

// records is the Store's bounded map of records, the one synced least
// recently dropped first.
type records struct {
	mu    sync.Mutex
	m     map[string]*list.Element
	order list.List // most recently synced first
}

func newRecords() *records { return &records{m: map[string]*list.Element{}} }

// get returns the record of name, made with its heartbeat spread over the
// last heartbeat (so that a process's breakers do not all beat at once),
// and marks it used. mu is held.
func (rs *records) get(name string, now time.Time, heartbeat time.Duration, mk func() *keyHealth) *record {
	if e, ok := rs.m[name]; ok {
		rs.order.MoveToFront(e)
		return e.Value.(*record)
	}
	if len(rs.m) >= maxStoreKeys {
		oldest := rs.order.Back()
		delete(rs.m, oldest.Value.(*record).name)
		rs.order.Remove(oldest)
	}
	r := &record{name: name, health: mk(), sent: now.Add(-rand.N(heartbeat + 1))}
	rs.m[name] = rs.order.PushFront(r)
	return r
}

// len returns the number of records kept.
func (rs *records) len() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return len(rs.m)
}

// feedView is the list of breakers that are not quiet as last read.
type feedView struct {
	entries map[string]feedEntry
	bad     map[string]error // entries out of range
	redisMs int64            // Redis's time at the read
	at      time.Time        // when the reply came
}

// redisNow estimates Redis's clock at t from a reply that gave redisMs at
// local time at.
func redisNow(redisMs int64, at, t time.Time) int64 {
	return redisMs + t.Sub(at).Milliseconds()
}
