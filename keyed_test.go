package retry

import (
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestKeyed steps the bounded map through sequences of uses: the cap holds,
// the key used least recently is the one dropped, and a dropped key comes
// back as a new value.
func TestKeyed(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	tests := []struct {
		name string
		max  int
		uses []string // keys in the order used
		kept []string // afterwards, most recently used first
		// set: kept in any order (keys used since the same addition count
		// as used together)
		set  bool
		made int // values mk made
	}{
		{name: "under the cap", max: 3, uses: []string{"a", "b", "a"}, kept: []string{"a", "b"}, made: 2},
		{name: "the oldest is dropped", max: 2, uses: []string{"a", "b", "c"}, kept: []string{"c", "b"}, made: 3},
		{name: "a use keeps a key", max: 2, uses: []string{"a", "b", "a", "c"}, kept: []string{"c", "a"}, made: 3},
		{name: "a dropped key is made again", max: 2, uses: []string{"a", "b", "c", "a"}, kept: []string{"a", "c"}, made: 4},
		// The first drop remembers the two oldest, a and b; b is used
		// since, so the next drop passes over it to c, the oldest then.
		{name: "a key used since the last drop's scan is kept", max: 8, uses: []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "b", "j"}, kept: []string{"j", "b", "i", "h", "g", "f", "e", "d"}, made: 10},
		{name: "a key used twice in a row stays the latest", max: 3, uses: []string{"a", "b", "b", "c", "a", "a", "d"}, kept: []string{"d", "a", "c"}, made: 4},
		// a and b, both used since c was added, count as used together;
		// c, not used since, is the one dropped.
		{name: "keys used since an addition outlive one not", max: 3, uses: []string{"a", "b", "c", "b", "a", "d"}, kept: []string{"a", "b", "d"}, set: true, made: 4},
		{name: "cap of one", max: 1, uses: []string{"a", "b", "b"}, kept: []string{"b"}, made: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newKeyed[int](tt.max)
			made := 0
			for _, key := range tt.uses {
				k.get(key, now, func() int { made++; return made })
				if n := k.len(); n > tt.max {
					t.Fatalf("after %q: %d kept, cap %d", key, n, tt.max)
				}
			}
			var kept []string
			k.each(func(key string, _ int) { kept = append(kept, key) })
			if tt.set {
				slices.Sort(kept)
			}
			if !slices.Equal(kept, tt.kept) || made != tt.made {
				t.Errorf("kept %v after making %d values; want %v and %d", kept, made, tt.kept, tt.made)
			}
		})
	}
}

// TestKeyedMany: a stream of keys far past the cap keeps the map at its cap,
// holding the keys used last.
func TestKeyedMany(t *testing.T) {
	k := newKeyed[int](64)
	now := time.Unix(1_000_000, 0)
	for i := range 10_000 {
		k.get(strconv.Itoa(i), now, func() int { return i })
	}
	if n := k.len(); n != 64 {
		t.Fatalf("%d kept, want the cap, 64", n)
	}
	if v := k.get("9999", now, func() int { return -1 }); v != 9999 {
		t.Errorf("the last key was dropped: got %d", v)
	}
	if v := k.get("0", now, func() int { return -1 }); v != -1 {
		t.Errorf("the first key was kept: got %d", v)
	}
}

// TestKeyedConcurrent: goroutines using the same keys agree on one value
// per key.
func TestKeyedConcurrent(t *testing.T) {
	k := newKeyed[*int](256)
	now := time.Unix(1_000_000, 0)
	var wg sync.WaitGroup
	got := make([][]*int, 4)
	for g := range got {
		wg.Go(func() {
			for i := range 200 { // fewer keys than the cap: none dropped
				got[g] = append(got[g], k.get(strconv.Itoa(i), now, func() *int { return new(int) }))
			}
		})
	}
	wg.Wait()
	for g := 1; g < len(got); g++ {
		for i := range got[g] {
			if got[g][i] != got[0][i] {
				t.Fatalf("key %d: goroutines got different values", i)
			}
		}
	}
}

// TestKeyedSteadyUse: keys used over and over in a map with room to spare
// write no stamp after their first use since the last addition, and a key
// used every half a map's worth of new keys outlives a stream of them.
func TestKeyedSteadyUse(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	k := newKeyed[int](maxKeys)
	for i := range 100 {
		k.get(strconv.Itoa(i), now, func() int { return i })
	}
	for i := range 100 { // each key's first use since the last addition
		k.get(strconv.Itoa(i), now, func() int { return -1 })
	}
	stamps := func() []uint64 {
		var s []uint64
		k.m.Range(func(_, v any) bool { s = append(s, v.(*keyedEntry[int]).used.Load()); return true })
		return s
	}
	before, tick := stamps(), k.tick.Load()
	for i := range 100_000 {
		k.get(strconv.Itoa(i%100), now, func() int { return -1 })
	}
	if after := stamps(); !slices.Equal(after, before) || k.tick.Load() != tick {
		t.Errorf("100,000 uses of 100 kept keys changed their stamps or the count of additions")
	}

	k = newKeyed[int](64)
	k.get("hot", now, func() int { return 1 })
	for i := range 10_000 {
		k.get(strconv.Itoa(i), now, func() int { return 0 })
		if i%32 == 0 {
			if v := k.get("hot", now, func() int { return -1 }); v != 1 {
				t.Fatalf("after %d new keys the key used every 32 was dropped", i+1)
			}
		}
	}
}

// TestKeyedStaleStamp: a use whose goroutine read the count of additions
// before an addition and writes its stamp after another use of the key
// stamped it since (the race of two uses of one key around an addition)
// leaves the later stamp: the key, used since the addition, still
// outlives the key added then and not used since.
func TestKeyedStaleStamp(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	k := newKeyed[int](4)
	for _, key := range []string{"a", "b", "c"} {
		k.get(key, now, func() int { return 0 })
	}
	stale := k.tick.Load() // a use of a reads the count, and waits
	k.get("d", now, func() int { return 0 })
	k.get("a", now, func() int { return 0 }) // another use of a, since d's addition
	e, _ := k.m.Load("a")
	k.stamp(e.(*keyedEntry[int]), stale)          // the waiting use writes its stamp
	for _, key := range []string{"e", "f", "g"} { // drop b, c, then one of a and d
		k.get(key, now, func() int { return 0 })
	}
	_, a := k.find("a")
	_, d := k.find("d")
	if !a || d {
		t.Errorf("a kept %v, d kept %v; want a, used since d was added, kept and d dropped", a, d)
	}
}

// TestKeyedEachBounded: each, read while other goroutines add keys to a
// full map (Stats during a flood of keys), visits no more keys than the
// map keeps. A sync.Map's Range is no snapshot: during additions and drops
// it can visit a key dropped and the key added in its place, over the cap.
// This test finds that within its rounds nearly always; with each taking
// its snapshot under the lock of additions, it cannot fail.
func TestKeyedEachBounded(t *testing.T) {
	const keep = 64
	k := newKeyed[int](keep)
	now := time.Unix(1_000_000, 0)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k.get(strconv.Itoa(g<<24|i), now, func() int { return i })
			}
		})
	}
	worst := 0
	for range 5000 {
		n := 0
		k.each(func(string, int) { n++ })
		if worst = max(worst, n); worst > keep {
			break
		}
	}
	close(stop)
	wg.Wait()
	if worst > keep {
		t.Errorf("each visited %d keys of a map that keeps %d", worst, keep)
	}
}
