package redis_test

import (
	"testing"
	"time"

	"github.com/steadyhq/retry"
	retryredis "github.com/steadyhq/retry/redis"
)

// TestBudgetRule: the fleet budget grants Ratio times the first attempts
// of the window plus Reserve per second of it, counted across processes,
// and forgets them once the window has passed.
func TestBudgetRule(t *testing.T) {
	s := startServer(t)
	tests := []struct {
		name    string
		spec    retry.Budget
		firsts  [3]int // first attempts in each of three processes
		perKey  bool
		want    int // retries granted at once
		later   time.Duration
		wantNow int // retries granted after later, with no new first attempts
	}{
		{"default rule: 15% plus 2/s over 10 s", retry.Budget{}, [3]int{400, 300, 300}, false, 170, 11 * time.Second, 20},
		{"ratio only", retry.Budget{Ratio: 0.5, Window: time.Second}, [3]int{10, 10, 0}, false, 10, 2 * time.Second, 0},
		{"reserve only", retry.Budget{Reserve: 3, Window: 2 * time.Second}, [3]int{100, 0, 0}, false, 6, 3 * time.Second, 6},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Unix(1_000_000+int64(i)*1000, 0)
			var bs [3]*retryredis.Budget
			for p := range bs {
				b, err := retryredis.NewBudget(s.Client(), tt.spec, retryredis.Options{Prefix: tt.name + ":"})
				if err != nil {
					t.Fatal(err)
				}
				bs[p] = b
				for range tt.firsts[p] {
					b.First("k")
				}
				// Each process sends its counts with its first request.
				if !b.Retry(t.Context(), "k", now) && tt.want > p {
					t.Fatalf("process %d refused a retry", p)
				}
			}
			got := 3
			if tt.want < 3 {
				got = tt.want
			}
			for bs[0].Retry(t.Context(), "k", now) {
				got++
				if got > 10_000 {
					t.Fatal("no end to the retries")
				}
			}
			if got != tt.want {
				t.Errorf("granted %d, want %d", got, tt.want)
			}
			later := now.Add(tt.later)
			n := 0
			for bs[1].Retry(t.Context(), "k", later) {
				n++
				if n > 10_000 {
					t.Fatal("no end to the retries")
				}
			}
			if n != tt.wantNow {
				t.Errorf("granted %d after %v, want %d", n, tt.later, tt.wantNow)
			}
		})
	}
}
