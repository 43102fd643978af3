// Command testsummary reads the output of `go test -json`, from one or more
// runs with other lines mixed in, and prints what go test prints without
// -v: the output of each failing test and one line per package ("ok",
// "FAIL", "?"). Lines that are not test events (a module's name, a build
// error on standard error) pass through as they come. A package with no
// test to run gets, on its "ok" line instead of go test's "[no tests to
// run]" and warning, "[no test matches -run]" in a step announced with
// -run (a line starting "go test" that holds " -run "), or else, unless a
// test of it ran earlier in the input, "[benchmarks only: make bench runs
// them]".
//
// Whenever nothing has been printed for 15 seconds it says what is going on:
// the tests still running and for how long, a package running outside its
// tests (TestMain, package set-up), or, when no test binary is running yet,
// that the last step announced (a line starting "go test") is compiling.
//
// At the end it prints one line naming the skipped tests' reasons, when a
// test was skipped, then the counts:
//
//	412 passed, 0 failed, 18 skipped
//
// Tests, subtests and examples each count once; a package that failed with
// no failing test (a build error, a panic in TestMain, a leak found after
// the tests) counts as one failure. The exit status is 1 when anything
// failed, and also when a test was skipped and the environment has
// CI=true: on CI no test may be skipped.
//
//	go test -json ./... 2>&1 | go run ./scripts/testsummary
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

func main() {
	s := newSummary(os.Stdout, os.Getenv("CI") == "true")
	os.Exit(s.run(os.Stdin, 15*time.Second))
}

// event is one line of `go test -json`: a test2json TestEvent or, from
// Go 1.24 on, a BuildEvent (ImportPath, Action build-output or build-fail).
type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	FailedBuild string
	ImportPath  string
}

// summary accumulates the events of a run.
type summary struct {
	out io.Writer
	ci  bool

	buf     map[string][]string  // test → its output lines so far
	running map[string]time.Time // test → when it started
	started map[string]time.Time // package whose test binary runs → when it started
	failing map[string]bool      // package → a test of it failed
	ran     map[string]bool      // package → a test of it ran

	passed, failed, skipped int
	reasons                 map[string]int // skip reason → tests
	order                   []string       // reasons in order of appearance
	failedPkgs              []string       // packages that failed with no failing test

	step      string    // the last "go test ..." line passed through
	stepStart time.Time // when it came

	last time.Time // when something was last printed
	now  func() time.Time
}

func newSummary(out io.Writer, ci bool) *summary {
	return &summary{
		out: out, ci: ci,
		buf:     map[string][]string{},
		running: map[string]time.Time{},
		started: map[string]time.Time{},
		failing: map[string]bool{},
		ran:     map[string]bool{},
		reasons: map[string]int{},
		now:     time.Now,
	}
}

// run reads in to its end and prints the summary; it returns the exit
// status. After each quiet interval without output it says what is running
// (stillRunning); quiet 0 turns that off.
func (s *summary) run(in io.Reader, quiet time.Duration) int {
	lines := make(chan string)
	errc := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
		for sc.Scan() {
			lines <- sc.Text()
		}
		errc <- sc.Err()
		close(lines)
	}()
	var tick <-chan time.Time
	if quiet > 0 {
		t := time.NewTicker(min(quiet, time.Second))
		defer t.Stop()
		tick = t.C
	}
	s.last = s.now()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				if err := <-errc; err != nil {
					s.print("testsummary: reading: " + err.Error())
					s.failed++
				}
				return s.finish()
			}
			s.line(line)
		case <-tick:
			if s.now().Sub(s.last) >= quiet {
				s.stillRunning()
			}
		}
	}
}

// print writes one line of output.
func (s *summary) print(line string) {
	fmt.Fprintln(s.out, line)
	s.last = s.now()
}

// line handles one line of input.
func (s *summary) line(line string) {
	var e event
	if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil || e.Action == "" {
		if strings.HasPrefix(line, "go test ") {
			s.step, s.stepStart = line, s.now()
		}
		s.print(line)
		return
	}
	key := e.Package + " " + e.Test
	switch e.Action {
	case "build-output":
		s.write(e.Output)
	case "start":
		s.started[e.Package] = s.now()
	case "run":
		s.running[key] = s.now()
		s.ran[e.Package] = true
	case "output":
		if e.Test == "" {
			// The package's own lines: "ok", "FAIL", "?", and whatever
			// TestMain prints. go test without -v drops "PASS". A
			// package with no test to run says why instead of go
			// test's warning.
			switch {
			case e.Output == "PASS\n" || e.Output == noTestsWarning:
			case strings.HasSuffix(e.Output, noTestsOK):
				s.write(strings.TrimSuffix(e.Output, noTestsOK) + s.noTests(e.Package))
			default:
				s.write(e.Output)
			}
			return
		}
		s.buf[key] = append(s.buf[key], e.Output)
	case "pass", "fail", "skip":
		if e.Test == "" {
			delete(s.started, e.Package)
			if e.Action == "fail" && !s.failing[e.Package] {
				s.failed++
				s.failedPkgs = append(s.failedPkgs, e.Package)
			}
			return
		}
		delete(s.running, key)
		switch e.Action {
		case "pass":
			s.passed++
		case "fail":
			s.failed++
			s.failing[e.Package] = true
			for _, o := range s.buf[key] {
				if !strings.HasPrefix(strings.TrimSpace(o), "=== ") {
					s.write(o)
				}
			}
		case "skip":
			s.skipped++
			r := reason(e.Package, s.buf[key])
			if s.reasons[r] == 0 {
				s.order = append(s.order, r)
			}
			s.reasons[r]++
		}
		delete(s.buf, key)
	}
}

// What go test prints for a package whose test binary has no test to run,
// and what testsummary prints instead (see noTests).
const (
	noTestsWarning = "testing: warning: no tests to run\n"
	noTestsOK      = " [no tests to run]\n"
	benchOnly      = " [benchmarks only: make bench runs them]\n"
	filteredOut    = " [no test matches -run]\n"
)

// noTests says why package pkg had no test to run: the step's -run
// matched none of its tests; or, when no test of it ran earlier, it has
// none (in this repository such a package holds benchmarks only); or
// else go test's own words.
func (s *summary) noTests(pkg string) string {
	switch {
	case strings.Contains(s.step, " -run "):
		return filteredOut
	case !s.ran[pkg]:
		return benchOnly
	}
	return noTestsOK
}

// write prints output that go test produced, which ends its own lines.
func (s *summary) write(out string) {
	if out == "" {
		return
	}
	io.WriteString(s.out, out)
	s.last = s.now()
}

// logLine is a line of t.Log, t.Skip and friends: "    file_test.go:45: text".
var logLine = regexp.MustCompile(`^\s+(\S+\.go:\d+): (.*)`)

// reason is why a test was skipped: the last line it logged, which is the
// t.Skip message, with its package, so that tests skipped for one reason
// count together.
func reason(pkg string, out []string) string {
	text := strings.Join(out, "")
	lines := strings.Split(text, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if m := logLine.FindStringSubmatch(lines[i]); m != nil {
			return fmt.Sprintf("%s (%s)", m[2], shortPkg(pkg))
		}
	}
	return fmt.Sprintf("no reason given (%s)", shortPkg(pkg))
}

// shortPkg drops the module path's host and owner.
func shortPkg(pkg string) string {
	parts := strings.Split(pkg, "/")
	if len(parts) > 2 && strings.Contains(parts[0], ".") {
		return strings.Join(parts[2:], "/")
	}
	return pkg
}

// stillRunning says what a quiet spell is spent on: the tests that have
// run longest; else the packages whose test binaries run outside their
// tests (TestMain, set-up, leak checks); else, as no test binary runs, the
// compilation of the last step announced.
func (s *summary) stillRunning() {
	now := s.now()
	secs := func(since time.Time) int { return int(now.Sub(since).Seconds()) }
	type run struct {
		name  string
		since time.Time
	}
	var runs []run
	for k, t := range s.running {
		pkg, test, _ := strings.Cut(k, " ")
		if strings.Contains(test, "/") {
			continue // its parent is running too
		}
		runs = append(runs, run{shortPkg(pkg) + " " + test, t})
	}
	what := "running: "
	if len(runs) == 0 {
		// No test runs: a test binary in TestMain, or go test compiling.
		for pkg, t := range s.started {
			runs = append(runs, run{shortPkg(pkg), t})
		}
		what = "running outside its tests (TestMain, set-up): "
	}
	if len(runs) == 0 {
		if s.step != "" {
			s.print(fmt.Sprintf("    compiling: %ds into %s", secs(s.stepStart), s.step))
		}
		return
	}
	slices.SortFunc(runs, func(a, b run) int { return a.since.Compare(b.since) })
	var names []string
	for _, r := range runs[:min(len(runs), 3)] {
		names = append(names, fmt.Sprintf("%s (%ds)", r.name, secs(r.since)))
	}
	more := ""
	if len(runs) > 3 {
		more = fmt.Sprintf(" and %d more", len(runs)-3)
	}
	s.print("    " + what + strings.Join(names, ", ") + more)
}

// finish prints the closing lines and returns the exit status.
func (s *summary) finish() int {
	status := 0
	if s.failed > 0 {
		status = 1
	}
	for _, p := range s.failedPkgs {
		s.print("FAIL: " + p + " failed outside its tests (build error, TestMain, or a leak check)")
	}
	if s.skipped > 0 {
		var parts []string
		for _, r := range s.order {
			parts = append(parts, fmt.Sprintf("%d× %s", s.reasons[r], r))
		}
		s.print(fmt.Sprintf("skipped %d: %s", s.skipped, strings.Join(parts, " | ")))
		if s.ci {
			s.print(fmt.Sprintf("FAIL: %d skipped with CI=true: on CI every test must run", s.skipped))
			status = 1
		}
	}
	s.print(fmt.Sprintf("%d passed, %d failed, %d skipped", s.passed, s.failed, s.skipped))
	return status
}
