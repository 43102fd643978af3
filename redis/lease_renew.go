package redis

import (
	"context"
	"math"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// told takes what a lease's reply told of the fleet: the lessees, whether
// tokens are scarce, and the process's share of the limit. ls.mu is held.
func (l *Limiter) told(ls *lease, key string, res taken, got time.Time, back int) {
	l.givenBack.Add(int64(back))
	ls.lessees = res.Lessees
	ls.busy = !res.Full || float64(res.Fleet) >= 0.5*l.perSec*l.window().Seconds()
	share := l.shareOf(ls, got, res)
	l.share.Store(math.Float64bits(share))
	l.fallback.setShare(key, share)
}

// renew asks for n more tokens of the bucket of key, on a goroutine of its
// own bounded by renewBound, for a lease nearly spent: the tokens granted
// join those left, for a new term. Calls that find the lease empty
// meanwhile wait on f, as on any request in flight, until it is slower
// than Timeout (f.slow). A renewal that fails while the lease still has
// tokens leaves the key up: the calls go on spending them, and the next
// renewal is asked an interval later; one that fails with the lease spent
// or lapsed puts the key down, as a failed request on a call's path does.
func (l *Limiter) renew(ls *lease, key string, n int, f *fetch) {
	name := l.opts.key("limit", key)
	ctx := context.Background()
	res, err := roundTrip(ctx, l.renewBound(), func(ctx context.Context) (taken, error) { return l.take(ctx, name, n, 0, nil) })
	got := time.Now()
	ls.mu.Lock()
	spent := ls.tokens == 0 || !got.Before(ls.lapses)
	ls.mu.Unlock()
	switch {
	case err == nil:
		ls.health.ok()
	case spent:
		ls.health.failed(ctx, err, false, "limiter "+name)
	default:
		ls.health.missed(err, "limiter "+name)
	}
	ls.mu.Lock()
	ls.fetching = nil
	f.failed = err != nil && ls.health.down.Load()
	close(f.done)
	if err != nil {
		ls.renewAt = got.Add(l.opts.SyncInterval)
	}
	left := 0
	if err == nil {
		l.told(ls, key, res, got, 0)
		if res.Allowed > 0 {
			term := l.term(ls)
			if !got.Before(ls.lapses) {
				ls.tokens = 0 // the old term ended meanwhile: its tokens lapsed
			}
			ls.tokens += res.Allowed
			ls.lapses, ls.term, ls.size = got.Add(term), term, ls.tokens
			left = ls.tokens
			l.leases.Add(1)
			l.allowed.Add(int64(res.Allowed))
		} else {
			ls.empty = got.Add(max(res.RetryAfter, time.Microsecond))
		}
	}
	ls.mu.Unlock()
	if left > 0 {
		l.lapse(ls)
	}
}

// renewBound bounds a renewal ahead: on no call's path, it may take the
// larger of Timeout and SyncInterval, so that a Redis slowed past Timeout
// (a loaded machine) still renews the lease before its tokens run out.
func (l *Limiter) renewBound() time.Duration { return max(l.opts.Timeout, l.opts.SyncInterval) }

// term is how long the next lease of ls lasts: an interval while tokens
// are scarce (see Limiter), so that the leases follow the demand closely;
// a Heartbeat otherwise, so that a process asks Redis once a Heartbeat a
// key. ls.mu is held.
func (l *Limiter) term(ls *lease) time.Duration {
	if ls.busy {
		return l.opts.SyncInterval
	}
	return l.opts.Heartbeat
}

// floor is the least a lease of ls asks for while tokens are not scarce:
// a few tokens (leaseFloor), so that a key whose demand the process has
// not yet measured does not lease one token a call; 1 while they are.
func (l *Limiter) floor(ls *lease) int {
	if ls.busy {
		return 1
	}
	return leaseFloor
}

// leaseFloor is the least a lease asks for while tokens are not scarce.
const leaseFloor = 4

// lapse notes a lease with tokens left, so that they are given back when
// its term ends if no request of its key does so first: one timer per
// Limiter, and one round trip for all the leases that lapsed.
func (l *Limiter) lapse(ls *lease) {
	l.lapseMu.Lock()
	defer l.lapseMu.Unlock()
	l.lapsing[ls] = true
	if !l.timer {
		l.timer = true
		time.AfterFunc(l.opts.Heartbeat+l.opts.SyncInterval, l.giveBack)
	}
}

// giveBack gives the tokens of the leases whose term ended back to the
// fleet's buckets, in one round trip, and looks again an interval later
// while leases with tokens are left. Tokens a failed round trip could not
// give back are lost to the fleet for their term, as a lease of a process
// that died is.
func (l *Limiter) giveBack() {
	now := time.Now()
	type back struct {
		ls    *lease
		n     int
		parts []grant
	}
	var backs []*back
	l.lapseMu.Lock()
	for ls := range l.lapsing {
		ls.mu.Lock()
		switch {
		case ls.tokens == 0:
			delete(l.lapsing, ls)
		case now.Before(ls.lapses) || ls.fetching != nil:
		default:
			backs = append(backs, &back{ls: ls, n: ls.tokens, parts: ls.giveBack(now, l.window(), ls.tokens)})
			ls.tokens = 0
			delete(l.lapsing, ls)
		}
		ls.mu.Unlock()
	}
	if len(l.lapsing) > 0 {
		time.AfterFunc(l.opts.SyncInterval, l.giveBack)
	} else {
		l.timer = false
	}
	l.lapseMu.Unlock()
	if len(backs) == 0 {
		return
	}
	cmds, err := pipeline(context.Background(), l.client, l.opts.Timeout, func(ctx context.Context, p goredis.Pipeliner, eval bool) []*goredis.Cmd {
		var cmds []*goredis.Cmd
		for _, b := range backs {
			name := l.opts.key("limit", b.ls.key)
			cmds = append(cmds, runScript(ctx, p, eval, takeScript, []string{name, name + ":lessees", name + ":granted"},
				l.takeArgs(0, b.n, b.parts)...))
		}
		return cmds
	})
	for i, b := range backs {
		e := err
		if e == nil {
			e = cmds[i].Err()
		}
		if e != nil {
			b.ls.health.failed(context.Background(), e, false, "limiter "+l.opts.key("limit", b.ls.key))
			continue
		}
		l.givenBack.Add(int64(b.n))
	}
}
