package shed

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Quota is a per-client quota over fixed windows: each client (see
// Options.Client) may send Limit requests in a window of Window that
// starts at its first request; a request over it is shed with ReasonQuota
// (HTTP 429, with Retry-After the time until the window resets). Every
// HTTP response to a request the quota counts carries the fields of
// draft-ietf-httpapi-ratelimit-headers-11 (RateLimit header fields for
// HTTP, https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/),
// Structured Fields lists of one item, the policy named "default":
//
//	RateLimit-Policy: "default";q=100;w=60
//	RateLimit: "default";r=42;t=17
//
// q is Limit, w the window in seconds, r the requests left in the
// client's window after this one, t the seconds until it resets, rounded
// up. A request shed for overload is given back to the quota.
//
// The windows of at most 10,000 clients are kept, each in about 80 bytes
// whatever its key's length (a client is kept as a hash of its key): under
// 1 MB in all. A new client past them takes the place of the client seen
// least recently, whose window starts again on its next request. A flood
// of new keys thus costs the clients it evicts a fresh window, never a
// newcomer its own, and never more memory; a client that can choose among
// more than 10,000 keys is not bounded by a quota, only by the limit and
// its share of it (ClientShare).
//
// The zero Quota counts nothing.
type Quota struct {
	// Limit is the requests a client may send in a window; 0 turns the
	// quota off.
	Limit int
	// Window is the length of a window, a whole number of seconds:
	// default 1 min.
	Window time.Duration
}

const (
	defaultQuotaWindow = time.Minute
	maxQuotaKeys       = 10_000
)

// maxQuota is the largest Limit: the RateLimit fields carry it and what
// is left of it as Structured Fields integers, at most 15 digits.
const maxQuota = 999_999_999_999_999

// resolve returns q with its defaults, or the error of its invalid field.
func (q Quota) resolve() (Quota, error) {
	bad := func(field string, value any, rule string) (Quota, error) {
		return q, fmt.Errorf("shed: Options.Quota.%s = %v: %s", field, value, rule)
	}
	switch {
	case q.Limit < 0 || q.Limit > maxQuota:
		return bad("Limit", q.Limit, "must be in [0, 999999999999999], the integers a Structured Field can carry (RFC 9651)")
	case q.Window < 0 || q.Window%time.Second != 0:
		return bad("Window", q.Window, "must be a whole number of seconds >= 0")
	}
	if q.Window == 0 {
		q.Window = defaultQuotaWindow
	}
	return q, nil
}

// quotaNote is a client's quota as one request left it.
type quotaNote struct {
	on, over  bool
	client    client
	limit     int
	remaining int
	window    time.Duration
	reset     time.Duration // until the window resets
	start     time.Time     // the window's start
}

// window is a client's current window.
type window struct {
	start time.Time
	n     int
}

// quotas holds the windows of at most maxQuotaKeys clients, in a list
// from the most recently seen (head) to the least (tail), which is
// evicted for a new client once the list is full. It is safe for
// concurrent use.
type quotas struct {
	q          Quota
	mu         sync.Mutex
	index      map[client]int32 // a client's place in entries
	entries    []quotaEntry     // at most maxQuotaKeys
	head, tail int32            // -1 for none
}

// quotaEntry is a client's window and its neighbours in the list.
type quotaEntry struct {
	c          client
	w          window
	prev, next int32 // -1 for none
}

func newQuotas(q Quota) *quotas {
	return &quotas{q: q, index: make(map[client]int32), head: -1, tail: -1}
}

// take counts a request of c at now, unless its window is used up.
func (qs *quotas) take(c client, now time.Time) quotaNote {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	i, ok := qs.index[c]
	switch {
	case ok:
		qs.unlink(i)
	case len(qs.entries) < maxQuotaKeys:
		i = int32(len(qs.entries))
		qs.entries = append(qs.entries, quotaEntry{})
	default: // evict the client seen least recently
		i = qs.tail
		qs.unlink(i)
		delete(qs.index, qs.entries[i].c)
	}
	if !ok {
		qs.entries[i] = quotaEntry{c: c}
		qs.index[c] = i
	}
	qs.pushFront(i)
	w := &qs.entries[i].w
	if w.start.IsZero() || now.Sub(w.start) >= qs.q.Window {
		*w = window{start: now}
	}
	over := w.n >= qs.q.Limit
	if !over {
		w.n++
	}
	return quotaNote{
		on: true, over: over, client: c, limit: qs.q.Limit, remaining: qs.q.Limit - w.n,
		window: qs.q.Window, reset: w.start.Add(qs.q.Window).Sub(now), start: w.start,
	}
}

// refund gives back the request that left note n, if its client's window
// is still the one that counted it.
func (qs *quotas) refund(n quotaNote) quotaNote {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	i, ok := qs.index[n.client]
	if !ok {
		return n
	}
	w := &qs.entries[i].w
	if !w.start.Equal(n.start) || w.n == 0 {
		return n
	}
	w.n--
	n.remaining = qs.q.Limit - w.n
	return n
}

// unlink takes entry i out of the list.
func (qs *quotas) unlink(i int32) {
	e := &qs.entries[i]
	if e.prev >= 0 {
		qs.entries[e.prev].next = e.next
	} else {
		qs.head = e.next
	}
	if e.next >= 0 {
		qs.entries[e.next].prev = e.prev
	} else {
		qs.tail = e.prev
	}
	e.prev, e.next = -1, -1
}

// pushFront puts entry i at the head of the list.
func (qs *quotas) pushFront(i int32) {
	e := &qs.entries[i]
	e.prev, e.next = -1, qs.head
	if qs.head >= 0 {
		qs.entries[qs.head].prev = i
	}
	qs.head = i
	if qs.tail < 0 {
		qs.tail = i
	}
}

// setFields sets the RateLimit-Policy and RateLimit fields of n on h.
func (n quotaNote) setFields(h http.Header) {
	h["Ratelimit-Policy"] = []string{`"default";q=` + strconv.Itoa(n.limit) + ";w=" + strconv.FormatInt(int64(n.window/time.Second), 10)}
	h["Ratelimit"] = []string{`"default";r=` + strconv.Itoa(n.remaining) + ";t=" + strconv.FormatInt(seconds(n.reset, n.window), 10)}
}
