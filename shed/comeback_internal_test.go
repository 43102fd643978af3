package shed

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"
)

func TestComeBack(t *testing.T) {
	const most = 60 * time.Second
	tests := []struct {
		name     string
		backlog  int64
		rate     float64
		limit    int
		baseline time.Duration
		most     time.Duration
		u        float64
		want     time.Duration
	}{
		{name: "backlog over rate", backlog: 300, rate: 100, most: most, u: 0, want: 3 * time.Second},
		{name: "spread to the top", backlog: 300, rate: 100, most: most, u: 0.5, want: 4500 * time.Millisecond},
		{name: "at least 1 s", backlog: 1, rate: 1000, most: most, u: 0, want: time.Second},
		{name: "at least 1 s, spread", backlog: 1, rate: 1000, most: most, u: 0.99, want: 1990 * time.Millisecond},
		{name: "w at most half the cap", backlog: 1e6, rate: 1, most: most, u: 0, want: 30 * time.Second},
		{name: "spread within the cap", backlog: 1e6, rate: 1, most: most, u: 0.999, want: 59970 * time.Millisecond},
		{name: "nothing measured, no baseline", backlog: 500, rate: 0, most: most, u: 0, want: time.Second},
		{name: "nothing measured, baseline", backlog: 500, rate: 0, limit: 50, baseline: 100 * time.Millisecond, most: most, u: 0, want: time.Second},
		{name: "nothing measured, slow baseline", backlog: 200, rate: 0, limit: 10, baseline: time.Second, most: most, u: 0, want: 20 * time.Second},
		{name: "small cap", backlog: 300, rate: 1, most: 2 * time.Second, u: 0.9, want: 1900 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := comeBack(tt.backlog, tt.rate, tt.limit, tt.baseline, tt.most, tt.u)
			if got != tt.want {
				t.Errorf("comeBack(%d, %v, %d, %v, %v, %v) = %v, want %v", tt.backlog, tt.rate, tt.limit, tt.baseline, tt.most, tt.u, got, tt.want)
			}
		})
	}
}

func TestSeconds(t *testing.T) {
	tests := []struct {
		d, most time.Duration
		want    int64
	}{
		{d: 0, most: time.Minute, want: 1},
		{d: time.Second, most: time.Minute, want: 1},
		{d: time.Second + time.Nanosecond, most: time.Minute, want: 2},
		{d: 4500 * time.Millisecond, most: time.Minute, want: 5},
		{d: 2 * time.Minute, most: time.Minute, want: 60},
		{d: 1900 * time.Millisecond, most: 1500 * time.Millisecond, want: 1},
		{d: math.MaxInt64 - 1, most: math.MaxInt64, want: math.MaxInt64 / int64(time.Second)},
	}
	for _, tt := range tests {
		if got := seconds(tt.d, tt.most); got != tt.want {
			t.Errorf("seconds(%v, %v) = %d, want %d", tt.d, tt.most, got, tt.want)
		}
	}
}

func TestNearestSeconds(t *testing.T) {
	tests := []struct {
		d, most time.Duration
		want    int64
	}{
		{d: 0, most: time.Minute, want: 1},
		{d: 500 * time.Millisecond, most: time.Minute, want: 1},
		{d: 1499 * time.Millisecond, most: time.Minute, want: 1},
		{d: 1500 * time.Millisecond, most: time.Minute, want: 2},
		{d: 1999 * time.Millisecond, most: time.Minute, want: 2},
		{d: 59700 * time.Millisecond, most: time.Minute, want: 60},
		{d: 2 * time.Minute, most: time.Minute, want: 60},
		{d: 1900 * time.Millisecond, most: 1500 * time.Millisecond, want: 1},
		{d: math.MaxInt64, most: math.MaxInt64, want: math.MaxInt64 / int64(time.Second)},
	}
	for _, tt := range tests {
		if got := nearestSeconds(tt.d, tt.most); got != tt.want {
			t.Errorf("nearestSeconds(%v, %v) = %d, want %d", tt.d, tt.most, got, tt.want)
		}
	}
}

// TestRetryAfterFollowsDrainRate drives a Shedder on a stepped clock: 100
// completions a second, then refusals; the delay told is the backlog over
// that rate, spread by the draw.
func TestRetryAfterFollowsDrainRate(t *testing.T) {
	tests := []struct {
		name      string
		perSecond int     // completions over the measured second
		shed      int     // refusals before the one measured, in that second
		u         float64 // the draw
		want      time.Duration
	}{
		{name: "nothing completed yet", perSecond: 0, shed: 0, u: 0, want: time.Second},
		{name: "small backlog", perSecond: 100, shed: 99, u: 0, want: time.Second},
		{name: "backlog of 3 s", perSecond: 100, shed: 299, u: 0, want: 3 * time.Second},
		{name: "backlog of 3 s, spread", perSecond: 100, shed: 299, u: 0.5, want: 4500 * time.Millisecond},
		{name: "slow drain", perSecond: 10, shed: 99, u: 0, want: 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(Options{Initial: 1, Min: 1, Max: 1})
			if err != nil {
				t.Fatal(err)
			}
			clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			s.now = func() time.Time { return clock }
			s.rand = func() float64 { return tt.u }
			ctx := context.Background()
			s.meter.record(clock, 0, 0) // the span's start
			for i := range tt.perSecond {
				clock = clock.Add(time.Second / time.Duration(tt.perSecond+1))
				tk, no := s.Admit(ctx, Request{})
				if no != nil {
					t.Fatalf("request %d shed: %v", i, no)
				}
				tk.timed = false // no latency sample: the algorithm is not under test
				s.Done(tk)
			}
			clock = time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC)
			hold, no := s.Admit(ctx, Request{})
			if no != nil {
				t.Fatal(no)
			}
			defer s.Done(hold)
			for range tt.shed {
				s.Admit(ctx, Request{Attempt: 2})
			}
			_, no = s.Admit(ctx, Request{Attempt: 2})
			if no == nil || no.Reason != ReasonLow {
				t.Fatalf("refusal = %v, want %v", no, ReasonLow)
			}
			if no.RetryAfter != tt.want {
				t.Errorf("RetryAfter = %v, want %v", no.RetryAfter, tt.want)
			}
			if st := s.Stats(); st.Shed[ReasonLow] != int64(tt.shed+1) {
				t.Errorf("Stats().Shed[ReasonLow] = %d, want %d", st.Shed[ReasonLow], tt.shed+1)
			}
			if got := s.Stats().RetryAfter; got != tt.want {
				t.Errorf("Stats().RetryAfter = %v, want the last refusal's, %v", got, tt.want)
			}
		})
	}
}

func TestParseAttempt(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{in: "", want: 0},
		{in: "0", want: 0},
		{in: "1", want: 1},
		{in: "2", want: 2},
		{in: "007", want: 7},
		{in: "abc", want: 0},
		{in: "-1", want: 0},
		{in: "+2", want: 0},
		{in: " 2", want: 0},
		{in: "2.0", want: 0},
		{in: "1000000", want: 1000000},
		{in: "1000001", want: maxAttempt},
		{in: "99999999999999999999", want: maxAttempt},
	}
	for _, tt := range tests {
		if got := ParseAttempt(tt.in); got != tt.want {
			t.Errorf("ParseAttempt(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func FuzzParseAttempt(f *testing.F) {
	for _, s := range []string{"", "2", "abc", "-1", "99999999999999999999", "1000000", "0x10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		n := ParseAttempt(v)
		if n < 0 || n > maxAttempt {
			t.Fatalf("ParseAttempt(%q) = %d, out of [0, %d]", v, n, maxAttempt)
		}
		want, err := strconv.ParseUint(v, 10, 64)
		switch {
		case err == nil && want <= maxAttempt && n != int(want):
			t.Fatalf("ParseAttempt(%q) = %d, want %d", v, n, want)
		case err == nil && want > maxAttempt && n != maxAttempt:
			t.Fatalf("ParseAttempt(%q) = %d, want %d", v, n, maxAttempt)
		case err != nil && n != 0 && !allDigits(v):
			t.Fatalf("ParseAttempt(%q) = %d, want 0 for a malformed value", v, n)
		}
	})
}

func allDigits(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return v != ""
}

// TestRetryAfterOddClocks drives a Shedder through measurements that are
// not a steady drain: each refusal's RetryAfter stays within (0,
// MaxRetryAfter] and its Retry-After within [1, MaxRetryAfter] seconds;
// after the clock jumps, the drain rate is measured again within about a
// second.
func TestRetryAfterOddClocks(t *testing.T) {
	const most = 10 * time.Second
	type step struct {
		jump      time.Duration // the clock moves by this first
		completed int           // then this many complete, spread over 1 s
		shed      int           // then this many are refused
	}
	tests := []struct {
		name      string
		steps     []step
		wantDrain bool // the drain rate is measured at the end
	}{
		{name: "nothing completed, refusals for 10 s", steps: []step{{shed: 50}, {jump: 5 * time.Second, shed: 50}, {jump: 5 * time.Second, shed: 50}}},
		{name: "drain stops for 30 s", steps: []step{{completed: 100, shed: 10}, {jump: 10 * time.Second, shed: 100}, {jump: 20 * time.Second, shed: 100}}},
		{name: "clock jumps forward an hour", steps: []step{{completed: 100, shed: 10}, {jump: time.Hour, shed: 10}, {completed: 100, shed: 10}}, wantDrain: true},
		{name: "clock jumps back an hour", steps: []step{{completed: 100, shed: 10}, {jump: -time.Hour, shed: 10}, {completed: 100}, {completed: 100, shed: 10}}, wantDrain: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(Options{Initial: 2, Min: 2, Max: 2, MaxRetryAfter: most})
			if err != nil {
				t.Fatal(err)
			}
			clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			s.now = func() time.Time { return clock }
			ctx := context.Background()
			hold, no := s.Admit(ctx, Request{}) // one permit stays held: refusals need a full limit
			if no != nil {
				t.Fatal(no)
			}
			defer s.Done(hold)
			for i, st := range tt.steps {
				clock = clock.Add(st.jump)
				for range st.completed {
					clock = clock.Add(time.Second / time.Duration(st.completed))
					tk, no := s.Admit(ctx, Request{})
					if no != nil {
						t.Fatalf("step %d: %v", i, no)
					}
					tk.timed = true
					tk.start = clock.Add(-time.Millisecond)
					s.Done(tk)
				}
				tk, no := s.Admit(ctx, Request{}) // the limit is full while refusals come
				if no != nil {
					t.Fatalf("step %d: %v", i, no)
				}
				for range st.shed {
					_, no := s.Admit(ctx, Request{Attempt: 2})
					if no == nil {
						t.Fatalf("step %d: a retry admitted on a full limit", i)
					}
					if n := nearestSeconds(no.RetryAfter, most); no.RetryAfter <= 0 || no.RetryAfter > most || n < 1 || n > int64(most/time.Second) {
						t.Errorf("step %d: RetryAfter %v, Retry-After %d; want within (0, %v], [1, %d]", i, no.RetryAfter, n, most, most/time.Second)
					}
				}
				s.Done(tk)
			}
			if got := s.Stats().DrainRate; tt.wantDrain && got < 50 {
				t.Errorf("DrainRate = %v after 100 completions a second, want about 100", got)
			}
		})
	}
}
