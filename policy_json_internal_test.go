package retry

import (
	"encoding/json"
	"math/big"
	"strings"
	"testing"
)

// FuzzJSONWhole checks jsonWhole against exact rational arithmetic on every
// JSON number with a modest exponent.
func FuzzJSONWhole(f *testing.F) {
	for _, s := range []string{"3", "3.0", "3.5", "1e2", "1E+2", "2.5e1", "500e-2", "1e-1", "-0", "-0.0e5", "0e999999999",
		"2147483647.000", "18446744073709551615", "18446744073709551616", "1.8446744073709551615e19", "3.0000000000000001", "-1.0", "1e400"} {
		f.Add(s)
	}
	f.Add(" 1")
	f.Add("00")
	f.Fuzz(func(t *testing.T, s string) {
		n, neg, ok := jsonWhole([]byte(s))
		if !json.Valid([]byte(s)) || strings.TrimSpace(s) != s || s[0] != '-' && (s[0] < '0' || s[0] > '9') {
			if ok {
				t.Fatalf("jsonWhole(%q) = %d, %v, true; not a JSON number", s, n, neg)
			}
			return
		}
		if _, exp, _ := strings.Cut(strings.ToLower(s), "e"); len(strings.TrimLeft(exp, "+-0")) > 3 {
			return // big.Rat would build 10^exp
		}
		r, parsed := new(big.Rat).SetString(s)
		if !parsed {
			t.Fatalf("big.Rat cannot read %q", s)
		}
		max := new(big.Rat).SetUint64(^uint64(0))
		want := r.IsInt() && new(big.Rat).Abs(r).Cmp(max) <= 0
		if ok != want {
			t.Fatalf("jsonWhole(%q) ok = %v, want %v", s, ok, want)
		}
		if ok {
			got := new(big.Rat).SetUint64(n)
			if neg {
				got.Neg(got)
			}
			if got.Cmp(r) != 0 {
				t.Fatalf("jsonWhole(%q) = %d (neg %v), want %v", s, n, neg, r)
			}
		}
	})
}
