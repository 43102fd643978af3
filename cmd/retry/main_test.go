package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// cli runs the command line args in process and returns its output and
// exit status.
func cli(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb}
	code = execute(context.Background(), e, args)
	return out.String(), errb.String(), code
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestUsageErrors: a bad flag, argument or policy gives exactly one line
// on stderr, naming what was wrong, and exit status 2.
func TestUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string // in the line
	}{
		{"unknown command", []string{"bogus"}, `unknown command "bogus"`},
		{"unknown flag", []string{"schedule", "--bogus"}, "unknown flag: --bogus"},
		{"progress", []string{"--progress", "sometimes", "schedule"}, `flag --progress = "sometimes": must be auto, always or never`},
		{"attempts not a number", []string{"schedule", "--attempts", "x"}, `flag --attempts = "x": must be an integer in [1, 2147483647]`},
		{"attempts zero", []string{"schedule", "--attempts", "0"}, `flag --attempts = "0": must be an integer in [1, 2147483647]`},
		{"attempts too many", []string{"schedule", "--attempts", "99999999999"}, `flag --attempts = "99999999999": must be an integer in [1, 2147483647]`},
		{"attempts past int32", []string{"get", "--attempts", "2147483648", "http://127.0.0.1:1/"}, `flag --attempts = "2147483648": must be an integer in [1, 2147483647]`},
		{"seed negative", []string{"schedule", "--seed", "-1"}, `flag --seed = "-1": must be an integer >= 0`},
		{"samples not a number", []string{"schedule", "--samples", "abc"}, `flag --samples = "abc": must be an integer`},
		{"json not a bool", []string{"schedule", "--json=maybe"}, `flag --json = "maybe": must be true or false`},
		{"rate not a number", []string{"sim", "--rate", "abc"}, `flag --rate = "abc": must be a number`},
		{"param without =", []string{"schedule", "--preset", "ojs", "--param", "x"}, `flag --param = "x": must be name=value`},
		{"empty policy", []string{"schedule", "--policy", ""}, `flag --policy = "": must be a file, - for stdin, or inline JSON`},
		{"blank policy", []string{"run", "--policy", " ", "--", "true"}, `flag --policy = " ": must be a file, - for stdin, or inline JSON`},
		{"param duration without a unit", []string{"schedule", "--preset", "daycry", "--param", "base=3"}, `flag --param base = "3": must be a duration with a unit, such as 1.5s, 500ms or PT1.5S`},
		{"policy argument duration without a unit", []string{"plot", "-o", "-", "--format", "svg", "zizq:jitter=30"}, `flag --param jitter = "30": must be a duration with a unit`},
		{"bad duration", []string{"schedule", "--initial", "soon"}, `flag --initial = "soon": must be a duration`},
		{"coefficient below 1", []string{"schedule", "--coefficient", "0.5"}, "flag --coefficient = 0.5: must be >= 1.0"},
		{"unknown strategy", []string{"schedule", "--strategy", "fibonacci"}, `flag --strategy = "fibonacci": must be`},
		{"unknown jitter", []string{"schedule", "--jitter", "wobbly"}, `flag --jitter = "wobbly": must be`},
		{"jitter factor", []string{"schedule", "--jitter-factor", "3"}, "flag --jitter-factor = 3: must be a number in (0, 1]"},
		{"max below initial", []string{"schedule", "--initial", "10m", "--max", "1m"}, "flag --max = 1m0s: must be >= initial_interval (10m0s)"},
		{"bad pattern", []string{"schedule", "--non-retryable", "a..b"}, `flag --non-retryable = "a..b": must not have empty dot-separated parts`},
		{"bad policy field", []string{"schedule", "--policy", `{"max_attempts": -1}`}, "retry: policy: max_attempts = -1: must be an integer in [0, 2147483647]"},
		{"unknown policy field", []string{"schedule", "--policy", `{"max_retries": 3}`}, "max_retries"},
		{"broken JSON", []string{"schedule", "--policy", `{"max_attempts": 3`}, "must be a JSON object"},
		{"policy file missing", []string{"schedule", "--policy", "testdata/no-such-file.json"}, `flag --policy = "testdata/no-such-file.json": no such file or directory`},
		{"policy from stdin", []string{"schedule", "--policy", "-"}, "retry: policy:"},
		{"policy and preset", []string{"schedule", "--policy", "{}", "--preset", "ojs"}, "give one or the other"},
		{"unknown preset", []string{"schedule", "--preset", "sidekiq"}, `flag --preset = "sidekiq": must be one of daycry, ojs, ratchet, zizq`},
		{"unknown param", []string{"schedule", "--preset", "zizq", "--param", "cap=1s"}, `flag --param cap = "1s": unknown parameter; zizq takes retries, base, exponent, jitter`},
		{"bad param", []string{"schedule", "--preset", "daycry", "--param", "multiplier=0.5"}, `flag --param multiplier = "0.5": must be a number in [1, 1e6]`},
		{"param without preset", []string{"schedule", "--param", "base=1s"}, "flag --param: needs --preset"},
		{"samples", []string{"schedule", "--samples", "0"}, "flag --samples = 0: must be in [1, 100000]"},
		{"stray argument", []string{"schedule", "extra"}, `unknown command "extra"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := cli(t, "[1, 2]", c.args...)
			if code != exitUsage {
				t.Errorf("exit status %d, want %d", code, exitUsage)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
				t.Errorf("stderr is not exactly one line: %q", stderr)
			}
			if !strings.HasPrefix(stderr, "retry: ") || !strings.Contains(stderr, c.want) {
				t.Errorf("stderr %q, want a line starting with \"retry: \" containing %q", stderr, c.want)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{nil, {"--help"}, {"schedule", "--help"}} {
		stdout, stderr, code := cli(t, "", args...)
		if code != 0 || stderr != "" || !strings.Contains(stdout, "Usage:") {
			t.Errorf("%v: status %d, stderr %q, stdout %q", args, code, stderr, stdout)
		}
	}
	// Preset parameters say what a duration is.
	for _, cmd := range []string{"schedule", "plot", "run", "get"} {
		stdout, _, _ := cli(t, "", cmd, "--help")
		if !strings.Contains(strings.Join(strings.Fields(stdout), " "), "a duration takes a unit, as 1.5s, 500ms, 2m or PT1.5S") {
			t.Errorf("%s --help does not say the unit of a preset's durations", cmd)
		}
	}
}
