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
		{"0", 0, true},
		{"1", time.Second, true},
		{"120", 2 * time.Minute, true},
		{"  7 ", 7 * time.Second, true},
		{"Sun, 22 Nov 2026 12:00:30 GMT", 30 * time.Second, true},
		{"Sunday, 22-Nov-26 12:01:00 GMT", time.Minute, true},
		{"Sun Nov 22 12:00:05 2026", 5 * time.Second, true},
		{"Sun, 22 Nov 2026 11:00:00 GMT", 0, true},
		{"99999999999999999999", 1<<63 - 1, true},
		{"9223372036", 9223372036 * time.Second, true},
		{"9223372037", 1<<63 - 1, true},
		{"", 0, false},
		{"-1", 0, false},
		{"+5", 0, false},
		{"1.5", 0, false},
		{"0x10", 0, false},
		{"soon", 0, false},
		{"Sun, 22 Nov 2026", 0, false},
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
