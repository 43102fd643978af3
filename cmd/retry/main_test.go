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
	if want, same := matchFile(t, path, got); !same {
		t.Errorf("output differs from %s:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// matchFile returns the file at path and whether got is the same; with
// -update it writes got there instead, and reports it the same.
func matchFile(t *testing.T, path string, got []byte) (want []byte, same bool) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return got, true
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	return want, bytes.Equal(got, want)
}

// TestUsageErrors: a bad flag, argument or policy gives exactly one line
// on stderr, naming what was wrong, and exit status 2.
func TestUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string // in the line
	}{
		{name: "unknown command", args: []string{"bogus"}, want: `unknown command "bogus"`},
		{name: "unknown flag", args: []string{"schedule", "--bogus"}, want: "unknown flag: --bogus"},
		{name: "progress", args: []string{"--progress", "sometimes", "schedule"}, want: `flag --progress = "sometimes": must be auto, always or never`},
		{name: "attempts not a number", args: []string{"schedule", "--attempts", "x"}, want: `flag --attempts = "x": must be an integer in [0, 2147483647] (0 and 1 both mean one attempt)`},
		{name: "attempts too many", args: []string{"schedule", "--attempts", "99999999999"}, want: `flag --attempts = "99999999999": must be an integer in [0, 2147483647] (0 and 1 both mean one attempt)`},
		{name: "attempts past int32", args: []string{"get", "--attempts", "2147483648", "http://127.0.0.1:1/"}, want: `flag --attempts = "2147483648": must be an integer in [0, 2147483647] (0 and 1 both mean one attempt)`},
		{name: "seed negative", args: []string{"schedule", "--seed", "-1"}, want: `flag --seed = "-1": must be an integer >= 0`},
		{name: "samples not a number", args: []string{"schedule", "--samples", "abc"}, want: `flag --samples = "abc": must be an integer`},
		{name: "json not a bool", args: []string{"schedule", "--json=maybe"}, want: `flag --json = "maybe": must be true or false`},
		{name: "rate not a number", args: []string{"sim", "--rate", "abc"}, want: `flag --rate = "abc": must be a number`},
		{name: "param without =", args: []string{"schedule", "--preset", "ojs", "--param", "x"}, want: `flag --param = "x": must be name=value`},
		{name: "empty policy", args: []string{"schedule", "--policy", ""}, want: `flag --policy = "": must be a file, - for stdin, or inline JSON`},
		{name: "blank policy", args: []string{"run", "--policy", " ", "--", "true"}, want: `flag --policy = " ": must be a file, - for stdin, or inline JSON`},
		{name: "param duration without a unit", args: []string{"schedule", "--preset", "daycry", "--param", "base=3"}, want: `flag --param base = "3": must be a duration with a unit, such as 1.5s, 500ms or PT1.5S`},
		{name: "policy argument duration without a unit", args: []string{"plot", "-o", "-", "--format", "svg", "zizq:jitter=30"}, want: `flag --param jitter = "30": must be a duration with a unit`},
		{name: "bad duration", args: []string{"schedule", "--initial", "soon"}, want: `flag --initial = "soon": must be a duration`},
		{name: "initial negative", args: []string{"schedule", "--initial", "-1s"}, want: `flag --initial = "-1s": must be > 0 (use --strategy immediate for retries without delay)`},
		{name: "initial negative ISO", args: []string{"schedule", "--initial=-PT1S"}, want: `flag --initial = "-PT1S": must be > 0`},
		{name: "initial zero", args: []string{"schedule", "--initial", "0"}, want: `flag --initial = "0": must be > 0`},
		{name: "max negative", args: []string{"schedule", "--max", "-1s"}, want: `flag --max = "-1s": must be > 0`},
		{name: "max zero", args: []string{"schedule", "--max", "0s"}, want: `flag --max = "0s": must be > 0`},
		{name: "offset negative", args: []string{"run", "--offset", "-5ms", "--", "true"}, want: `flag --offset = "-5ms": must be >= 0`},
		{name: "attempts negative", args: []string{"schedule", "--attempts", "-1"}, want: `flag --attempts = "-1": must be an integer in [0, 2147483647] (0 and 1 both mean one attempt)`},
		{name: "coefficient below 1", args: []string{"schedule", "--coefficient", "0.5"}, want: "flag --coefficient = 0.5: must be >= 1.0"},
		{name: "unknown strategy", args: []string{"schedule", "--strategy", "fibonacci"}, want: `flag --strategy = "fibonacci": must be`},
		{name: "unknown jitter", args: []string{"schedule", "--jitter", "wobbly"}, want: `flag --jitter = "wobbly": must be`},
		{name: "jitter factor", args: []string{"schedule", "--jitter-factor", "3"}, want: "flag --jitter-factor = 3: must be a number in (0, 1]"},
		{name: "max below initial", args: []string{"schedule", "--initial", "10m", "--max", "1m"}, want: "flag --max = 1m0s: must be >= initial_interval (10m0s)"},
		{name: "bad pattern", args: []string{"schedule", "--non-retryable", "a..b"}, want: `flag --non-retryable = "a..b": must not have empty dot-separated parts`},
		{name: "bad policy field", args: []string{"schedule", "--policy", `{"max_attempts": -1}`}, want: "retry: policy: max_attempts = -1: must be an integer in [0, 2147483647]"},
		{name: "unknown policy field", args: []string{"schedule", "--policy", `{"max_retries": 3}`}, want: "max_retries"},
		{name: "broken JSON", args: []string{"schedule", "--policy", `{"max_attempts": 3`}, want: "must be well-formed JSON: the input ends early"},
		{name: "trailing comma", args: []string{"schedule", "--policy", `{"max_attempts": 3,}`}, want: "must be well-formed JSON: a comma before '}' at line 1, column 19 (JSON allows no trailing comma)"},
		{name: "policy file missing", args: []string{"schedule", "--policy", "testdata/no-such-file.json"}, want: `flag --policy = "testdata/no-such-file.json": no such file or directory`},
		{name: "policy from stdin", args: []string{"schedule", "--policy", "-"}, want: "retry: policy:"},
		{name: "policy and preset", args: []string{"schedule", "--policy", "{}", "--preset", "ojs"}, want: "give one or the other"},
		{name: "unknown preset", args: []string{"schedule", "--preset", "sidekiq"}, want: `flag --preset = "sidekiq": must be one of daycry, ojs, ratchet, zizq`},
		{name: "unknown param", args: []string{"schedule", "--preset", "zizq", "--param", "cap=1s"}, want: `flag --param cap = "1s": unknown parameter; zizq takes retries, base, exponent, jitter`},
		{name: "bad param", args: []string{"schedule", "--preset", "daycry", "--param", "multiplier=0.5"}, want: `flag --param multiplier = "0.5": must be a number in [1, 1e6]`},
		{name: "param without preset", args: []string{"schedule", "--param", "base=1s"}, want: "flag --param: needs --preset"},
		{name: "samples", args: []string{"schedule", "--samples", "0"}, want: "flag --samples = 0: must be in [1, 100000]"},
		{name: "stray argument", args: []string{"schedule", "extra"}, want: `retry: schedule: argument = "extra": must be none; schedule takes only flags (see retry schedule --help)`},
		{name: "stray argument to sim", args: []string{"sim", "--rate", "5", "extra"}, want: `retry: sim: argument = "extra": must be none`},
		{name: "stray argument to demo", args: []string{"demo", "now"}, want: `retry: demo: argument = "now": must be none`},
		{name: "demo page kept without an address", args: []string{"demo", "--debug-wait"}, want: "retry: flag --debug-wait: needs --debug-addr"},
		{name: "param duration negative", args: []string{"schedule", "--preset", "ratchet", "--param", "base=-5s"}, want: `retry: flag --param base = "-5s": must be > 0`},
		{name: "param duration negative ISO", args: []string{"schedule", "--preset", "daycry", "--param", "max=-PT5M"}, want: `flag --param max = "-PT5M": must be > 0`},
		{name: "param duration zero", args: []string{"schedule", "--preset", "ratchet", "--param", "base=0"}, want: `flag --param base = "0": must be > 0`},
		{name: "param duration negative, 0 allowed", args: []string{"schedule", "--preset", "zizq", "--param", "jitter=-1s"}, want: `flag --param jitter = "-1s": must be >= 0`},
		{name: "param negative without a unit", args: []string{"schedule", "--preset", "zizq", "--param", "jitter=-3"}, want: `flag --param jitter = "-3": must be a duration with a unit`},
		{name: "param word, upper case as in the help", args: []string{"schedule", "--preset", "ratchet", "--param", "backoff=WAT"}, want: `retry: flag --param backoff = "WAT": must be NONE, FIXED or EXPONENTIAL (in any case)`},
		{name: "param word, lower case as in the help", args: []string{"schedule", "--preset", "daycry", "--param", "strategy=x"}, want: `flag --param strategy = "x": must be none, fixed or exponential (in any case)`},
		{name: "inline policy, an array", args: []string{"schedule", "--policy", "[1,2]"}, want: `[1,2]: must be a JSON object`},
		{name: "inline policy, a number", args: []string{"schedule", "--policy", "3"}, want: `3: must be a JSON object`},
		{name: "inline policy, an array cut short", args: []string{"schedule", "--policy", "[1,2"}, want: `[1,2`},
		// A POLICY argument of plot is not --policy: its error names the
		// argument, and no flag.
		{name: "plot, a POLICY argument neither preset nor file", args: []string{"plot", "nosuch"},
			want: `retry: policy "nosuch": not a preset (daycry, ojs, ratchet, zizq), and not a readable file: no such file or directory` + "\n"},
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
	// A preset's words are listed in the help as its errors list them.
	stdout, _, _ := cli(t, "", "schedule", "--help")
	for _, w := range []string{"NONE, FIXED or EXPONENTIAL", "none, fixed or exponential", "retryBackoffJitter: true or false"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("schedule --help lacks %q", w)
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
