package main

import (
	"bytes"
	"strings"
	"testing"
)

const sample = `goos: linux
goarch: amd64
pkg: github.com/steadyhq/retry/bench
cpu: Test CPU
BenchmarkSuccess/plain-2         	100	         2.000 ns/op	       0 B/op	       0 allocs/op
BenchmarkSuccess/plain-2         	100	         4.000 ns/op	       0 B/op	       0 allocs/op
BenchmarkSuccess/retry-retrier-2 	100	        10.00 ns/op	       0 B/op	       0 allocs/op
BenchmarkSuccess/retry-retrier-2 	100	        30.00 ns/op	       0 B/op	       0 allocs/op
BenchmarkSuccess/retry-retrier-2 	100	        12.00 ns/op	       0 B/op	       0 allocs/op
BenchmarkSuccess/peer-a-2        	100	        60.00 ns/op	      80 B/op	       3 allocs/op
BenchmarkSuccess/peer-b-2        	100	        90.00 ns/op	     120 B/op	       5 allocs/op
BenchmarkParallel/retry-retrier-2	100	         6.000 ns/op	       0 B/op	       0 allocs/op
`

func TestTable(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
		err  string
	}{
		{"medians and ratios", sample, []string{
			"cpu: Test CPU",
			"| retry-retrier | 12.00 | 0 | 0 | 0.200 | 4.000 | +0 |", // median of 10, 12, 30; 12/60; 12/3
			"| peer-b | 90.00 | 120 | 5 | 1.500 | 30.000 | +5 |",
			"| plain | 3.00 | 0 | 0 | 0.050 | 1.000 | +0 |",
			"| retry-retrier | 6.00 | 0 | 0 |  | 0.50 |", // parallel against serial 12
		}, ""},
		{"empty input", "PASS\n", nil, "no benchmark results"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(strings.NewReader(tt.in), &out)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("missing %q in\n%s", w, out.String())
				}
			}
		})
	}
}
