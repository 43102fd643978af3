package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestFleet runs the example as a program: against a redis-server the
// test starts on a loopback port, it tells what the shared limiter
// refused, that the shared breaker opened and closed for every worker and
// what it refused, and replays dead letters; with no Redis at its
// address it prints one line and exits with status 1.
func TestFleet(t *testing.T) {
	bin := buildFleet(t)
	tests := []struct {
		name     string
		addr     func(t *testing.T) string
		exit     int
		stderr   *regexp.Regexp // all of it
		stdout   []*regexp.Regexp
		counters bool // check the counters of a run against Redis
	}{
		{
			name: "redis",
			addr: startRedis,
			exit: 0,
			stdout: []*regexp.Regexp{
				regexp.MustCompile(`(?m)^3 workers offer 150, 75 and 75 calls/s for 3s, each call allowed 200ms; on Redis they share$`),
				regexp.MustCompile(`(?m)^a limit of 200 attempts/s, a retry budget and a breaker that opens for 250ms on 50% failures$`),
				regexp.MustCompile(`(?m)^the dependency fails 1 attempt in 10, and all from 1\.00s to 2\.00s$`),
				regexp.MustCompile(`(?m)^\d+ calls, \d+ succeeded, \d+ stopped: .*\d+ by the limiter \(rate_limited\)`),
				regexp.MustCompile(`(?m)^\d+ calls, .*\d+ by the breaker \(breaker_open\)`),
				regexp.MustCompile(`(?m)^the dependency saw \d+ attempts, \d+/s on average; the fleet's limit is 200/s$`),
				regexp.MustCompile(`(?m)^\d+ dead letters in the stream; replaying the first 3$`),
				regexp.MustCompile(`(?m)(^  \d+-\d+ \([a-z_]+ after \d+ attempts?: dependency: 503\): replayed: ok\n){3}`),
			},
			stderr:   regexp.MustCompile(`^$`),
			counters: true,
		},
		{
			name:   "no redis",
			addr:   closedPort,
			exit:   1,
			stderr: regexp.MustCompile(`^fleet: no Redis at 127\.0\.0\.1:\d+ \(dial tcp 127\.0\.0\.1:\d+: connect: connection refused\): start one \(redis-server --port 6379\) or give its address with -addr\n$`),
			stdout: []*regexp.Regexp{regexp.MustCompile(`^$`)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, "-addr", tt.addr(t))
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			exit := 0
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				exit = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			out := stdout.String()
			if exit != tt.exit {
				t.Errorf("exit status %d, want %d", exit, tt.exit)
			}
			if !tt.stderr.MatchString(stderr.String()) {
				t.Errorf("stderr %q, want it to match %s", stderr.String(), tt.stderr)
			}
			for _, re := range tt.stdout {
				if !re.MatchString(out) {
					t.Errorf("stdout does not match %s", re)
				}
			}
			if tt.counters {
				checkCounters(t, out)
			}
			if t.Failed() {
				t.Logf("stdout:\n%s", out)
			}
		})
	}
}

var (
	stoppedRe = regexp.MustCompile(`(?m)^\d+ calls, \d+ succeeded, \d+ stopped: .*?(\d+) by the limiter \(rate_limited\).*?$`)
	breakerRe = regexp.MustCompile(`(?m)^\d+ calls, .*?(\d+) by the breaker \(breaker_open\)`)
	workerRe  = regexp.MustCompile(`(?m)^worker (\d): (\d+) calls, (\d+) attempts, (\d+) dead letters; limiter: (\d+) tokens leased, (\d+) refused; budget: (\d+) retries granted, (\d+) refused\n  breaker: (\d+) calls waited, (\d+) refused; seen (.*)$`)
)

// checkCounters checks what the story of the output rests on: the
// limiter and the breaker refused calls, the breaker made calls wait, and
// every worker saw the shared breaker open, go half-open to a probe and
// close at the end, each change within 100 ms of the others'.
func checkCounters(t *testing.T, out string) {
	t.Helper()
	num := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if m := stoppedRe.FindStringSubmatch(out); m == nil || num(m[1]) == 0 {
		t.Errorf("no call stopped by the limiter: %q", m)
	}
	if m := breakerRe.FindStringSubmatch(out); m == nil || num(m[1]) == 0 {
		t.Errorf("no call stopped by the breaker: %q", m)
	}
	workers := workerRe.FindAllStringSubmatch(out, -1)
	if len(workers) != 3 {
		t.Fatalf("%d worker reports, want 3", len(workers))
	}
	var leased, limited, waited, refused int
	var opened, closed []float64
	for _, m := range workers {
		leased += num(m[5])
		limited += num(m[6])
		waited += num(m[9])
		refused += num(m[10])
		seen := strings.Split(m[11], ", ")
		first, last := seen[0], seen[len(seen)-1]
		if !strings.HasPrefix(first, "open ") || !strings.HasPrefix(last, "closed ") || !strings.Contains(m[11], "half_open") {
			t.Errorf("worker %s saw the breaker %s, want it open first, half_open to probe and closed last", m[1], m[11])
			continue
		}
		opened = append(opened, seconds(t, first))
		closed = append(closed, seconds(t, last))
	}
	for name, n := range map[string]int{"tokens leased": leased, "refused by the limiter": limited, "waits for the breaker": waited, "refused by the breaker": refused} {
		if n == 0 {
			t.Errorf("%s: 0 in all workers", name)
		}
	}
	for name, at := range map[string][]float64{"opened": opened, "closed": closed} {
		if len(at) > 0 && spread(at) > 0.1 {
			t.Errorf("the workers saw the breaker %s at %v, more than 100 ms apart", name, at)
		}
	}
	if len(opened) > 0 && (opened[0] < 1 || closed[0] < 2) {
		t.Errorf("the breaker opened at %.2fs and closed at %.2fs, want after the dependency went down (1s) and came back (2s)", opened[0], closed[0])
	}
}

// seconds reads the time of a change such as "open 1.27s".
func seconds(t *testing.T, change string) float64 {
	t.Helper()
	_, at, _ := strings.Cut(change, " ")
	f, err := strconv.ParseFloat(strings.TrimSuffix(at, "s"), 64)
	if err != nil {
		t.Fatalf("change %q: %v", change, err)
	}
	return f
}

func spread(v []float64) float64 {
	lo, hi := v[0], v[0]
	for _, f := range v {
		lo, hi = min(lo, f), max(hi, f)
	}
	return hi - lo
}

// buildFleet builds the example into a temporary directory.
func buildFleet(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("go not found on PATH: the test builds the example with it")
	}
	bin := filepath.Join(t.TempDir(), "fleet")
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startRedis starts a redis-server on a free loopback port, stopped when
// the test ends, and returns its address, as redis/harness_test.go does:
// without the binary it skips t, and fails it on CI (CI=true).
func startRedis(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		const msg = "redis-server not found on PATH; install it (scripts/setup.sh, or apt-get install -y redis-server) to run the Redis tests"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + " (CI=true: a Redis test may not be skipped)")
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	for range 5 {
		addr := closedPort(t)
		_, port, _ := net.SplitHostPort(addr)
		cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"), "--daemonize", "no")
		if err = cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		if err = waitPong(addr, done); err == nil {
			t.Cleanup(func() {
				cmd.Process.Kill()
				<-done
			})
			return addr
		}
		cmd.Process.Kill()
		<-done
	}
	t.Fatalf("redis-server: %v", err)
	return ""
}

// waitPong waits up to 5 s for a PONG from addr, or for the server to exit.
func waitPong(addr string, exited <-chan error) error {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		select {
		case err := <-exited:
			return fmt.Errorf("exited: %v", err)
		default:
		}
		c, err := net.DialTimeout("tcp", addr, 50*time.Millisecond)
		if err != nil {
			continue
		}
		c.SetDeadline(time.Now().Add(100 * time.Millisecond))
		buf := make([]byte, 7)
		_, err = c.Write([]byte("PING\r\n"))
		n, _ := c.Read(buf)
		c.Close()
		if err == nil && string(buf[:n]) == "+PONG\r\n" {
			return nil
		}
	}
	return fmt.Errorf("not answering on %s", addr)
}

// closedPort returns a loopback address that nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
