//go:build unix

package main

import (
	"os/exec"
	"syscall"
	"time"
)

// stopGroup runs cmd in a process group of its own and makes its
// cancellation stop the whole group (make test and the go test processes
// it starts) with SIGTERM, then SIGKILL 10 seconds later.
func stopGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
}
