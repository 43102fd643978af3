package chart

import (
	"math"
	"regexp"
	"slices"
	"testing"

	"gonum.org/v1/plot/vg"
)

// TestDurationTicks: delay axes are labelled in human units at round
// values, about one a decade on a log axis.
func TestDurationTicks(t *testing.T) {
	const s, mi, h, d = 1e3, 60e3, 3600e3, 86400e3
	cases := []struct {
		name      string
		log       bool
		lo, hi    float64   // milliseconds
		room, gap vg.Length // the axis' length, the labels' least distance
		want      []string
	}{
		{name: "log, 9ms to 1.7s in 200pt: decades only", log: true, lo: 9, hi: 1.7 * s, room: 200, gap: 42, want: []string{"10ms", "100ms", "1s"}},
		{name: "log, 1ms to 2d in 80pt: decades 14pt apart", log: true, lo: 1, hi: 2 * d, room: 80, gap: 14, want: []string{"1ms", "100ms", "10s", "10min", "6h"}},
		{name: "linear, 0 to 2min in 100pt: 1min steps", hi: 2 * mi, room: 100, gap: 42, want: []string{"0", "1min", "2min"}},
		{name: "log, 0.5s to 3h", log: true, lo: 0.5 * s, hi: 3 * h, want: []string{"1s", "10s", "1min", "10min", "1h"}},
		{name: "log, 1ms to 2d", log: true, lo: 1, hi: 2 * d, want: []string{"1ms", "10ms", "100ms", "1s", "10s", "1min", "10min", "1h", "6h", "1d"}},
		{name: "log, 20s to 30d", log: true, lo: 20 * s, hi: 30 * d, want: []string{"1min", "10min", "1h", "6h", "1d", "10d"}},
		{name: "log, 9ms to 1.7s: three decades, 1, 2 and 5 of each labelled", log: true, lo: 9, hi: 1.7 * s,
			want: []string{"10ms", "20ms", "50ms", "100ms", "200ms", "500ms", "1s"}},
		{name: "log, 9ms to 25s: four decades, one label each", log: true, lo: 9, hi: 25 * s, want: []string{"10ms", "100ms", "1s", "10s"}},
		{name: "log, short span: its ends labelled too", log: true, lo: 0.8 * s, hi: 1.25 * s, want: []string{"1s", "800ms", "1.25s"}},
		{name: "log, between round values", log: true, lo: 1.1 * s, hi: 1.3 * s, want: []string{"1.1s", "1.3s"}},
		{name: "linear, 0 to 3s", hi: 3 * s, want: []string{"0", "1s", "2s", "3s"}},
		{name: "linear, 0 to 400s", hi: 400 * s, want: []string{"0", "2min", "4min", "6min"}},
		{name: "linear, 0 to 90s", hi: 90 * s, want: []string{"0", "30s", "1min", "1.5min"}},
		{name: "linear, 0 to 2min", hi: 2 * mi, want: []string{"0", "30s", "1min", "1.5min", "2min"}},
		{name: "linear, 0 to 800ms", hi: 800, want: []string{"0", "200ms", "400ms", "600ms", "800ms"}},
		{name: "linear, 0 to 3d", hi: 3 * d, want: []string{"0", "1d", "2d", "3d"}},
	}
	human := regexp.MustCompile(`^(0|[0-9]+(\.[0-9]+)?(µs|ms|s|min|h|d))$`)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lo, hi := c.lo, c.hi
			if c.log {
				lo, hi = math.Log10(lo), math.Log10(hi)
			}
			var got []string
			for _, tk := range (DurationTicks{Log: c.log, room: c.room, gap: c.gap}).Ticks(lo, hi) {
				if tk.Value < lo-1e-9 || tk.Value > hi+1e-9 {
					t.Errorf("tick %q at %v: outside the axis [%v, %v]", tk.Label, tk.Value, lo, hi)
				}
				if tk.Label == "" {
					continue
				}
				if !human.MatchString(tk.Label) {
					t.Errorf("tick label %q: not a number in ms, s, min, h or d", tk.Label)
				}
				got = append(got, tk.Label)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("labels %q, want %q", got, c.want)
			}
		})
	}
}

// TestDurationLabel: a duration in milliseconds reads in the largest
// unit in which it is round.
func TestDurationLabel(t *testing.T) {
	cases := []struct {
		ms   float64
		want string
	}{
		{want: "0"}, {ms: 0.5, want: "500µs"}, {ms: 1, want: "1ms"}, {ms: 250, want: "250ms"}, {ms: 1250, want: "1.25s"}, {ms: 1500, want: "1.5s"}, {ms: 75e3, want: "75s"},
		{ms: 90e3, want: "1.5min"}, {ms: 600e3, want: "10min"}, {ms: 5400e3, want: "1.5h"}, {ms: 30 * 3600e3, want: "30h"}, {ms: 36 * 3600e3, want: "1.5d"}, {ms: 25 * 86400e3, want: "25d"},
	}
	for _, c := range cases {
		if got := DurationLabel(c.ms); got != c.want {
			t.Errorf("DurationLabel(%v) = %q, want %q", c.ms, got, c.want)
		}
	}
}

func TestIntegerTicks(t *testing.T) {
	cases := []struct {
		lo, hi float64
		want   []string
	}{
		{lo: 1, hi: 10, want: []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10"}},
		{lo: 1, hi: 25, want: []string{"1", "5", "10", "15", "20", "25"}},
		{lo: 1, hi: 20, want: []string{"1", "2", "4", "6", "8", "10", "12", "14", "16", "18", "20"}},
		{lo: 0.5, hi: 1.5, want: []string{"1"}},
		{lo: 1, hi: 1000, want: []string{"1", "100", "200", "300", "400", "500", "600", "700", "800", "900", "1000"}},
	}
	for _, c := range cases {
		var got []string
		for _, tk := range (IntegerTicks{}).Ticks(c.lo, c.hi) {
			if tk.Label != "" {
				got = append(got, tk.Label)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("[%v, %v]: labels %q, want %q", c.lo, c.hi, got, c.want)
		}
	}
}
