package redis

import (
	"strconv"
	"testing"
)

// FuzzDecodeRecord: any stream entry decodes to a record or to an error
// naming the entry; never a panic, never a negative attempt count.
func FuzzDecodeRecord(f *testing.F) {
	f.Add("3", "2024-05-01T10:00:00.123456789Z", "", `{"Method":"GET"}`, "exhausted")
	f.Add("-1", "yesterday", "2024-05-01T10:00:00Z", `{`, "")
	f.Add("99999999999999999999", "", "", "null", "budget")
	f.Fuzz(func(t *testing.T, attempts, first, last, payload, reason string) {
		r, err := decodeRecord("1-0", map[string]any{
			fieldAttempts: attempts,
			fieldFirst:    first,
			fieldTime:     last,
			fieldPayload:  payload,
			fieldReason:   reason,
			"unknown":     "x",
		})
		if err != nil {
			return
		}
		if n, _ := strconv.Atoi(attempts); r.Attempts < 0 || n != r.Attempts {
			t.Fatalf("attempts %q decoded as %d", attempts, r.Attempts)
		}
		if r.Reason != reason || r.ID != "1-0" {
			t.Fatalf("record %+v", r)
		}
	})
}
