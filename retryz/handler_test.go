package retryz_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/steadyhq/retry"
	"github.com/steadyhq/retry/retryz"
	"github.com/steadyhq/retry/shed"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errDown = errors.New("dependency down")

// get asks srv for path and returns the status, the headers and the body.
func get(t *testing.T, srv *httptest.Server, method, path string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// snapshot reads the handler's JSON.
func snapshot(t *testing.T, srv *httptest.Server, query string) retryz.Snapshot {
	t.Helper()
	code, hd, body := get(t, srv, http.MethodGet, "/debug/retry/?format=json"+query)
	if code != http.StatusOK || hd.Get("Content-Type") != "application/json" {
		t.Fatalf("GET ?format=json%s: %d %s: %s", query, code, hd.Get("Content-Type"), body)
	}
	var s retryz.Snapshot
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// serve mounts h as a user would, on a mux of its own.
func serve(t *testing.T, h *retryz.Handler) *httptest.Server {
	mux := http.NewServeMux()
	mux.Handle("/debug/retry/", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// fleetPart is a Fleet whose status the test sets.
type fleetPart struct {
	on   bool
	last time.Time
	errs int64
}

func (f *fleetPart) FleetStatus() (bool, time.Time, int64) { return f.on, f.last, f.errs }

// TestShowsEachKindOfSource: what the page and its JSON show of a
// Retrier, a Transport, a Shedder and a fleet component, as registered.
func TestShowsEachKindOfSource(t *testing.T) {
	ctx := t.Context()
	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
		retry.WithBreaker(retry.Breaker{MinRequests: 1, FailureRatio: 1, OpenTimeout: time.Hour, MaxWait: -1, PerKey: true}),
		retry.WithBudget(retry.Budget{PerKey: true}),
		retry.WithRateLimit(retry.RateLimit{Limit: 0.001, Burst: 7, PerKey: true}),
		retry.WithThrottle(retry.Throttle{PerKey: true}),
		retry.WithConcurrency(retry.Concurrency{PerKey: true, Initial: 9}))
	_ = retry.Run(ctx, func(context.Context) error { return errDown }, r, retry.WithKey("db"))   // opens db's breaker
	_ = retry.Run(ctx, func(context.Context) error { return nil }, r, retry.WithKey("db"))       // denied: breaker_open
	_ = retry.Run(ctx, func(context.Context) error { return nil }, r, retry.WithKey("cache"))    // fine
	dep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})) // the Transport's dependency
	defer dep.Close()
	tr := retry.NewTransport(dep.Client().Transport, retry.WithPolicy(retry.Policy{MaxAttempts: 2}), retry.WithHedge(retry.Hedge{Delay: time.Hour}))
	resp, err := (&http.Client{Transport: tr}).Get(dep.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	sh, err := shed.New(shed.Options{Initial: 1, Min: 1, Max: 1, Queue: 1})
	if err != nil {
		t.Fatal(err)
	}
	held, _ := sh.Admit(ctx, shed.Request{})
	_, no := sh.Admit(ctx, shed.Request{Attempt: 2}) // shed: low priority
	if no == nil {
		t.Fatal("the retry was admitted")
	}
	defer sh.Done(held)
	last := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

	h := retryz.New()
	h.AddRetrier("payments", r)
	h.AddTransport("search", tr)
	h.AddShedder("api", sh)
	h.AddFleet("breakers", &fleetPart{on: true, last: last, errs: 3})
	srv := serve(t, h)
	defer runtime.KeepAlive([]any{r, tr, sh}) // the page does not keep them alive
	s := snapshot(t, srv, "")

	if s.Version != retryz.Version || len(s.Clients) != 2 || len(s.Shedders) != 1 || len(s.Fleet) != 1 {
		t.Fatalf("snapshot %+v: want version 1, 2 clients, 1 shedder, 1 fleet member", s)
	}
	pay, search := s.Clients[0], s.Clients[1]
	if pay.Name != "payments" || pay.Kind != "retrier" || search.Name != "search" || search.Kind != "transport" {
		t.Fatalf("clients %q (%s) and %q (%s), want payments (retrier) and search (transport)", pay.Name, pay.Kind, search.Name, search.Kind)
	}
	if pay.Stats.Calls != 3 || pay.Stats.BreakerDenied != 1 || pay.KeysTotal != 2 || pay.BreakerStates["open"] != 1 || pay.BreakerStates["closed"] != 1 {
		t.Errorf("payments: calls %d, breaker denied %d, keys %d, states %v; want 3, 1, 2, 1 open and 1 closed",
			pay.Stats.Calls, pay.Stats.BreakerDenied, pay.KeysTotal, pay.BreakerStates)
	}
	db := pay.Keys[0] // open first
	if db.Key != "db" || db.Breaker != "open" || db.Since.IsZero() || db.Tokens == nil || *db.Tokens < 5 || *db.Tokens > 5.1 ||
		db.Throttle == nil || db.Limit == nil || *db.Limit != 9 || db.InFlight == nil || *db.InFlight != 0 {
		t.Errorf("db's row %+v (tokens %v, limit %v): want open since its change, 5 tokens of 7 (refilling at 0.001/s), throttle, limit 9 with 0 in flight", db, *db.Tokens, *db.Limit)
	}
	if cache := pay.Keys[1]; cache.Key != "cache" || cache.Breaker != "closed" || cache.Budget == nil { // a success earns a budget
		t.Errorf("cache's row %+v: want closed, with its budget", cache)
	}
	if len(pay.Changes) != 1 || pay.Changes[0].Key != "db" || pay.Changes[0].To != "open" {
		t.Errorf("changes %+v, want db opening", pay.Changes)
	}
	if len(pay.Denials) != 1 || pay.Denials[0].Reason != retry.ReasonBreakerOpen || pay.Denials[0].Type != "breaker.open" || pay.Denials[0].Key != "db" {
		t.Errorf("denials %+v, want db's call stopped by its open breaker", pay.Denials)
	}
	if search.Stats.Calls != 1 || search.Stats.Hedges != 0 || search.KeysTotal != 1 || search.Keys[0].Budget == nil {
		t.Errorf("search: %+v: want 1 call, no hedge, its budget", search)
	}
	api := s.Shedders[0]
	if api.Name != "api" || api.Limit != 1 || api.InFlight != 1 || api.Admitted != 1 || api.Shed["low_priority"] != 1 || api.RetryAfter <= 0 {
		t.Errorf("api: %+v: want limit 1, 1 in flight, 1 admitted, 1 shed as low_priority, a Retry-After", api)
	}
	m := s.Fleet[0]
	if m.Name != "breakers" || !m.OnFleet || !m.LastSync.Equal(last) || m.Errors != 3 {
		t.Errorf("fleet member %+v: want breakers, on the fleet, last sync %v, 3 errors", m, last)
	}

	// The page shows the same, in colour: the open breaker's row and pill.
	code, hd, page := get(t, srv, http.MethodGet, "/debug/retry/")
	if code != http.StatusOK || !strings.HasPrefix(hd.Get("Content-Type"), "text/html") {
		t.Fatalf("page: %d %s", code, hd.Get("Content-Type"))
	}
	for _, want := range []string{
		`data-source="payments"`, `data-source="search"`, `data-source="api"`, `data-source="breakers"`,
		`<tr data-key="db" data-state="open" class="open">`, `class="pill open" data-count="open">1 open`,
		`<span class="pill closed" data-fleet="on">on the fleet</span>`, `shed: low_priority`, `Retry-After (last)`,
		`data-series="attempts"`, `data-series="denials"`, `data-series="shed"`, `data-series="errors"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
}

// TestDefaultRetrier: a nil Retrier is the default one, which Do and Run
// use without options.
func TestDefaultRetrier(t *testing.T) {
	before := (*retry.Retrier)(nil).Stats().Calls
	_ = retry.Run(t.Context(), func(context.Context) error { return nil })
	h := retryz.New()
	h.AddRetrier("default", nil)
	s := snapshot(t, serve(t, h), "")
	if len(s.Clients) != 1 || s.Clients[0].Stats.Calls != before+1 {
		t.Fatalf("clients %+v, want the default Retrier with %d calls", s.Clients, before+1)
	}
}

// TestNilSources: a nil Transport, Shedder or Fleet (a typed nil too) is
// shown with an error that names it, and nothing panics.
func TestNilSources(t *testing.T) {
	var nilStore *fleetPart
	h := retryz.New()
	h.AddTransport("t", nil)
	h.AddShedder("s", nil)
	h.AddFleet("f", nil)
	h.AddFleet("typed", nilStore)
	srv := serve(t, h)
	s := snapshot(t, srv, "")
	errs := []string{s.Clients[0].Error, s.Shedders[0].Error, s.Fleet[0].Error, s.Fleet[1].Error}
	want := []string{"retryz: AddTransport: nil *retry.Transport", "retryz: AddShedder: nil *shed.Shedder",
		"retryz: AddFleet: nil Fleet (<nil>)", "retryz: AddFleet: nil Fleet (*retryz_test.fleetPart)"}
	for i := range want {
		if errs[i] != want[i] {
			t.Errorf("error %d = %q, want %q", i, errs[i], want[i])
		}
	}
	if code, _, page := get(t, srv, http.MethodGet, "/debug/retry/"); code != 200 || !strings.Contains(page, "nil *shed.Shedder") {
		t.Errorf("page: %d, want 200 showing the error", code)
	}
}

// TestRemoveAndReplace: a source removed leaves the page; a name
// registered again shows the new source, and the old one's remove does
// nothing to it.
func TestRemoveAndReplace(t *testing.T) {
	h := retryz.New()
	srv := serve(t, h)
	first := retry.New()
	second := retry.New(retry.WithKey("second"))
	defer runtime.KeepAlive([]any{first, second})
	removeFirst := h.AddRetrier("r", first)
	h.AddRetrier("r", second)
	removeFirst()
	s := snapshot(t, srv, "")
	if len(s.Clients) != 1 || s.Clients[0].Stats.Calls != 0 {
		t.Fatalf("clients %+v, want the second Retrier", s.Clients)
	}
	h2 := retryz.New()
	remove := h2.AddRetrier("r", first)
	remove()
	remove()
	if s := snapshot(t, serve(t, h2), ""); len(s.Clients) != 0 {
		t.Fatalf("clients %+v after remove, want none", s.Clients)
	}
}

// TestReadOnly: the handler answers GET and HEAD alone, registers nothing
// on http.DefaultServeMux, and tells browsers not to cache or embed it.
func TestReadOnly(t *testing.T) {
	h := retryz.New()
	h.AddRetrier("r", retry.New())
	srv := serve(t, h)
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		code, hd, _ := get(t, srv, m, "/debug/retry/")
		if code != http.StatusMethodNotAllowed || hd.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s: %d, Allow %q; want 405 and GET, HEAD", m, code, hd.Get("Allow"))
		}
	}
	for _, q := range []string{"", "?format=json"} {
		code, hd, body := get(t, srv, http.MethodHead, "/debug/retry/"+q)
		if code != http.StatusOK || body != "" || hd.Get("Cache-Control") != "no-store" || hd.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("HEAD %s: %d, %q, %v", q, code, body, hd)
		}
	}
	for _, path := range []string{"/debug/retry/", "/debug/retry", "/debug/"} {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if _, pattern := http.DefaultServeMux.Handler(req); pattern != "" {
			t.Errorf("http.DefaultServeMux routes %s to %q", path, pattern)
		}
	}
}

// TestBadQuery: a wrong parameter gets 400 naming it, its value and the
// rule.
func TestBadQuery(t *testing.T) {
	srv := serve(t, retryz.New())
	tests := []struct {
		query, want string
	}{
		{query: "?format=xml", want: `retryz: format = "xml": must be html, json or events`},
		{query: "?limit=-1", want: `retryz: limit = "-1": must be a whole number from 0 to 1024`},
		{query: "?limit=5000", want: `retryz: limit = "5000": must be a whole number from 0 to 1024`},
		{query: "?offset=x", want: `retryz: offset = "x": must be a whole number from 0 to 1048576`},
		{query: "?format=" + strings.Repeat("a", 65536), want: `retryz: format = "` + strings.Repeat("a", 40) + `"...: must be html, json or events`},
	}
	for _, tt := range tests {
		code, _, body := get(t, srv, http.MethodGet, "/debug/retry/"+tt.query)
		if code != http.StatusBadRequest || strings.TrimSpace(body) != tt.want {
			t.Errorf("%.50s: %d %q, want 400 %q", tt.query, code, body, tt.want)
		}
	}
}

// TestNoExternalAssets: the page loads nothing from anywhere: no script,
// style, image or font address, and a Content-Security-Policy that allows
// only its own inline script and style (by hash) and its event stream.
func TestNoExternalAssets(t *testing.T) {
	h := retryz.New()
	h.AddRetrier("r", retry.New(retry.WithBreaker(retry.Breaker{})))
	h.AddShedder("s", mustShedder(t))
	_, hd, page := get(t, serve(t, h), http.MethodGet, "/debug/retry/")
	csp := hd.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'sha256-", "style-src 'sha256-", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") || strings.Contains(csp, "http") {
		t.Errorf("Content-Security-Policy %q allows more than the page's own", csp)
	}
	// Every address on the page is a query of the page itself.
	for _, m := range regexp.MustCompile(`(?i)(?:src|href|action)\s*=\s*"([^"]*)"`).FindAllStringSubmatch(page, -1) {
		if !strings.HasPrefix(m[1], "?") {
			t.Errorf("the page refers to %q", m[1])
		}
	}
	for _, bad := range []string{"url(", "@import", "<link", "<iframe", "<img", "http://", "https://", "//cdn"} {
		if strings.Contains(strings.ToLower(page), bad) {
			t.Errorf("the page holds %q", bad)
		}
	}
}

func mustShedder(t *testing.T) *shed.Shedder {
	t.Helper()
	s, err := shed.New(shed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRedacted: names, keys, and the keys of changes and denials pass
// through package redact, as dead-letter records do, in the JSON and on
// the page; markup in them is shown as text.
func TestRedacted(t *testing.T) {
	secretKey := "https://alice:hunter2@api.example.com/v1?api_key=sk_live_abcdefghijklmnop"
	name := `payments <script>alert(1)</script> token=abc123secret`
	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 1}),
		retry.WithBreaker(retry.Breaker{MinRequests: 1, FailureRatio: 1, OpenTimeout: time.Hour, MaxWait: -1, PerKey: true}))
	_ = retry.Run(t.Context(), func(context.Context) error { return errDown }, r, retry.WithKey(secretKey))
	_ = retry.Run(t.Context(), func(context.Context) error { return nil }, r, retry.WithKey(secretKey))
	h := retryz.New()
	h.AddRetrier(name, r)
	defer runtime.KeepAlive(r)
	srv := serve(t, h)
	_, _, js := get(t, srv, http.MethodGet, "/debug/retry/?format=json")
	_, _, page := get(t, srv, http.MethodGet, "/debug/retry/")
	for what, body := range map[string]string{"JSON": js, "page": page} {
		for _, secret := range []string{"hunter2", "sk_live_abcdefghijklmnop", "abc123secret", "<script>alert"} {
			if strings.Contains(body, secret) {
				t.Errorf("the %s shows %q", what, secret)
			}
		}
	}
	s := snapshot(t, srv, "")
	c := s.Clients[0]
	if !strings.Contains(c.Keys[0].Key, "[REDACTED]") || !strings.Contains(c.Changes[0].Key, "[REDACTED]") || !strings.Contains(c.Denials[0].Key, "[REDACTED]") {
		t.Errorf("keys %q, %q, %q: want them redacted", c.Keys[0].Key, c.Changes[0].Key, c.Denials[0].Key)
	}
}

// TestNameAndPages: ?name shows one source; ?offset and ?limit page the
// keys, whose links the page gives.
func TestNameAndPages(t *testing.T) {
	r := retry.New(retry.WithBudget(retry.Budget{PerKey: true}))
	for i := range 120 {
		_ = retry.Run(t.Context(), func(context.Context) error { return nil }, r, retry.WithKey(fmt.Sprintf("k%03d", i)))
	}
	h := retryz.New()
	other := retry.New()
	defer runtime.KeepAlive(other)
	h.AddRetrier("many", r)
	h.AddRetrier("other", other)
	srv := serve(t, h)
	defer runtime.KeepAlive(r)
	s := snapshot(t, srv, "&name=many&offset=100&limit=30")
	if len(s.Clients) != 1 || s.Clients[0].Name != "many" {
		t.Fatalf("clients %+v, want many alone", s.Clients)
	}
	c := s.Clients[0]
	if c.KeysTotal != 120 || c.Offset != 100 || len(c.Keys) != 20 || c.Keys[0].Key != "k100" {
		t.Errorf("keys: total %d, offset %d, %d of them from %q; want 120, 100, 20 from k100", c.KeysTotal, c.Offset, len(c.Keys), c.Keys[0].Key)
	}
	if s := snapshot(t, srv, ""); len(s.Clients[0].Keys) != 50 {
		t.Errorf("%d keys by default, want 50", len(s.Clients[0].Keys))
	}
	_, _, page := get(t, srv, http.MethodGet, "/debug/retry/?name=many&offset=50")
	for _, want := range []string{"keys 51–100 of 120", `<a href="?name=many&amp;offset=0">previous</a>`, `<a href="?name=many&amp;offset=100">next</a>`, `data-live="?format=events&amp;name=many&amp;offset=50"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(page, `data-source="other"`) {
		t.Error("the page shows other, not asked for")
	}
}

// TestRegistrationsBounded: past 256 sources, a registration is refused
// and counted; a name already registered can still be replaced.
func TestRegistrationsBounded(t *testing.T) {
	h := retryz.New()
	keep := make([]*retry.Retrier, 0, 257)
	for i := range 257 {
		r := retry.New()
		keep = append(keep, r)
		h.AddRetrier(fmt.Sprint("r", i), r)
	}
	h.AddRetrier("r0", keep[0])
	s := snapshot(t, serve(t, h), "&limit=0")
	if len(s.Clients) != 256 || s.Refused != 1 {
		t.Errorf("%d clients, %d refused; want 256 and 1", len(s.Clients), s.Refused)
	}
	runtime.KeepAlive(keep)
}
