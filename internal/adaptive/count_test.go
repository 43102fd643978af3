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

// TestCountArithmetic: the permits and the acquisitions share one word; a
// give-back at zero borrows from the acquisitions, and its undo carries
// back, so that both read as before, whatever interleaves between them.
func TestCountArithmetic(t *testing.T) {
	type op int
	const (
		take op = iota
		give
		undo
	)
	tests := []struct {
		name     string
		ops      []op
		inflight int64
		acquired uint64 // the acquisition number after
	}{
		{name: "take and give back", ops: []op{take, take, give}, inflight: 1, acquired: 2},
		{name: "give back at zero, undone", ops: []op{give, undo}, inflight: 0, acquired: 0},
		{name: "a take between a give-back at zero and its undo", ops: []op{take, give, give, take, undo}, inflight: 1, acquired: 2},
		{name: "two give-backs at zero, both undone", ops: []op{give, give, undo, undo, take}, inflight: 1, acquired: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c count
			for _, o := range tt.ops {
				switch o {
				case take:
					c.take()
				case give:
					c.giveBack()
				case undo:
					c.undoGiveBack()
				}
			}
			v := c.load()
			if v.inflight() != tt.inflight || uint64(v>>32) != tt.acquired {
				t.Errorf("inflight %d, acquisitions %d; want %d and %d", v.inflight(), uint64(v>>32), tt.inflight, tt.acquired)
			}
		})
	}
}

// TestInFlightNeverNegative: a permit given back when none is held lowers
// the count below zero until the give-back is undone; InFlight, read from
// another goroutine in that moment (Stats, the shedder's), reports none
// in use, not -1.
func TestInFlightNeverNegative(t *testing.T) {
	l := New(Config{Initial: 2, Min: 1, Max: 2, MaxLatency: time.Second})
	l.count.giveBack() // a Release with no permit held, before its undo
	if n := l.InFlight(); n != 0 {
		t.Errorf("InFlight = %d during a give-back at zero, want 0", n)
	}
	l.count.undoGiveBack()
}
