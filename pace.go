package retry

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// typeRemoteRateLimited is the type of a request the Transport stopped
// before sending it, because the server's RateLimit field said the quota
// of its key is used up for longer than the request can wait.
const typeRemoteRateLimited = "ratelimit.remote"

// pacer holds the keys whose server said, in a RateLimit field, that their
// quota is used up until some time. It keeps at most maxKeys keys and is
// safe for concurrent use.
//
// A hold lasts until the reset the server gave, or for maxHold (the
// Transport's MaxServerDelay) if that is sooner: no request could wait
// longer anyway, and a reset far off (a timestamp sent where seconds were
// meant) would otherwise keep every request on the key unsent, with
// nothing able to end the hold. After maxHold the next request goes out,
// and the server's answer holds the key again if its quota is still used
// up.
type pacer struct {
	held    atomic.Int32 // how many keys are held: none lets gates skip the lock
	maxHold time.Duration
	mu      sync.Mutex
	until   map[string]keyHold
}

// keyHold is a held key's reset, as the server gave it, and when the hold
// ends: at the reset, or maxHold after it was learned.
type keyHold struct{ reset, ends time.Time }

func newPacer(maxHold time.Duration) *pacer {
	return &pacer{maxHold: maxHold, until: make(map[string]keyHold)}
}

// hold holds key until reset, or later if it is held longer already, for
// at most maxHold from now. When the map is full, the holds that have
// ended at now are dropped, and if none has, the one that ends soonest.
func (p *pacer) hold(key string, reset, now time.Time) {
	h := keyHold{reset: reset, ends: now.Add(p.maxHold)}
	if reset.Before(h.ends) {
		h.ends = reset
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.until[key]; ok {
		if h.reset.After(old.reset) {
			old.reset = h.reset
		}
		if h.ends.After(old.ends) {
			old.ends = h.ends
		}
		p.until[key] = old
		return
	}
	if len(p.until) >= maxKeys {
		p.drop(now)
	}
	p.until[key] = h
	p.held.Store(int32(len(p.until)))
}

// drop makes room for a key: p.mu is held.
func (p *pacer) drop(now time.Time) {
	var soonest string
	var first time.Time
	for k, h := range p.until {
		if !h.ends.After(now) {
			delete(p.until, k)
			continue
		}
		if first.IsZero() || h.ends.Before(first) {
			soonest, first = k, h.ends
		}
	}
	if len(p.until) >= maxKeys {
		delete(p.until, soonest)
	}
}

// wait returns how long an attempt on key must wait from now for the
// server's reset; zero once the hold has ended, when the key is let go.
func (p *pacer) wait(key string, now time.Time) time.Duration {
	if p.held.Load() == 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	h, ok := p.until[key]
	if !ok {
		return 0
	}
	if h.ends.After(now) {
		return h.reset.Sub(now)
	}
	delete(p.until, key)
	p.held.Store(int32(len(p.until)))
	return 0
}

// paceGate is the gate of a Transport's pacer: it holds an attempt on a
// held key until the key's time, or refuses it at once when that wait
// cannot fit the caller's deadline, MaxElapsed or MaxServerDelay, and a
// hedge, which starts now or not at all. kinds says which attempts it is
// asked about (see Transport.gated).
type paceGate struct {
	p     *pacer
	kinds uint8
}

func (g *paceGate) acts() (admits, enters uint8) { return g.kinds, 0 }

func (g *paceGate) admit(ctx context.Context, a *ask, gr *grant) {
	if g.p.held.Load() == 0 {
		return
	}
	w := g.p.wait(a.key, a.cfg.mono())
	if w <= a.wait {
		return
	}
	if w > a.room(ctx) || w > a.cfg.maxServerDelay {
		gr.no = &refusal{reason: ReasonRateLimited, typ: typeRemoteRateLimited, err: &remoteRateLimitError{wait: w}}
		return
	}
	gr.wait = w
}

// enter is never asked.
func (g *paceGate) enter(context.Context, *ask, *grant) {}

// remoteRateLimitError is the failure of a request stopped because its
// server's quota resets too late for it.
type remoteRateLimitError struct{ wait time.Duration }

func (e *remoteRateLimitError) Error() string {
	return "retry: the server's rate limit quota is used up for " + e.wait.String() +
		", longer than the request can wait"
}

func (e *remoteRateLimitError) ErrorType() string { return typeRemoteRateLimited }

// pace sets up the Transport's pacing once its configuration is built:
// retries and hedges pass the pacing gate always, and first attempts in
// t.paced, the configuration requests take while some key is held.
func (t *Transport) pace() {
	t.pacer = newPacer(t.cfg.maxServerDelay)
	t.cfg.pace = &paceGate{p: t.pacer, kinds: onRetry | onHedge}
	t.cfg.assemble()
	paced := t.cfg
	paced.pace = &paceGate{p: t.pacer, kinds: onAll}
	paced.assemble()
	t.paced = &paced
}

// gated returns the configuration whose gates a request passes: cfg, or
// while some key is held, t.paced. So the first attempt of a request costs
// the pacing one atomic load until a server says its quota is used up.
func (t *Transport) gated(cfg *config) *config {
	if t.pacer.held.Load() > 0 {
		return t.paced
	}
	return cfg
}

// learnRateLimit holds the request's key while resp says, in its RateLimit
// fields, that a quota is used up (see rateLimitWait).
func (rt *roundTrip) learnRateLimit(cfg *config, resp *http.Response) {
	if _, ok := resp.Header[rateLimitField]; !ok {
		return
	}
	if w := rateLimitWait(resp.Header); w > 0 {
		now := cfg.mono()
		rt.t.pacer.hold(rt.key, now.Add(w), now)
	}
}
