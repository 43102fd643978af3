package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRun: run exits with the command's final status, passes its output
// through, reports each retried attempt on stderr, and honours
// non-retryable exit types.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	counter := filepath.Join(dir, "n")
	fast := []string{"--initial", "1ms", "--max", "5ms"}
	cases := []struct {
		name       string
		args       []string
		stdin      string
		code       int
		stdout     string
		retries    int    // "next attempt in" lines
		stderrHas  string // in stderr
		stderrLine int    // lines of stderr; -1 to skip
	}{
		{name: "success", args: []string{"--", "sh", "-c", "echo hello"}, stdout: "hello\n"},
		{name: "exit 3 thrice", args: append(fast, "--", "sh", "-c", "echo try; exit 3"), code: 3, stdout: "try\ntry\ntry\n", retries: 2,
			stderrHas: "retry: exhausted after 3 attempts: exit status 3", stderrLine: 3},
		{name: "non-retryable exit.2", args: append(fast, "--non-retryable", "exit.2", "--", "sh", "-c", "exit 2"), code: 2, retries: 0,
			stderrHas: "retry: non_retryable after 1 attempt: exit status 2", stderrLine: 1},
		{name: "non-retryable from policy JSON", args: []string{"--policy", `{"max_attempts": 5, "initial_interval": "1ms", "non_retryable_errors": ["exit.*"]}`, "--", "sh", "-c", "exit 9"},
			stdin: "", code: 9, stderrHas: "non_retryable after 1 attempt", stderrLine: 1},
		{name: "succeeds on the third attempt", args: append(fast, "--attempts", "5", "--", "sh", "-c",
			`n=$(cat "$0" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$0"; echo "attempt $n"; [ $n -ge 3 ]`, counter),
			stdin: "", stdout: "attempt 1\nattempt 2\nattempt 3\n", retries: 2, stderrLine: 2},
		{name: "stdin to the first attempt", args: []string{"--", "sh", "-c", "cat"}, stdin: "piped\n", stdout: "piped\n"},
		{name: "quiet", args: append(fast, "-q", "--", "sh", "-c", "exit 4"), code: 4},
		{name: "not found", args: []string{"--", "no-such-command-here"}, code: 127, stderrHas: "executable file not found", stderrLine: 1},
		{name: "not executable", args: []string{"--", "testdata/payment-policy.json"}, code: 126, stderrHas: "permission denied", stderrLine: 1},
		{name: "killed by a signal", args: append(fast, "--attempts", "1", "--", "sh", "-c", "kill -KILL $$"), code: 137, retries: 0,
			stderrHas: "killed by SIGKILL (exit status 137)", stderrLine: 1},
		{name: "attempt timeout", args: append(fast, "--attempts", "2", "--attempt-timeout", "50ms", "--", "sleep", "10"), code: 143, retries: 1,
			stderrHas: "exhausted after 2 attempts: killed by SIGTERM", stderrLine: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := cli(t, c.stdin, append([]string{"run"}, c.args...)...)
			if code != c.code {
				t.Errorf("status %d, want %d; stderr:\n%s", code, c.code, stderr)
			}
			if stdout != c.stdout {
				t.Errorf("stdout %q, want %q", stdout, c.stdout)
			}
			if n := strings.Count(stderr, "next attempt in"); n != c.retries {
				t.Errorf("%d retries reported, want %d:\n%s", n, c.retries, stderr)
			}
			if !strings.Contains(stderr, c.stderrHas) {
				t.Errorf("stderr lacks %q:\n%s", c.stderrHas, stderr)
			}
			if n := strings.Count(stderr, "\n"); c.stderrLine >= 0 && n != c.stderrLine {
				t.Errorf("%d lines on stderr, want %d:\n%s", n, c.stderrLine, stderr)
			}
		})
	}
}

func TestRunUsage(t *testing.T) {
	for _, args := range [][]string{
		{"run"},
		{"run", "--attempt-timeout", "-1s", "--", "true"},
		{"run", "--attempts", "-1", "--", "true"},
	} {
		stdout, stderr, code := cli(t, "", args...)
		if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: status %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}

// TestForwardSignals: a signal sent to this process reaches the command.
func TestForwardSignals(t *testing.T) {
	c := exec.Command("sh", "-c", `trap 'exit 7' USR1; echo ready; while :; do sleep 0.01; done`)
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	stop := forwardSignals(c.Process)
	defer stop()
	buf := make([]byte, 6)
	if _, err := out.Read(buf); err != nil { // the trap is set
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		if xe, ok := err.(*exec.ExitError); !ok || xe.ExitCode() != 7 {
			t.Errorf("command ended with %v, want exit status 7 from its USR1 trap", err)
		}
	case <-time.After(5 * time.Second):
		c.Process.Kill()
		<-done
		t.Fatal("the signal was not forwarded")
	}
}
