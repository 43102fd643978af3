package retryz

import (
	"reflect"
	"testing"
	"unsafe"
)

// reading is one reading of a counter, at a time in milliseconds.
type readingAt struct {
	ms int64
	n  int64
}

// TestHistory: the activity of each whole second, interpolated between
// the readings around it, from the first second whose both ends are
// known; gaps hold their average; a clock that goes back starts again.
func TestHistory(t *testing.T) {
	tests := []struct {
		name      string
		readings  []readingAt
		wantStart int64
		want      []int64
	}{
		{name: "no reading", wantStart: 0, want: nil},
		{name: "one reading", readings: []readingAt{{10_500, 7}}, want: nil},
		{name: "one boundary", readings: []readingAt{{10_500, 0}, {11_500, 10}}, want: nil},
		{name: "readings on the boundaries", readings: []readingAt{{10_000, 0}, {11_000, 10}, {12_000, 30}}, wantStart: 11, want: []int64{20}},
		{name: "readings between boundaries", readings: []readingAt{{10_500, 0}, {11_500, 10}, {12_500, 30}, {13_500, 30}}, wantStart: 11, want: []int64{15, 10}},
		{name: "two readings in a second", readings: []readingAt{{10_100, 0}, {10_900, 8}, {11_100, 10}, {11_900, 18}, {12_100, 20}}, wantStart: 11, want: []int64{10}},
		{name: "a gap holds its average", readings: []readingAt{{10_000, 0}, {11_000, 0}, {15_000, 40}}, wantStart: 11, want: []int64{10, 10, 10, 10}},
		{name: "the clock goes back", readings: []readingAt{{10_000, 0}, {11_000, 5}, {12_000, 9}, {5_000, 100}, {6_000, 101}, {7_000, 103}, {8_000, 106}}, wantStart: 6, want: []int64{2, 3}},
		{name: "counters that fall count zero", readings: []readingAt{{10_000, 0}, {11_000, 50}, {12_000, 20}, {13_000, 25}}, wantStart: 11, want: []int64{0, 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h history
			for _, r := range tt.readings {
				h.record(r.ms*1e6, [maxSeries]int64{r.n, 2 * r.n})
			}
			start, got := h.series()
			if start != tt.wantStart || !reflect.DeepEqual(got[0], tt.want) {
				t.Fatalf("series from %d: %v, want from %d: %v", start, got[0], tt.wantStart, tt.want)
			}
			for i, v := range got[0] {
				if got[1][i] != 2*v {
					t.Fatalf("the second counter: %v, want twice %v", got[1], got[0])
				}
			}
		})
	}
}

// TestHistoryBounded: hours of readings keep five minutes, in the same
// memory; a gap longer than five minutes leaves its average over them.
func TestHistoryBounded(t *testing.T) {
	var h history
	size := unsafe.Sizeof(h)
	var n int64
	for s := int64(1); s <= 4*3600; s++ { // four hours, a reading a second, 3 more each second
		n += 3
		h.record(s*1e9+250e6, [maxSeries]int64{n})
	}
	start, got := h.series()
	if len(got[0]) != histLen || start != 4*3600-histLen {
		t.Fatalf("%d values from %d, want %d from %d", len(got[0]), start, histLen, 4*3600-histLen)
	}
	for _, v := range got[0] {
		if v != 3 {
			t.Fatalf("values %v, want 3 each", got[0])
		}
	}
	if unsafe.Sizeof(h) != size {
		t.Fatal("the history grew")
	}
	// Ten minutes without a reading, 6,000 more: 10 a second.
	last := int64(4*3600) * 1e9
	h.record(last+600e9+250e6, [maxSeries]int64{n + 6000})
	_, got = h.series()
	if len(got[0]) != histLen {
		t.Fatalf("%d values after the gap, want %d", len(got[0]), histLen)
	}
	for _, v := range got[0] {
		if v != 10 {
			t.Fatalf("values after the gap %v, want 10 each", got[0])
		}
	}
}
