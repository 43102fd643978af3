package shed

import (
	"context"
	"slices"
	"time"
)

// Request is what Admit needs to know of a request, whatever its
// transport.
type Request struct {
	// Priority is the request's own priority; a retry is Low whatever it
	// says.
	Priority Priority
	// Attempt is the caller's attempt number, one-based: 2 or more marks
	// a retry; 0 and 1 a first attempt.
	Attempt int
	// Key names the client, for its Quota and its ClientShare (see
	// Options.Client): an IP address names its client by its prefix
	// (Options.IPv6Prefix), any other key is kept as a hash. "" leaves the
	// request out of both.
	Key string
}

// Ticket is an admitted request's permit: give it back with Done once the
// request is served. The zero Ticket holds nothing.
type Ticket struct {
	start time.Time // when the permit was handed over, for a timed one
	timed bool      // the limit learns this request's latency
	held  bool      // a permit is held
	quota quotaNote // the quota's state, when one counted the request
	slot  int32     // the client's share counter, one-based; 0 for none
}

// Reason says why a request was shed.
type Reason int8

const (
	// ReasonQueueFull: no permit was free and the queue was full.
	ReasonQueueFull Reason = iota
	// ReasonQueueTimeout: the request waited QueueWait for a permit.
	ReasonQueueTimeout
	// ReasonLow: a retry or Low request found no permit free, or others
	// waiting.
	ReasonLow
	// ReasonCanceled: the request's context ended while it waited.
	ReasonCanceled
	// ReasonQuota: the client is over its Quota (HTTP 429; gRPC
	// RESOURCE_EXHAUSTED). Every other reason is overload (HTTP 503; gRPC
	// UNAVAILABLE).
	ReasonQuota
	// ReasonClient: the client's requests hold its share of the permits
	// (Options.ClientShare).
	ReasonClient
	numReasons
)

var reasonNames = [numReasons]string{"queue full", "queue timeout", "low priority", "canceled", "quota", "client share"}

// String returns the reason's name: "queue full", "queue timeout", "low
// priority", "canceled", "quota" or "client share".
func (r Reason) String() string {
	if r < 0 || r >= numReasons {
		return "unknown"
	}
	return reasonNames[r]
}

// Refusal says why a request was shed and when its client should come
// back.
type Refusal struct {
	Reason Reason
	// RetryAfter is when to come back, > 0. For ReasonQuota it is the
	// time until the client's window resets, at least 1 s. For overload it follows the
	// rate at which the server drains its work, spread at random:
	//
	//	R = the requests completed per second over about the last second
	//	    (since the counters were read between 250 ms and 1 s ago);
	//	    when that span is not measured or none completed in it,
	//	    Limit/Baseline, the limit's own estimate, once a baseline is
	//	    known
	//	need = (Q + S)/R, Q the requests queued now and S those shed for
	//	    overload over the same span (this one included): the time the
	//	    server needs at rate R to serve them; 1 s while R is unknown
	//	w = min(max(need, 1 s), MaxRetryAfter/2)
	//	RetryAfter = min(w·(1+u), MaxRetryAfter), u uniform in [0, 1)
	//
	// so clients refused together come back spread over [w, 2w]. HTTP
	// sends it in whole seconds, rounded to the nearest, within [1 s,
	// MaxRetryAfter] (Retry-After: 3; rounding up would tell every client
	// 2 when w is 1 s); gRPC in milliseconds, rounded up
	// (grpc-retry-pushback-ms).
	//
	// For ReasonQuota, MaxRetryAfter does not apply: the client may not
	// come back before its window resets, however far that is, and HTTP
	// sends the reset rounded up, as the RateLimit field's t.
	RetryAfter time.Duration
	quota      quotaNote
}

// Error returns the refusal as a message: "shed: <reason>, retry after <d>".
func (r *Refusal) Error() string {
	return "shed: " + r.Reason.String() + ", retry after " + r.RetryAfter.String()
}

// waiter is a request in the queue; ch receives its permit. On
// Options.Clock, wake cuts its sleep short when it is handed one.
type waiter struct {
	ch   chan Ticket
	wake context.CancelFunc
}

// Admit admits a request or sheds it: it returns a Ticket to give back
// with Done, or a Refusal. A request the Quota applies to is counted
// first, and shed if over quota; then a request whose client holds its
// share of the permits (Options.ClientShare) is shed. Then a free permit
// admits it, unless others wait for one; otherwise a Normal first attempt
// waits in the FIFO queue (if it is not full) until a permit is handed to
// it, QueueWait passes, or ctx ends; a retry or Low request is shed at
// once. A request shed for any reason but its quota does not use its
// client's quota. A nil ctx is taken as context.Background().
//
// The admitted path of a first attempt without a quota does not allocate
// and reads the clock only when the limit times the request.
func (s *Shedder) Admit(ctx context.Context, req Request) (Ticket, *Refusal) {
	if s == nil || s.lim == nil {
		return Ticket{}, nil
	}
	c := noClient
	if s.quota != nil || s.share != nil {
		c = s.clientOf(req.Key)
	}
	return s.admit(ctx, req, c)
}

// admit is Admit for the request of client c.
func (s *Shedder) admit(ctx context.Context, req Request, c client) (Ticket, *Refusal) {
	if ctx == nil {
		ctx = context.Background()
	}
	var q quotaNote
	if s.quota != nil && c != noClient {
		q = s.quota.take(c, s.now())
		if q.over {
			return Ticket{}, s.refuse(ReasonQuota, q)
		}
	}
	var slot int32
	if s.share != nil && c != noClient {
		// A share of the whole limit (a limit of 1) bounds nothing.
		limit := s.lim.Limit()
		if most := max(int(float64(limit)*s.opts.ClientShare), 1); most < limit {
			if slot = s.share.take(c, most); slot == 0 {
				s.lim.Want() // the limit, through the share, held it back
				return Ticket{}, s.overload(ReasonClient, q)
			}
		}
	}
	if s.waiting.Load() == 0 {
		if timed, ok := s.lim.Acquire(); ok {
			return s.ticket(timed, q, slot), nil
		}
	}
	if req.Priority == Low || req.Attempt >= 2 {
		// A permit may be free while others wait: Acquire counts a
		// permit before it checks the limit, so a failed fast path can
		// have made a Done's dispatch find none. Hand it on.
		s.handOff()
		s.giveShare(slot)
		return Ticket{}, s.overload(ReasonLow, q)
	}
	return s.wait(ctx, q, slot)
}

// giveShare gives back the share counted in slot.
func (s *Shedder) giveShare(slot int32) {
	if s.share != nil {
		s.share.give(slot)
	}
}

// handOff hands free permits to the queue, if requests wait.
func (s *Shedder) handOff() {
	if s.waiting.Load() > 0 {
		s.mu.Lock()
		s.dispatch()
		s.mu.Unlock()
	}
}

// ticket returns a held permit's ticket, timed from now if timed.
func (s *Shedder) ticket(timed bool, q quotaNote, slot int32) Ticket {
	t := Ticket{timed: timed, held: true, quota: q, slot: slot}
	if timed {
		t.start = s.now()
	}
	return t
}

// wait queues the request for a permit.
func (s *Shedder) wait(ctx context.Context, q quotaNote, slot int32) (Ticket, *Refusal) {
	w := &waiter{ch: make(chan Ticket, 1)}
	wctx := ctx
	if s.clock != nil {
		wctx, w.wake = context.WithCancel(ctx)
		defer w.wake()
	}
	s.mu.Lock()
	// Counted before the queue is read, so that a permit given back from
	// now on is handed to the queue (see Done).
	s.waiting.Add(1)
	limit := s.opts.Queue
	if limit == 0 {
		limit = max(s.lim.Limit()/queueShare, 1)
	}
	if len(s.queue) >= limit {
		s.waiting.Add(-1)
		s.mu.Unlock()
		s.giveShare(slot)
		return Ticket{}, s.overload(ReasonQueueFull, q)
	}
	s.queue = append(s.queue, w)
	s.dispatch() // a permit may be free
	s.mu.Unlock()

	t, ok, why := s.await(ctx, wctx, w)
	if ok {
		t.quota, t.slot = q, slot
		return t, nil
	}
	s.mu.Lock()
	i := slices.Index(s.queue, w)
	if i >= 0 {
		s.queue = slices.Delete(s.queue, i, i+1)
		s.waiting.Add(-1)
	}
	s.mu.Unlock()
	if i < 0 { // handed a permit meanwhile
		t := <-w.ch
		t.quota, t.slot = q, slot
		if why != ReasonCanceled {
			return t, nil
		}
		s.release(t, false)
	} else {
		s.giveShare(slot)
	}
	return Ticket{}, s.overload(why, q)
}

// await waits for w's permit, up to queueWait: on the real clock with a
// timer and a select; on Options.Clock with a sleep on wctx, which a permit
// handed to w or the end of ctx cuts short. It returns the permit, or why
// there is none.
func (s *Shedder) await(ctx, wctx context.Context, w *waiter) (Ticket, bool, Reason) {
	if s.clock == nil {
		timer := time.NewTimer(s.queueWait())
		defer timer.Stop()
		select {
		case t := <-w.ch:
			return t, true, 0
		case <-timer.C:
			return Ticket{}, false, ReasonQueueTimeout
		case <-ctx.Done():
			return Ticket{}, false, ReasonCanceled
		}
	}
	slept := s.clock.Sleep(wctx, s.queueWait())
	select {
	case t := <-w.ch:
		return t, true, 0
	default:
	}
	if slept != nil && ctx.Err() != nil {
		return Ticket{}, false, ReasonCanceled
	}
	return Ticket{}, false, ReasonQueueTimeout
}

// queueWait is how long a request waits in the queue.
func (s *Shedder) queueWait() time.Duration {
	if s.opts.QueueWait > 0 {
		return s.opts.QueueWait
	}
	if b := s.lim.Baseline(); b > 0 {
		return b / queueShare
	}
	return defaultQueueWait
}

// dispatch hands free permits to the head of the queue. s.mu is held.
func (s *Shedder) dispatch() {
	for len(s.queue) > 0 {
		timed, ok := s.lim.Acquire()
		if !ok {
			return
		}
		w := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.waiting.Add(-1)
		w.ch <- s.ticket(timed, quotaNote{}, 0)
		if w.wake != nil {
			w.wake()
		}
	}
}

// Done gives the permit of t back; when requests wait, it goes to the
// head of the queue. Done of the zero Ticket does nothing. Call it exactly
// once for each Ticket Admit returned without a refusal, also when the
// handler panics: a Ticket is a value, and a second Done would give back
// a permit that another request holds.
func (s *Shedder) Done(t Ticket) { s.release(t, true) }

// release gives the permit of t back, counting it as completed when done.
func (s *Shedder) release(t Ticket, done bool) {
	if !t.held || s == nil || s.lim == nil {
		return
	}
	s.giveShare(t.slot)
	if done {
		s.completed.Add(1)
	}
	if t.timed && done {
		now := s.now()
		s.lim.Done(now.Sub(t.start), false, now)
		s.meter.record(now, s.completed.Load(), s.overloadShed())
	} else {
		s.lim.Release()
	}
	s.handOff()
}

// overload sheds a request for overload, or for its client's share: the
// quota it used is given back, and its come-back delay follows the drain
// rate.
func (s *Shedder) overload(why Reason, q quotaNote) *Refusal {
	if q.on {
		q = s.quota.refund(q)
	}
	return s.refuse(why, q)
}

// refuse counts a refusal and says when to come back.
func (s *Shedder) refuse(why Reason, q quotaNote) *Refusal {
	s.shed[why].Add(1)
	if why == ReasonQuota {
		return &Refusal{Reason: why, RetryAfter: max(q.reset, time.Second), quota: q}
	}
	now := s.now()
	done, shed := s.completed.Load(), s.overloadShed()
	s.meter.record(now, done, shed)
	rate, shedIn := s.meter.rate(now, done, shed)
	s.mu.Lock()
	queued := len(s.queue)
	s.mu.Unlock()
	d := comeBack(int64(queued)+shedIn, rate, s.lim.Limit(), s.lim.Baseline(), s.opts.MaxRetryAfter, s.rand())
	s.retryAfter.Store(int64(d))
	return &Refusal{Reason: why, RetryAfter: d, quota: q}
}

// overloadShed returns the requests shed for overload so far.
func (s *Shedder) overloadShed() int64 {
	return s.shed[ReasonQueueFull].Load() + s.shed[ReasonQueueTimeout].Load() + s.shed[ReasonLow].Load()
}
