package adaptive

import (
	"sync"
	"testing"
	"time"
)

// drive feeds l the samples of a dependency that serves `serve` attempts
// at once in latency each, with `clients` callers each holding a permit
// whenever they can, for d of simulated time, and returns the limit.
func drive(l *Limit, clients, serve int, latency, d time.Duration, start time.Time) (time.Time, int) {
	now := start
	for end := start.Add(d); now.Before(end); now = now.Add(latency) {
		held := 0
		timed := 0
		for range clients {
			tm, ok := l.Acquire()
			if !ok {
				break
			}
			held++
			if tm {
				timed++
			}
		}
		// Beyond what it serves at once, the attempts queue: the
		// latency stretches by the share of the excess.
		rtt := latency
		if held > serve {
			rtt = time.Duration(float64(latency) * float64(held) / float64(serve))
		}
		for i := range held {
			if i < timed {
				l.Done(rtt, false, now.Add(rtt))
			} else {
				l.Release()
			}
		}
	}
	return now, l.Limit()
}

func TestLimitFollowsCapacity(t *testing.T) {
	tests := []struct {
		name           string
		initial        int // below what the dependency serves: see below
		serve          int
		wantLo, wantHi int
	}{
		{name: "serves 40", initial: 20, serve: 40, wantLo: 30, wantHi: 60},
		{name: "serves 10", initial: 5, serve: 10, wantLo: 7, wantHi: 20},
	}
	// A limit that starts above what the dependency serves, under a load
	// that keeps it full from the first window, never sees the unqueued
	// latency and takes the queued one as its baseline; this model has no
	// spread in latency that would show it the lower one.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := New(Config{Initial: tt.initial, Min: 1, Max: 1000, MaxLatency: 10 * time.Second})
			_, got := drive(l, 200, tt.serve, 10*time.Millisecond, 30*time.Second, time.Unix(0, 0))
			if got < tt.wantLo || got > tt.wantHi {
				t.Errorf("limit = %d after 30 s, want within [%d, %d] for a dependency serving %d at once", got, tt.wantLo, tt.wantHi, tt.serve)
			}
			if l.InFlight() != 0 {
				t.Errorf("InFlight = %d after every permit came back, want 0", l.InFlight())
			}
			if b := l.Baseline(); b < 10*time.Millisecond || b > 12*time.Millisecond {
				t.Errorf("Baseline = %v, want about the unqueued 10ms", b)
			}
		})
	}
}

func TestLimitBounds(t *testing.T) {
	l := New(Config{Initial: 2, Min: 1, Max: 2, MaxLatency: time.Second})
	for range 2 {
		if _, ok := l.Acquire(); !ok {
			t.Fatal("a free permit was refused")
		}
	}
	if _, ok := l.Acquire(); ok {
		t.Fatal("a third permit was given at a limit of 2")
	}
	l.Release()
	if _, ok := l.Acquire(); !ok {
		t.Fatal("a permit given back was not given again")
	}
	// Given back more often than taken: the count stays at zero, so the
	// limit still holds.
	for range 5 {
		l.Release()
	}
	l.Done(time.Millisecond, false, time.Unix(0, 0))
	if n := l.InFlight(); n != 0 {
		t.Fatalf("InFlight = %d after more releases than permits, want 0", n)
	}
	for range 2 {
		if _, ok := l.Acquire(); !ok {
			t.Fatal("a free permit was refused")
		}
	}
	if _, ok := l.Acquire(); ok {
		t.Fatal("a third permit was given at a limit of 2 after extra releases")
	}
}

// TestLimitConcurrent: permits taken and given back from many goroutines
// all come back (run under -race).
func TestLimitConcurrent(t *testing.T) {
	l := New(Config{Initial: 8, Min: 1, Max: 8, MaxLatency: time.Second})
	var wg sync.WaitGroup
	start := time.Unix(0, 0)
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				timed, ok := l.Acquire()
				switch {
				case !ok:
				case timed:
					l.Done(time.Millisecond, i%7 == 0, start.Add(time.Duration(g*1000+i)*time.Millisecond))
				default:
					l.Release()
				}
			}
		})
	}
	wg.Wait()
	if n := l.InFlight(); n != 0 {
		t.Errorf("InFlight = %d, want 0", n)
	}
}

// TestLimitSamplesFewInItsFirstWindow: a limit times every attempt at
// first, and a window lasts at least 100 ms; a busy limit must not time
// all of its first window's attempts (each costs two clock readings and
// the lock), but stop within a few thousand samples of it.
func TestLimitSamplesFewInItsFirstWindow(t *testing.T) {
	tests := []struct {
		name      string
		attempts  int
		wantTimed int // at most, over the last 1024 attempts
	}{
		{name: "a few attempts are all timed", attempts: 1000, wantTimed: 1000},
		{name: "a busy first window times one in the largest stride", attempts: 200_000, wantTimed: 1024 / maxStride * 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := New(Config{Initial: 20, Min: 1, Max: 1000, MaxLatency: 10 * time.Second})
			// Every attempt ends at the same instant, a microsecond after
			// it started: the first window never closes.
			now := time.Unix(1000, 0)
			timed, last := 0, min(tt.attempts, 1024)
			for i := range tt.attempts {
				tm, ok := l.Acquire()
				if !ok {
					t.Fatalf("attempt %d refused", i)
				}
				if tm {
					l.Done(time.Microsecond, false, now)
					if i >= tt.attempts-last {
						timed++
					}
				} else {
					l.Release()
				}
			}
			if timed > tt.wantTimed {
				t.Errorf("timed %d of the last %d attempts, want at most %d", timed, last, tt.wantTimed)
			}
			if tt.wantTimed == last && timed != last {
				t.Errorf("timed %d of %d attempts, want all", timed, last)
			}
			if got := l.InFlight(); got != 0 {
				t.Errorf("InFlight() = %d after every permit came back, want 0", got)
			}
		})
	}
}
