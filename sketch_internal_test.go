package retry

import (
	"testing"
	"time"
)

// TestPercentileRank: the percentile of n latencies is the value of rank
// ceil(p% of n+1), so that a new latency from the same distribution exceeds
// it at most 100-p percent of the time on average: for the 95th of 128,
// 6 chances in 129 (4.7%), where the nearest rank of n leaves 7 (5.4%).
func TestPercentileRank(t *testing.T) {
	cases := []struct {
		name string
		n    int
		p    float64
		want time.Duration // the value of rank want among 1..n
	}{
		{name: "p95 of 128", n: 128, p: 95, want: 123},
		{name: "p95 of 20", n: 20, p: 95, want: 20},
		{name: "p50 of 9", n: 9, p: 50, want: 5},
		{name: "p99 of 128", n: 128, p: 99, want: 128},
		{name: "p1 of 128", n: 128, p: 1, want: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sorted := make([]time.Duration, tc.n)
			for i := range sorted {
				sorted[i] = time.Duration(i + 1)
			}
			if got := percentile(sorted, tc.p); got != tc.want {
				t.Errorf("percentile = rank %d, want %d", got, tc.want)
			}
			if above := float64(tc.n-int(tc.want)+1) / float64(tc.n+1); tc.want < time.Duration(tc.n) && above > 1-tc.p/100 {
				t.Errorf("a new latency exceeds it with probability %.3f, above %.3f", above, 1-tc.p/100)
			}
		})
	}
}
