package redis_test

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// buildFleetProc builds internal/cmd/fleetproc into a temporary directory,
// with -race when the tests run with it, and returns the program's path.
func buildFleetProc(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("go not found on PATH: the test builds internal/cmd/fleetproc with it")
	}
	bin := filepath.Join(t.TempDir(), "fleetproc")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command(goBin, append(args, "./internal/cmd/fleetproc")...).CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./internal/cmd/fleetproc: %v\n%s", err, out)
	}
	return bin
}

// hit is one request the dependency received.
type hit struct {
	at   int64 // unix ns
	proc string
}

// dependency is a loopback HTTP server shared by the processes: it answers
// 200, or 503 while failing, and keeps the time and sender of every
// request.
type dependency struct {
	srv     *httptest.Server
	failing atomic.Bool
	mu      sync.Mutex
	hits    []hit
}

func newDependency(t *testing.T) *dependency {
	d := &dependency{}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := hit{at: time.Now().UnixNano(), proc: r.Header.Get("X-Fleet-Proc")}
		d.mu.Lock()
		d.hits = append(d.hits, h)
		d.mu.Unlock()
		if d.failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(d.srv.Close)
	return d
}

// since returns the requests received at from or later, in order.
func (d *dependency) since(from int64) []hit {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []hit
	for _, h := range d.hits {
		if h.at >= from {
			out = append(out, h)
		}
	}
	slices.SortFunc(out, func(a, b hit) int { return cmp.Compare(a.at, b.at) })
	return out
}

// each reports whether every process in procs sent at least n requests
// at from or later.
func (d *dependency) each(procs []string, from int64, n int) bool {
	per := map[string]int{}
	for _, h := range d.since(from) {
		per[h.proc]++
	}
	for _, p := range procs {
		if per[p] < n {
			return false
		}
	}
	return true
}

// fleetReport is what internal/cmd/fleetproc prints when asked and when
// it ends.
type fleetReport struct {
	Name     string `json:"name"`
	Calls    int64  `json:"calls"`
	Attempts int64  `json:"attempts"`
	Changes  []struct {
		From string `json:"from"`
		To   string `json:"to"`
		At   int64  `json:"at"`
	} `json:"changes"`
	Fallback int64 `json:"fallback"`
	Denied   int64 `json:"denied"`
	Syncs    int64 `json:"syncs"`
	Errors   int64 `json:"errors"`
	Granted  int64 `json:"granted"`
	OnFleet  bool  `json:"on_fleet"`
}

// proc is a running fleetproc. Closing its standard input stops it.
type proc struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan []byte // the lines of its standard output
	stderr bytes.Buffer
	waited chan error
}

// startProc starts bin with args; the process is stopped, and killed if
// it does not end within 5 s, when the test ends.
func startProc(t *testing.T, bin, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, waited: make(chan error, 1), lines: make(chan []byte, 16)}
	p.cmd = exec.Command(bin, append([]string{"-name", name}, args...)...)
	p.cmd.Stderr = &p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			p.lines <- append([]byte(nil), sc.Bytes()...)
		}
		close(p.lines)
		p.waited <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		p.stdin.Close()
		select {
		case <-p.waited:
		case <-time.After(5 * time.Second):
			p.cmd.Process.Kill()
			<-p.waited
			t.Errorf("%s did not end within 5 s of its stop; killed", name)
		}
	})
	return p
}

// report asks the running process for its report of the moment.
func (p *proc) report(t *testing.T) fleetReport {
	t.Helper()
	if _, err := io.WriteString(p.stdin, "report\n"); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	select {
	case line, ok := <-p.lines:
		if !ok {
			t.Fatalf("%s ended: %s", p.name, p.stderr.String())
		}
		return p.decode(t, line)
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not report within 5 s", p.name)
	}
	return fleetReport{}
}

func (p *proc) decode(t *testing.T, line []byte) fleetReport {
	t.Helper()
	var rep fleetReport
	if err := json.Unmarshal(line, &rep); err != nil {
		t.Fatalf("%s: report %q: %v", p.name, line, err)
	}
	return rep
}

// stop closes the process's standard input, waits for it to end and
// returns its report.
func (p *proc) stop(t *testing.T) fleetReport {
	t.Helper()
	p.stdin.Close()
	var last []byte
	timeout := time.After(5 * time.Second)
	for done := false; !done; {
		select {
		case line, ok := <-p.lines:
			if !ok {
				done = true
				break
			}
			last = line
		case <-timeout:
			t.Fatalf("%s did not end within 5 s of its stop", p.name)
		}
	}
	err := <-p.waited
	p.waited <- err // for the cleanup
	if err != nil {
		t.Fatalf("%s: %v\n%s", p.name, err, p.stderr.String())
	}
	return p.decode(t, last)
}

// TestFleetProcesses: three OS processes (internal/cmd/fleetproc), each a
// Retrier with retry.Breaker{Store: retryredis.NewStore(...)} on one
// redis-server, call one loopback HTTP dependency. When it fails, the
// fleet trips (the instant read from the breaker's hash on Redis) and every
// process stops calling it within 200 ms of the trip; while the breaker
// stays open the dependency sees probe rounds at least OpenTimeout apart of
// at most Probes attempts each, from the whole fleet; when it recovers, a
// probe closes the breaker and every process calls it again. No process
// falls back to its own breaker.
func TestFleetProcesses(t *testing.T) {
	s := startServer(t)
	bin := buildFleetProc(t)
	admin := s.Client()
	tests := []struct {
		name   string
		probes int
	}{
		{name: "one probe", probes: 1},
		{name: "two probes", probes: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const (
				interval = 20 * time.Millisecond
				open     = 250 * time.Millisecond
				converge = 200 * time.Millisecond
				down     = 3 * open // how long the dependency fails after the trip
			)
			dep := newDependency(t)
			prefix := fmt.Sprintf("procs:%d:", tt.probes)
			key := prefix + "{breaker:}"
			names := []string{"p0", "p1", "p2"}
			procs := make([]*proc, len(names))
			for i, n := range names {
				procs[i] = startProc(t, bin, n,
					"-redis", s.Addr(), "-url", dep.srv.URL, "-prefix", prefix,
					"-sync", interval.String(), "-open", open.String(), "-window", "200ms",
					"-min", "10", "-probes", strconv.Itoa(tt.probes),
					"-workers", "3", "-pause", "2ms", "-for", "20s")
			}
			waitFor(t, 10*time.Second, "each process calling the dependency", func() bool {
				return dep.each(names, 0, 20)
			})

			failedAt := time.Now()
			dep.failing.Store(true)
			// The trip: the first open state in the breaker's hash, whose
			// opened-until time less OpenTimeout is the instant on Redis's
			// clock (the same machine's) at which the fleet tripped.
			var trip, until int64
			waitFor(t, 2*time.Second, "the fleet's breaker to open", func() bool {
				v, err := admin.HMGet(t.Context(), key, "st", "until").Result()
				if err != nil || v[0] != "2" {
					return false
				}
				ms, _ := strconv.ParseInt(v[1].(string), 10, 64)
				until = ms * int64(time.Millisecond)
				trip = until - int64(open)
				return true
			})
			healAt := time.Unix(0, trip).Add(down)
			time.Sleep(time.Until(healAt))
			dep.failing.Store(false)
			heal := time.Now().UnixNano()
			// A probe finds it healthy and closes the breaker for all.
			waitFor(t, 2*time.Second, "every process to call the dependency again", func() bool {
				return dep.each(names, heal, 5)
			})
			reps := make([]fleetReport, len(procs))
			for i, p := range procs {
				reps[i] = p.stop(t)
			}

			// Convergence: each process's last attempt after the trip and
			// before the open period ends (no probe is granted before it).
			var convergence time.Duration
			last := map[string]time.Duration{}
			var probes []int64 // attempts from the end of the first open period to the heal
			for _, h := range dep.since(trip) {
				switch {
				case h.at < until:
					last[h.proc] = time.Duration(h.at - trip)
					convergence = max(convergence, last[h.proc])
				case h.at < heal:
					probes = append(probes, h.at)
				}
			}
			var saw []string
			for _, r := range reps {
				for _, c := range r.Changes {
					if c.From == "closed" && c.To == "open" {
						saw = append(saw, fmt.Sprintf("%s %v", r.Name, time.Duration(c.At-trip).Round(time.Millisecond)))
						break
					}
				}
			}
			t.Logf("tripped %v after the dependency failed; last attempts after the trip %v (convergence %v); closed>open seen at %s",
				time.Duration(trip-failedAt.UnixNano()).Round(time.Millisecond), last, convergence, strings.Join(saw, ", "))
			if convergence > converge {
				t.Errorf("convergence %v: a process called the failing dependency %v after the fleet tripped, want within %v", convergence, convergence, converge)
			}

			// Probe rounds: attempts closer than OpenTimeout/2 belong to
			// one round; each round holds at most Probes attempts and
			// starts at least OpenTimeout after the one before (less 5 ms
			// for Redis's millisecond clock).
			var rounds [][]int64
			for _, at := range probes {
				if n := len(rounds); n > 0 && at-rounds[n-1][len(rounds[n-1])-1] < int64(open/2) {
					rounds[n-1] = append(rounds[n-1], at)
					continue
				}
				rounds = append(rounds, []int64{at})
			}
			var desc []string
			for i, r := range rounds {
				desc = append(desc, fmt.Sprintf("%d at +%v", len(r), time.Duration(r[0]-trip).Round(time.Millisecond)))
				if len(r) > tt.probes {
					t.Errorf("probe round %d: %d attempts, want at most Probes = %d", i, len(r), tt.probes)
				}
				if i > 0 && r[0]-rounds[i-1][0] < int64(open-5*time.Millisecond) {
					t.Errorf("probe round %d started %v after the one before, want at least OpenTimeout %v", i, time.Duration(r[0]-rounds[i-1][0]), open)
				}
			}
			span := time.Duration(heal - until)
			ceiling := tt.probes * (int(span/open) + 1)
			t.Logf("%d attempts from the whole fleet in the %v from the first open period's end to the heal (at most %d): rounds %s",
				len(probes), span.Round(time.Millisecond), ceiling, strings.Join(desc, "; "))
			if len(probes) > ceiling || len(rounds) == 0 {
				t.Errorf("%d attempts while the breaker was open or half-open, want 1 to %d", len(probes), ceiling)
			}

			for _, r := range reps {
				t.Logf("%s: %+v", r.Name, r)
				if r.Fallback != 0 || r.Errors != 0 {
					t.Errorf("%s: %d fallbacks, %d store errors, want none with Redis up", r.Name, r.Fallback, r.Errors)
				}
				if r.Denied == 0 {
					t.Errorf("%s: no call refused by the open breaker", r.Name)
				}
			}
		})
	}
}

// waitFor polls cond every 2 ms until it holds, failing t after limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", limit, what)
		}
	}
}

// TestFleetProcessesRejoin: three OS processes sharing one breaker on one
// redis-server, after the breaker has opened and closed once (so its
// generation is past the one a store that lost it answers with). Redis is
// killed with SIGKILL and restarted empty on the same port (after 100 ms,
// and after a second, long enough for the client's pool to stop dialing),
// or flushed: within two sync intervals (a second more after the long
// outage; and slack) of Redis answering, every process
// decides on the fleet's state again and makes no more decisions on its
// own breaker, and the fleet still trips together on its summed counts:
// no process calls the failing dependency from 100 ms after the trip.
func TestFleetProcessesRejoin(t *testing.T) {
	s := startServer(t)
	bin := buildFleetProc(t)
	admin := s.Client()
	const (
		interval = 20 * time.Millisecond
		open     = 250 * time.Millisecond
		slack    = 200 * time.Millisecond // a loaded machine's scheduling, on three race-built processes
		key      = "rejoin:{breaker:}"
	)
	dep := newDependency(t)
	names := []string{"p0", "p1", "p2"}
	procs := make([]*proc, len(names))
	for i, n := range names {
		procs[i] = startProc(t, bin, n,
			"-redis", s.Addr(), "-url", dep.srv.URL, "-prefix", "rejoin:",
			"-sync", interval.String(), "-open", open.String(), "-window", "200ms",
			"-min", "10", "-probes", "1", "-workers", "3", "-pause", "2ms", "-for", "30s")
	}
	waitFor(t, 10*time.Second, "each process calling the dependency", func() bool {
		return dep.each(names, 0, 20)
	})
	// trip fails the dependency until the fleet's breaker opens, checks
	// that no process calls it in the 100 ms after the trip's first
	// 100 ms, heals it, and waits until every process calls it again.
	trip := func(what string) {
		t.Helper()
		dep.failing.Store(true)
		var until int64
		waitFor(t, 2*time.Second, what+": the fleet's breaker to open", func() bool {
			v, err := admin.HMGet(t.Context(), key, "st", "until").Result()
			if err != nil || v[0] != "2" {
				return false
			}
			ms, _ := strconv.ParseInt(v[1].(string), 10, 64)
			until = ms * int64(time.Millisecond)
			return true
		})
		tripped := until - int64(open)
		time.Sleep(time.Until(time.Unix(0, tripped).Add(200 * time.Millisecond)))
		for _, h := range dep.since(tripped + int64(100*time.Millisecond)) {
			if h.at < tripped+int64(200*time.Millisecond) {
				t.Errorf("%s: %s called the dependency %v after the fleet tripped", what, h.proc, time.Duration(h.at-tripped))
			}
		}
		dep.failing.Store(false)
		healed := time.Now().UnixNano()
		waitFor(t, 3*time.Second, what+": every process calling the dependency again", func() bool {
			return dep.each(names, healed, 5)
		})
	}
	trip("before the faults")

	faults := []struct {
		name   string
		inject func()
		// more is how much later than two intervals every process may
		// be back: a second after a long outage, in which go-redis's pool
		// may stop dialing and then dial again once a second (the doc's
		// allowance; TestRejoinAfterPoolGaveUp forces that case).
		more time.Duration
	}{
		{name: "killed and restarted empty", inject: func() {
			s.Stop()
			time.Sleep(100 * time.Millisecond)
			s.Start()
		}},
		{name: "killed for a second and restarted empty", inject: func() {
			s.Stop()
			time.Sleep(time.Second)
			s.Start()
		}, more: time.Second},
		{name: "FLUSHALL", inject: func() {
			if err := admin.FlushAll(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, f := range faults {
		f.inject()
		time.Sleep(2*interval + f.more + slack)
		before := make([]fleetReport, len(procs))
		for i, p := range procs {
			before[i] = p.report(t)
		}
		time.Sleep(300 * time.Millisecond)
		for i, p := range procs {
			r := p.report(t)
			t.Logf("%s: %s: %d fallbacks in all, %d in the 300 ms from two intervals after Redis answered; on the fleet's state %v",
				f.name, r.Name, r.Fallback, r.Fallback-before[i].Fallback, r.OnFleet)
			if r.Fallback != before[i].Fallback || !r.OnFleet || !before[i].OnFleet {
				t.Errorf("%s: %s: %d decisions on its own breaker from two intervals after Redis answered (on the fleet's state %v, then %v), want none",
					f.name, r.Name, r.Fallback-before[i].Fallback, before[i].OnFleet, r.OnFleet)
			}
		}
		trip("after " + f.name)
	}
	for _, p := range procs {
		p.stop(t)
	}
}
