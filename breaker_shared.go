package retry

import (
	"cmp"
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// BreakerStore keeps the state of circuit breakers that a fleet of
// processes shares (github.com/steadyhq/retry/redis has one on Redis); set
// it as Breaker.Store.
//
// Each process decides alone, from the fleet's state as it last read it,
// and counts its outcomes locally; about once per SyncInterval, while it
// has calls, one Sync sends those counts and reads the fleet's state back.
// The store sums the fleet's counts over Window and trips the breaker on
// the sum (FailureRatio and MinRequests apply to it); it keeps the time the
// breaker stays open, and it grants the half-open probes, Probes of them
// fleet-wide. A process's attempts wait on the store only to claim a probe,
// before its first attempts (a process that has never read the fleet's
// state reads it first), or after a quiet spell longer than two intervals,
// for at most StoreWait each time.
//
// A store may lose a breaker's state (a restart with empty data, a flush,
// an expired key) and answer with a generation lower than the one a
// process last read: the process takes the answer to a request sent after
// it read that generation as the fleet's state, whatever its generation,
// so that it is back on the fleet's state at its next sync after the store
// answers. A store that starts the generations of a state it makes again
// past those it lost (the Redis one does) keeps late replies from before
// the loss from passing for newer.
//
// Implementations must be safe for concurrent use and must not hold a call
// past ctx's deadline.
type BreakerStore interface {
	// Sync adds s to the fleet's breaker name, whose settings are b (its
	// zero fields set to their defaults, as the Retrier passes them), and
	// returns the breaker's state, in one round trip. Counts of another
	// generation than the breaker's are dropped; a claim is granted only
	// in the half-open state, while fewer than b.Probes are claimed.
	Sync(ctx context.Context, name string, b Breaker, s BreakerSync) (BreakerFleet, error)
	// SyncInterval is how often a process with calls syncs each breaker.
	SyncInterval() time.Duration
}

// BreakerSync is what one process sends a BreakerStore: its outcomes
// since its last Sync, and whether it claims a probe.
type BreakerSync struct {
	Generation uint64 // the fleet's generation the outcomes belong to
	Successes  uint64 // attempts that succeeded in the closed state
	Failures   uint64 // attempts that failed in the closed state
	Claim      bool   // claim one half-open probe
	// The outcomes of probes claimed in Generation: a failed probe opens
	// the breaker again, Probes successes close it, and a released claim
	// (an outcome the breaker leaves out) frees the probe for another.
	ProbeSuccesses, ProbeFailures, ProbeReleases uint32
}

// BreakerFleet is the state of a fleet's breaker as a BreakerStore
// returns it.
type BreakerFleet struct {
	State      string        // BreakerClosed, BreakerHalfOpen or BreakerOpen
	Generation uint64        // changes with every change of State
	OpenFor    time.Duration // while open: how long it stays open from the reply
	Claimed    bool          // the Sync's claim was granted: its caller runs a probe
}

// sharedBreaker is a breaker whose state is the fleet's, kept by a
// BreakerStore. Attempts decide from fleetView, the state as last read;
// outcomes are counted on atomics and sent by the next sync, which runs on
// a goroutine of its own, started by a call that finds the view older than
// the interval and ending with its round trip. No goroutine outlives one
// round trip bounded by the interval and StoreWait.
type sharedBreaker struct {
	store    BreakerStore
	bs       *breakers
	key      string
	interval time.Duration

	view   atomic.Pointer[fleetView]
	seq    atomic.Uint64 // requests sent to the store, numbered in order
	local  atomic.Bool   // the last decision was the local breaker's
	tried  atomic.Int64  // unix ns at which the last sync started
	failed atomic.Bool   // the last round trip failed
	flight atomic.Pointer[flight]
	claim  atomic.Bool // a claim is in flight

	successes, failures atomic.Uint64 // since the last sync
	flush               atomic.Bool   // a timer will send them

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

// flight is a sync under way; done closes when it has its answer.
type flight struct{ done chan struct{} }

func newSharedBreaker(store BreakerStore, bs *breakers, key string) *sharedBreaker {
	sb := &sharedBreaker{store: store, bs: bs, key: key, interval: store.SyncInterval()}
	if sb.interval <= 0 {
		sb.interval = 100 * time.Millisecond
	}
	// Never synced: the first call reads the fleet's state, within
	// StoreWait, before it decides.
	sb.view.Store(&fleetView{state: BreakerClosed})
	return sb
}

// current returns the view a call decides on, starting a sync when the
// view is older than the interval. A view older than two intervals (a
// quiet process) is refreshed first, within storeWait. It returns
// nil when the store failed or did not answer in time: the local breaker
// then stands in.
func (sb *sharedBreaker) current(ctx context.Context, now int64) *fleetView {
	v := sb.view.Load()
	age := time.Duration(now - v.synced)
	if age < sb.interval {
		return v
	}
	var f *flight
	if time.Duration(now-sb.tried.Load()) >= sb.interval {
		f = sb.kick()
	}
	if age < 2*sb.interval {
		return v
	}
	if f == nil {
		f = sb.flight.Load()
	}
	if f != nil && !sb.failed.Load() {
		t := time.NewTimer(sb.storeWait(ctx))
		select {
		case <-f.done:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		v = sb.view.Load()
	}
	if time.Duration(time.Now().UnixNano()-v.synced) < 2*sb.interval {
		return v
	}
	return nil
}

// kick starts a sync unless one is under way, and returns it.
func (sb *sharedBreaker) kick() *flight {
	for {
		if f := sb.flight.Load(); f != nil {
			return f
		}
		f := &flight{done: make(chan struct{})}
		if sb.flight.CompareAndSwap(nil, f) {
			sb.tried.Store(time.Now().UnixNano())
			go sb.syncs(f)
			return f
		}
	}
}

// syncs runs the sync f, and runs another at once while probe outcomes are
// waiting to be sent.
func (sb *sharedBreaker) syncs(f *flight) {
	for {
		sb.sync()
		sb.flight.Store(nil)
		close(f.done)
		if sb.failed.Load() || !sb.probesWaiting() {
			return // outcomes kept from a failed sync wait for the next interval's
		}
		f = &flight{done: make(chan struct{})}
		if !sb.flight.CompareAndSwap(nil, f) {
			return
		}
		sb.tried.Store(time.Now().UnixNano())
	}
}

func (sb *sharedBreaker) probesWaiting() bool {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	p := sb.probes
	return p.ProbeSuccesses+p.ProbeFailures+p.ProbeReleases > 0
}

// sync sends the counts and probe outcomes kept since the last one and
// reads the fleet's state back. Counts that fail to reach the store are
// dropped: the local breaker has them.
func (sb *sharedBreaker) sync() {
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
	ctx, cancel := context.WithTimeout(context.Background(), sb.interval+sb.bs.spec.StoreWait)
	defer cancel()
	seq := sb.seq.Add(1)
	fl, err := sb.store.Sync(ctx, sb.key, sb.bs.spec, s)
	if err != nil {
		sb.failed.Store(true)
		sb.keepProbes(s)
		return
	}
	sb.update(fl, seq)
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
		nv.fence = sb.seq.Load()
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
		sb.bs.record(sb.key, old.state, nv.state, now)
	}
}

// count keeps the outcome of an attempt run in the closed state. Counts
// go out with the sync that the next call starts, or at the latest one
// interval later, by a timer, so that a process that falls quiet still
// sends them.
func (sb *sharedBreaker) count(outcome error) {
	switch outcome {
	case nil:
		sb.successes.Add(1)
	case errBreakerExcluded:
		return
	default:
		sb.failures.Add(1)
	}
	if !sb.flush.Load() && sb.flush.CompareAndSwap(false, true) {
		time.AfterFunc(sb.interval, sb.flushed)
	}
}

// flushed starts a sync of counts still unsent one interval after they
// were counted, unless a sync started within the interval; then it looks
// again one interval after that sync.
func (sb *sharedBreaker) flushed() {
	if sb.successes.Load()+sb.failures.Load() == 0 {
		sb.flush.Store(false)
		return
	}
	if age := time.Duration(time.Now().UnixNano() - sb.tried.Load()); age < sb.interval {
		time.AfterFunc(sb.interval-age, sb.flushed)
		return
	}
	sb.flush.Store(false)
	sb.kick()
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
	sb.kick()
}

// storeWait is how long a call may wait for the store: StoreWait, and at
// most half of what is left of ctx's deadline, so that the local breaker
// still has time.
func (sb *sharedBreaker) storeWait(ctx context.Context) time.Duration {
	w := sb.bs.spec.StoreWait
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
	seq := sb.seq.Add(1)
	fl, err := sb.store.Sync(ctx, sb.key, sb.bs.spec, BreakerSync{Generation: v.gen, Claim: true})
	if err != nil {
		return fl, false
	}
	sb.update(fl, seq)
	return fl, true
}

// allow admits one attempt on the fleet's state, in two steps as
// gobreaker's TwoStepCircuitBreaker does: done, when not nil, must be
// called with the attempt's outcome. A nil done refuses the attempt, to be
// asked again after wait. ok is false when the store could not be read in
// time, and the caller's own breaker decides instead.
func (sb *sharedBreaker) allow(ctx context.Context) (done func(error), wait time.Duration, ok bool) {
	now := time.Now().UnixNano()
	v := sb.current(ctx, now)
	if v == nil {
		return nil, 0, ended(ctx)
	}
	switch {
	case v.state == BreakerClosed:
	case v.state == BreakerOpen && now < v.until:
		return nil, time.Duration(v.until-now) + 1, true
	default: // half-open, or open past its time: claim a probe
		if !sb.claim.CompareAndSwap(false, true) {
			return nil, sb.bs.spec.recheck(), true // this process is claiming
		}
		fl, ok := sb.claimProbe(ctx, v)
		sb.claim.Store(false)
		switch {
		case ended(ctx):
			return nil, 0, true
		case !ok:
			return nil, 0, false
		case fl.Claimed:
			gen := fl.Generation
			return func(outcome error) { sb.probed(gen, outcome) }, 0, true
		case fl.State == BreakerOpen && fl.OpenFor > 0:
			return nil, fl.OpenFor + 1, true
		case fl.State != BreakerClosed:
			return nil, sb.bs.spec.recheck(), true // the fleet's probes are out
		}
	}
	if ended(ctx) {
		return nil, 0, true
	}
	return sb.count, 0, true
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
