package retry

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// fleetSync syncs a Retrier's shared breakers with its BreakerStore: one
// Sync for all of them, started by a call that finds the last one older
// than the interval (or by a timer, so that a process that falls quiet
// still sends its counts), and, at once, one for breakers that have never
// been read or have probe outcomes to send. Each runs on a goroutine of
// its own that ends with its round trip: no goroutine outlives one round
// trip bounded by the interval and StoreWait.
type fleetSync struct {
	store    BreakerStore
	bs       *breakers
	interval time.Duration

	seq     atomic.Uint64 // requests sent to the store, numbered in order
	tried   atomic.Int64  // unix ns at which the last sync of every breaker started
	flight  atomic.Pointer[flight]
	counted atomic.Bool  // outcomes wait to be sent
	flush   atomic.Bool  // a timer will send them
	busy    atomic.Int64 // unix ns of a call that found a view between one and two intervals old
}

// flight is a sync under way; done closes when it has its answer.
type flight struct{ done chan struct{} }

func newFleetSync(bs *breakers) *fleetSync {
	fs := &fleetSync{store: bs.spec.Store, bs: bs, interval: bs.spec.Store.SyncInterval()}
	if fs.interval <= 0 {
		fs.interval = 100 * time.Millisecond
	}
	return fs
}

// kick starts a sync unless one is under way, and returns the one under
// way: of every breaker when all, else of those never read or with probe
// outcomes to send.
func (fs *fleetSync) kick(all bool) *flight {
	for {
		if f := fs.flight.Load(); f != nil {
			return f
		}
		f := &flight{done: make(chan struct{})}
		if fs.flight.CompareAndSwap(nil, f) {
			if all {
				fs.tried.Store(time.Now().UnixNano())
			}
			go fs.syncs(f, all)
			return f
		}
	}
}

// syncs runs the sync f, and another at once while probe outcomes or
// breakers never read are waiting.
func (fs *fleetSync) syncs(f *flight, all bool) {
	for {
		more := fs.sync(all)
		fs.flight.Store(nil)
		close(f.done)
		if !more {
			return
		}
		f = &flight{done: make(chan struct{})}
		if !fs.flight.CompareAndSwap(nil, f) {
			return
		}
		all = false
	}
}

// each calls f for every shared breaker of the Retrier.
func (fs *fleetSync) each(f func(sb *sharedBreaker)) {
	if fs.bs.single != nil {
		f(fs.bs.single.shared)
		return
	}
	fs.bs.keys.each(func(_ string, b *breaker) { f(b.shared) })
}

// sync sends, in one Sync, the counts and probe outcomes kept since the
// last one, of every breaker when all, and reads their states back. Counts
// that fail to reach the store are dropped: the local breakers have them.
// It reports whether probe outcomes kept from a sync that failed, or
// breakers never read, wait for another.
func (fs *fleetSync) sync(all bool) (more bool) {
	var sbs []*sharedBreaker
	var in []BreakerSync
	fs.counted.Store(false)
	fs.each(func(sb *sharedBreaker) {
		if all || sb.view.Load().synced == 0 || sb.probesWaiting() {
			sbs = append(sbs, sb)
			in = append(in, sb.take())
		}
	})
	if len(in) == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), fs.interval+fs.bs.spec.StoreWait)
	defer cancel()
	seq := fs.seq.Add(1)
	out, err := fs.store.Sync(ctx, fs.bs.spec, in)
	if err == nil && len(out) != len(in) {
		err = fmt.Errorf("retry: BreakerStore.Sync returned %d states for %d breakers", len(out), len(in))
	}
	for i, sb := range sbs {
		e := err
		if e == nil {
			e = out[i].Err
		}
		if e != nil {
			sb.failed.Store(true)
			sb.keepProbes(in[i])
			continue
		}
		sb.update(out[i], seq)
		more = more || sb.probesWaiting()
	}
	return more && err == nil
}

// counts notes outcomes waiting to be sent. They go out with the sync that
// the next call starts, or at the latest one interval later, by a timer,
// so that a process that falls quiet still sends them.
func (fs *fleetSync) counts() {
	if !fs.counted.Load() {
		fs.counted.Store(true)
	}
	if !fs.flush.Load() && fs.flush.CompareAndSwap(false, true) {
		time.AfterFunc(fs.interval, fs.flushed)
	}
}

// flushed starts a sync of counts still unsent one interval after they
// were counted, unless a sync started within the interval; then it looks
// again one interval after that sync.
func (fs *fleetSync) flushed() {
	if !fs.counted.Load() {
		fs.flush.Store(false)
		return
	}
	if age := time.Duration(time.Now().UnixNano() - fs.tried.Load()); age < fs.interval {
		time.AfterFunc(fs.interval-age, fs.flushed)
		return
	}
	fs.flush.Store(false)
	fs.kick(true)
}
