package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the tests if one leaves a goroutine running (the
// rehearsal tests read a process's output on one).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
