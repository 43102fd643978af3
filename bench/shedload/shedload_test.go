//go:build !race

// The short load test runs without the race detector (`make test` runs
// it in its pass for the tests -race excludes): under -race its latencies
// would be the detector's, not the shedding's.

package shedload

import (
	"context"
	"testing"
	"time"
)

// The short form's bounds for a shedding server, with margins for a
// 2-core machine shared with other work, against issue 30's
// targets for the full form: goodput at least 75% of capacity (target
// 90%); p99 of admitted requests at most 3× the unloaded p99 (target 2×)
// plus the longest stall the run saw in its own load generator;
// amplification at most 1.10 (target 1.05); recovery within 2 s, as the
// target (the short form has 1.5 s after the overload, so any recovery
// within the run passes); no retry before Retry-After, as the target (a
// retry is early or not whatever the machine's speed).
//
// The stall term is there because the servers, the clients and the
// generator share one process on a shared machine: a pause of the process
// (another job's burst of CPU, a GC) adds its length to the server-side
// latency of every request in flight, whatever the shedding does, and the
// generator's lateness past its due times (MaxLagMS) is the run's own
// measure of the longest such pause. A server that queues too long still
// misses by far: without shedding, p99 is seconds.
const (
	minGoodputShare   = 0.75
	maxP99Ratio       = 3
	maxAmplification  = 1.10
	maxRecoverySecond = 2
)

// checkShedding returns what r misses of the bounds above.
func checkShedding(r *Result) []string {
	var miss []string
	if r.GoodputShare < minGoodputShare {
		miss = append(miss, "goodput below the bound")
	}
	if r.P99MS > maxP99Ratio*r.UnloadedP99MS+r.MaxLagMS {
		miss = append(miss, "p99 of admitted requests above the bound")
	}
	if r.Amplification > maxAmplification {
		miss = append(miss, "amplification above the bound")
	}
	if r.EarlyRetries > 0 {
		miss = append(miss, "retries before Retry-After")
	}
	if r.RecoveryS == nil || *r.RecoveryS > maxRecoverySecond {
		miss = append(miss, "no recovery within the bound")
	}
	return miss
}

// TestShortLoad runs the short form against a server without shedding,
// which must miss the bounds (else they prove nothing: the load would not
// overload it), and against this library's shedding, over HTTP and over
// gRPC, which must meet them.
func TestShortLoad(t *testing.T) {
	tests := []struct {
		wire     string
		target   Target
		shedding bool // whether the server must meet the bounds
	}{
		{wire: "http", target: HTTP(None), shedding: false},
		{wire: "http", target: HTTP(Ours), shedding: true},
		{wire: "grpc", target: GRPC(GRPCOurs), shedding: true},
	}
	for _, tt := range tests {
		t.Run(tt.wire+"/"+tt.target.Name, func(t *testing.T) {
			r, err := Run(context.Background(), Short(), tt.target)
			if err != nil {
				t.Fatal(err)
			}
			rec := "never"
			if r.RecoveryS != nil {
				rec = time.Duration(*r.RecoveryS * float64(time.Second)).String()
			}
			t.Logf("goodput %.0f%% of %.0f/s; p50 %.1f ms, p99 %.1f ms admitted (unloaded p99 %.1f ms); amplification %.3f (%d attempts, %d refused, %d retries, %d early); recovery %s; send lag up to %.1f ms",
				100*r.GoodputShare, r.Capacity, r.P50MS, r.P99MS, r.UnloadedP99MS, r.Amplification, r.Attempts, r.Refused, r.Retries, r.EarlyRetries, rec, r.MaxLagMS)
			miss := checkShedding(r)
			switch {
			case tt.shedding && len(miss) > 0:
				t.Errorf("misses issue 30's targets (with the short form's margins): %v", miss)
			case !tt.shedding && len(miss) == 0:
				t.Errorf("a server without shedding meets the bounds for shedding: the load does not overload it")
			}
		})
	}
}
