package retry

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// hostileField returns a header value of 64 KiB made of unit repeated:
// what a hostile server can put in one field line (net/http's client
// reads up to 1 MiB of header).
func hostileField(unit string) string {
	const size = 64 << 10
	return strings.Repeat(unit, size/len(unit)+1)[:size]
}

// BenchmarkParseRetryAfter measures the Retry-After parser on 64 KiB
// values of hostile shapes: it reads a value once (strconv, or
// http.ParseTime's fixed layouts).
func BenchmarkParseRetryAfter(b *testing.B) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct{ name, v string }{
		{name: "digits", v: hostileField("9")},
		{name: "zeros", v: hostileField("0")},
		{name: "spaces", v: " " + hostileField(" ") + "1"},
		{name: "date and spaces", v: "Sun, 22 Nov 2026 12:00:30 GMT" + hostileField(" ")},
		{name: "letters", v: hostileField("a")},
		{name: "commas", v: hostileField(",")},
	} {
		b.Run(tt.name, func(b *testing.B) {
			b.SetBytes(int64(len(tt.v)))
			for b.Loop() {
				parseRetryAfter(tt.v, now)
			}
		})
	}
}

// BenchmarkRateLimit measures the RateLimit field parser on 64 KiB lines
// of hostile shapes, and on a header of 1,000 such lines of 64 B: each
// byte is read once.
func BenchmarkRateLimit(b *testing.B) {
	for _, tt := range []struct{ name, v string }{
		{name: "many limits", v: strings.TrimSuffix(hostileField(`"a";r=0;t=1, `), " ")},
		{name: "many parameters", v: `"a"` + hostileField(";r=0")},
		{name: "long string", v: `"` + hostileField("a") + `";r=0;t=1`},
		{name: "escapes", v: `"` + hostileField(`\"`) + `";r=0;t=1`},
		{name: "unterminated string", v: `"` + hostileField("a")},
		{name: "long token", v: `"a";r=0;x=` + hostileField("t")},
		{name: "long bytes", v: `"a";r=0;pk=:` + hostileField("QUJD") + `:`},
		{name: "long number", v: `"a";r=` + hostileField("1")},
		{name: "equals", v: hostileField("=")},
		{name: "spaces", v: hostileField(" ")},
	} {
		b.Run(tt.name, func(b *testing.B) {
			b.SetBytes(int64(len(tt.v)))
			for b.Loop() {
				parseRateLimit(tt.v)
			}
		})
	}
	b.Run("1000 lines", func(b *testing.B) {
		h := http.Header{}
		for range 1000 {
			h.Add("RateLimit", `"default";r=0;t=17, "burst";r=3;t=1`)
		}
		for b.Loop() {
			serverWait(h, time.Time{})
		}
	})
}
