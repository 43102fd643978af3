//go:build !linux && !race

package retryz_test

import "time"

var start = time.Now()

// threadCPU stands for the calling thread's CPU time where it cannot be
// read: the wall time.
func threadCPU() time.Duration { return time.Since(start) }
