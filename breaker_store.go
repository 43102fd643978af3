package retry

import (
	"context"
	"time"
)

// BreakerStore keeps the state of circuit breakers that a fleet of
// processes shares (github.com/steadyhq/retry/redis has one on Redis); set
// it as Breaker.Store.
//
// Each process decides alone, from the fleet's state as it last read it,
// and counts its outcomes locally. About once per SyncInterval, while it
// has calls, the Retrier makes one Sync for all its breakers: it sends each
// one's counts and reads every state back, so that what a process must
// sync in an interval goes in one request, however many keys it calls. The
// store sums the fleet's counts over Window and trips the breaker on the
// sum (FailureRatio and MinRequests apply to it); it keeps the time the
// breaker stays open, and it grants the half-open probes, Probes of them
// fleet-wide. A process's attempts wait on the store only to claim a probe,
// before the first attempts on a key (a process that has never read a
// breaker's state reads it first), or after a quiet spell longer than two
// intervals, for at most StoreWait each time.
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
	// Sync adds each of syncs to the fleet's breaker it names, all of
	// settings b (its zero fields set to their defaults, as the Retrier
	// passes them), and returns the breakers' states in the order of
	// syncs. Counts of another generation than the breaker's are
	// dropped; a claim is granted only in the half-open state, while fewer
	// than b.Probes are claimed. A store may answer from what it last read
	// of the fleet, and send the counts later, as long as the fleet trips
	// on them within two intervals of their Sync. An error fails every
	// breaker of the call; BreakerFleet.Err fails one.
	Sync(ctx context.Context, b Breaker, syncs []BreakerSync) ([]BreakerFleet, error)
	// SyncInterval is how often a process with calls syncs its breakers.
	SyncInterval() time.Duration
}

// BreakerSync is what one process sends a BreakerStore for one breaker:
// its outcomes since its last Sync, and whether it claims a probe.
type BreakerSync struct {
	Name       string // the breaker: its key with Breaker.PerKey, or ""
	Generation uint64 // the fleet's generation the outcomes belong to; 0 before the first reply
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
	// Err, when not nil, says that the store could not sync this breaker
	// (its key alone failed); the process's own breaker stands in.
	Err error
}
