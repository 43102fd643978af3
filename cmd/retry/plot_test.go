package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlotLog: a log axis draws any policy with a delay above 0, even one
// whose delays are all equal and small, and refuses on one line, with
// status 2 and no file, when every delay drawn is 0.
func TestPlotLog(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"immediate", []string{"--strategy", "immediate"}, exitUsage, "flag --log: every delay drawn is 0"},
		{"one attempt", []string{"--attempts", "1"}, exitUsage, "flag --log: every delay drawn is 0"},
		{"ratchet NONE", []string{"--preset", "ratchet", "--param", "backoff=none"}, exitUsage, "flag --log: every delay drawn is 0"},
		{"immediate, cumulative", []string{"--strategy", "immediate", "--cumulative"}, exitUsage, "flag --log: every delay drawn is 0"},
		{"constant 1ms", []string{"--strategy", "constant", "--initial", "1ms", "--jitter", "none"}, 0, "wrote"},
		{"constant 400us", []string{"--strategy", "constant", "--initial", "400us", "--jitter", "none"}, 0, "wrote"},
		{"immediate beside exponential", []string{"--strategy", "immediate", "--compare", "ojs"}, 0, "(2 curves)"},
		{"exponential", []string{"--attempts", "8"}, 0, "wrote"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "c.svg")
			stdout, stderr, code := cli(t, "", append([]string{"plot", "--log", "--samples", "20", "-o", out}, c.args...)...)
			if code != c.code || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
				t.Errorf("status %d (want %d), stdout %q, stderr %q, want one line with %q", code, c.code, stdout, stderr, c.want)
			}
			_, err := os.Stat(out)
			if wrote := err == nil; wrote != (c.code == 0) {
				t.Errorf("file written: %v, want %v", wrote, c.code == 0)
			}
		})
	}
}
