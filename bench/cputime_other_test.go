//go:build !unix

package bench

import "testing"

// cpuPerOp reports nothing where the process's CPU time is not read.
func cpuPerOp(*testing.B) func() { return func() {} }
