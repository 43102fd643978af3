package shedload

import (
	"math"
	"testing"
	"time"
)

func TestRecovery(t *testing.T) {
	// b builds ticks of 10 requests due each, with the successes given.
	b := func(ok ...int) []Bucket {
		bs := make([]Bucket, len(ok))
		for i, n := range ok {
			bs[i] = Bucket{Offered: 10, Served: n}
		}
		return bs
	}
	tests := []struct {
		name    string
		buckets []Bucket
		from    int
		want    int
		ok      bool
	}{
		{name: "healthy from the start", buckets: b(10, 10, 10, 10, 10, 10), from: 0, want: 0, ok: true},
		{name: "healthy from the overload's end", buckets: b(0, 0, 10, 10, 10, 10, 10), from: 2, want: 2, ok: true},
		{name: "a dip after the overload delays it", buckets: b(0, 0, 10, 0, 10, 10, 10, 10, 10), from: 2, want: 4, ok: true},
		{name: "27 of 30 is enough", buckets: b(10, 10, 10, 10, 7, 10, 10, 10), from: 0, want: 0, ok: true},
		{name: "90% of every window is enough", buckets: b(0, 9, 9, 9, 9, 9, 9), from: 0, want: 1, ok: true},
		{name: "just under 90% is not", buckets: b(10, 10, 10, 10, 6, 10, 10, 10, 10, 10), from: 0, want: 5, ok: true},
		{name: "the last tick counts", buckets: b(0, 10, 10, 10, 0), from: 0, ok: false},
		{name: "never", buckets: b(0, 0, 0, 0, 0, 0), from: 0, ok: false},
		{name: "no window left past a failing one", buckets: b(10, 10, 10, 10, 6, 10, 10), from: 0, ok: false},
		{name: "a run too short past from", buckets: b(10, 10, 10), from: 1, ok: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := recovery(tt.buckets, tt.from)
			if ok != tt.ok || (ok && got != tt.want) {
				t.Errorf("recovery = %d, %v; want %d, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestEarly(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	tests := []struct {
		name     string
		attempts []*Attempt
		want     int
	}{
		{name: "one attempt", attempts: []*Attempt{{Arrived: 0, Answered: ms(1), RetryAfter: time.Second}}, want: 0},
		{name: "a retry after Retry-After", attempts: []*Attempt{
			{Arrived: 0, Answered: ms(1), RetryAfter: time.Second},
			{Arrived: ms(1002), RetryAfter: -1},
		}, want: 0},
		{name: "a retry before Retry-After", attempts: []*Attempt{
			{Arrived: 0, Answered: ms(1), RetryAfter: time.Second},
			{Arrived: ms(999), RetryAfter: -1},
		}, want: 1},
		{name: "out of order, early", attempts: []*Attempt{
			{Arrived: ms(500), RetryAfter: -1},
			{Arrived: 0, Answered: ms(2), RetryAfter: time.Second},
		}, want: 1},
		{name: "no Retry-After: never early", attempts: []*Attempt{
			{Arrived: 0, Answered: ms(1), Status: 429, RetryAfter: -1},
			{Arrived: ms(2), RetryAfter: -1},
		}, want: 0},
		{name: "Retry-After 0: never early", attempts: []*Attempt{
			{Arrived: 0, Answered: ms(1), Status: 503, RetryAfter: 0},
			{Arrived: ms(1), RetryAfter: -1},
		}, want: 0},
		{name: "each pair on its own", attempts: []*Attempt{
			{Arrived: 0, Answered: ms(1), RetryAfter: ms(100)},
			{Arrived: ms(50), Answered: ms(51), RetryAfter: ms(100)},
			{Arrived: ms(200), RetryAfter: -1},
		}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := early(tt.attempts); got != tt.want {
				t.Errorf("early = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestQuantile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(100-i) * time.Millisecond // reversed: quantile sorts
	}
	tests := []struct {
		name string
		ds   []time.Duration
		q    float64
		want time.Duration
	}{
		{name: "none", ds: nil, q: 0.99, want: 0},
		{name: "one", ds: []time.Duration{7}, q: 0.99, want: 7},
		{name: "p99 of 100", ds: hundred, q: 0.99, want: 99 * time.Millisecond},
		{name: "p50 of 100", ds: hundred, q: 0.5, want: 50 * time.Millisecond},
		{name: "p100 of 100", ds: hundred, q: 1, want: 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := quantile(tt.ds, tt.q); got != tt.want {
				t.Errorf("quantile = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestAnalyse checks the figures of a run made up by hand: a profile of
// 1 s unloaded, 1 s overload, 1 s after at 10 workers × 100 ms (100/s).
func TestAnalyse(t *testing.T) {
	p := Profile{Workers: 10, Service: 100 * time.Millisecond, Deadline: time.Second,
		Unloaded: time.Second, Overload: time.Second, After: time.Second, OverloadFactor: 3, LightFactor: 0.5}
	at := arrivals(p)
	if want := 50 + 300 + 50; len(at) != want {
		t.Fatalf("arrivals: %d, want %d", len(at), want)
	}
	s := func(d time.Duration) time.Duration { return d }
	calls := make([]call, len(at))
	var attempts []*Attempt
	for i, a := range at {
		calls[i] = call{at: a, sent: a, done: a + 100*time.Millisecond}
		served := a < time.Second || a >= 2*time.Second || i%3 == 0 // during the overload, one in three
		calls[i].ok = served
		first := &Attempt{ID: uint64(i), N: 1, Arrived: a, Ended: a + s(100*time.Millisecond), RetryAfter: -1, Admitted: served, Served: served}
		if a < time.Second {
			first.Ended = a + s(20*time.Millisecond) // unloaded latency
		}
		attempts = append(attempts, first)
		if !served {
			first.Ended, first.Answered, first.Status, first.RetryAfter = a, a, 503, time.Second
			if i%3 == 1 { // a retry, early
				attempts = append(attempts, &Attempt{ID: uint64(i), N: 2, Arrived: a + 10*time.Millisecond, Ended: a + 10*time.Millisecond, RetryAfter: -1})
			}
		}
	}
	r := analyse("made up", p, calls, attempts)
	offered := 300 + 50
	check := []struct {
		name      string
		got, want float64
	}{
		{name: "capacity", got: r.Capacity, want: 100},
		{name: "offered", got: float64(r.Offered), want: float64(offered)},
		// Successes ending during the overload: the 5 of the unloaded
		// phase due from 0.9 s on, and the one in three of the overload's
		// due before 1.9 s (90 of its first 270).
		{name: "goodput", got: r.Goodput, want: 5 + 90},
		{name: "unloaded p99", got: r.UnloadedP99MS, want: 20},
		{name: "p99", got: r.P99MS, want: 100},
		{name: "attempts", got: float64(r.Attempts), want: float64(offered + 100)},
		{name: "refused", got: float64(r.Refused), want: 300},
		{name: "retries", got: float64(r.Retries), want: 100},
		{name: "early", got: float64(r.EarlyRetries), want: 100},
	}
	for _, c := range check {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	// Every request due after the overload succeeds: recovered at once.
	if r.RecoveryS == nil || *r.RecoveryS != 0 {
		t.Errorf("recovery = %v, want 0 s", r.RecoveryS)
	}
	// Requests due in the 200 ms after the overload failing delay it.
	for i := range calls {
		if calls[i].at >= 2*time.Second && calls[i].at < 2200*time.Millisecond {
			calls[i].ok = false
		}
	}
	if r := analyse("made up", p, calls, attempts); r.RecoveryS == nil || math.Abs(*r.RecoveryS-0.2) > 1e-9 {
		t.Errorf("recovery after failures = %v, want 0.2 s", r.RecoveryS)
	}
	if len(r.Buckets) != 30 {
		t.Errorf("%d ticks, want 30", len(r.Buckets))
	}
}

// TestRecoveryNeedsTimelyAnswers: after the overload, requests answered
// seconds late, as a server still working through its queue answers them,
// do not count as recovered; the run recovers when answers come in time.
func TestRecoveryNeedsTimelyAnswers(t *testing.T) {
	p := Profile{Workers: 10, Service: 100 * time.Millisecond, Deadline: 5 * time.Second,
		Unloaded: time.Second, Overload: time.Second, After: 3 * time.Second, OverloadFactor: 3, LightFactor: 0.5}
	at := arrivals(p)
	calls := make([]call, len(at))
	for i, a := range at {
		late := a >= 2*time.Second && a < 3*time.Second // the first second after the overload
		calls[i] = call{at: a, sent: a, done: a + 100*time.Millisecond, ok: true}
		if late {
			calls[i].done = a + 3*time.Second
		}
	}
	r := analyse("late", p, calls, nil)
	if r.RecoveryS == nil || *r.RecoveryS < 0.95 || *r.RecoveryS > 1.05 {
		got := "never"
		if r.RecoveryS != nil {
			got = time.Duration(*r.RecoveryS * float64(time.Second)).String()
		}
		t.Errorf("recovery after %s, want 1s: the answers 3 s late are not a recovery", got)
	}
}
