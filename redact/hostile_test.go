package redact_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/steadyhq/retry/redact"
)

// hostileSize is the size of the hostile inputs: what Sanitize reads of a
// message at most.
const hostileSize = 64 << 10

// hostile returns text of n bytes made of unit repeated, cut at n.
func hostile(unit string, n int) string {
	return strings.Repeat(unit, n/len(unit)+1)[:n]
}

// hostileUnits are the shapes a hostile peer sends to make a scanner go
// back over what it read: the characters each rule of the sanitizer stops
// at, repeated, and long runs of one token.
var hostileUnits = []struct{ name, unit string }{
	{name: "at", unit: "@"},
	{name: "at word", unit: "a@"},
	{name: "at colon", unit: "a:@"},
	{name: "email", unit: "a.b@c.de "},
	{name: "scheme", unit: "://"},
	{name: "scheme at", unit: "x://a@"},
	{name: "scheme userinfo", unit: "https://u:p@"},
	{name: "scheme slash at", unit: "s://h/a@"},
	{name: "percent", unit: "%"},
	{name: "percent key", unit: "%41="},
	{name: "equals", unit: "="},
	{name: "key equals", unit: "password="},
	{name: "key spaces equals", unit: "password = "},
	{name: "quoted redacted", unit: `password="[REDACTED]`},
	{name: "unterminated quote", unit: `token:"`},
	{name: "header line", unit: "Cookie: [REDACTED]"},
	{name: "header name", unit: "X-Api-Key:"},
	{name: "colon", unit: ":"},
	{name: "bearer", unit: "Bearer "},
	{name: "pem", unit: "-----BEGIN "},
	{name: "pem key", unit: "-----BEGIN PRIVATE KEY-----"},
	{name: "long token", unit: "a"},
	{name: "jwt prefix", unit: "eyJ"},
	{name: "space", unit: " "},
	{name: "newline", unit: "\n"},
	{name: "invalid utf8", unit: "\xff"},
}

// BenchmarkSanitize measures Sanitize on 64 KiB of each hostile shape.
func BenchmarkSanitize(b *testing.B) {
	for _, h := range hostileUnits {
		s := hostile(h.unit, hostileSize)
		b.Run(h.name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				redact.Sanitize(s)
			}
		})
	}
}

// BenchmarkSanitizeURL measures SanitizeURL on URLs carrying 64 KiB of
// each hostile shape in their path, query and fragment.
func BenchmarkSanitizeURL(b *testing.B) {
	for _, h := range hostileUnits {
		s := hostile(h.unit, hostileSize)
		u := &url.URL{Scheme: "https", Host: "api.example.com", Path: "/" + s, RawQuery: s, Fragment: s}
		b.Run(h.name, func(b *testing.B) {
			for b.Loop() {
				redact.SanitizeURL(u)
			}
		})
	}
}

// BenchmarkSafeHeader measures SafeHeader on a header of one 64 KiB value
// of each hostile shape, under a name that is safe to keep.
func BenchmarkSafeHeader(b *testing.B) {
	for _, h := range hostileUnits {
		hd := http.Header{"Accept": {hostile(h.unit, hostileSize)}}
		b.Run(h.name, func(b *testing.B) {
			for b.Loop() {
				redact.SafeHeader(hd)
			}
		})
	}
}

// BenchmarkSanitizeBody measures SanitizeBody on 64 KiB of each hostile
// shape.
func BenchmarkSanitizeBody(b *testing.B) {
	for _, h := range hostileUnits {
		body := []byte(hostile(h.unit, hostileSize))
		b.Run(h.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				redact.SanitizeBody(body)
			}
		})
	}
}

// perCall returns the least time of a few calls of f (the machine's other
// load only ever adds to it), or of the first, when it took over a second:
// the sanitizer that went back over its input took 5.6 s.
func perCall(f func()) time.Duration {
	best := time.Duration(1<<63 - 1)
	for range 5 {
		start := time.Now()
		f()
		best = min(best, time.Since(start))
		if best > time.Second {
			break
		}
	}
	return best
}

// TestHostileLinear checks that each function's time grows linearly with
// its input for every hostile shape: 64 KiB costs at most 50 ms a call,
// about ten times what the slowest shape takes on a machine under a load
// of 10 (the sanitizer that went back over its input took 5.6 s for 64
// KiB of '@', 212 ms for "s://h/a@" and 72 ms for "Cookie: [REDACTED]"),
// five times that under the race detector; and a call that takes over
// two fifths of that bound (so that the ratio is not the clock's or the
// garbage collector's) costs at most 64 times what 4 KiB costs (16 times
// for a linear scan; 256 for one that goes back over what it read).
func TestHostileLinear(t *testing.T) {
	most := 50 * time.Millisecond * raceSlowdown
	for _, h := range hostileUnits {
		small, large := hostile(h.unit, hostileSize/16), hostile(h.unit, hostileSize)
		u := func(s string) *url.URL {
			return &url.URL{Scheme: "https", Host: "api.example.com", Path: "/" + s, RawQuery: s, Fragment: s}
		}
		for _, f := range []struct {
			name string
			call func(s string) func()
		}{
			{name: "Sanitize", call: func(s string) func() { return func() { redact.Sanitize(s) } }},
			{name: "SanitizeURL", call: func(s string) func() { v := u(s); return func() { redact.SanitizeURL(v) } }},
			{name: "SanitizeBody", call: func(s string) func() { b := []byte(s); return func() { redact.SanitizeBody(b) } }},
			{name: "SafeHeader", call: func(s string) func() {
				hd := http.Header{"Accept": {s}, "X-Custom": {s}}
				return func() { redact.SafeHeader(hd) }
			}},
		} {
			t.Run(f.name+"/"+h.name, func(t *testing.T) {
				tl := perCall(f.call(large))
				if tl > most {
					t.Fatalf("%s of 64 KiB of %q took %v, over %v", f.name, h.unit, tl, most)
				}
				ts := perCall(f.call(small))
				if tl > most*2/5 && tl > 64*ts {
					t.Errorf("%s: 4 KiB of %q took %v, 64 KiB %v: %.1f times", f.name, h.unit, ts, tl, float64(tl)/float64(ts))
				}
			})
		}
	}
}
