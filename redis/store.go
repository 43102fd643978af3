package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/steadyhq/retry"
)

var _ retry.BreakerStore = (*Store)(nil)

// Store keeps circuit breakers that a fleet shares in Redis: set it as
// retry.Breaker.Store and every process using the same Redis and prefix
// shares one breaker (one per key with Breaker.PerKey). It implements
// retry.BreakerStore: each process decides its attempts from the fleet's
// state as last read, and about once per Options.SyncInterval, while it has
// calls, syncs all its breakers in one round trip (on a Redis Cluster, one
// per master, in parallel).
//
// Each breaker is one Redis hash, PREFIX{breaker:NAME} (the braces keep it
// in one slot of a Redis Cluster), read and written by one Lua script: a ring
// of ten slices of Breaker.Window holding success and failure counts, the
// state, its generation, the opened-until time and the half-open claims.
// The script trips the breaker on the fleet's sum over the window, opens
// it until one instant on Redis's clock (TIME), turns it half-open past
// that instant, grants at most Breaker.Probes claims, and closes it on
// Probes successes or reopens it on a failure. Claims not answered within
// another OpenTimeout lapse and the probes start again, so a process that
// dies while probing cannot hold the breaker half-open.
//
// Redis's work grows with failures, not with keys × processes. Every
// breaker of the prefix that is not quiet (open, half-open, or closed with
// a failure within its window) is listed in one more hash,
// PREFIX{breakers}, which each process reads in its round trip; a breaker
// it does not list is closed and quiet, and the process answers its own
// syncs of it from what it knows. A process sends a breaker's counts in
// that interval's round trip when it has a failure to count, or when the
// breaker is listed (so that the fleet's window holds everyone's
// successes while anyone fails); otherwise once a heartbeat: every
// Options.Heartbeat, or a fifth of the breaker's Window when that is
// shorter. It reads a breaker alone when it claims a probe, sends a
// probe's outcome, has not read it before, or knows it open or half-open
// (once a heartbeat, so that a state Redis lost is seen). A failure thus
// reaches Redis in the interval it is synced, and a breaker it trips is
// listed at once, for the whole fleet to read in its next round trip:
// every process sees a change within two intervals. See the package
// documentation for what this costs.
//
// A quiet breaker's successes wait in the process for its heartbeat, and
// are then sent dated by the slice of the window they came in, so that
// they leave the fleet's window when they should. So while a breaker
// starts failing in some processes only, the fleet's window lacks the
// others' successes of their last heartbeat (at most a fifth of the
// window) for the interval or two before they read the list, which errs
// toward opening.
//
// The hash of a closed breaker lives twice its Window after its last
// sync: the state of a breaker nobody has called for that long is a new
// one's. An open or half-open breaker's lives Options.StateTTL (or twice
// the Window or OpenTimeout when longer), and its entry in the list as
// long. So Redis keeps a state for the breakers called within the last
// twice their Window, and for those that failed within StateTTL; the
// list, for those not quiet (its lapsed entries are dropped as they are
// seen). A Store keeps what it knows of at most 4,096 breakers, the one
// synced least recently dropped first.
//
// Each round trip is bounded by Options.Timeout and its context. When
// Redis fails or is slower, Sync returns the error, counted in Stats and
// logged to Options.Logger, and the Retrier's own breaker decides
// (retry.Stats.BreakerFallbacks, and false in retry.Stats.BreakersOnFleet)
// until Redis answers again; while the list cannot be read (its key's
// master down), each breaker is read alone, so that the others go on. A
// state in Redis that no Store wrote (an opened-until time further ahead
// than the state lives, a number that is not finite) is such a failure
// too. When Redis loses a breaker's state (a restart with empty data,
// FLUSHALL, the key expired), it starts again closed, and every process
// takes that state at its next sync. A breaker's generations start at
// Redis's time in microseconds when its state is made, so that they grow
// across such a loss: a late reply from before it cannot pass for a newer
// state. A Store needs no Close; a round trip that the client does not cut
// at Timeout finishes on a goroutine of its own.
//
// A Store is safe for concurrent use. Build it with NewStore.
type Store struct {
	client   goredis.UniversalClient
	opts     Options
	health   *health
	recs     *records
	feed     atomic.Pointer[feedView]
	trip     *keyHealth  // of the round trips as a whole
	listed   *keyHealth  // of the list of breakers that are not quiet
	cleaning atomic.Bool // a write drops the list's lapsed entries

	syncs, claims, granted atomic.Int64
}

// NewStore returns a Store on client.
func NewStore(client goredis.UniversalClient, opts Options) (*Store, error) {
	if isNilClient(client) {
		return nil, errors.New("redis: NewStore: client is nil")
	}
	opts, err := opts.withDefaults("NewStore")
	if err != nil {
		return nil, err
	}
	h := newHealth("breaker store", opts)
	return &Store{client: client, opts: opts, health: h, recs: newRecords(), trip: h.key(), listed: h.key()}, nil
}

// StoreStats counts a Store's round trips.
type StoreStats struct {
	Syncs   int64 // round trips to Redis
	Errors  int64 // breakers (and reads of the list) whose round trip failed: Redis down, slow or refusing
	Claims  int64 // probe claims asked for
	Granted int64 // probe claims granted
	// OnFleet is false while a breaker's round trips fail (its last one
	// failed, within the last two intervals and a Timeout); each
	// breaker's own state is in retry.Stats.BreakersOnFleet.
	OnFleet bool
	// Breakers is the number of breakers the Store keeps what it knows
	// of: at most 4,096.
	Breakers int
}

// errNilStore is the error of Sync on a nil *Store.
var errNilStore = errors.New("redis: nil *Store (check the error of NewStore)")

// Stats returns the store's counters; a nil *Store's are zero.
func (s *Store) Stats() StoreStats {
	if s == nil {
		return StoreStats{}
	}
	return StoreStats{Syncs: s.syncs.Load(), Errors: s.health.errors.Load(), Claims: s.claims.Load(), Granted: s.granted.Load(),
		OnFleet: s.health.onFleet(), Breakers: s.recs.len()}
}

// FleetStatus reports whether s runs on the fleet's state (as
// StoreStats.OnFleet), when a round trip to Redis last succeeded (zero
// before one) and how many failed (StoreStats.Errors): what the live page
// of github.com/steadyhq/retry/retryz shows of it. A nil *Store's are
// zero.
func (s *Store) FleetStatus() (onFleet bool, lastSync time.Time, errors int64) {
	if s == nil {
		return false, time.Time{}, 0
	}
	return s.health.status()
}

// SyncInterval returns Options.SyncInterval; zero for a nil *Store.
func (s *Store) SyncInterval() time.Duration {
	if s == nil {
		return 0
	}
	return s.opts.SyncInterval
}

// key is the hash of the breaker name.
func (s *Store) key(name string) string { return s.opts.key("breaker", name) }

// feedKey is the list of breakers that are not quiet; feedKey+":lapse"
// orders them by the time their entries lapse.
func (s *Store) feedKey() string { return s.opts.Prefix + "{breakers}" }

// toSend is one breaker's sync that goes to Redis.
type toSend struct {
	i     int // in the Sync's breakers
	rec   *record
	in    retry.BreakerSync
	cmd   *goredis.Cmd
	args  []any
	pairs []any // successes held: slices ago, and count
}

// Sync implements retry.BreakerStore in one round trip (see Store),
// bounded by Options.Timeout and ctx. A nil *Store returns an error.
func (s *Store) Sync(ctx context.Context, b retry.Breaker, in []retry.BreakerSync) ([]retry.BreakerFleet, error) {
	if s == nil {
		return nil, errNilStore
	}
	switch {
	case b.Window <= 0:
		return nil, fmt.Errorf("redis: Store.Sync: Window = %v: must be > 0 (the Retrier passes its breaker's settings with their defaults set)", b.Window)
	case b.OpenTimeout <= 0:
		return nil, fmt.Errorf("redis: Store.Sync: OpenTimeout = %v: must be > 0", b.OpenTimeout)
	case b.Probes == 0 || b.MinRequests == 0:
		return nil, fmt.Errorf("redis: Store.Sync: Probes = %d, MinRequests = %d: must be > 0", b.Probes, b.MinRequests)
	}
	out := make([]retry.BreakerFleet, len(in))
	if len(in) == 0 {
		return out, nil
	}
	now := time.Now()
	if s.trip.skip(now) {
		// The last round trip failed as a whole within the interval: the
		// breakers run on the process's own, their counts kept.
		err := s.trip.resting("breaker store")
		for i, e := range in {
			if e.Claim {
				s.claims.Add(1)
			}
			out[i].Err = err
		}
		s.holdAll(in, now, b)
		return out, nil
	}
	interval, beat := s.opts.SyncInterval, s.heartbeat(b)
	ttlOpen := max(s.opts.StateTTL, 2*b.Window, 2*b.OpenTimeout)
	ttlClosed := 2 * max(b.Window, beat)
	// The successes a Store holds are kept by slice of the window, on the
	// local clock, and sent with how many slices ago they came, so that
	// they age out of the fleet's window when they should.
	sliceMs := max(b.Window.Milliseconds()/window, 1)
	idx := now.UnixMilli() / sliceMs
	// The list is read again when it is half an interval old, or, for a
	// sync of breakers that are all new to the Store (a Retrier's first
	// read of a key), a whole interval: so that a process calling ever new
	// keys still makes about one round trip an interval.
	fv := s.feed.Load()
	stale := interval / 2
	if s.allNew(in) {
		stale = interval
	}
	fresh := fv != nil && now.Sub(fv.at) < stale
	usable := fv != nil && now.Sub(fv.at) <= interval+s.opts.Timeout
	readFeed := false
	if !fresh && !s.listed.skip(now) {
		readFeed = true
	} else if !fresh && !usable {
		fv = nil // neither read nor usable: each breaker is read alone
	}

	var sends []*toSend
	var cached, unknown []int
	s.recs.mu.Lock()
	send := func(i int, rec *record) {
		e := in[i]
		if rec.health.skip(now) {
			out[i].Err = rec.health.resting("breaker " + s.key(e.Name))
			return
		}
		sd := &toSend{i: i, rec: rec, in: e}
		if e.ProbeSuccesses+e.ProbeFailures+e.ProbeReleases == 0 {
			sd.in.Generation = rec.pendGen
			if rec.pendGen == 0 {
				sd.in.Generation = e.Generation
			}
			sd.in.Successes, sd.in.Failures = 0, rec.takeFailures(now, b.Window)
			sd.pairs = rec.takeHeld(idx)
		}
		sends = append(sends, sd)
	}
	for i, e := range in {
		if e.Claim {
			s.claims.Add(1)
		}
		rec := s.recs.get(e.Name, now, beat, s.health.key)
		rec.merge(e, idx, now)
		switch {
		case s.needsRedis(rec, e, fv, readFeed, now, idx, beat):
			send(i, rec)
		case !rec.known:
			unknown = append(unknown, i)
		default:
			cached = append(cached, i)
		}
	}
	// A breaker this Store has never read alone goes in the round trip
	// when there is one (so that a key of the wrong type, or a state out
	// of range, is seen at once); without one, the list answers for it,
	// and the next round trip reads it.
	for _, i := range unknown {
		if len(sends) > 0 || readFeed {
			send(i, s.recs.get(in[i].Name, now, beat, s.health.key))
		} else {
			cached = append(cached, i)
		}
	}
	s.recs.mu.Unlock()

	if len(sends) > 0 || readFeed {
		if err := s.roundTrip(ctx, b, ttlOpen, ttlClosed, sends, readFeed, out, idx); err != nil {
			for _, i := range cached {
				out[i].Err = fmt.Errorf("redis: breaker %s: %w", s.key(in[i].Name), err)
			}
			return out, nil
		}
	}
	fv = s.feed.Load()
	if fv != nil && time.Since(fv.at) > interval+s.opts.Timeout {
		fv = nil
	}
	s.recs.mu.Lock()
	for _, i := range cached {
		rec := s.recs.get(in[i].Name, now, beat, s.health.key)
		out[i] = s.answer(rec, fv, time.Now())
	}
	s.recs.mu.Unlock()
	return out, nil
}

// holdAll keeps the counts of in, which a resting Store does not send,
// for the round trip after the rest.
func (s *Store) holdAll(in []retry.BreakerSync, now time.Time, b retry.Breaker) {
	idx := now.UnixMilli() / max(b.Window.Milliseconds()/window, 1)
	s.recs.mu.Lock()
	defer s.recs.mu.Unlock()
	for _, e := range in {
		if e.Successes+e.Failures > 0 {
			s.recs.get(e.Name, now, s.heartbeat(b), s.health.key).merge(e, idx, now)
		}
	}
}

// heartbeat is how often a quiet breaker of settings b syncs: the
// Heartbeat, at most a fifth of its Window (so that the fleet's window
// lacks at most a fifth of a quiet process's successes), at least an
// interval.
func (s *Store) heartbeat(b retry.Breaker) time.Duration {
	return max(min(s.opts.Heartbeat, b.Window/5), s.opts.SyncInterval)
}

// allNew reports whether the Store has no record of any breaker of in.
func (s *Store) allNew(in []retry.BreakerSync) bool {
	s.recs.mu.Lock()
	defer s.recs.mu.Unlock()
	for _, e := range in {
		if _, ok := s.recs.m[e.Name]; ok {
			return false
		}
	}
	return true
}

// needsRedis reports whether a breaker's sync goes to Redis: with a probe
// to claim or an outcome to send, a failure to count, its last round trip
// failed, the list unknown, listed with counts to send (someone fails), or
// its heartbeat due. s.recs.mu is held.
func (s *Store) needsRedis(rec *record, e retry.BreakerSync, fv *feedView, reading bool, now time.Time, idx int64, beat time.Duration) bool {
	switch {
	case e.Claim, e.ProbeSuccesses+e.ProbeFailures+e.ProbeReleases > 0, rec.pendF > 0, rec.health.down.Load():
		return true
	case fv == nil && !reading, s.listed.down.Load():
		return true // the list cannot be read: each breaker alone
	}
	due := now.Sub(rec.sent) >= beat
	if rec.known && rec.state != 0 {
		if fv != nil && fv.at.After(rec.at) {
			if _, ok := fv.entries[rec.name]; !ok {
				return true // not listed since it was: its state changed, or Redis lost it
			}
		}
		return due // open or half-open: read it alone once a heartbeat
	}
	if !rec.heldSuccesses(idx) {
		return false
	}
	if fv != nil {
		if ent, ok := fv.entries[rec.name]; ok && ent.lapse > redisNow(fv.redisMs, fv.at, now) {
			return true // someone fails: successes count now
		}
	}
	return due
}

// answer is a breaker's state as the Store knows it, from its own last
// reply or the list, whichever is newer; nil fv means the list is not
// known. s.recs.mu is held.
func (s *Store) answer(rec *record, fv *feedView, now time.Time) retry.BreakerFleet {
	if fv == nil {
		return retry.BreakerFleet{Err: fmt.Errorf("redis: breaker %s: the list of breakers not quiet (%s) could not be read: %w", s.key(rec.name), s.feedKey(), s.listed.lastErr())}
	}
	if err := fv.bad[rec.name]; err != nil {
		return retry.BreakerFleet{Err: fmt.Errorf("redis: breaker %s: %w", s.key(rec.name), err)}
	}
	ent, listed := fv.entries[rec.name]
	if rec.known && (!listed || rec.gen >= ent.gen) {
		return fleetState(rec.state, rec.gen, rec.untilMs, redisNow(rec.redisMs, rec.at, now))
	}
	if listed {
		return fleetState(ent.state, ent.gen, ent.untilMs, redisNow(fv.redisMs, fv.at, now))
	}
	return retry.BreakerFleet{State: retry.BreakerClosed, Generation: rec.pendGen}
}

// fleetState is a state of the script's or the list's, at Redis's time
// nowMs: open past its time is half-open.
func fleetState(st int, gen uint64, untilMs, nowMs int64) retry.BreakerFleet {
	switch {
	case st == 2 && untilMs > nowMs:
		return retry.BreakerFleet{State: retry.BreakerOpen, Generation: gen, OpenFor: time.Duration(untilMs-nowMs) * time.Millisecond}
	case st == 2, st == 1:
		return retry.BreakerFleet{State: retry.BreakerHalfOpen, Generation: gen}
	}
	return retry.BreakerFleet{State: retry.BreakerClosed, Generation: gen}
}

// roundTrip sends the breakers' syncs, and reads the list when readFeed,
// in one pipeline, and fills out with the syncs' replies; then, when a
// reply changed what the list should say, it writes the list. It returns
// the error of a round trip that failed as a whole.
func (s *Store) roundTrip(ctx context.Context, b retry.Breaker, ttlOpen, ttlClosed time.Duration, sends []*toSend, readFeed bool, out []retry.BreakerFleet, idx int64) error {
	s.syncs.Add(1)
	timeout := s.opts.Timeout
	var claimed bool
	for _, sd := range sends {
		claimed = claimed || sd.in.Claim
		claim := 0
		if sd.in.Claim {
			claim = 1
		}
		sd.args = append([]any{strconv.FormatUint(sd.in.Generation, 10), sd.in.Failures, claim,
			sd.in.ProbeSuccesses, sd.in.ProbeFailures, sd.in.ProbeReleases,
			strconv.FormatFloat(b.FailureRatio, 'g', -1, 64), b.MinRequests,
			max(b.Window.Milliseconds(), 1), max(b.OpenTimeout.Milliseconds(), 1), b.Probes,
			max(ttlOpen.Milliseconds(), 1), max(ttlClosed.Milliseconds(), 1)}, sd.pairs...)
	}
	cut := false
	if claimed {
		// A claim is on a call's path: leave half of what is left of the
		// caller's deadline to the fallback.
		if dl, ok := ctx.Deadline(); ok {
			if half := time.Until(dl) / 2; half < timeout {
				timeout, cut = max(half, 0), true
			}
		}
	}
	cmds, err := pipeline(ctx, s.client, timeout, func(ctx context.Context, p goredis.Pipeliner, eval bool) []*goredis.Cmd {
		var cmds []*goredis.Cmd
		if readFeed {
			cmds = append(cmds, runScript(ctx, p, eval, feedRead, []string{s.feedKey()}))
		}
		for _, sd := range sends {
			cmds = append(cmds, runScript(ctx, p, eval, syncScript, []string{s.key(sd.in.Name)}, sd.args...))
		}
		return cmds
	})
	got := time.Now()
	if err == nil && failedWhole(cmds) {
		err = cmds[0].Err()
	}
	if err != nil {
		// Redis down, slow or cut off: the round trip failed, not its
		// breakers. The Store rests one interval, and then the list is
		// read again.
		s.trip.failed(ctx, err, cut, "round trip")
		s.recs.mu.Lock()
		for _, sd := range sends {
			out[sd.i].Err = fmt.Errorf("redis: breaker %s: %w", s.key(sd.in.Name), err)
			sd.keep(idx)
		}
		s.recs.mu.Unlock()
		return err
	}
	s.trip.ok()
	if readFeed {
		s.readFeed(ctx, cmds[0], nil, got, ttlOpen)
		cmds = cmds[1:]
	}
	for j, sd := range sends {
		sd.cmd = cmds[j]
	}
	var writes []any
	fv := s.feed.Load()
	s.recs.mu.Lock()
	defer func() {
		s.recs.mu.Unlock()
		switch {
		case len(writes) == 0:
		case claimed:
			// On a goroutine of its own, bounded by Timeout: a claim's
			// caller does not wait for it.
			go s.writeFeed(context.WithoutCancel(ctx), ttlOpen, writes)
		default:
			s.writeFeed(ctx, ttlOpen, writes)
		}
	}()
	for _, sd := range sends {
		key := s.key(sd.in.Name)
		v, e := sd.cmd.Int64Slice()
		var r syncReply
		if e == nil {
			r, e = parseSyncReply(v, ttlOpen.Milliseconds())
		}
		if e != nil {
			sd.rec.health.failed(ctx, e, cut, "breaker "+key)
			out[sd.i].Err = fmt.Errorf("redis: breaker %s: %w", key, e)
			sd.keep(idx)
			continue
		}
		sd.rec.health.ok()
		rec := sd.rec
		rec.known, rec.state, rec.gen, rec.redisMs, rec.at, rec.sent = true, r.state, r.gen, r.nowMs, got, got
		rec.untilMs = 0
		if r.state == 2 {
			rec.untilMs = r.nowMs + r.leftMs
		}
		if rec.pendGen != 0 && rec.pendGen != r.gen {
			rec.dropHeld() // counted since, in a generation that ended
		}
		rec.pendGen = r.gen
		out[sd.i] = fleetState(r.state, r.gen, rec.untilMs, r.nowMs)
		out[sd.i].Claimed = r.granted
		if r.granted {
			s.granted.Add(1)
		}
		writes = append(writes, s.listEntry(rec, fv, sd.in.Failures > 0, r, b, ttlOpen)...)
	}
	return nil
}

// keep holds again the counts of a sync that failed, for the next round
// trip: successes and failures alike. s.recs.mu is held.
func (sd *toSend) keep(idx int64) {
	in, rec := sd.in, sd.rec
	if in.ProbeSuccesses+in.ProbeFailures+in.ProbeReleases == 0 && (rec.pendGen == in.Generation || rec.pendGen == 0) {
		rec.putBack(idx, sd.pairs)
		if in.Failures > 0 && rec.pendF == 0 {
			rec.pendFSince = time.Now()
		}
		rec.pendF += in.Failures
	}
}

// failedWhole reports whether every command of a round trip failed, none
// with a reply of Redis's own (a key of the wrong type, a script's error):
// Redis is down, slow or cut off, and the round trip failed, not its keys.
func failedWhole(cmds []*goredis.Cmd) bool {
	for _, c := range cmds {
		var reply goredis.Error
		if err := c.Err(); err == nil || errors.As(err, &reply) {
			return false
		}
	}
	return len(cmds) > 0
}
