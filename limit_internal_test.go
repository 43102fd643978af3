package retry

import (
	"math"
	"testing"
	"time"
)

// TestGCRA checks the bucket's admissions and waits, step by step.
func TestGCRA(t *testing.T) {
	type op struct {
		at      time.Duration // since the bucket was made
		maxWait time.Duration
		cancel  int // give back, at this time, the token taken by op cancel-1, instead of taking one
		wait    time.Duration
		ok      bool
	}
	forever := time.Duration(math.MaxInt64)
	tests := []struct {
		name  string
		limit float64
		burst int
		ops   []op
	}{
		{"burst then paced", 10, 2, []op{
			{at: 0, maxWait: forever, ok: true},
			{at: 0, maxWait: forever, ok: true},
			{at: 0, maxWait: forever, wait: 100 * time.Millisecond, ok: true},
			{at: 0, maxWait: forever, wait: 200 * time.Millisecond, ok: true},
			{at: 250 * time.Millisecond, maxWait: forever, wait: 50 * time.Millisecond, ok: true},
		}},
		{"a wait past maxWait takes nothing", 10, 1, []op{
			{at: 0, maxWait: 0, ok: true},
			{at: 0, maxWait: 99 * time.Millisecond, ok: false},
			{at: 0, maxWait: 100 * time.Millisecond, wait: 100 * time.Millisecond, ok: true},
		}},
		{"idle refills to the burst only", 100, 3, []op{
			{at: 0, maxWait: 0, ok: true},
			{at: time.Hour, maxWait: 0, ok: true},
			{at: time.Hour, maxWait: 0, ok: true},
			{at: time.Hour, maxWait: 0, ok: true},
			{at: time.Hour, maxWait: 0, ok: false},
		}},
		{"a canceled reservation gives its token back", 10, 1, []op{
			{at: 0, maxWait: forever, ok: true},
			{at: 0, maxWait: forever, wait: 100 * time.Millisecond, ok: true},
			{at: 0, cancel: 2},
			{at: 0, maxWait: forever, wait: 100 * time.Millisecond, ok: true},
		}},
		{"a cancel under a later reservation gives nothing back", 1, 1, []op{
			{at: 0, maxWait: forever, ok: true},
			{at: 0, maxWait: forever, wait: time.Second, ok: true},
			{at: 0, maxWait: forever, wait: 2 * time.Second, ok: true},
			{at: 0, cancel: 2},
			{at: 0, maxWait: forever, wait: 3 * time.Second, ok: true},
		}},
		{"cancels in reverse order give both back", 1, 1, []op{
			{at: 0, maxWait: forever, ok: true},
			{at: 0, maxWait: forever, wait: time.Second, ok: true},
			{at: 0, maxWait: forever, wait: 2 * time.Second, ok: true},
			{at: 0, cancel: 3},
			{at: 0, cancel: 2},
			{at: 0, maxWait: forever, wait: time.Second, ok: true},
		}},
		{"a cancel never fills past the burst", 10, 1, []op{
			{at: 0, maxWait: 0, ok: true},
			{at: time.Second, cancel: 1},
			{at: time.Second, maxWait: 0, ok: true},
			{at: time.Second, maxWait: 0, ok: false},
		}},
		{"the highest limit", 1e9, 1, []op{
			{at: 0, maxWait: 0, ok: true},
			{at: 0, maxWait: 0, ok: false},
			{at: time.Nanosecond, maxWait: 0, ok: true},
		}},
		{"the lowest limit for its burst", 2 / maxRefill, 2, []op{
			{at: 0, maxWait: 0, ok: true},
			{at: 0, maxWait: 0, ok: true},
			{at: 0, maxWait: 0, ok: false},
			{at: 0, maxWait: forever, wait: maxRefill / 2 * time.Second, ok: true},
			{at: maxRefill * time.Second, maxWait: 0, ok: true},
			{at: maxRefill * time.Second, maxWait: 0, ok: false},
		}},
		{"the lowest limit", 1 / maxRefill, 1, []op{
			{at: 0, maxWait: 0, ok: true},
			{at: 0, maxWait: forever, wait: maxRefill * time.Second, ok: true},
			{at: 2 * maxRefill * time.Second, maxWait: 0, ok: true},
		}},
		{"a burst that rounding takes past the ticks is smaller, never larger", 0.99e9, 0.99e18, []op{
			{at: 0, maxWait: 0, ok: true},
			{at: time.Nanosecond, maxWait: 0, ok: true},
		}},
		{"fine ticks up to their refill bound", 1, fineRefill, []op{
			{at: 0, maxWait: 0, ok: true},
			{at: 20 * 365 * 24 * time.Hour, maxWait: 0, ok: true},
		}},
		{"a bucket older than its ticks refuses", 1, 1, []op{
			{at: 200 * 365 * 24 * time.Hour, maxWait: forever, ok: false},
		}},
		{"a time before the bucket was made", 1, 1, []op{
			{at: -time.Second, maxWait: 0, ok: true},
			{at: -time.Second / 2, maxWait: 0, ok: false},
			{at: -time.Second / 2, maxWait: forever, wait: time.Second / 2, ok: true},
		}},
	}
	epoch := time.Unix(1_700_000_000, 0)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGCRA(tt.limit, tt.burst, epoch)
			nexts := make([]int64, len(tt.ops))
			for i, o := range tt.ops {
				now := epoch.Add(o.at)
				if o.cancel > 0 {
					g.cancel(nexts[o.cancel-1], now)
					continue
				}
				wait, next, ok := g.reserve(g.ticks(now), o.maxWait)
				nexts[i] = next
				if wait != o.wait || ok != o.ok {
					t.Fatalf("op %d at %v: reserve = %v, %v; want %v, %v", i, o.at, wait, ok, o.wait, o.ok)
				}
			}
		})
	}
}

// refBucket is a token bucket kept the other way round, as a level of
// credit refilled with time, for FuzzGCRA to compare with.
type refBucket struct {
	res, step, tol, credit, last int64
}

func (r *refBucket) reserve(now int64, maxWait time.Duration) (time.Duration, bool) {
	r.credit = min(r.tol, r.credit+now-r.last)
	r.last = now
	if r.credit >= r.step {
		r.credit -= r.step
		return 0, true
	}
	wait := time.Duration((r.step - r.credit + r.res - 1) / r.res)
	if wait > maxWait {
		return 0, false
	}
	r.credit -= r.step
	return wait, true
}

// FuzzGCRA checks the bucket against a credit-based token bucket over a
// sequence of requests at non-decreasing times.
func FuzzGCRA(f *testing.F) {
	f.Add(uint32(1000), uint8(0), uint8(3), []byte{0, 0, 0, 0, 10, 200, 0, 5})
	f.Add(uint32(1), uint8(0), uint8(1), []byte{255, 255, 0, 1})
	f.Add(uint32(1), uint8(9), uint8(1), []byte{0, 0, 0, 255, 255, 255})
	f.Fuzz(func(t *testing.T, units uint32, scale, burst uint8, steps []byte) {
		limit := float64(units) / math.Pow10(int(scale%10)) // down to 1e-9 per second
		if validRate(limit, int(burst)) != nil {
			return
		}
		epoch := time.Unix(0, 0)
		g := newGCRA(limit, int(burst), epoch)
		ref := &refBucket{res: g.res, step: g.step, tol: g.tol, credit: g.tol}
		at := time.Duration(0)
		for i := 0; i+1 < len(steps); i += 2 {
			at += time.Duration(steps[i]) * time.Millisecond
			maxWait := time.Duration(steps[i+1]) * time.Millisecond
			now := g.ticks(epoch.Add(at))
			w1, _, ok1 := g.reserve(now, maxWait)
			w2, ok2 := ref.reserve(now, maxWait)
			if w1 != w2 || ok1 != ok2 {
				t.Fatalf("at %v, maxWait %v: gcra %v %v, reference %v %v", at, maxWait, w1, ok1, w2, ok2)
			}
		}
	})
}
