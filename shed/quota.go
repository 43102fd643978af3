package shed

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Quota is a per-client quota over fixed windows: each client (each key)
// may send Limit requests in a window of Window that starts at its first
// request; a request over it is shed with ReasonQuota (HTTP 429, with
// Retry-After the time until the window resets). Every HTTP response to a
// request the quota counts carries the fields of
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
// At most 10,000 clients are kept; when that many have live windows, the
// clients past them share one window (a flood of new keys cannot escape
// the quota, nor grow the memory).
//
// The zero Quota counts nothing.
type Quota struct {
	// Limit is the requests a client may send in a window; 0 turns the
	// quota off.
	Limit int
	// Window is the length of a window, a whole number of seconds:
	// default 1 min.
	Window time.Duration
	// Key names the client of an HTTP request; "" leaves the request out
	// of the quota. Default: the host part of the request's RemoteAddr.
	// gRPC: the peer's address, host part.
	Key func(*http.Request) string
}

const (
	defaultQuotaWindow = time.Minute
	maxQuotaKeys       = 10_000
	overflowKey        = "" // the window the clients past maxQuotaKeys share; "" is never a client's key
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
	if q.Key == nil {
		q.Key = remoteHost
	}
	return q, nil
}

// remoteHost returns the host part of r.RemoteAddr.
func remoteHost(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// quotaNote is a client's quota as one request left it.
type quotaNote struct {
	on, over  bool
	shared    bool // counted in the window the clients past maxQuotaKeys share
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

// quotas holds the windows of the clients. It is safe for concurrent use.
type quotas struct {
	q     Quota
	mu    sync.Mutex
	m     map[string]window
	swept time.Time // the last sweep of expired windows
}

func newQuotas(q Quota) *quotas { return &quotas{q: q, m: make(map[string]window)} }

// take counts a request of key at now, unless its window is used up.
func (qs *quotas) take(key string, now time.Time) quotaNote {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	w, ok := qs.m[key]
	if !ok && len(qs.m) >= maxQuotaKeys {
		if now.Sub(qs.swept) >= qs.q.Window/8 {
			qs.sweep(now)
		}
		if len(qs.m) >= maxQuotaKeys {
			key = overflowKey
			w = qs.m[key]
		}
	}
	if w.start.IsZero() || now.Sub(w.start) >= qs.q.Window {
		w = window{start: now}
	}
	over := w.n >= qs.q.Limit
	if !over {
		w.n++
	}
	qs.m[key] = w
	n := qs.note(w, now, over)
	n.shared = key == overflowKey
	return n
}

// refund gives back the request of key that left note n, if its window
// is still the one that counted it.
func (qs *quotas) refund(key string, n quotaNote) quotaNote {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if n.shared {
		key = overflowKey
	}
	w, ok := qs.m[key]
	if !ok || !w.start.Equal(n.start) || w.n == 0 {
		return n
	}
	w.n--
	qs.m[key] = w
	n.remaining = qs.q.Limit - w.n
	return n
}

func (qs *quotas) note(w window, now time.Time, over bool) quotaNote {
	return quotaNote{
		on: true, over: over, limit: qs.q.Limit, remaining: qs.q.Limit - w.n,
		window: qs.q.Window, reset: w.start.Add(qs.q.Window).Sub(now), start: w.start,
	}
}

// sweep drops the windows that have ended.
func (qs *quotas) sweep(now time.Time) {
	qs.swept = now
	for k, w := range qs.m {
		if now.Sub(w.start) >= qs.q.Window {
			delete(qs.m, k)
		}
	}
}

// setFields sets the RateLimit-Policy and RateLimit fields of n on h.
func (n quotaNote) setFields(h http.Header) {
	h["Ratelimit-Policy"] = []string{`"default";q=` + strconv.Itoa(n.limit) + ";w=" + strconv.FormatInt(int64(n.window/time.Second), 10)}
	h["Ratelimit"] = []string{`"default";r=` + strconv.Itoa(n.remaining) + ";t=" + strconv.FormatInt(seconds(n.reset, n.window), 10)}
}
