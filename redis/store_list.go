package redis

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/steadyhq/retry"
)

// listEntry returns the arguments of feedWrite that bring the list up to
// a breaker's reply r, or nil when it says as much already: a breaker open
// or half-open is listed for as long as its state lives; a closed one, for
// a Window after a failure (its entry renewed when less than half of it is
// left) or after it closed. s.recs.mu is held.
func (s *Store) listEntry(rec *record, fv *feedView, failed bool, r syncReply, b retry.Breaker, ttlOpen time.Duration) []any {
	var ent feedEntry
	listed := false
	if fv != nil {
		ent, listed = fv.entries[rec.name]
	}
	lapse := r.nowMs + b.Window.Milliseconds()
	switch {
	case r.state != 0 && (!listed || ent.gen != r.gen || ent.state != r.state):
		lapse = r.nowMs + ttlOpen.Milliseconds()
	case r.state == 0 && listed && (ent.gen != r.gen || ent.state != 0):
		// Closed again: listed for a window, so that all see it.
	case r.state == 0 && failed && (!listed || ent.lapse < r.nowMs+b.Window.Milliseconds()/2):
		if rec.lastFailedSent.After(time.Now().Add(-s.opts.SyncInterval)) && !listed {
			return nil // written within the interval; the list read then did not show it yet
		}
		rec.lastFailedSent = time.Now()
	default:
		return nil
	}
	return []any{rec.name, r.gen, r.state, rec.untilMs, lapse}
}

// readFeed takes the list read by cmd (or its failure err) as the Store's
// view of it.
func (s *Store) readFeed(ctx context.Context, cmd *goredis.Cmd, err error, got time.Time, ttlOpen time.Duration) {
	var v []any
	if err == nil {
		v, err = cmd.Slice()
	}
	var nowMs int64
	var flat []any
	if err == nil {
		ok1, ok2 := false, false
		if len(v) == 2 {
			nowMs, ok1 = v[0].(int64)
			flat, ok2 = v[1].([]any)
		}
		if !ok1 || !ok2 || nowMs <= 0 || len(flat)%2 != 0 {
			err = fmt.Errorf("unexpected reply %.200v", v)
		}
	}
	if err != nil {
		s.listed.failed(ctx, err, false, "list of breakers "+s.feedKey())
		return
	}
	s.listed.ok()
	fv := &feedView{entries: make(map[string]feedEntry, len(flat)/2), redisMs: nowMs, at: got}
	lapsed := false
	for j := 0; j < len(flat); j += 2 {
		name, _ := flat[j].(string)
		val, _ := flat[j+1].(string)
		ent, err := parseFeedEntry(val, nowMs, ttlOpen.Milliseconds())
		if err != nil {
			if fv.bad == nil {
				fv.bad = map[string]error{}
			}
			fv.bad[name] = fmt.Errorf("list of breakers %s: %w", s.feedKey(), err)
			s.health.errors.Add(1)
			continue
		}
		if ent.lapse <= nowMs {
			lapsed = true
			continue // quiet again, or its state expired
		}
		fv.entries[name] = ent
	}
	if lapsed && s.cleaning.CompareAndSwap(false, true) {
		// Entries that lapsed go with the next write; with none coming,
		// with one of their own, on a goroutine bounded by Timeout.
		go func() {
			defer s.cleaning.Store(false)
			s.writeFeed(context.WithoutCancel(ctx), ttlOpen, nil)
		}()
	}
	s.recs.mu.Lock()
	for name, rec := range s.recs.m {
		r := rec.Value.(*record)
		_, r.listed = fv.entries[name]
		if r.known && r.state != 0 && !r.listed && r.at.Before(got) {
			r.sent = time.Time{} // open as far as it knows, and not listed: read it
		}
	}
	s.recs.mu.Unlock()
	s.feed.Store(fv)
}

// writeFeed writes entries to the list, within Timeout; a failure is
// counted and logged, and the replies stand.
func (s *Store) writeFeed(ctx context.Context, ttlOpen time.Duration, entries []any) {
	args := append([]any{max(ttlOpen.Milliseconds(), 1)}, entries...)
	cmds, err := pipeline(ctx, s.client, s.opts.Timeout, func(ctx context.Context, p goredis.Pipeliner, eval bool) []*goredis.Cmd {
		return []*goredis.Cmd{runScript(ctx, p, eval, feedWrite, []string{s.feedKey(), s.feedKey() + ":lapse"}, args...)}
	})
	if err == nil {
		err = cmds[0].Err()
	}
	if err != nil {
		s.listed.failed(ctx, err, false, "list of breakers "+s.feedKey())
	}
}
