package retry

import (
	"context"
	"net/http"

	"github.com/steadyhq/retry/redact"
)

// mayHedge reports whether the Transport may hedge its request: it may be
// sent twice whatever the failure, its body (if any) can be sent again at
// once (GetBody, or a length that fits the replay buffer), and its breaker
// is not shared through a Breaker.Store.
func (rt *roundTrip) mayHedge() bool {
	req, cfg := rt.req, rt.t.config()
	switch {
	case cfg.hedge == nil || cfg.hedge.Max < 2 || !rt.idempotent:
		return false
	case cfg.breakers != nil && cfg.breakers.spec.Store != nil:
		return false
	case req.Body == nil || req.Body == http.NoBody || req.GetBody != nil:
		return true
	}
	return req.ContentLength > 0 && req.ContentLength <= rt.t.maxReplay()
}

// hedgeResp is the response of one hedged attempt and the release of its
// context.
type hedgeResp struct {
	resp   *http.Response
	cancel context.CancelFunc
}

// hedgedRoundTrip is RoundTrip for a request the Transport hedges (see
// mayHedge); c is RoundTrip's call, copied so that the common path keeps
// its call off the heap. Each attempt builds its own request, so that
// attempts can run at once: bodies come from GetBody, the first attempt's
// being the caller's own, or from the replay buffer, made here. The
// response kept (the winner, or a turn's last failure) becomes the
// response in hand, as in RoundTrip; losing responses are drained and
// closed.
func hedgedRoundTrip(ctx context.Context, c call) (*http.Response, error) {
	rt := &c.http
	defer rt.finish()
	req := rt.req
	if req.Body != nil && req.Body != http.NoBody {
		rt.bodyOwned = true // the first attempt takes it over
		if req.GetBody == nil {
			rt.body = newReplayBody(req.Body, rt.t.maxReplay())
		}
	}
	rt.method, rt.url = methodOf(req), redact.SanitizeURL(req.URL)
	hg := &hedging{cfg: c.cfg, spec: c.cfg.hedge, key: c.key, http: true, inline: new(hedgeTry),
		take: func(t *hedgeTry) {
			hr := t.value.(*hedgeResp)
			if hr.resp == nil {
				release(hr.cancel)
				t.cancel()
				return
			}
			rt.resp, rt.held = hr.resp, nil
			rt.cancel = func() {
				release(hr.cancel)
				t.cancel()
			}
		},
		drop: func(t *hedgeTry) {
			hr := t.value.(*hedgeResp)
			if hr.resp != nil {
				hold(hr.resp) // drains and closes
			}
			release(hr.cancel)
		},
	}
	hg.attempt = func(actx context.Context) (error, bool) {
		t := tryFrom(actx)
		if t == nil { // the turn's first attempt
			t = hg.inline
		}
		return rt.hedgeAttempt(actx, t)
	}
	c.hedge = hg
	err := c.run(ctx, hg.attempt)
	if rt.resp != nil {
		return deliver(rt.resp, rt.cancel), nil
	}
	release(rt.cancel)
	return heldOr(rt.held, err)
}

// hedgeAttempt is one attempt t of a hedged request.
func (rt *roundTrip) hedgeAttempt(actx context.Context, t *hedgeTry) (error, bool) {
	cfg, req := rt.t.config(), rt.req
	hr := new(hedgeResp)
	t.value = hr
	actx, acancel, timer := rt.attemptContext(actx)
	hr.cancel = acancel
	r, err := rt.send(actx, t.n)
	if timer != nil && !timer.Stop() && err == nil {
		r.Body.Close() // as in RoundTrip: the timeout struck as the headers came
		<-actx.Done()
		r, err = nil, context.Cause(actx)
	}
	hr.resp = r
	timedOut := err != nil && context.Cause(actx) == errAttemptTimeout
	failure := err
	if err == nil {
		failure = cfg.statusFailure(r)
	}
	if cfg.breakers != nil {
		t.verdict = httpVerdict(req.Context(), cfg, r, err, timedOut)
	}
	return failure, timedOut
}
