package main

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstallFromClone: `go install ./cmd/retry`, run in a clone's root,
// puts a working retry in GOBIN and leaves no binary in the clone, where
// `go build ./cmd/retry` would leave one untracked.
func TestInstallFromClone(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	// The binaries a build would leave in the clone, and whether each
	// was there before.
	leftovers := map[string]bool{}
	for _, dir := range []string{root, filepath.Join(root, "cmd", "retry")} {
		for _, name := range []string{"retry", "retry.exe"} {
			p := filepath.Join(dir, name)
			_, err := os.Stat(p)
			leftovers[p] = err == nil
		}
	}
	bin := t.TempDir()
	cmd := exec.Command(goTool, "install", "./cmd/retry")
	cmd.Dir = root
	// The clone's go.work, as for a contributor, whatever GOWORK the
	// tests run under (make release runs them with GOWORK=off).
	cmd.Env = append(os.Environ(), "GOBIN="+bin, "GOWORK=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install ./cmd/retry: %v\n%s", err, out)
	}
	for p, before := range leftovers {
		if _, err := os.Stat(p); !before && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("go install left %s in the clone", p)
		}
	}
	installed := filepath.Join(bin, "retry")
	if _, err := os.Stat(installed); err != nil {
		installed += ".exe"
	}
	out, err := exec.Command(installed, "schedule", "--attempts", "2", "--jitter", "none").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "attempt  retry") {
		t.Errorf("the installed retry: %v\n%s", err, out)
	}
}
