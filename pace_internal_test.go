package retry

import (
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestPacer steps a pacer through fixed instants: a key is held until its
// time, a longer hold extends it and a shorter one does not, and a key
// whose time has passed is let go; a reset past maxHold (10 s here) holds
// the key, telling the reset, for maxHold only, and the next answer that
// gives it holds it again.
func TestPacer(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	p := newPacer(10 * time.Second)
	steps := []struct {
		name  string
		hold  time.Duration // hold "k" until t0+hold at now, when set
		now   time.Duration
		key   string
		want  time.Duration
		count int32 // keys held after the step
	}{
		{name: "nothing held", now: 0, key: "k", want: 0, count: 0},
		{name: "held", hold: 5 * time.Second, now: time.Second, key: "k", want: 4 * time.Second, count: 1},
		{name: "another key", now: time.Second, key: "j", want: 0, count: 1},
		{name: "a shorter hold changes nothing", hold: 2 * time.Second, now: time.Second, key: "k", want: 4 * time.Second, count: 1},
		{name: "a longer one extends", hold: 7 * time.Second, now: 2 * time.Second, key: "k", want: 5 * time.Second, count: 1},
		{name: "passed: let go", now: 7 * time.Second, key: "k", want: 0, count: 0},
		{name: "a reset far off: the wait is the reset", hold: 1000 * time.Second, now: 8 * time.Second, key: "k", want: 992 * time.Second, count: 1},
		{name: "held until maxHold has passed", now: 18*time.Second - 1, key: "k", want: 982*time.Second + 1, count: 1},
		{name: "maxHold passed: let go", now: 18 * time.Second, key: "k", want: 0, count: 0},
		{name: "the server says it again: held again", hold: 1000 * time.Second, now: 18 * time.Second, key: "k", want: 982 * time.Second, count: 1},
	}
	for _, s := range steps {
		if s.hold > 0 {
			p.hold("k", at(s.hold), at(s.now))
		}
		if got := p.wait(s.key, at(s.now)); got != s.want {
			t.Errorf("%s: wait = %v, want %v", s.name, got, s.want)
		}
		if got := p.held.Load(); got != s.count {
			t.Errorf("%s: %d keys held, want %d", s.name, got, s.count)
		}
	}
}

// TestPacerBounded: a full pacer drops the keys whose time has passed, and
// else the one released soonest, never growing past maxKeys.
func TestPacerBounded(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		expired int      // of the first keys, how many have passed at now
		gone    string   // the key dropped to make room
		kept    []string // keys still held after
	}{
		{name: "expired keys go first", expired: 10, gone: "k0", kept: []string{"k10", "k1023"}},
		{name: "else the soonest", expired: 0, gone: "k0", kept: []string{"k1", "k1023"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPacer(2 * time.Hour)
			now := t0.Add(time.Duration(tt.expired) * time.Second)
			for i := range maxKeys {
				// key i is held until t0 + i s + 1 ns: the first
				// tt.expired have passed at now.
				p.hold("k"+strconv.Itoa(i), t0.Add(time.Duration(i)*time.Second+1), t0)
			}
			p.hold("new", now.Add(time.Hour), now)
			if n := len(p.until); n > maxKeys || int(p.held.Load()) != n {
				t.Fatalf("%d keys kept, %d counted; at most %d", n, p.held.Load(), maxKeys)
			}
			if _, ok := p.until[tt.gone]; ok {
				t.Errorf("%s still held", tt.gone)
			}
			for _, k := range append(tt.kept, "new") {
				if _, ok := p.until[k]; !ok {
					t.Errorf("%s dropped", k)
				}
			}
		})
	}
}

// TestPacerConcurrent: holds and waits from many goroutines (run with
// -race) leave the count equal to the keys kept.
func TestPacerConcurrent(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newPacer(time.Minute)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				k := strconv.Itoa((g*500 + i) % 1500)
				now := t0.Add(time.Duration(i) * time.Millisecond)
				p.hold(k, now.Add(100*time.Millisecond), now)
				p.wait(k, now.Add(50*time.Millisecond))
			}
		})
	}
	wg.Wait()
	if n := len(p.until); n > maxKeys || int(p.held.Load()) != n {
		t.Fatalf("%d keys kept, %d counted; at most %d", n, p.held.Load(), maxKeys)
	}
}
