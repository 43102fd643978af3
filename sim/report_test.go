package sim

import (
	"testing"
	"time"
)

// TestRecovery: recovery is the first whole second after the faults from
// which every 5 s window to the end of the run has successful calls of at
// least 90% of its arrivals; a window without arrivals passes.
func TestRecovery(t *testing.T) {
	series := func(good func(i int) int) []Bucket {
		s := make([]Bucket, 30)
		for i := range s {
			s[i] = Bucket{Arrivals: 10, Succeeded: good(i)}
		}
		return s
	}
	on := func(c bool, v int) int {
		if c {
			return v
		}
		return 0
	}
	cases := []struct {
		name string
		end  time.Duration
		res  time.Duration
		good func(i int) int
		want time.Duration // -1 for never
	}{
		{name: "never down", end: 10 * time.Second, good: func(int) int { return 10 }, want: 0},
		{name: "back at 14s", end: 10 * time.Second, good: func(i int) int { return on(i >= 14, 10) }, want: 4 * time.Second},
		{name: "a backlog served at once counts", end: 10 * time.Second, good: func(i int) int { return on(i >= 14, 10) + on(i == 14, 20) }, want: 2 * time.Second},
		{name: "a second at half does not break it", end: 10 * time.Second, good: func(i int) int { return 10 - on(i == 20, 5) }, want: 0},
		{name: "a second at nothing does", end: 10 * time.Second, good: func(i int) int { return 10 - on(i == 20, 10) }, want: 11 * time.Second},
		{name: "down again in the last window: never", end: 10 * time.Second, good: func(i int) int { return on(i < 27, 10) }, want: -1},
		{name: "never back", end: 10 * time.Second, good: func(int) int { return 0 }, want: -1},
		{name: "faults ending within a second", end: 10500 * time.Millisecond, good: func(int) int { return 10 }, want: 500 * time.Millisecond},
		{name: "no window after the faults: never", end: 30 * time.Second, good: func(int) int { return 10 }, want: -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &Figures{Series: series(c.good)}
			f.recovery(c.end, time.Second)
			switch {
			case c.want < 0 && f.Recovered:
				t.Errorf("recovered after %v, want never", f.Recovery)
			case c.want >= 0 && (!f.Recovered || f.Recovery != c.want):
				t.Errorf("recovered %v after %v, want after %v", f.Recovered, f.Recovery, c.want)
			}
		})
	}
}

// TestRecoveryResolution: the rule takes whole seconds whatever the
// series' resolution.
func TestRecoveryResolution(t *testing.T) {
	f := &Figures{Series: make([]Bucket, 300)} // 30 s of 100 ms
	for i := range f.Series {
		f.Series[i].Arrivals = 1
		if i >= 140 {
			f.Series[i].Succeeded = 1
		}
	}
	f.recovery(10*time.Second, 100*time.Millisecond)
	if !f.Recovered || f.Recovery != 4*time.Second {
		t.Errorf("recovered %v after %v, want after 4s", f.Recovered, f.Recovery)
	}
}

// TestLatency: the q-quantile is the latency of rank ⌈q·n⌉.
func TestLatency(t *testing.T) {
	r := &Report{}
	for i := 1; i <= 1000; i++ {
		r.Latencies = append(r.Latencies, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{q: 0.5, want: 500 * time.Millisecond}, {q: 0.999, want: 999 * time.Millisecond}, {q: 1, want: time.Second}, {q: 0, want: time.Millisecond}} {
		if got := r.Latency(c.q); got != c.want {
			t.Errorf("Latency(%g) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := (&Report{}).Latency(0.5); got != 0 {
		t.Errorf("no calls: %v, want 0", got)
	}
}
