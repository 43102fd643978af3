//go:build !unix

package main

import (
	"os"
	"os/exec"
)

// forwarded are the signals retry run relays to the command it runs: on
// Windows, only the interrupt.
var forwarded = []os.Signal{os.Interrupt}

// terminate ends an attempt that ran out of time: Windows has no SIGTERM.
func terminate(p *os.Process) error { return p.Kill() }

// signaled returns nil: on Windows no signal ends a process.
func signaled(*exec.ExitError) *exitError { return nil }
