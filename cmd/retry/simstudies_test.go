package main

import (
	"encoding/json"
	"testing"
)

// TestHedge: on the long-tail model (1% of attempts 100× slower), the
// delay at p95 cuts the 99.9th percentile at least tenfold for at most 7%
// more attempts, in virtual time.
func TestHedge(t *testing.T) {
	stdout, _, code := cli(t, "", "sim", "--hedge", "--json")
	var res struct {
		TailDrop  float64 `json:"p999_drop"`
		ExtraLoad float64 `json:"extra_attempts"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); code != 0 || err != nil {
		t.Fatalf("status %d, %v", code, err)
	}
	if res.TailDrop < 10 || res.ExtraLoad > 0.07 {
		t.Errorf("p99.9 falls %.1f× for %.2f%% more attempts; want ≥ 10× for ≤ 7%%", res.TailDrop, 100*res.ExtraLoad)
	}
}
