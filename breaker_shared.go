package retry

import (
	"cmp"
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// sharedBreaker is a breaker whose state is the fleet's, kept by a
// BreakerStore through the Retrier's fleetSync. Attempts decide from
// fleetView, the state as last read; outcomes are counted on atomics and
// sent by the next sync.
type sharedBreaker struct {
	fs  *fleetSync
	key string

	view   atomic.Pointer[fleetView]
	local  atomic.Bool // the last decision was the local breaker's
	failed atomic.Bool // the last round trip failed
	claim  atomic.Bool // a claim is in flight

	successes, failures atomic.Uint64 // since the last sync

	mu     sync.Mutex
	probes BreakerSync // probe outcomes not yet sent
}

// fleetView is the fleet's state as this process last read it.
type fleetView struct {
	state  string
	gen    uint64
	until  int64  // unix ns: while open, when probes may start
	synced int64  // unix ns of the reply; 0 before the first
	seq    uint64 // the number of the request answered
	fence  uint64 // the last request sent when the view was taken
}

func newSharedBreaker(fs *fleetSync, key string) *sharedBreaker {
	sb := &sharedBreaker{fs: fs, key: key}
	// Never synced: the first call reads the fleet's state, within
	// StoreWait, before it decides.
	sb.view.Store(&fleetView{state: BreakerClosed})
	return sb
}

// current returns the view a call decides on, starting a sync of every
// breaker when the last one is older than the interval. A breaker never
// read, or whose view is older than two intervals (a quiet process; or
// four, while a sync is under way in a process that had calls while the
// view was fresh), is read first, within storeWait. It returns nil when the store failed or did not
// answer in time: the local breaker then stands in.
func (sb *sharedBreaker) current(ctx context.Context, now int64) *fleetView {
	fs := sb.fs
	v := sb.view.Load()
	if time.Duration(now-v.synced) < fs.interval {
		return v
	}
	var f *flight
	if time.Duration(now-fs.tried.Load()) >= fs.interval {
		f = fs.kick(true)
	}
	age := time.Duration(now - v.synced)
	if v.synced != 0 && age < 2*fs.interval {
		if fs.busy.Load() < v.synced {
			fs.busy.Store(now) // a call while the view was fresh: the process is not quiet
		}
		return v
	}
	if v.synced != 0 && age < 4*fs.interval && fs.busy.Load() >= v.synced && fs.flight.Load() != nil && !sb.failed.Load() {
		// The process had calls while the view was fresh, and its sync
		// is late (a slow store, a loaded machine): the calls decide on
		// the view they have, up to four intervals old, rather than each
		// wait for the store.
		return v
	}
	if sb.failed.Load() && v.synced != 0 {
		return nil // its last round trip failed: the local breaker, without waiting
	}
	t := time.NewTimer(sb.storeWait(ctx))
	defer t.Stop()
	for {
		if f == nil {
			f = fs.flight.Load()
		}
		if f == nil {
			f = fs.kick(v.synced != 0) // a breaker never read: a sync of those
		}
		timedOut := false
		select {
		case <-f.done:
		case <-t.C:
			timedOut = true
		case <-ctx.Done():
		}
		v = sb.view.Load()
		switch {
		case v.synced != 0 && time.Duration(time.Now().UnixNano()-v.synced) < 2*fs.interval:
			return v
		case timedOut, sb.failed.Load(), ctx.Err() != nil:
			return nil
		}
		f = nil // the sync that ended did not read this breaker: another
	}
}

// take returns what the next sync sends: the probe outcomes kept, or the
// counts since the last sync.
func (sb *sharedBreaker) take() BreakerSync {
	v := sb.view.Load()
	s := BreakerSync{Generation: v.gen}
	sb.mu.Lock()
	if p := sb.probes; p.ProbeSuccesses+p.ProbeFailures+p.ProbeReleases > 0 {
		s = p
	}
	sb.probes = BreakerSync{}
	sb.mu.Unlock()
	if s.Generation == v.gen {
		s.Successes, s.Failures = sb.successes.Swap(0), sb.failures.Swap(0)
	}
	s.Name = sb.key
	return s
}

func (sb *sharedBreaker) probesWaiting() bool {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	p := sb.probes
	return p.ProbeSuccesses+p.ProbeFailures+p.ProbeReleases > 0
}

// keepProbes puts back the probe outcomes of a sync that failed, so that
// the next sync sends them: a probe's outcome lost would leave the fleet's
// breaker half-open, its claim taken, until the claim lapses.
func (sb *sharedBreaker) keepProbes(s BreakerSync) {
	if s.ProbeSuccesses+s.ProbeFailures+s.ProbeReleases == 0 {
		return
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	p := &sb.probes
	if p.ProbeSuccesses+p.ProbeFailures+p.ProbeReleases > 0 && p.Generation != s.Generation {
		return // newer outcomes, of another generation, are waiting
	}
	p.Generation = s.Generation
	p.ProbeSuccesses += s.ProbeSuccesses
	p.ProbeFailures += s.ProbeFailures
	p.ProbeReleases += s.ProbeReleases
}

// update takes the store's reply to request seq as the view, and reports
// a change of state to Breaker.OnChange. A reply of a newer generation is
// taken; of the same generation, if it answers a later request. A reply of
// an older generation is taken only if its request was sent after the view
// was taken (seq above the view's fence): the store lost the breaker's
// state, and its answer is the fleet's state from now on. Otherwise it is
// a late reply (a sync and a probe claim may answer out of order).
func (sb *sharedBreaker) update(fl BreakerFleet, seq uint64) {
	now := time.Now()
	sb.failed.Store(false)
	nv := &fleetView{state: cmp.Or(fl.State, BreakerClosed), gen: fl.Generation, synced: now.UnixNano(), seq: seq}
	if fl.State == BreakerOpen {
		nv.until = now.Add(max(fl.OpenFor, 0)).UnixNano()
	}
	var old *fleetView
	for {
		old = sb.view.Load()
		switch {
		case nv.gen > old.gen:
		case nv.gen == old.gen && seq > old.seq:
		case nv.gen < old.gen && seq > old.fence:
		default:
			return // a late reply
		}
		nv.fence = sb.fs.seq.Load()
		if sb.view.CompareAndSwap(old, nv) {
			break
		}
	}
	if old.gen != nv.gen {
		// Outcomes counted under the old generation belong to it.
		sb.successes.Store(0)
		sb.failures.Store(0)
	}
	if old.state != nv.state {
		sb.fs.bs.record(sb.key, old.state, nv.state, now)
	}
}

// count keeps the outcome of an attempt run in the closed state, for the
// next sync.
func (sb *sharedBreaker) count(outcome error) {
	switch outcome {
	case nil:
		sb.successes.Add(1)
	case errBreakerExcluded:
		return
	default:
		sb.failures.Add(1)
	}
	sb.fs.counts()
}

// probed keeps the outcome of a probe claimed in gen for the next sync,
// and starts that sync at once.
func (sb *sharedBreaker) probed(gen uint64, outcome error) {
	sb.mu.Lock()
	if sb.probes.Generation != gen {
		sb.probes = BreakerSync{Generation: gen}
	}
	switch outcome {
	case nil:
		sb.probes.ProbeSuccesses++
	case errBreakerExcluded:
		sb.probes.ProbeReleases++
	default:
		sb.probes.ProbeFailures++
	}
	sb.mu.Unlock()
	sb.fs.kick(false)
}

// storeWait is how long a call may wait for the store: StoreWait, and at
// most half of what is left of ctx's deadline, so that the local breaker
// still has time.
func (sb *sharedBreaker) storeWait(ctx context.Context) time.Duration {
	w := sb.fs.bs.spec.StoreWait
	if dl, ok := ctx.Deadline(); ok {
		w = min(w, time.Until(dl)/2)
	}
	return max(w, 0)
}

// claimProbe asks the store for a probe, within storeWait. ok is
// false when the store failed.
func (sb *sharedBreaker) claimProbe(ctx context.Context, v *fleetView) (fl BreakerFleet, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, sb.storeWait(ctx))
	defer cancel()
	seq := sb.fs.seq.Add(1)
	out, err := sb.fs.store.Sync(ctx, sb.fs.bs.spec, []BreakerSync{{Name: sb.key, Generation: v.gen, Claim: true}})
	if err != nil || len(out) != 1 || out[0].Err != nil {
		return fl, false
	}
	sb.update(out[0], seq)
	return out[0], true
}

// allow admits one attempt on the fleet's state, in two steps as
// gobreaker's TwoStepCircuitBreaker does: a probe's done, when not nil,
// must be called with the attempt's outcome; counted, that sb.count must
// (the closed state's, which takes no allocation). Neither refuses the
// attempt, to be asked again after wait. ok is false when the store could
// not be read in time, and the caller's own breaker decides instead.
func (sb *sharedBreaker) allow(ctx context.Context) (done func(error), counted bool, wait time.Duration, ok bool) {
	now := time.Now().UnixNano()
	v := sb.current(ctx, now)
	if v == nil {
		return nil, false, 0, ended(ctx)
	}
	switch {
	case v.state == BreakerClosed:
	case v.state == BreakerOpen && now < v.until:
		return nil, false, time.Duration(v.until-now) + 1, true
	default: // half-open, or open past its time: claim a probe
		if !sb.claim.CompareAndSwap(false, true) {
			return nil, false, sb.fs.bs.spec.recheck(), true // this process is claiming
		}
		fl, ok := sb.claimProbe(ctx, v)
		sb.claim.Store(false)
		switch {
		case ended(ctx):
			return nil, false, 0, true
		case !ok:
			return nil, false, 0, false
		case fl.Claimed:
			gen := fl.Generation
			return func(outcome error) { sb.probed(gen, outcome) }, false, 0, true
		case fl.State == BreakerOpen && fl.OpenFor > 0:
			return nil, false, fl.OpenFor + 1, true
		case fl.State != BreakerClosed:
			return nil, false, sb.fs.bs.spec.recheck(), true // the fleet's probes are out
		}
	}
	if ended(ctx) {
		return nil, false, 0, true
	}
	return nil, true, 0, true
}

// openFor is how long the fleet's breaker stays open from now, as last
// read, or zero.
func (sb *sharedBreaker) openFor() time.Duration {
	v := sb.view.Load()
	if v.state != BreakerOpen {
		return 0
	}
	left := time.Duration(v.until - time.Now().UnixNano())
	if left <= 0 {
		return 0
	}
	return left + 1
}

// ended reports whether ctx is done or its deadline has passed, which a
// timer set for the same instant may notice first.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}
