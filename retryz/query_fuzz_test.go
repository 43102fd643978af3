package retryz

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzQuery: any query either parses within the bounds or gets a short
// error naming the parameter (at most 300 bytes: 40 bytes of the value,
// quoted).
func FuzzQuery(f *testing.F) {
	for _, s := range []string{"", "format=json", "format=events&name=a&offset=50&limit=10", "limit=-1", "offset=99999999999999999999",
		"format=" + strings.Repeat("x", 1000), "name=%00%ff", "limit=1e3", "format=json&format=html"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := parseQuery(v)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "retryz: ") || len(msg) > 300 {
				t.Fatalf("error %q: want a short one starting retryz: ", msg)
			}
			return
		}
		switch {
		case q.format != "" && q.format != "html" && q.format != "json" && q.format != "events":
			t.Fatalf("format %q accepted", q.format)
		case q.offset < 0 || q.offset > 1<<20 || q.limit < 0 || q.limit > maxLimit:
			t.Fatalf("offset %d, limit %d accepted", q.offset, q.limit)
		}
	})
}
