//go:build unix

package bench

import (
	"syscall"
	"testing"
)

// cpuPerOp starts reading the process's CPU time, and returns the func
// that, called once the benchmark's loop has ended, reports it per
// operation as cpu-ns/op beside ns/op:
//
//	defer cpuPerOp(b)()
//	for b.Loop() { ... }
//
// A benchmark's wall time counts the time that other processes held its
// core, which on a shared machine moves by tens of percent from one round
// to the next; its CPU time does not. It is the time of every thread of
// the process (the calling goroutine's, the garbage collector's, a
// loopback server's, all the goroutines of a RunParallel), so that it is
// the work an operation costs, which run.sh's table compares.
func cpuPerOp(b *testing.B) func() {
	start := processCPU()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

// processCPU returns the CPU time the process has used, user and system,
// in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
