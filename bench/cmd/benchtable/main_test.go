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
		{name: "medians and ratios", in: sample, want: []string{
			"cpu: Test CPU",
			"| retry-retrier | 12.00 | 0 | 0 | 0.200 | 4.000 | +0 |", // median of 10, 12, 30; 12/60; 12/3
			"| peer-b | 90.00 | 120 | 5 | 1.500 | 30.000 | +5 |",
			"| plain | 3.00 | 0 | 0 | 0.050 | 1.000 | +0 |",
			"| retry-retrier | 6.00 | 0 | 0 |  | 0.50 |", // parallel against serial 12
		}},
		{name: "GOMAXPROCS 1: no suffix; digits inside a name stay", in: `cpu: One CPU
BenchmarkSuccess/plain        	100	         2.000 ns/op	       0 B/op	       0 allocs/op
BenchmarkSuccess/backoff-v5   	100	        20.00 ns/op	      16 B/op	       1 allocs/op
BenchmarkSuccess/backoff-v5-8 	100	        40.00 ns/op	      16 B/op	       1 allocs/op
`, want: []string{
			"cpu: One CPU",
			"| backoff-v5 | 30.00 | 16 | 1 |  | 15.000 | +1 |", // median of 20 and 40
		}},
		{name: "other lines and units are ignored", in: `goos: linux
=== RUN   BenchmarkSuccess
BenchmarkSuccess/plain-2	100	2.000 ns/op	5.000 MB/s
--- BENCH: BenchmarkSuccess/plain-2
PASS
ok  	github.com/steadyhq/retry/bench	1.000s
`, want: []string{"| plain | 2.00 | 0 | 0 |  | 1.000 | +0 |"}},
		{name: "X-none rows are the bases of their rows X-…, the others have plain", in: `cpu: Test CPU
BenchmarkGateThrottle/plain-2                       	100	         1.000 ns/op	       0 B/op	       0 allocs/op
BenchmarkGateThrottle/retry-none-2                  	100	        20.00 ns/op	       0 B/op	       0 allocs/op
BenchmarkGateThrottle/retry-throttle-2              	100	        35.00 ns/op	       0 B/op	       0 allocs/op
BenchmarkGateThrottle/peer-none-2                   	100	        50.00 ns/op	      16 B/op	       1 allocs/op
BenchmarkGateThrottle/peer-executor-none-2          	100	        300.0 ns/op	     320 B/op	      11 allocs/op
BenchmarkGateThrottle/peer-executor-throttler-2     	100	        500.0 ns/op	     432 B/op	      14 allocs/op
BenchmarkGateThrottle/peer-throttler-bare-2         	100	        70.00 ns/op	       0 B/op	       0 allocs/op
BenchmarkGateThrottle/gobreaker-twostep-2           	100	        200.0 ns/op	      48 B/op	       1 allocs/op
`, want: []string{
			"| implementation | ns/op | B/op | allocs/op | × best peer | − base (ns) | extra allocs | base |",
			"| plain | 1.00 | 0 | 0 | 0.014 | +0.0 | +0 | plain |",
			"| retry-none | 20.00 | 0 | 0 | 0.286 | +0.0 | +0 | retry-none |",
			"| retry-throttle | 35.00 | 0 | 0 | 0.500 | +15.0 | +0 | retry-none |",                      // best peer: the bare row; bases are no peers
			"| peer-executor-throttler | 500.0 | 432 | 14 | 7.143 | +200.0 | +3 | peer-executor-none |", // the longest X
			"| peer-throttler-bare | 70.00 | 0 | 0 |  | +20.0 | -1 | peer-none |",
			"| gobreaker-twostep | 200.0 | 48 | 1 | 2.857 | +199.0 | +1 | plain |",
		}},
		{name: "CPU times: the table compares them; Parallel rows against the serial case's", in: `cpu: Test CPU
BenchmarkGuarded/retry-retrier-2          	100	        50.00 ns/op	        20.00 cpu-ns/op	       0 B/op	       0 allocs/op
BenchmarkGuarded/hand-2                   	100	        90.00 ns/op	        80.00 cpu-ns/op	     128 B/op	       4 allocs/op
BenchmarkGuarded/base:retry-retrier-2     	100	        60.00 ns/op	        40.00 cpu-ns/op	       0 B/op	       0 allocs/op
BenchmarkParallelGuarded/retry-retrier-2  	100	        30.00 ns/op	        22.00 cpu-ns/op	       0 B/op	       0 allocs/op
BenchmarkParallelGuarded/hand-2           	100	        45.00 ns/op	        96.00 cpu-ns/op	     128 B/op	       4 allocs/op
`, want: []string{
			"| implementation | ns/op | CPU ns/op | B/op | allocs/op | × best peer |",
			"| retry-retrier | 50.00 | 20.00 | 0 | 0 | 0.250 |",        // 20/80: of CPU time
			"| base:retry-retrier | 60.00 | 40.00 | 0 | 0 | 0.500 |",   // ours at an earlier revision: no peer
			"| retry-retrier | 30.00 | 22.00 | 0 | 0 | 0.229 | 1.10 |", // 22/20 against Guarded
			"| hand | 45.00 | 96.00 | 128 | 4 |  | 1.20 |",
		}},
		{name: "a value that is no number", in: "BenchmarkSuccess/plain-2\t100\tfast ns/op\n", err: `value "fast" is not a number`},
		{name: "empty input", in: "PASS\n", err: "no benchmark results"},
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
