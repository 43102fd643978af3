package retryz

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Paging of the keys: the default and the most per page.
const (
	defaultLimit = 50
	maxLimit     = 1024
)

// query is what a request asks for.
type query struct {
	format        string // "", "json" or "events"
	name          string // one source alone; "" for all
	offset, limit int
}

// parseQuery reads the request's query, or says which parameter is wrong.
func parseQuery(v url.Values) (query, error) {
	q := query{format: v.Get("format"), name: v.Get("name"), limit: defaultLimit}
	switch q.format {
	case "", "html", "json", "events":
	default:
		return q, fmt.Errorf("retryz: format = %s: must be html, json or events", short(q.format))
	}
	num := func(field string, p *int, most int) error {
		s := v.Get(field)
		if s == "" {
			return nil
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > most {
			return fmt.Errorf("retryz: %s = %s: must be a whole number from 0 to %d", field, short(s), most)
		}
		*p = n
		return nil
	}
	if err := num("offset", &q.offset, 1<<20); err != nil {
		return q, err
	}
	if err := num("limit", &q.limit, maxLimit); err != nil {
		return q, err
	}
	return q, nil
}

// short quotes s, cut to its first 40 bytes ("..." after the quote then
// says so), for an error.
func short(s string) string {
	if len(s) > 40 {
		return strconv.Quote(s[:40]) + "..."
	}
	return strconv.Quote(s)
}

// snapshot returns the Snapshot of rd for q: its sources (or the one
// named), each with a page of its keys.
func (rd *reading) snapshot(q query) Snapshot {
	s := Snapshot{Version: Version, Time: rd.at, Clients: []Client{}, Shedders: []Server{}, Fleet: []Member{},
		Collected: rd.collected, Refused: rd.refused}
	want := func(name string) bool { return q.name == "" || name == clean(q.name) }
	for _, c := range rd.clients {
		if !want(c.Name) {
			continue
		}
		cl := c.Client
		lo := min(q.offset, len(c.keys))
		hi := min(lo+q.limit, len(c.keys))
		cl.Offset = lo
		cl.Keys = make([]Key, hi-lo)
		for i, k := range c.keys[lo:hi] {
			k.Key = clean(k.Key)
			cl.Keys[i] = k
		}
		s.Clients = append(s.Clients, cl)
	}
	for _, sv := range rd.servers {
		if want(sv.Name) {
			s.Shedders = append(s.Shedders, sv)
		}
	}
	for _, m := range rd.fleet {
		if want(m.Name) {
			s.Fleet = append(s.Fleet, m)
		}
	}
	return s
}

func (h *Handler) serveJSON(w http.ResponseWriter, r *http.Request, q query) {
	b, err := json.MarshalIndent(h.read().snapshot(q), "", "  ")
	if err != nil { // no value of a Snapshot fails to encode
		http.Error(w, "retryz: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodHead {
		return
	}
	w.Write(append(b, '\n'))
}

func (h *Handler) servePage(w http.ResponseWriter, r *http.Request, q query) {
	body := h.read().cached(q)
	var buf bytes.Buffer
	if err := pageTemplate.ExecuteTemplate(&buf, "page", pageData{Body: template.HTML(body), Live: liveQuery(q)}); err != nil {
		http.Error(w, "retryz: "+err.Error(), http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	if r.Method == http.MethodHead {
		return
	}
	w.Write(buf.Bytes())
}

// liveQuery is the query of the page's event stream: the page's, in
// events format.
func liveQuery(q query) string {
	v := url.Values{"format": {"events"}}
	if q.name != "" {
		v.Set("name", q.name)
	}
	if q.offset != 0 {
		v.Set("offset", strconv.Itoa(q.offset))
	}
	if q.limit != defaultLimit {
		v.Set("limit", strconv.Itoa(q.limit))
	}
	return "?" + v.Encode()
}

// The event stream: an event a second, each the page's body.
const (
	streamEvery = time.Second
	// writeTimeout bounds one event's write: a client that reads
	// nothing for that long is dropped. Nothing else waits on it.
	writeTimeout = 10 * time.Second
	// maxStreams bounds the event streams open at once; past it a page
	// is told to come back (and polls by its reconnections).
	maxStreams = 64
)

func (h *Handler) serveEvents(w http.ResponseWriter, r *http.Request, q query) {
	if n := h.streams.Add(1); n > maxStreams {
		h.streams.Add(-1)
		w.Header().Set("Retry-After", "5")
		http.Error(w, "retryz: too many event streams open", http.StatusServiceUnavailable)
		return
	}
	defer h.streams.Add(-1)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	if r.Method == http.MethodHead {
		return
	}
	rc := http.NewResponseController(w)
	tick := time.NewTicker(streamEvery)
	defer tick.Stop()
	var buf bytes.Buffer
	buf.WriteString("retry: 2000\n\n") // reconnect after 2 s
	for {
		writeEvent(&buf, h.read().cached(q))
		rc.SetWriteDeadline(time.Now().Add(writeTimeout)) // not supported by every writer: then it waits
		if _, err := w.Write(buf.Bytes()); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		buf.Reset()
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

// writeEvent appends one event whose data is body, line by line.
func writeEvent(buf *bytes.Buffer, body []byte) {
	for line := range strings.SplitSeq(string(body), "\n") {
		buf.WriteString("data: ")
		buf.WriteString(strings.TrimSuffix(line, "\r"))
		buf.WriteByte('\n')
	}
	buf.WriteByte('\n')
}

// maxCached bounds the bodies a reading keeps rendered.
const maxCached = 16

// cached returns the rendered body of the page for q, rendering it once
// per reading and query.
func (rd *reading) cached(q query) []byte {
	q.format = ""
	rd.mu.Lock()
	b, ok := rd.pages[q]
	rd.mu.Unlock()
	if ok {
		return b
	}
	b = renderBody(rd.snapshot(q), q)
	rd.mu.Lock()
	if rd.pages == nil || len(rd.pages) >= maxCached {
		rd.pages = make(map[query][]byte)
	}
	rd.pages[q] = b
	rd.mu.Unlock()
	return b
}
