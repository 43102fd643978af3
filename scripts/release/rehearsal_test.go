//go:build unix

package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The rehearsal that make test runs (scripts/installcheck/run.sh) leaves
// nothing behind when it fails or is stopped: its temporary directory goes,
// the rehearsal's version leaves the module cache, and the repository's
// files and tags are as they were. The full rehearsal runs in make test
// itself; these stop it early.

// rehearsal starts the rehearsal with its own TMPDIR and PATH, in a
// process group of its own, and returns it with its combined output.
func rehearsal(t *testing.T, tmpdir, path string) (*exec.Cmd, io.Reader) {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join("..", "installcheck", "run.sh"))
	cmd.Env = append(os.Environ(), "TMPDIR="+tmpdir, "PATH="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { pw.CloseWithError(cmd.Wait()) }()
	return cmd, pr
}

// repoState is what the rehearsal must not change in the repository.
func repoState(t *testing.T) string {
	t.Helper()
	root := filepath.Join("..", "..")
	return git(t, root, "status", "--porcelain", "--untracked-files=all") + "\n" + git(t, root, "tag", "--list") + "\n" + git(t, root, "rev-parse", "HEAD")
}

// empty fails the test unless dir has nothing in it.
func empty(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("left behind in TMPDIR: %s", e.Name())
	}
}

// TestRehearsalFailureLeavesNothing: a rehearsal whose clone fails exits
// non-zero and leaves its TMPDIR empty.
func TestRehearsalFailureLeavesNothing(t *testing.T) {
	realGit, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	fake := "#!/bin/sh\ncase \"$1\" in clone) echo 'git clone: refused by the test' >&2; exit 1;; esac\nexec " + realGit + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	before := repoState(t)
	tmpdir := t.TempDir()
	_, out := rehearsal(t, tmpdir, bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	text, err := io.ReadAll(out)
	if err == nil || !strings.Contains(string(text), "refused by the test") {
		t.Errorf("the rehearsal: %v\n%s", err, text)
	}
	empty(t, tmpdir)
	if after := repoState(t); after != before {
		t.Errorf("the repository changed:\n%s\n%s", before, after)
	}
}

// TestRehearsalStoppedLeavesNothing: a rehearsal stopped (SIGTERM to its
// process group, as a terminal's ^C reaches it) once its release has begun
// to fetch the rehearsal's version into the module cache (as it tidies the
// modules against its module proxy) leaves its TMPDIR empty and that
// version out of the module cache.
func TestRehearsalStoppedLeavesNothing(t *testing.T) {
	before := repoState(t)
	tmpdir := t.TempDir()
	cmd, out := rehearsal(t, tmpdir, os.Getenv("PATH"))
	versionLine := regexp.MustCompile(`make release VERSION=(\S+),`)
	var version, seen strings.Builder
	sc := bufio.NewScanner(out)
	stopped := false
	deadline := time.AfterFunc(5*time.Minute, func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	defer deadline.Stop()
	for sc.Scan() {
		line := sc.Text()
		seen.WriteString(line + "\n")
		if m := versionLine.FindStringSubmatch(line); m != nil {
			version.WriteString(m[1])
		}
		if !stopped && strings.Contains(line, "go: downloading github.com/steadyhq/retry") {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			stopped = true
		}
	}
	io.Copy(io.Discard, out)
	if !stopped || version.Len() == 0 {
		t.Fatalf("the rehearsal ended before its release fetched the version:\n%s", seen.String())
	}
	if strings.Contains(seen.String(), "installcheck: ok") {
		t.Errorf("the rehearsal went on after SIGTERM:\n%s", seen.String())
	}
	empty(t, tmpdir)
	var left []string
	cache := goEnv("GOMODCACHE")
	for _, dir := range []string{filepath.Join(cache, "github.com", "steadyhq"), filepath.Join(cache, "cache", "download", "github.com", "steadyhq")} {
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && strings.Contains(d.Name(), version.String()) {
				left = append(left, p)
			}
			return nil
		})
	}
	if len(left) > 0 {
		t.Errorf("the module cache keeps %s: %v", version.String(), left)
	}
	if after := repoState(t); after != before {
		t.Errorf("the repository changed:\n%s\n%s", before, after)
	}
}
