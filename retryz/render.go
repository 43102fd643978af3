package retryz

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/steadyhq/retry"
)

// The page's own style and script, inline: the page loads nothing else.
var (
	//go:embed page.css
	pageCSS string
	//go:embed page.js
	pageJS string
	//go:embed page.html
	pageHTML string
)

// contentSecurityPolicy lets the page run its own inline style and script
// (by their hashes) and open its event stream, and nothing else: no
// script, style, font, image or frame from any address.
var contentSecurityPolicy = "default-src 'none'; script-src '" + hash(pageJS) + "'; style-src '" + hash(pageCSS) +
	"'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func hash(s string) string {
	h := sha256.Sum256([]byte(s))
	return "sha256-" + base64.StdEncoding.EncodeToString(h[:])
}

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"ago":    ago,
	"clock":  clock,
	"num":    num,
	"style":  func() template.CSS { return template.CSS(pageCSS) },
	"script": func() template.JS { return template.JS(pageJS) },
	"barWidth": func(inFlight, limit int) string {
		if limit <= 0 {
			return "0"
		}
		return num(100 * min(float64(inFlight)/float64(limit), 1))
	},
}).Parse(pageHTML))

// pageData is what the page template is given.
type pageData struct {
	Body template.HTML // the rendered body, which the event stream replaces
	Live string        // the query of the event stream
}

// renderBody renders the part of the page that each event replaces.
func renderBody(s Snapshot, q query) []byte {
	v := bodyView{Snapshot: s, Only: q.name}
	for _, c := range s.Clients {
		v.Clients = append(v.Clients, newClientView(c, s.Time, q))
	}
	for _, sv := range s.Shedders {
		v.Shedders = append(v.Shedders, serverView{Server: sv, Sparks: sparks(
			[]string{"admitted", "shed"}, sv.Activity.Admitted, sv.Activity.Shed)})
	}
	for _, m := range s.Fleet {
		v.Fleet = append(v.Fleet, memberView{Member: m, Sparks: sparks([]string{"errors"}, m.Activity.Errors)})
	}
	var buf bytes.Buffer
	if err := pageTemplate.ExecuteTemplate(&buf, "body", v); err != nil {
		buf.Reset()
		template.HTMLEscape(&buf, []byte("retryz: "+err.Error()))
	}
	return buf.Bytes()
}

type bodyView struct {
	Snapshot
	Only     string // the one source asked for; "" for all
	Clients  []clientView
	Shedders []serverView
	Fleet    []memberView
}

// clientView is a Client as the page shows it.
type clientView struct {
	Client
	Now                    time.Time
	Open, HalfOpen, Closed int
	Cols                   struct{ Breaker, OnFleet, Budget, Tokens, Throttle, Concurrency bool }
	Sparks                 []spark
	Counters               []counter
	Rows                   []keyRow
	Changes                []Change // newest first, shownChanges at most
	Denied                 []denialGroup
	First, Last            int    // the keys shown, from 1
	Prev, Next             string // links to the pages of keys around; "" for none
}

type serverView struct {
	Server
	Sparks []spark
}

type memberView struct {
	Member
	Sparks []spark
}

// keyRow is a Key as the page shows it.
type keyRow struct {
	Key, State, Since        string
	Fleet                    string // "fleet", "local", or "" without a shared breaker
	Budget, Tokens, Throttle string
	BudgetLow, Throttling    bool // below one retry; above zero
	HasLimit                 bool
	InFlight, Limit          int
}

func newKeyRow(k Key, now time.Time) keyRow {
	r := keyRow{Key: k.Key, State: k.Breaker, HasLimit: k.Limit != nil, InFlight: deref(k.InFlight), Limit: deref(k.Limit)}
	if !k.Since.IsZero() {
		r.Since = ago(k.Since, now)
	}
	if k.OnFleet != nil {
		r.Fleet = "local"
		if *k.OnFleet {
			r.Fleet = "fleet"
		}
	}
	if k.Budget != nil {
		r.Budget, r.BudgetLow = num(*k.Budget), *k.Budget < 1
	}
	if k.Tokens != nil {
		r.Tokens = num(*k.Tokens)
	}
	if k.Throttle != nil {
		r.Throttle, r.Throttling = strconv.FormatFloat(100**k.Throttle, 'f', 1, 64)+"%", *k.Throttle > 0
	}
	return r
}

// shownChanges is the most breaker changes the page lists (the JSON has
// all that Stats keeps).
const shownChanges = 12

// denialGroup is the recent denials of one key, reason and type.
type denialGroup struct {
	Key, Type string
	Reason    retry.Reason
	Count     int
	Last      time.Time
	Balance   float64 // the budget's, at the last
}

// groupDenials groups denials by key, reason and type, the group with the
// latest denial first.
func groupDenials(ds []retry.Event) []denialGroup {
	var out []denialGroup
	for i := len(ds) - 1; i >= 0; i-- {
		d := ds[i]
		j := slices.IndexFunc(out, func(g denialGroup) bool { return g.Key == d.Key && g.Reason == d.Reason && g.Type == d.Type })
		if j < 0 {
			out = append(out, denialGroup{Key: d.Key, Type: d.Type, Reason: d.Reason, Last: d.Time, Balance: d.Balance})
			j = len(out) - 1
		}
		out[j].Count++
	}
	return out
}

// counter is one of a Client's counters; Warn colours it when it is not
// zero.
type counter struct {
	Name  string
	Value string
	Warn  bool
}

func newClientView(c Client, now time.Time, q query) clientView {
	v := clientView{Client: c, Now: now}
	if c.BreakerStates != nil {
		v.Open, v.HalfOpen, v.Closed = c.BreakerStates[retry.BreakerOpen], c.BreakerStates[retry.BreakerHalfOpen], c.BreakerStates[retry.BreakerClosed]
	}
	for _, k := range c.Keys {
		v.Rows = append(v.Rows, newKeyRow(k, now))
		v.Cols.Breaker = v.Cols.Breaker || k.Breaker != ""
		v.Cols.OnFleet = v.Cols.OnFleet || k.OnFleet != nil
		v.Cols.Budget = v.Cols.Budget || k.Budget != nil
		v.Cols.Tokens = v.Cols.Tokens || k.Tokens != nil
		v.Cols.Throttle = v.Cols.Throttle || k.Throttle != nil
		v.Cols.Concurrency = v.Cols.Concurrency || k.Limit != nil
	}
	a := c.Activity
	v.Sparks = sparks([]string{"attempts", "failures", "retries", "denials"}, a.Attempts, a.Failures, a.Retries, a.Denials)
	st := c.Stats
	// The first four always; the others once they count something.
	add := func(name string, n int64, warn bool) {
		if n != 0 || len(v.Counters) < 4 {
			v.Counters = append(v.Counters, counter{Name: name, Value: strconv.FormatInt(n, 10), Warn: warn && n > 0})
		}
	}
	add("calls", st.Calls, false)
	add("attempts", st.Attempts, false)
	add("failed", st.Failed, true)
	add("retried", st.Retried, false)
	add("failed permanently", st.FailedPermanently, true)
	if st.BudgetBalance >= 0 {
		v.Counters = append(v.Counters, counter{Name: "budget balance", Value: num(st.BudgetBalance), Warn: st.BudgetBalance < 1})
	}
	add("budget denied", st.BudgetDenied, true)
	add("budget shadow denied", st.BudgetShadowDenied, true)
	add("breaker waits", st.BreakerWaits, true)
	add("breaker denied", st.BreakerDenied, true)
	add("breaker fallbacks", st.BreakerFallbacks, true)
	add("rate limit waits", st.LimiterWaits, false)
	add("rate limit denied", st.LimiterDenied, true)
	add("throttled", st.Throttled, true)
	add("concurrency waits", st.ConcurrencyWaits, false)
	add("concurrency denied", st.ConcurrencyDenied, true)
	add("hedges", st.Hedges, false)
	add("hedge wins", st.HedgeWins, false)
	add("dead-lettered", st.DeadLettered, true)
	add("dead letters lost", st.DeadLetterFailed, true)
	if len(c.Keys) > 0 {
		v.First, v.Last = c.Offset+1, c.Offset+len(c.Keys)
	}
	for i := len(c.Changes) - 1; i >= 0 && len(v.Changes) < shownChanges; i-- {
		v.Changes = append(v.Changes, c.Changes[i])
	}
	v.Denied = groupDenials(c.Denials)
	link := func(offset int) string {
		u := url.Values{"offset": {strconv.Itoa(offset)}}
		if q.name != "" {
			u.Set("name", q.name)
		}
		if q.limit != defaultLimit {
			u.Set("limit", strconv.Itoa(q.limit))
		}
		return "?" + u.Encode()
	}
	if c.Offset > 0 {
		v.Prev = link(max(c.Offset-q.limit, 0))
	}
	if c.Offset+len(c.Keys) < c.KeysTotal {
		v.Next = link(c.Offset + len(c.Keys))
	}
	return v
}

// spark is one sparkline: a polyline over the last Window seconds, the
// newest at the right.
type spark struct {
	Name   string
	Points string // the polyline's, in a Window × sparkHeight box
	Window int    // seconds: 60, 120 or histLen, the least that holds the series
	Now    int64  // the last second's count
	Max    int64  // the highest second's
}

const sparkHeight = 30

func sparks(names []string, series ...[]int64) []spark {
	out := make([]spark, len(series))
	for i, s := range series {
		out[i] = newSpark(names[i], s)
	}
	return out
}

func newSpark(name string, s []int64) spark {
	sp := spark{Name: name, Window: 60}
	for len(s) > sp.Window && sp.Window < histLen {
		sp.Window = min(2*sp.Window, histLen)
	}
	if len(s) == 0 {
		return sp
	}
	for _, n := range s {
		sp.Max = max(sp.Max, n)
	}
	sp.Now = s[len(s)-1]
	var b strings.Builder
	x0 := sp.Window - len(s)
	for i, n := range s {
		y := float64(sparkHeight - 1)
		if sp.Max > 0 {
			y -= float64(n) / float64(sp.Max) * (sparkHeight - 2)
		}
		fmt.Fprintf(&b, "%d,%.1f ", x0+i, y)
	}
	sp.Points = strings.TrimSpace(b.String())
	return sp
}

// ago says how long before now t was, as "4.2 s ago"; "never" for the
// zero time.
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "in " + (-d).Round(100*time.Millisecond).String()
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s ago"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + " min ago"
	}
	return d.Round(time.Minute).String() + " ago"
}

// clock is t's time of day, to the millisecond, in UTC.
func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("15:04:05.000")
}

// num formats a balance, a token count or a rate: two decimals at most.
func num(f float64) string {
	return strconv.FormatFloat(math.Round(f*100)/100, 'f', -1, 64)
}
