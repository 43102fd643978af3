package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// ev renders one test event as go test -json does.
func ev(action, pkg, test, output string) string {
	var b strings.Builder
	b.WriteString(`{"Action":"` + action + `","Package":"` + pkg + `"`)
	if test != "" {
		b.WriteString(`,"Test":"` + test + `"`)
	}
	if output != "" {
		b.WriteString(`,"Output":` + quote(output))
	}
	b.WriteString("}")
	return b.String()
}

func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`)
	return `"` + r.Replace(s) + `"`
}

const pkg = "github.com/steadyhq/retry/redis"

func TestSummary(t *testing.T) {
	pass := []string{
		ev("start", pkg, "", ""),
		ev("run", pkg, "TestA", ""),
		ev("output", pkg, "TestA", "=== RUN   TestA\n"),
		ev("output", pkg, "TestA", "--- PASS: TestA (0.00s)\n"),
		ev("pass", pkg, "TestA", ""),
		ev("output", pkg, "", "PASS\n"),
		ev("output", pkg, "", "ok  \t"+pkg+"\t0.01s\n"),
		ev("pass", pkg, "", ""),
	}
	skip := func(test, msg string) []string {
		return []string{
			ev("run", pkg, test, ""),
			ev("output", pkg, test, "=== RUN   "+test+"\n"),
			ev("output", pkg, test, "    harness_test.go:45: "+msg+"\n"),
			ev("output", pkg, test, "--- SKIP: "+test+" (0.00s)\n"),
			ev("skip", pkg, test, ""),
		}
	}
	var skips []string
	skips = append(skips, skip("TestB", "redis-server not found")...)
	skips = append(skips, skip("TestC", "redis-server not found")...)
	skips = append(skips, skip("TestD", "short mode")...)
	fail := []string{
		ev("run", pkg, "TestE", ""),
		ev("run", pkg, "TestE/sub", ""),
		ev("output", pkg, "TestE/sub", "=== RUN   TestE/sub\n"),
		ev("output", pkg, "TestE/sub", "    x_test.go:9: boom\n"),
		ev("output", pkg, "TestE/sub", "    --- FAIL: TestE/sub (0.00s)\n"),
		ev("fail", pkg, "TestE/sub", ""),
		ev("output", pkg, "TestE", "--- FAIL: TestE (0.00s)\n"),
		ev("fail", pkg, "TestE", ""),
		ev("output", pkg, "", "FAIL\n"),
		ev("output", pkg, "", "FAIL\t"+pkg+"\t0.02s\n"),
		ev("fail", pkg, "", ""),
	}
	buildFail := []string{
		`{"ImportPath":"example.com/broken [example.com/broken.test]","Action":"build-output","Output":"# example.com/broken\n"}`,
		`{"ImportPath":"example.com/broken [example.com/broken.test]","Action":"build-output","Output":"./a.go:3:1: syntax error\n"}`,
		`{"ImportPath":"example.com/broken [example.com/broken.test]","Action":"build-fail"}`,
		ev("start", "example.com/broken", "", ""),
		ev("output", "example.com/broken", "", "FAIL\texample.com/broken [build failed]\n"),
		`{"Action":"fail","Package":"example.com/broken","FailedBuild":"example.com/broken [example.com/broken.test]"}`,
	}
	join := func(parts ...[]string) string {
		var all []string
		for _, p := range parts {
			all = append(all, p...)
		}
		return strings.Join(all, "\n") + "\n"
	}
	tests := []struct {
		name    string
		in      string
		ci      bool
		status  int
		want    []string // lines of the output, in order
		notWant []string
	}{
		{
			name:    "all pass",
			in:      join([]string{"go test -race /work/redis"}, pass),
			status:  0,
			want:    []string{"go test -race /work/redis", "ok  \t" + pkg + "\t0.01s", "1 passed, 0 failed, 0 skipped"},
			notWant: []string{"PASS", "=== RUN", "skipped "},
		},
		{
			name:   "skips are counted by reason on one line",
			in:     join(pass, skips),
			status: 0,
			want: []string{
				"skipped 3: 2× redis-server not found (retry/redis) | 1× short mode (retry/redis)",
				"1 passed, 0 failed, 3 skipped",
			},
			notWant: []string{"--- SKIP"},
		},
		{
			name:   "a skip fails a CI run",
			in:     join(pass, skips),
			ci:     true,
			status: 1,
			want:   []string{"skipped 3:", "FAIL: 3 skipped with CI=true", "1 passed, 0 failed, 3 skipped"},
		},
		{
			name:    "a failing test prints its output, once, without the RUN lines",
			in:      join(fail),
			status:  1,
			want:    []string{"    x_test.go:9: boom", "    --- FAIL: TestE/sub (0.00s)", "--- FAIL: TestE (0.00s)", "FAIL\t" + pkg + "\t0.02s", "0 passed, 2 failed, 0 skipped"},
			notWant: []string{"=== RUN", "failed outside its tests"},
		},
		{
			name:   "a build failure counts as a failure",
			in:     join(pass, buildFail),
			status: 1,
			want: []string{"./a.go:3:1: syntax error", "FAIL\texample.com/broken [build failed]",
				"FAIL: example.com/broken failed outside its tests", "1 passed, 1 failed, 0 skipped"},
		},
		{
			name:   "a skip without a message",
			in:     join([]string{ev("run", pkg, "TestF", ""), ev("output", pkg, "TestF", "--- SKIP: TestF (0.00s)\n"), ev("skip", pkg, "TestF", "")}),
			status: 0,
			want:   []string{"skipped 1: 1× no reason given (retry/redis)", "0 passed, 0 failed, 1 skipped"},
		},
		{
			name:   "other lines pass through",
			in:     "go: downloading example.com/x v1.0.0\n{not json\n",
			status: 0,
			want:   []string{"go: downloading example.com/x v1.0.0", "{not json", "0 passed, 0 failed, 0 skipped"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			status := newSummary(&out, tt.ci).run(strings.NewReader(tt.in), 0)
			if status != tt.status {
				t.Errorf("status %d, want %d", status, tt.status)
			}
			checkLines(t, out.String(), tt.want, tt.notWant)
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if last := lines[len(lines)-1]; last != tt.want[len(tt.want)-1] {
				t.Errorf("last line %q, want the counts %q", last, tt.want[len(tt.want)-1])
			}
		})
	}
}

// checkLines checks that out has the lines want in that order (each a
// prefix of a line), and no line containing any of notWant.
func checkLines(t *testing.T, out string, want, notWant []string) {
	t.Helper()
	lines := strings.Split(out, "\n")
	i := 0
	for _, l := range lines {
		if i < len(want) && strings.HasPrefix(l, want[i]) {
			i++
		}
		for _, n := range notWant {
			if strings.Contains(l, n) {
				t.Errorf("line %q has %q", l, n)
			}
		}
	}
	if i < len(want) {
		t.Errorf("missing %q (in this order: %q) in:\n%s", want[i], want, out)
	}
}

// TestStillRunning: a quiet spell names the longest-running tests, else
// the test binaries running outside their tests, else the step compiling.
func TestStillRunning(t *testing.T) {
	const other = "github.com/steadyhq/retry/otel"
	tests := []struct {
		name  string
		lines []string // one a second
		want  string
	}{
		{
			name: "the longest-running tests",
			lines: []string{"go test -race /work/redis", ev("start", pkg, "", ""),
				ev("run", pkg, "TestSlow", ""), ev("run", pkg, "TestSlow/sub", ""),
				ev("run", pkg, "TestB", ""), ev("run", pkg, "TestC", ""), ev("run", pkg, "TestD", "")},
			want: "    running: retry/redis TestSlow (5s), retry/redis TestB (3s), retry/redis TestC (2s) and 1 more\n",
		},
		{
			name: "a test binary in TestMain",
			lines: []string{"go test -race /work/redis", ev("start", pkg, "", ""),
				ev("start", other, "", ""), ev("run", other, "TestA", ""), ev("pass", other, "TestA", "")},
			want: "    running outside its tests (TestMain, set-up): retry/redis (4s), retry/otel (3s)\n",
		},
		{
			name: "compiling",
			lines: []string{"go test -race /work/redis", ev("start", other, "", ""),
				ev("output", other, "", "ok  \t"+other+"\t0.01s\n"), ev("pass", other, "", "")},
			want: "    compiling: 4s into go test -race /work/redis\n",
		},
		{
			name:  "nothing announced",
			lines: []string{"something else"},
			want:  "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			s := newSummary(&out, false)
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			s.now = func() time.Time { return now }
			for _, l := range tt.lines {
				s.line(l)
				now = now.Add(time.Second)
			}
			out.Reset()
			s.stillRunning()
			if out.String() != tt.want {
				t.Errorf("got %q, want %q", out.String(), tt.want)
			}
		})
	}
}

// TestRealRun reads what go test -json prints for a small module with a
// pass, a failure, skips, subtests and a package that does not build.
func TestRealRun(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/m\n\ngo 1.25\n",
		"a/a_test.go": `package a

import "testing"

func TestPass(t *testing.T) {}
func TestFail(t *testing.T) { t.Log("about to fail"); t.Error("boom") }
func TestSkip(t *testing.T) { t.Skip("needs a database") }
func TestSub(t *testing.T) {
	t.Run("ok", func(t *testing.T) {})
	t.Run("skipped", func(t *testing.T) { t.Skipf("needs %s", "a database") })
}
`,
		"b/b_test.go": "package b\n\nfunc broken( {}\n",
		"c/c.go":      "package c\n",
		"d/d_test.go": "package d\n\nimport \"testing\"\n\nfunc BenchmarkD(b *testing.B) {}\n",
	}
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "test", "-count=1", "-json", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local")
	in, _ := cmd.CombinedOutput() // go test fails: that is the point
	var out bytes.Buffer
	status := newSummary(&out, false).run(bytes.NewReader(in), 0)
	if status != 1 {
		t.Errorf("status %d, want 1", status)
	}
	checkLines(t, out.String(), []string{
		"    a_test.go:6: about to fail",
		"    a_test.go:6: boom",
		"--- FAIL: TestFail",
		"FAIL\texample.com/m/a",
		"skipped 2: 2× needs a database (a)",
		"3 passed, 2 failed, 2 skipped", // TestPass, TestSub, TestSub/ok; TestFail and package b
	}, []string{"=== RUN", "--- SKIP", "--- PASS", "no tests to run"})
	// Packages print in the order they finish.
	if !regexp.MustCompile(`(?m)^ok  \texample\.com/m/d\t\S+s \[benchmarks only: make bench runs them\]$`).MatchString(out.String()) {
		t.Errorf("the benchmarks-only package's ok line does not say so:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "example.com/m/b failed outside its tests") {
		t.Errorf("package b's build failure is not reported:\n%s", out.String())
	}
}

// TestFilteredPass: as make test runs them, a pass of every test, then a
// pass announced with -run that matches a test of one package only: the
// packages with tests but none in that pass are said to have no test
// matching -run, not to hold benchmarks only, which only the package of
// benchmarks is said to, in the pass of every test.
func TestFilteredPass(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":      "module example.com/m\n\ngo 1.25\n",
		"a/a_test.go": "package a\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) {}\n",
		"e/e_test.go": "package e\n\nimport \"testing\"\n\nfunc TestEAllocs(t *testing.T) {}\n",
		"d/d_test.go": "package d\n\nimport \"testing\"\n\nfunc BenchmarkD(b *testing.B) {}\n",
	}
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var in bytes.Buffer
	for _, pass := range [][]string{{"./..."}, {"-run", "Allocs$", "./..."}} {
		in.WriteString("go test " + strings.Join(pass, " ") + "\n")
		cmd := exec.Command("go", append([]string{"test", "-count=1", "-json"}, pass...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go test %v: %v\n%s", pass, err, out)
		}
		in.Write(out)
	}
	var out bytes.Buffer
	if status := newSummary(&out, false).run(&in, 0); status != 0 {
		t.Errorf("status %d, want 0:\n%s", status, out.String())
	}
	_, filtered, _ := strings.Cut(out.String(), "go test -run")
	for _, want := range []struct{ in, pkg, label string }{
		{in: out.String(), pkg: "d", label: "[benchmarks only: make bench runs them]"},
		{in: filtered, pkg: "a", label: "[no test matches -run]"},
		{in: filtered, pkg: "d", label: "[no test matches -run]"},
	} {
		if !regexp.MustCompile(`(?m)^ok  \texample\.com/m/` + want.pkg + `\t\S+s ` + regexp.QuoteMeta(want.label) + `$`).MatchString(want.in) {
			t.Errorf("package %s's ok line does not end %q:\n%s", want.pkg, want.label, want.in)
		}
	}
	if strings.Contains(filtered, "benchmarks only") {
		t.Errorf("the pass with -run says a package holds benchmarks only:\n%s", filtered)
	}
	if !regexp.MustCompile(`(?m)^ok  \texample\.com/m/e\t\S+s$`).MatchString(filtered) {
		t.Errorf("package e, whose test matches, has no plain ok line:\n%s", filtered)
	}
}
