package retryz

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/internal/typednil"
	"github.com/steadyhq/retry/shed"
)

// Fleet is a component that keeps state shared by a fleet of processes,
// such as the Store, Limiter and Budget of github.com/steadyhq/retry/redis,
// which implement it. FleetStatus must be safe for concurrent use and
// must not block: the page calls it on every reading.
type Fleet interface {
	// FleetStatus reports whether the component runs on the fleet's
	// state now (false while it falls back on this process's own), when
	// a round trip to the fleet's store last succeeded (zero before
	// one), and how many round trips failed.
	FleetStatus() (onFleet bool, lastSync time.Time, errors int64)
}

// maxSources bounds the sources a Handler keeps: a registration past it
// is refused, and counted (Snapshot.Refused).
const maxSources = 256

// Handler serves the live page of the sources registered with it, its
// JSON and its event stream; see the package documentation. Build it with
// New. It is safe for concurrent use: sources may come and go while it
// serves.
//
// A Handler does not keep a Retrier, Transport or Shedder alive: once
// nothing uses one (for a Retrier: neither the program nor a Transport or
// call that shares its state), it is collected as if it were not
// registered, and leaves the page (Snapshot.Collected counts it). A Fleet
// is kept until removed.
type Handler struct {
	mu        sync.Mutex
	sources   map[string]*source // by name
	refused   int64              // registrations past maxSources
	collected int64              // sources collected while registered

	// readMu is held by the one goroutine reading the sources; the
	// readers that find it held wait for its reading.
	readMu  sync.Mutex
	reading atomic.Pointer[reading]
	streams atomic.Int32 // event streams open

	now func() time.Time // time.Now; a test's clock
}

// New returns a Handler with no sources.
func New() *Handler {
	return &Handler{sources: make(map[string]*source), now: time.Now}
}

// kind is what a source is.
type kind uint8

const (
	kindRetrier kind = iota
	kindTransport
	kindShedder
	kindFleet
)

var kindNames = [...]string{"retrier", "transport", "shedder", "fleet"}

func (k kind) String() string { return kindNames[k] }

// source is one registered Retrier, Transport, Shedder or Fleet. Its
// history is written only by the goroutine holding Handler.readMu.
type source struct {
	name      string
	kind      kind
	retrier   weak.Pointer[retry.Retrier]
	dflt      bool // the default Retrier: AddRetrier's nil
	transport weak.Pointer[retry.Transport]
	shedder   weak.Pointer[shed.Shedder]
	fleet     Fleet
	invalid   string // why nothing can be read: a nil source
	hist      history
}

// AddRetrier shows r under name, in place of any source of that name; a
// nil r is the default Retrier, which Do and Run use without options.
// The returned func removes it (and does nothing once another source has
// taken the name).
func (h *Handler) AddRetrier(name string, r *retry.Retrier) (remove func()) {
	s := &source{name: name, kind: kindRetrier, dflt: r == nil}
	if r != nil {
		s.retrier = weak.Make(r)
	}
	return h.add(s)
}

// AddTransport shows t under name, in place of any source of that name; a
// Transport built with a Retrier shows that Retrier's state, which it
// shares. A nil t is shown as an error. The returned func removes it.
func (h *Handler) AddTransport(name string, t *retry.Transport) (remove func()) {
	s := &source{name: name, kind: kindTransport}
	if t == nil {
		s.invalid = "retryz: AddTransport: nil *retry.Transport"
	} else {
		s.transport = weak.Make(t)
	}
	return h.add(s)
}

// AddShedder shows s under name, in place of any source of that name. A
// nil s is shown as an error. The returned func removes it.
func (h *Handler) AddShedder(name string, s *shed.Shedder) (remove func()) {
	src := &source{name: name, kind: kindShedder}
	if s == nil {
		src.invalid = "retryz: AddShedder: nil *shed.Shedder"
	} else {
		src.shedder = weak.Make(s)
	}
	return h.add(src)
}

// AddFleet shows f under name, in place of any source of that name; the
// Handler keeps f until it is removed. A nil f, or a nil pointer in it, is
// shown as an error. The returned func removes it.
func (h *Handler) AddFleet(name string, f Fleet) (remove func()) {
	s := &source{name: name, kind: kindFleet, fleet: f}
	if typednil.Is(f) {
		s.fleet = nil
		s.invalid = fmt.Sprintf("retryz: AddFleet: nil Fleet (%T)", f)
	}
	return h.add(s)
}

// add registers s, and returns the func that removes it.
func (h *Handler) add(s *source) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.sources[s.name]; !ok && len(h.sources) >= maxSources {
		h.refused++
		return func() {}
	}
	h.sources[s.name] = s
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.sources[s.name] == s {
			delete(h.sources, s.name)
		}
	}
}

// list returns the sources, sorted by kind then name, and forgets those
// whose Retrier, Transport or Shedder was collected.
func (h *Handler) list() (srcs []*source, refused, collected int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, s := range h.sources {
		if s.gone() {
			delete(h.sources, name)
			h.collected++
			continue
		}
		srcs = append(srcs, s)
	}
	slices.SortFunc(srcs, func(a, b *source) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.name, b.name))
	})
	return srcs, h.refused, h.collected
}

// gone reports whether the source's Retrier, Transport or Shedder was
// collected.
func (s *source) gone() bool {
	switch {
	case s.invalid != "":
		return false
	case s.kind == kindRetrier:
		return !s.dflt && s.retrier.Value() == nil
	case s.kind == kindTransport:
		return s.transport.Value() == nil
	case s.kind == kindShedder:
		return s.shedder.Value() == nil
	}
	return false
}

// ServeHTTP serves the page (the default), its JSON (?format=json) or its
// event stream (?format=events, for the page), for GET and HEAD; any other
// method gets 405. ?name=NAME shows that source alone; ?offset=N and
// ?limit=M page each source's keys (default 0 and 50, limit at most 1024).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "retryz: read-only: GET or HEAD", http.StatusMethodNotAllowed)
		return
	}
	q, err := parseQuery(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	hd := w.Header()
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	switch q.format {
	case "json":
		h.serveJSON(w, r, q)
	case "events":
		h.serveEvents(w, r, q)
	default:
		h.servePage(w, r, q)
	}
}
