package retry

// What a breaker reports: its changes of state, delivered to
// Breaker.OnChange in order, and its state for Stats.

import "time"

// changed records a change of the local circuit's state, under the
// circuit's lock, unless a shared breaker decides and the local one only
// learns.
func (b *breaker) changed(ch change) {
	if ch.happened() && (b.shared == nil || b.standIn.Load() > 0) {
		b.bs.record(b.key, ch.from.String(), ch.to.String(), ch.at)
	}
}

// record keeps a change of state at a time for the next flush, and for
// Stats.BreakerChanges.
func (bs *breakers) record(key, from, to string, at time.Time) {
	bs.mu.Lock()
	bs.changes = append(bs.changes, breakerChange{key: key, from: from, to: to})
	bs.mu.Unlock()
	bs.pending.Add(1)
	bs.recent.add(stateChange{Key: key, From: from, To: to, Time: at})
}

// The states of a circuit breaker, by the names that Breaker.OnChange,
// Stats.Breakers and BreakerFleet.State give them, and that a BreakerStore
// must return. They are untyped, so that they compare with those strings.
const (
	// BreakerClosed is the state in which attempts run and are counted.
	BreakerClosed = "closed"
	// BreakerHalfOpen is the state in which Breaker.Probes attempts run,
	// to try the dependency.
	BreakerHalfOpen = "half_open"
	// BreakerOpen is the state in which attempts are refused, until
	// Breaker.OpenTimeout has passed.
	BreakerOpen = "open"
)

// flush delivers the recorded state changes to Breaker.OnChange in the
// order they happened, one at a time: one goroutine delivers, holding
// bs.deliver, and a goroutine that finds it held leaves its changes to
// it, which looks again before it lets go. No lock a caller waits on is
// held while OnChange runs.
func (bs *breakers) flush() {
	if bs.pending.Load() != 0 {
		bs.deliverChanges()
	}
}

// deliverChanges is flush with changes pending.
func (bs *breakers) deliverChanges() {
	for bs.pending.Load() != 0 {
		if !bs.deliver.TryLock() {
			return
		}
		for bs.pending.Load() != 0 {
			bs.mu.Lock()
			changes := bs.changes
			bs.changes = nil
			bs.pending.Store(0)
			bs.mu.Unlock()
			if h := bs.spec.OnChange; h != nil {
				for _, ch := range changes {
					h(ch.key, ch.from, ch.to)
				}
			}
		}
		bs.deliver.Unlock()
	}
}

// states returns the state of every breaker, by key, and with a
// Breaker.Store whether the fleet's state made each one's last decision.
func (bs *breakers) states(now time.Time) (states map[string]string, onFleet map[string]bool) {
	states = make(map[string]string)
	if bs.spec.Store != nil {
		onFleet = make(map[string]bool)
	}
	add := func(key string, b *breaker) {
		local := b.shared == nil || b.shared.local.Load()
		states[key] = b.state(local, now)
		if b.shared != nil {
			onFleet[key] = !local
		}
	}
	if bs.single != nil {
		add("", bs.single)
	} else {
		bs.keys.each(add)
	}
	return states, onFleet
}

// state is the breaker's state at now: the process's own circuit's when
// local (it made the last decision, or there is no store), else the
// fleet's as this process last saw it in the store.
func (b *breaker) state(local bool, now time.Time) string {
	if !local {
		return b.shared.view.Load().state
	}
	st, _ := b.c.current(now)
	return st.String()
}

// openFor returns how long the breaker stays open from now, or zero when
// it is not open; for a shared breaker, as the fleet's state was last read.
func (b *breaker) openFor(now time.Time) time.Duration {
	if b.shared != nil {
		return b.shared.openFor()
	}
	return b.c.openFor(now)
}
