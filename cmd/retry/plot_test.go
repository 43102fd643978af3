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

// TestOutputDir: plot -o and sim --plot write into an existing directory
// and create none: a missing one is a one-line usage error, given before
// any work, that leaves the parent as it was.
func TestOutputDir(t *testing.T) {
	cases := []struct {
		name string
		args func(dir string) []string
		code int
		want string
	}{
		{"plot, missing directory", func(d string) []string { return []string{"plot", "-o", d + "/missing/c.svg"} },
			exitUsage, `/missing": no such file or directory`},
		{"plot, missing directories", func(d string) []string { return []string{"plot", "-o", d + "/a/b/c.png"} },
			exitUsage, `/a/b": no such file or directory`},
		{"plot, a file as the directory", func(d string) []string { return []string{"plot", "-o", d + "/file/c.svg"} },
			exitUsage, `/file" is not a directory`},
		{"sim, missing directory", func(d string) []string {
			return []string{"sim", "--duration", "1s", "--plot", d + "/missing/load.svg"}
		}, exitUsage, `flag --plot = "` + "DIR" + `/missing/load.svg": directory`},
		{"plot, existing directory", func(d string) []string { return []string{"plot", "--samples", "10", "-o", d + "/c.svg"} },
			0, "wrote"},
		{"sim, existing directory", func(d string) []string { return []string{"sim", "--duration", "1s", "--plot", d + "/load.svg"} },
			0, "wrote"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			stdout, stderr, code := cli(t, "", c.args(dir)...)
			want := strings.ReplaceAll(c.want, "DIR", dir)
			if code != c.code || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, want) {
				t.Errorf("status %d (want %d), stderr %q, want one line with %q", code, c.code, stderr, want)
			}
			entries, _ := os.ReadDir(dir)
			if c.code != 0 && (stdout != "" || len(entries) != 1) {
				t.Errorf("stdout %q, %d entries in the directory: want nothing written", stdout, len(entries))
			}
			if c.code == 0 && len(entries) != 2 {
				t.Errorf("%d entries in the directory, want the image beside the file", len(entries))
			}
		})
	}
}
