package adaptive

import (
	"math"
	"testing"
	"time"
)

// TestLimitTimesEveryKindOfAttempt: with many acquisitions, one in the
// stride is timed, and so for each kind of attempt of a caller whose
// attempts come in a pattern, whatever its period: a stride of every
// 64th acquisition would time only the first kind of a pattern of two,
// four or eight, and none of the others.
func TestLimitTimesEveryKindOfAttempt(t *testing.T) {
	tests := []struct {
		name   string
		period int // the kinds of attempt, in turn
	}{
		{name: "no pattern", period: 1},
		{name: "two kinds in turn", period: 2},
		{name: "three kinds", period: 3},
		{name: "eight kinds", period: 8},
		{name: "sixty-four kinds", period: 64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := New(Config{Initial: 20, Min: 1, Max: 1000, MaxLatency: 10 * time.Second})
			now := time.Unix(1000, 0)
			// Every attempt ends at once: the first window never closes,
			// and the stride doubles every 1024 samples, to maxStride.
			for range 100_000 {
				if tm, _ := l.Acquire(); tm {
					l.Done(time.Microsecond, false, now)
				} else {
					l.Release()
				}
			}
			if m := l.mask.Load(); m != maxStride-1 {
				t.Fatalf("stride = %d after 100,000 attempts, want %d", m+1, maxStride)
			}
			const perKind = 64 * 64 // attempts of each kind; 64 timed, on average
			timed := make([]int, tt.period)
			for i := range perKind * tt.period {
				tm, ok := l.Acquire()
				if !ok {
					t.Fatalf("attempt %d refused", i)
				}
				if tm {
					timed[i%tt.period]++
					l.Done(time.Microsecond, false, now)
				} else {
					l.Release()
				}
			}
			want := float64(perKind) / maxStride
			for kind, n := range timed {
				// Within an eighth of one in the stride: the numbers
				// timed are spread evenly (random draws would miss by
				// more for about a third of the kinds).
				if math.Abs(float64(n)-want) > want/8 {
					t.Errorf("kind %d of %d: %d of its %d attempts timed, want about %.0f (one in %d)", kind, tt.period, n, perKind, want, maxStride)
				}
			}
			if got := l.InFlight(); got != 0 {
				t.Errorf("InFlight() = %d after every permit came back, want 0", got)
			}
		})
	}
}
