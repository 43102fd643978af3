package retry

import (
	"context"
	"net/http"
)

// mayHedge reports whether the Transport may hedge its request: it may be
// sent twice whatever the failure, its body (if any) can be sent again at
// once (GetBody, or a length that fits the replay buffer), and its breaker
// is not shared through a Breaker.Store.
func (rt *roundTrip) mayHedge() bool {
	req, cfg := rt.req, rt.t.config()
	switch {
	case cfg.hedge == nil || !cfg.hedgeable(cfg.hedge) || !rt.idempotent:
		return false
	case req.Body == nil || req.Body == http.NoBody || req.GetBody != nil:
		return true
	}
	return req.ContentLength > 0 && req.ContentLength <= rt.t.maxReplay()
}

// hedgedTrip is a hedged request: its state, and its turns, whose attempts
// are sent through roundTrip.attempt beside each other.
type hedgedTrip struct {
	rt  roundTrip
	c   call
	drv driver
	tn  *turn
}

// hedged is RoundTrip for a request the Transport hedges (see mayHedge).
// The first attempt of the request sends the caller's own body; the
// others take theirs from GetBody or from the replay buffer, made here
// before any attempt so that attempts can read it at once. The outcome of
// a turn (the winner, or its last failure) becomes the response in hand;
// the other responses are drained and closed.
func (t *Transport) hedged(rt roundTrip) (*http.Response, error) {
	h := &hedgedTrip{rt: rt}
	rt2 := &h.rt
	defer rt2.finish()
	req, cfg := rt2.req, t.config()
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		rt2.bodyOwned = true // the replay buffer closes it
		rt2.body = newReplayBody(req.Body, t.maxReplay())
	}
	c := &h.c
	*c = call{cfg: t.gated(cfg), key: rt2.key}
	h.tn = takeTurn(h, c.cfg, cfg.hedge, c.key, rt2.describe)
	defer h.tn.recycle()
	h.drv = driver{verdict: h.tn.verdictFn, cause: h.tn.causeFn, giveUp: rt2.discard, describe: rt2.describe, record: rt2.record}
	err := c.run(req.Context(), &h.drv, func(actx context.Context) (bool, error) {
		rt2.held = nil
		a := h.tn.run(actx, c)
		rt2.resp, _ = a.value.(*http.Response)
		// The first attempt's try lives in the turn, which the next
		// request may take from the pool before this response is closed:
		// keep its releases, not the try.
		release, cancel := a.release, a.cancel
		rt2.cancel = func() {
			if release != nil {
				release()
			}
			if cancel != nil {
				cancel()
			}
		}
		return a.timedOut, a.failure
	})
	return rt2.answer(err)
}

func (h *hedgedTrip) attempt(ctx context.Context, t *try) {
	var resp *http.Response
	resp, t.release, t.timedOut, t.verdict, t.failure = h.rt.attempt(ctx, t.n)
	if resp != nil {
		t.value = resp
	}
}

// discard drains and closes a response that is not returned.
func (h *hedgedTrip) discard(t *try) {
	if resp, _ := t.value.(*http.Response); resp != nil {
		hold(resp)
	}
}
