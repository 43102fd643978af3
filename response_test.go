package retry_test

import (
	"testing"
	"time"

	"github.com/steadyhq/retry"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{in: "0", ok: true},
		{in: "1", want: time.Second, ok: true},
		{in: "120", want: 2 * time.Minute, ok: true},
		{in: "  7 ", want: 7 * time.Second, ok: true},
		{in: "Sun, 22 Nov 2026 12:00:30 GMT", want: 30 * time.Second, ok: true},
		{in: "Sunday, 22-Nov-26 12:01:00 GMT", want: time.Minute, ok: true},
		{in: "Sun Nov 22 12:00:05 2026", want: 5 * time.Second, ok: true},
		{in: "Sun, 22 Nov 2026 11:00:00 GMT", ok: true},
		{in: "99999999999999999999", want: 1<<63 - 1, ok: true},
		{in: "9223372036", want: 9223372036 * time.Second, ok: true},
		{in: "9223372037", want: 1<<63 - 1, ok: true},
		{},
		{in: "-1"},
		{in: "+5"},
		{in: "1.5"},
		{in: "0x10"},
		{in: "soon"},
		{in: "Sun, 22 Nov 2026"},
	}
	for _, tc := range tests {
		got, ok := retry.ParseRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"0", "120", "Sun, 22 Nov 2026 12:00:30 GMT", "Sunday, 22-Nov-26 12:01:00 GMT", "Sun Nov 22 12:00:05 2026", "-1", "99999999999999999999"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := retry.ParseRetryAfter(s, now)
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v", s, d, ok)
		}
	})
}
