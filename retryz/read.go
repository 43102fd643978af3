package retryz

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/internal/debugstats"
	"github.com/steadyhq/retry/redact"
	"github.com/steadyhq/retry/shed"
)

// maxAge is how long a reading serves the readers that come after it: the
// sources are read at most twice a second, whatever the number of readers.
const maxAge = 500 * time.Millisecond

// reading is what the sources said at one time, shared by the readers of
// that time. It is not changed once built, but for its cache of pages.
type reading struct {
	at        time.Time
	clients   []clientReading
	servers   []Server
	fleet     []Member
	refused   int64
	collected int64

	mu    sync.Mutex
	pages map[query][]byte // rendered bodies, by query; see cached
}

// clientReading is a Client before its keys are paged.
type clientReading struct {
	Client
	keys []Key // all of them, sorted as Client.Keys says
}

// read returns a reading no older than maxAge, reading the sources if
// needed. One goroutine reads at a time; the others wait for its reading.
func (h *Handler) read() *reading {
	if r := h.reading.Load(); r != nil && h.now().Sub(r.at) < maxAge {
		return r
	}
	h.readMu.Lock()
	defer h.readMu.Unlock()
	if r := h.reading.Load(); r != nil && h.now().Sub(r.at) < maxAge {
		return r
	}
	srcs, refused, collected := h.list()
	now := h.now()
	rd := &reading{at: now, refused: refused, collected: collected}
	for _, s := range srcs {
		switch s.kind {
		case kindRetrier, kindTransport:
			rd.clients = append(rd.clients, s.readClient(now))
		case kindShedder:
			rd.servers = append(rd.servers, s.readServer(now))
		case kindFleet:
			rd.fleet = append(rd.fleet, s.readFleet(now))
		}
	}
	h.reading.Store(rd)
	return rd
}

// stats reads the Retrier's or Transport's Stats; false when it is gone.
func (s *source) stats() (retry.Stats, bool) {
	switch {
	case s.dflt:
		return (*retry.Retrier)(nil).Stats(), true
	case s.kind == kindRetrier:
		if r := s.retrier.Value(); r != nil {
			return r.Stats(), true
		}
	case s.kind == kindTransport:
		if t := s.transport.Value(); t != nil {
			return debugstats.TransportStats(t).(retry.Stats), true
		}
	}
	return retry.Stats{}, false
}

func (s *source) readClient(now time.Time) clientReading {
	c := clientReading{Client: Client{Name: clean(s.name), Kind: s.kind.String(), Error: s.invalid,
		Changes: []Change{}, Denials: []retry.Event{}}}
	st, ok := s.stats()
	if !ok {
		if c.Error == "" {
			c.Error = "collected"
		}
		return c
	}
	denied := st.BudgetDenied + st.BreakerDenied + st.LimiterDenied + st.Throttled + st.ConcurrencyDenied
	s.hist.record(now.UnixNano(), [maxSeries]int64{st.Attempts, st.Failed, st.Retried, denied})
	start, v := s.hist.series()
	c.Activity = Series{Start: unix(start), Attempts: v[0], Failures: v[1], Retries: v[2], Denials: v[3]}

	c.keys = keysOf(&st)
	c.KeysTotal = len(c.keys)
	if st.Breakers != nil {
		c.BreakerStates = map[string]int{retry.BreakerClosed: 0, retry.BreakerHalfOpen: 0, retry.BreakerOpen: 0}
		for _, state := range st.Breakers {
			c.BreakerStates[state]++
		}
	}
	c.Changes = make([]Change, len(st.BreakerChanges))
	since := make(map[string]time.Time)
	for i, ch := range st.BreakerChanges {
		since[ch.Key] = ch.Time
		ch.Key = clean(ch.Key)
		c.Changes[i] = Change(ch)
	}
	for i := range c.keys {
		c.keys[i].Since = since[c.keys[i].Key]
	}
	c.Denials = make([]retry.Event, len(st.Denials))
	for i, d := range st.Denials {
		d.Key, d.URL, d.Message = clean(d.Key), clean(d.URL), clean(d.Message)
		c.Denials[i] = d
	}
	// What Keys, Changes and Denials carry.
	st.Breakers, st.BreakersOnFleet, st.BreakerChanges = nil, nil, nil
	st.Budgets, st.Throttle, st.ConcurrencyLimit, st.InFlight, st.Tokens, st.Denials = nil, nil, nil, nil, nil, nil
	st.BudgetDeniedKey = clean(st.BudgetDeniedKey)
	c.Stats = st
	return c
}

// keysOf gathers the per-key state of st, sorted: open breakers first,
// then half-open, then by throttle probability and by the share of the
// concurrency limit in use, highest first, then by key. Keys are not yet
// redacted: page does it for the page it serves.
func keysOf(st *retry.Stats) []Key {
	m := make(map[string]*Key)
	get := func(k string) *Key {
		if v, ok := m[k]; ok {
			return v
		}
		v := &Key{Key: k}
		m[k] = v
		return v
	}
	for k, v := range st.Breakers {
		get(k).Breaker = v
	}
	for k, v := range st.BreakersOnFleet {
		get(k).OnFleet = &v
	}
	if st.BudgetBalance >= 0 {
		b := st.BudgetBalance
		get("").Budget = &b
	}
	for k, v := range st.Budgets {
		get(k).Budget = &v
	}
	for k, v := range st.Tokens {
		get(k).Tokens = &v
	}
	for k, v := range st.Throttle {
		get(k).Throttle = &v
	}
	for k, v := range st.ConcurrencyLimit {
		get(k).Limit = &v
	}
	for k, v := range st.InFlight {
		get(k).InFlight = &v
	}
	keys := make([]Key, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		keys = append(keys, *m[k])
	}
	slices.SortStableFunc(keys, func(a, b Key) int {
		return cmp.Or(cmp.Compare(severity(b.Breaker), severity(a.Breaker)),
			cmp.Compare(deref(b.Throttle), deref(a.Throttle)),
			cmp.Compare(used(b), used(a)))
	})
	return keys
}

// severity orders breaker states: open first.
func severity(state string) int {
	switch state {
	case retry.BreakerOpen:
		return 2
	case retry.BreakerHalfOpen:
		return 1
	}
	return 0
}

func deref[T int | float64](p *T) T {
	if p == nil {
		return 0
	}
	return *p
}

// used is the share of a key's concurrency limit in use.
func used(k Key) float64 {
	if l := deref(k.Limit); l > 0 {
		return float64(deref(k.InFlight)) / float64(l)
	}
	return 0
}

func (s *source) readServer(now time.Time) Server {
	sv := Server{Name: clean(s.name), Error: s.invalid, Shed: map[string]int64{}}
	sh := s.shedder.Value()
	if sh == nil {
		if sv.Error == "" {
			sv.Error = "collected"
		}
		return sv
	}
	st := sh.Stats()
	sv.Limit, sv.InFlight, sv.Queued, sv.Admitted = st.Limit, st.InFlight, st.Queued, st.Admitted
	sv.DrainRate, sv.RetryAfter = st.DrainRate, st.RetryAfter.Seconds()
	var shed int64
	for i, n := range st.Shed {
		sv.Shed[reasonName(i)] = n
		shed += n
	}
	s.hist.record(now.UnixNano(), [maxSeries]int64{st.Admitted, shed})
	start, v := s.hist.series()
	sv.Activity = Series{Start: unix(start), Admitted: v[0], Shed: v[1]}
	return sv
}

// reasonName is the JSON name of shed's reason i: "queue full" becomes
// queue_full.
func reasonName(i int) string {
	return strings.ReplaceAll(shed.Reason(i).String(), " ", "_")
}

func (s *source) readFleet(now time.Time) Member {
	m := Member{Name: clean(s.name), Error: s.invalid}
	if s.fleet == nil {
		return m
	}
	m.OnFleet, m.LastSync, m.Errors = s.fleet.FleetStatus()
	s.hist.record(now.UnixNano(), [maxSeries]int64{m.Errors})
	start, v := s.hist.series()
	m.Activity = Series{Start: unix(start), Errors: v[0]}
	return m
}

// unix is the time of unix second s; zero for 0.
func unix(s int64) time.Time {
	if s == 0 {
		return time.Time{}
	}
	return time.Unix(s, 0)
}

// clean passes a name, key, URL or message through the sanitizer of
// dead-letter records, and replaces line breaks and other control
// characters, so that one line stays one line.
func clean(s string) string {
	if s == "" {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, redact.Sanitize(s))
}
