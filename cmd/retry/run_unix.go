//go:build unix

package main

import (
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// forwarded are the signals retry run relays to the command it runs.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// terminate asks an attempt that ran out of time to end: SIGTERM.
func terminate(p *os.Process) error { return p.Signal(syscall.SIGTERM) }

// signaled returns the status of a command a signal killed, the shell's
// 128 + the signal's number, or nil.
func signaled(xe *exec.ExitError) *exitError {
	if ws, ok := xe.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return &exitError{code: 128 + int(ws.Signal()), signal: unix.SignalName(ws.Signal())}
	}
	return nil
}
