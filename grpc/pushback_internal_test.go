package grpc

import (
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"
)

// FuzzPushback: whatever the trailer holds, pushback never panics, never
// returns a negative wait, and asks for a retry only on a whole number of
// milliseconds.
func FuzzPushback(f *testing.F) {
	for _, v := range []string{"0", "50", "-1", "", "1.5", "99999999999999999999", " 7"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		wait, pushed, ok := pushback(metadata.Pairs(PushbackKey, v))
		if !pushed || wait < 0 || ok && (v == "" || strings.Trim(v, "0123456789") != "") {
			t.Fatalf("pushback(%q) = %v, %v, %v", v, wait, pushed, ok)
		}
	})
}

// BenchmarkPushback measures the pushback parser on 64 KiB values: each
// byte is read once, and it stops at the first that is not a digit or
// once the value saturates.
func BenchmarkPushback(b *testing.B) {
	const size = 64 << 10
	for _, tt := range []struct{ name, v string }{
		{name: "zeros", v: strings.Repeat("0", size)},
		{name: "nines", v: strings.Repeat("9", size)},
		{name: "digits then a letter", v: strings.Repeat("0", size-1) + "x"},
	} {
		md := metadata.Pairs(PushbackKey, tt.v)
		b.Run(tt.name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				pushback(md)
			}
		})
	}
}
