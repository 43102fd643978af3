package retry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"net/http"
	"sync"
	"time"

	"github.com/steadyhq/retry/redact"
)

// DeadLetters says where failures routed to dead letter go: the DeadLetter
// verdict always; Permanent, non-retryable types, exhaustion, and
// deadline, budget, breaker and rate-limit stops after at least one
// attempt, when the policy's on_exhaustion is dead_letter. Zero fields take
// the defaults given beside them.
type DeadLetters struct {
	// Sink receives every record routed to dead letter. Its context
	// survives the caller's cancellation and is bounded by Timeout. A sink
	// error, or a panic, is counted in Stats.DeadLetterFailed and joined
	// into the call's error; without a Sink that error says so ("retry:
	// no dead-letter sink configured").
	Sink func(context.Context, Event) error
	// Timeout bounds each call of Sink; default 10 s.
	Timeout time.Duration
	// Alert is called for a record routed to dead letter, except that a
	// repeat of an alert (same key, type and message) within DedupWindow
	// is suppressed and counted in Stats.AlertsSuppressed; Sink still
	// receives every record.
	Alert func(Event)
	// DedupWindow is how long an alert suppresses its repeats; default
	// 1 h (Ratchet's), negative for none.
	DedupWindow time.Duration
}

// WithDeadLetter sets the dead-letter sink and alert of d, in place of
// those before it. An invalid d makes every call return an error naming
// the field.
func WithDeadLetter(d DeadLetters) Option {
	return optionFunc(func(c *config) {
		if d.Timeout < 0 {
			c.invalid("WithDeadLetter", "Timeout", d.Timeout, "must be >= 0 (0 means 10 s)")
			return
		}
		c.deadLetters = d.withDefaults()
	})
}

// withDefaults returns d with its zero fields set to their defaults, and
// a negative DedupWindow set to zero: none.
func (d DeadLetters) withDefaults() DeadLetters {
	d.Timeout = cmp.Or(d.Timeout, defaultDeadLetterLimit)
	d.DedupWindow = max(cmp.Or(d.DedupWindow, defaultDedupWindow), 0)
	return d
}

// errNoDeadLetterSink is joined into a call's error when a failure is routed
// to dead letter but no sink was configured: the record would otherwise be
// lost without a trace.
var errNoDeadLetterSink = errors.New("retry: no dead-letter sink configured")

// deadLetter routes ev to the sink and returns the routing failure, if any.
func (c *call) deadLetter(ctx context.Context, ev Event) error {
	cfg, st := c.cfg, c.cfg.state
	var err error
	if dl := cfg.deadLetters; dl.Sink == nil {
		err = errNoDeadLetterSink
	} else {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dl.Timeout)
		err = callSink(sctx, dl.Sink, ev)
		cancel()
		if err != nil {
			err = fmt.Errorf("retry: dead-letter sink: %w", err)
		}
	}
	if err != nil {
		st.deadLetterFailed.Add(1)
	} else {
		st.deadLettered.Add(1)
	}
	return err
}

// alert raises the dead-letter alert for ev, unless the same alert was
// raised within the dedup window.
func (c *call) alert(ev Event) {
	cfg, st := c.cfg, c.cfg.state
	dl := cfg.deadLetters
	if dl.Alert == nil {
		return
	}
	if st.alerts.admit(ev.Key, ev.Type, ev.Message, ev.Time, dl.DedupWindow) {
		dl.Alert(ev)
	} else {
		st.alertsSuppressed.Add(1)
	}
}

// callSink calls the sink, turning a panic into an error: a record must not
// be lost, nor the caller's goroutine, because the sink failed.
func callSink(ctx context.Context, sink func(context.Context, Event) error, ev Event) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return sink(ctx, ev)
}

// maxAlerts bounds the dedup window's memory.
const maxAlerts = 4096

// alerts remembers recent dead-letter alerts for deduplication.
type alerts struct {
	mu   sync.Mutex
	seed maphash.Seed
	seen map[uint64]time.Time
}

// admit reports whether an alert for (key, typ, msg) at now should be raised,
// and remembers it for window.
func (a *alerts) admit(key, typ, msg string, now time.Time, window time.Duration) bool {
	if window <= 0 {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seen == nil {
		a.seed = maphash.MakeSeed()
		a.seen = make(map[uint64]time.Time)
	}
	var h maphash.Hash
	h.SetSeed(a.seed)
	h.WriteString(key)
	h.WriteByte(0)
	h.WriteString(typ)
	h.WriteByte(0)
	h.WriteString(msg)
	sum := h.Sum64()
	if t, ok := a.seen[sum]; ok && now.Sub(t) < window {
		return false
	}
	if len(a.seen) >= maxAlerts {
		for k, t := range a.seen {
			if now.Sub(t) >= window {
				delete(a.seen, k)
			}
		}
		if len(a.seen) >= maxAlerts {
			clear(a.seen) // a burst of distinct alerts: forget rather than grow
		}
	}
	a.seen[sum] = now
	return true
}

// record is the dead-letter payload of the request: enough to send it again
// through the caller's own client, which re-applies credentials.
func (rt *roundTrip) record() any {
	req, h := rt.req, rt.t.cfg.http
	r := &RequestRecord{
		Method: methodOf(req),
		URL:    redact.SanitizeURL(req.URL),
		Header: redact.SafeHeader(req.Header, h.RecordHeaders...),
	}
	if r.Header == nil { // a request built by hand may have no header
		r.Header = make(http.Header, 1)
	}
	if rt.idemKey != "" {
		r.Header.Set("Idempotency-Key", rt.idemKey)
	}
	if !h.RecordBody {
		return r
	}
	var body []byte
	switch {
	case req.Body == nil || req.Body == http.NoBody:
		return r
	case req.GetBody != nil:
		if b, err := req.GetBody(); err == nil {
			body, r.BodyComplete = readUpTo(b, rt.t.maxReplay())
			b.Close()
		}
	case rt.body != nil:
		body, r.BodyComplete = rt.body.snapshot()
	}
	if r.Body = redact.SanitizeBody(body); r.Body == nil {
		r.BodyComplete = false // a binary body is not kept
	}
	return r
}

// RequestRecord is the Payload of a Transport's dead-letter record: the
// request without its credentials. Its header keeps only the headers
// known to carry none (see redact.SafeHeader) and those HTTP.RecordHeaders
// names, so replaying it through the caller's own client re-applies
// Authorization, cookies and API keys. It keeps no body unless
// HTTP.RecordBody asks for one.
type RequestRecord struct {
	Method string
	URL    string // without userinfo, secret query values redacted
	Header http.Header
	// Body is the request body, with HTTP.RecordBody, when it could be
	// kept (GetBody, or a body no longer than the replay limit) and is
	// text: the values of secret keys in it replaced by redact.Redacted
	// (see redact.SanitizeBody). BodyComplete says it is whole.
	Body         []byte
	BodyComplete bool
}
