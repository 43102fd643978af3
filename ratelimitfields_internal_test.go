package retry

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestParseRateLimit: the RateLimit field's syntax, valid and not (a
// malformed line is ignored whole: ok false, no wait).
func TestParseRateLimit(t *testing.T) {
	tests := []struct {
		name string
		in   string
		wait time.Duration
		ok   bool
	}{
		{name: "exhausted", in: `"default";r=0;t=17`, wait: 17 * time.Second, ok: true},
		{name: "quota left", in: `"default";r=50;t=30`, ok: true},
		{name: "exhausted, no window", in: `"default";r=0`, ok: true},
		{name: "zero window", in: `"default";r=0;t=0`, ok: true},
		{name: "partition key", in: `"default";r=0;t=60;pk=:QXBwLTk5OQ==:`, wait: time.Minute, ok: true},
		{name: "two policies, one exhausted", in: `"permin";r=0;t=5, "perhr";r=900;t=3000`, wait: 5 * time.Second, ok: true},
		{name: "two exhausted: the longer", in: `"a";r=0;t=5,"b";r=0;t=9`, wait: 9 * time.Second, ok: true},
		{name: "comments", in: `"d";acme-burst=1.5;r=0;x="y\"z";t=2;ok;tok=a:b/c;b=?0;at=@1700000000`, wait: 2 * time.Second, ok: true},
		{name: "last duplicate counts", in: `"d";r=?1;r=0;t=1;t=3`, wait: 3 * time.Second, ok: true},
		{name: "spaces", in: "  \"d\"; r=0; t=4 \t,\t \"e\";r=1  ", wait: 4 * time.Second, ok: true},
		{name: "empty", in: "", ok: true},
		{name: "huge window saturates", in: `"d";r=0;t=999999999999999`, wait: maxDuration, ok: true},

		{name: "no r", in: `"default";t=17`},
		{name: "negative r", in: `"default";r=-1;t=1`},
		{name: "decimal r", in: `"default";r=0.0;t=1`},
		{name: "string r", in: `"default";r="0";t=1`},
		{name: "bare r", in: `"default";r;t=1`},
		{name: "negative t", in: `"default";r=0;t=-5`},
		{name: "decimal t", in: `"default";r=0;t=1.5`},
		{name: "token policy", in: `default;r=0;t=1`},
		{name: "inner list", in: `("a" "b");r=0;t=1`},
		{name: "pk not bytes", in: `"d";r=0;t=1;pk=abc`},
		{name: "trailing comma", in: `"d";r=0;t=1,`},
		{name: "no comma", in: `"d";r=0;t=1 "e";r=0;t=2`},
		{name: "uppercase key", in: `"d";R=0;t=1`},
		{name: "sixteen digits", in: `"d";r=0;t=1234567890123456`},
		{name: "unterminated string", in: `"d;r=0;t=1`},
		{name: "bad escape", in: `"d\n";r=0;t=1`},
		{name: "old dictionary syntax", in: `limit=100, remaining=0, reset=5`},
		{name: "leading tab", in: "\t\"d\";r=0;t=1"},
		{name: "space before ;", in: `"d" ;r=0;t=1`},
		{name: "space before =", in: `"d";r =0;t=1`},
		{name: "non-ascii", in: "\"d\u00e9\";r=0;t=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wait, ok := parseRateLimit(tt.in)
			if wait != tt.wait || ok != tt.ok {
				t.Errorf("parseRateLimit(%q) = %v, %v; want %v, %v", tt.in, wait, ok, tt.wait, tt.ok)
			}
		})
	}
}

// TestRateLimitWait: several field lines make one list, and one malformed
// line makes the client ignore them all.
func TestRateLimitWait(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  time.Duration
	}{
		{name: "none"},
		{name: "one", lines: []string{`"d";r=0;t=3`}, want: 3 * time.Second},
		{name: "split over two lines", lines: []string{`"a";r=2;t=60`, `"b";r=0;t=7`}, want: 7 * time.Second},
		{name: "one malformed", lines: []string{`"b";r=0;t=7`, `"a";r=x`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, l := range tt.lines {
				h.Add("RateLimit", l)
			}
			if got := rateLimitWait(h); got != tt.want {
				t.Errorf("rateLimitWait(%q) = %v, want %v", tt.lines, got, tt.want)
			}
		})
	}
}

// FuzzRateLimit: the parser never panics; a wait is whole seconds (or
// saturated) and comes only from an exhausted quota; appending a valid
// limit with quota left to a valid list changes nothing.
func FuzzRateLimit(f *testing.F) {
	for _, s := range []string{
		`"default";r=0;t=17`, `"default";r=50;t=30`, `"d";r=0;t=60;pk=:QXBwLTk5OQ==:`,
		`"a";r=0;t=5, "b";r=9`, `"d";x=1.25;y=?1;z=tok/en;w=@-1;r=0;t=1`, ``, `"\"";r=0`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		wait, ok := parseRateLimit(v)
		if wait < 0 || wait%time.Second != 0 && wait != maxDuration {
			t.Fatalf("parseRateLimit(%q) = %v", v, wait)
		}
		if !ok && wait != 0 {
			t.Fatalf("parseRateLimit(%q) = %v for a malformed line", v, wait)
		}
		if wait > 0 && !strings.Contains(v, "r=") {
			t.Fatalf("parseRateLimit(%q) = %v without an exhausted quota", v, wait)
		}
		if ok && strings.Trim(v, " ") != "" {
			w2, ok2 := parseRateLimit(v + `, "more";r=1;t=1`)
			if w2 != wait || !ok2 {
				t.Fatalf("parseRateLimit(%q + a limit with quota left) = %v, %v; alone %v", v, w2, ok2, wait)
			}
		}
	})
}

// TestServerWait: the wait a response asks for is the longer of its
// Retry-After and of its RateLimit fields' used-up window.
func TestServerWait(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name       string
		retryAfter string
		rateLimit  string
		want       time.Duration
	}{
		{name: "neither"},
		{name: "Retry-After", retryAfter: "2", want: 2 * time.Second},
		{name: "RateLimit", rateLimit: `"d";r=0;t=5`, want: 5 * time.Second},
		{name: "both: RateLimit longer", retryAfter: "2", rateLimit: `"d";r=0;t=5`, want: 5 * time.Second},
		{name: "both: Retry-After longer", retryAfter: "9", rateLimit: `"d";r=0;t=5`, want: 9 * time.Second},
		{name: "an HTTP-date and RateLimit", retryAfter: now.Add(3 * time.Second).Format(http.TimeFormat), rateLimit: `"d";r=0;t=1`, want: 3 * time.Second},
		{name: "quota left", retryAfter: "2", rateLimit: `"d";r=1;t=5`, want: 2 * time.Second},
		{name: "malformed RateLimit", retryAfter: "2", rateLimit: `"d";r=0;t=5,`, want: 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.retryAfter != "" {
				h.Set("Retry-After", tt.retryAfter)
			}
			if tt.rateLimit != "" {
				h.Set("RateLimit", tt.rateLimit)
			}
			if got := serverWait(h, now); got != tt.want {
				t.Errorf("serverWait = %v, want %v", got, tt.want)
			}
			resp := &http.Response{StatusCode: http.StatusTooManyRequests, Header: h}
			var se *StatusError
			if err := ResponseError(resp); !errors.As(err, &se) || tt.retryAfter == "" && se.RetryAfter != tt.want {
				t.Errorf("ResponseError = %v, want a wait of %v", err, tt.want)
			}
		})
	}
}
