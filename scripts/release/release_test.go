package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The test project: a root module with one package, a released library
// module that imports it, a released command that imports the library, and
// an unreleased module that imports both, tied by go.work as the
// repository's modules are. It needs nothing from outside: every command
// runs with GOPROXY=off, a module cache of its own and git's configuration
// left out.
var testFiles = map[string]string{
	"go.work": `go 1.25.0

use (
	.
	./bench
	./cmd/app
	./lib
)

// The project's modules, served from the checkout.
replace (
	example.com/proj v0.0.0 => ./
	example.com/proj/cmd/app v0.0.0 => ./cmd/app
	example.com/proj/lib v0.0.0 => ./lib
)
`,
	"LICENSE":         "the license\n",
	"go.mod":          "module example.com/proj\n\ngo 1.25.0\n",
	"proj.go":         "// Package proj is the root package.\npackage proj\n\n// A returns 1.\nfunc A() int { return 1 }\n",
	"proj_test.go":    "package proj\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) {\n\tif A() != 1 {\n\t\tt.Fatal(A())\n\t}\n}\n",
	"lib/go.mod":      "module example.com/proj/lib\n\ngo 1.25.0\n\nrequire example.com/proj v0.0.0\n",
	"lib/lib.go":      "// Package lib is a library module.\npackage lib\n\nimport \"example.com/proj\"\n\n// B returns 2.\nfunc B() int { return proj.A() + 1 }\n",
	"cmd/app/go.mod":  "module example.com/proj/cmd/app\n\ngo 1.25.0\n\nrequire example.com/proj/lib v0.0.0\n\nrequire example.com/proj v0.0.0 // indirect\n",
	"cmd/app/main.go": "// Command app prints B.\npackage main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/proj/lib\"\n)\n\nfunc main() { fmt.Println(\"app\", lib.B()) }\n",
	"bench/go.mod":    "module example.com/proj/bench\n\ngo 1.25.0\n\nrequire (\n\texample.com/proj v0.0.0\n\texample.com/proj/lib v0.0.0\n)\n",
	"bench/bench.go":  "// Package bench uses both.\npackage bench\n\nimport (\n\t\"example.com/proj\"\n\t\"example.com/proj/lib\"\n)\n\n// C returns 3.\nfunc C() int { return proj.A() + lib.B() }\n",
}

// testEnv isolates the go and git commands of a test: a module cache of
// its own, no proxy, no global git configuration, a fixed identity.
func testEnv(t *testing.T) {
	t.Setenv("GOWORK", "")
	t.Setenv("GOMODCACHE", t.TempDir())
	t.Setenv("GOPROXY", "off")
	t.Setenv("GOFLAGS", "-modcacherw")
	t.Setenv("GONOSUMDB", "")
	t.Setenv("GOTOOLCHAIN", "local")
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	for _, who := range []string{"AUTHOR", "COMMITTER"} {
		t.Setenv("GIT_"+who+"_NAME", "tester")
		t.Setenv("GIT_"+who+"_EMAIL", "tester@localhost")
	}
	saved, savedUn := releasedDirs, unreleasedDirs
	releasedDirs, unreleasedDirs = []string{".", "cmd/app", "lib"}, []string{"bench"}
	t.Cleanup(func() { releasedDirs, unreleasedDirs = saved, savedUn })
}

// newRepo writes the test project into a new repository with one commit.
func newRepo(t *testing.T) string {
	t.Helper()
	testEnv(t)
	dir := t.TempDir()
	for name, text := range testFiles {
		write(t, dir, name, text)
	}
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "proj: A and B")
	return dir
}

func write(t *testing.T, dir, name, text string) {
	t.Helper()
	file := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := gitOutput(dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// commitFiles writes files and commits them.
func commitFiles(t *testing.T, dir, msg string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		write(t, dir, name, text)
	}
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", msg)
}

// releaseCLI runs the command line as make release does, with nothing run
// outside the workspace and no check command unless args say otherwise.
func releaseCLI(t *testing.T, dir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	full := append([]string{"-C", dir, "-check", "", "-standalone", "none"}, args...)
	code = cli(context.Background(), full, &out, &errb)
	return out.String(), errb.String(), code
}

// mustRelease releases version or fails the test.
func mustRelease(t *testing.T, dir string, args ...string) string {
	t.Helper()
	stdout, stderr, code := releaseCLI(t, dir, args...)
	if code != 0 {
		t.Fatalf("release %v: status %d\nstderr: %s\nstdout: %s", args, code, stderr, stdout)
	}
	return stdout
}

// state is what a refused or failed release must leave as it was: HEAD,
// the tags, git status, the index and every file of the tree.
func state(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "HEAD %s\ntags %s\nstatus %s\nindex %s\n", git(t, dir, "rev-parse", "HEAD"),
		git(t, dir, "tag", "--list"), git(t, dir, "status", "--porcelain", "--untracked-files=all"),
		git(t, dir, "ls-files", "-s"))
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %x\n", p, sha256.Sum256(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// cached returns the module cache's entries for version.
func cached(t *testing.T, version string) []string {
	t.Helper()
	var found []string
	filepath.WalkDir(os.Getenv("GOMODCACHE"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), version) {
			found = append(found, p)
		}
		return nil
	})
	return found
}

// TestReleaseFirst: the first release sets every requirement between the
// modules and go.work's lines to the version, writes CHANGELOG.md, commits
// and tags the root and each released module (not the unreleased one),
// prints the push that would publish it, pushes nothing, and leaves the
// version out of the module cache; from its tags, a module outside the
// repository gets the library with go get and installs the command with
// go install.
func TestReleaseFirst(t *testing.T) {
	dir := newRepo(t)
	git(t, dir, "init", "-q", "--bare", filepath.Join(dir, "..", "remote.git"))
	git(t, dir, "remote", "add", "origin", filepath.Join(dir, "..", "remote.git"))
	before := git(t, dir, "rev-parse", "HEAD")
	stdout := mustRelease(t, dir, "-standalone", "vet", "v0.1.0")

	if got := git(t, dir, "tag", "--list"); got != "cmd/app/v0.1.0\nlib/v0.1.0\nv0.1.0" {
		t.Errorf("tags:\n%s\nwant cmd/app/v0.1.0, lib/v0.1.0, v0.1.0 (bench is not released)", got)
	}
	if got := git(t, dir, "rev-parse", "HEAD~1"); got != before {
		t.Errorf("HEAD~1 = %s, want the commit before the release %s", got, before)
	}
	if got := git(t, dir, "log", "-1", "--format=%s"); !strings.HasPrefix(got, "release v0.1.0: ") {
		t.Errorf("the release commit's subject: %q", got)
	}
	if got := git(t, dir, "status", "--porcelain"); got != "" {
		t.Errorf("the tree after the release: %s", got)
	}
	for _, want := range []string{"git push origin HEAD v0.1.0 lib/v0.1.0 cmd/app/v0.1.0", "nothing is pushed"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the output lacks %q:\n%s", want, stdout)
		}
	}
	if refs := git(t, filepath.Join(dir, "..", "remote.git"), "for-each-ref"); refs != "" {
		t.Errorf("the remote has refs after the release: %s", refs)
	}
	for file, wants := range map[string][]string{
		"lib/go.mod":     {"example.com/proj v0.1.0"},
		"cmd/app/go.mod": {"example.com/proj/lib v0.1.0", "example.com/proj v0.1.0 // indirect"},
		"bench/go.mod":   {"example.com/proj v0.1.0", "example.com/proj/lib v0.1.0"},
		"go.work": {"// The project's modules, served from the checkout.", "example.com/proj v0.1.0 => ./\n",
			"example.com/proj/cmd/app v0.1.0 => ./cmd/app\n", "example.com/proj/lib v0.1.0 => ./lib\n"},
		"lib/go.sum":   {"example.com/proj v0.1.0 h1:", "example.com/proj v0.1.0/go.mod h1:"},
		"bench/go.sum": {"example.com/proj/lib v0.1.0 h1:"},
		"CHANGELOG.md": {"# Changelog", "## v0.1.0 (", "The first release", "### Across modules\n\n- proj: A and B ("},
	} {
		text := read(t, dir, file)
		for _, w := range wants {
			if !strings.Contains(text, w) {
				t.Errorf("%s lacks %q:\n%s", file, w, text)
			}
		}
		if strings.Contains(text, "v0.0.0") {
			t.Errorf("%s still names v0.0.0:\n%s", file, text)
		}
	}
	if c := cached(t, "v0.1.0"); len(c) > 0 {
		t.Errorf("the module cache keeps the release: %v", c)
	}

	// The tags, served as a module proxy, to a module outside the repository.
	proxy := t.TempDir()
	if err := command(context.Background(), []string{"proxy", proxy, "v0.1.0"}, dir, "", "", "", &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOPROXY", "file://"+filepath.ToSlash(proxy))
	t.Setenv("GONOSUMDB", "example.com/proj")
	t.Setenv("GOWORK", "off")
	app := t.TempDir()
	write(t, app, "main.go", "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/proj/lib\"\n)\n\nfunc main() { fmt.Println(lib.B()) }\n")
	goCmd(t, app, "mod", "init", "example.com/user")
	goCmd(t, app, "get", "example.com/proj/lib@latest")
	if got := goCmd(t, app, "run", "."); got != "2" {
		t.Errorf("go run of a program using lib printed %q, want 2", got)
	}
	if gomod := read(t, app, "go.mod"); !strings.Contains(gomod, "example.com/proj/lib v0.1.0") || strings.Contains(gomod, "replace") {
		t.Errorf("the user's go.mod:\n%s", gomod)
	}
	bin := t.TempDir()
	t.Setenv("GOBIN", bin)
	goCmd(t, t.TempDir(), "install", "example.com/proj/cmd/app@v0.1.0")
	if out, err := exec.Command(filepath.Join(bin, "app")).Output(); err != nil || string(out) != "app 2\n" {
		t.Errorf("the installed app: %q, %v", out, err)
	}
}

func goCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestRefusals: each reason not to release gives one line on stderr and
// exit status 2, and leaves the repository, its tags, its index and every
// file as they were.
func TestRefusals(t *testing.T) {
	removeB := map[string]string{"lib/lib.go": "// Package lib is a library module.\npackage lib\n\n// D returns 4.\nfunc D() int { return 4 }\n"}
	addC := map[string]string{"lib/c.go": "package lib\n\n// C returns 3.\nfunc C() int { return 3 }\n"}
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string) // after a release of v0.1.0 when released is set
		first bool                           // release v0.1.0 first
		args  []string
		want  string
	}{
		{name: "two numbers", args: []string{"1.2"}, want: `VERSION "1.2" is not a release version: want vMAJOR.MINOR.PATCH, as v1.2.0`},
		{name: "four numbers", args: []string{"v1.2.3.4"}, want: `VERSION "v1.2.3.4" is not a release version`},
		{name: "no v", args: []string{"1.2.3"}, want: "as v1.2.3"},
		{name: "leading zero", args: []string{"v0.01.0"}, want: "not a release version"},
		{name: "build metadata", args: []string{"v0.1.0+meta"}, want: "not a release version"},
		{name: "hostile", args: []string{strings.Repeat("v", 1<<16)}, want: "not a release version"},
		{name: "missing", args: []string{""}, want: "VERSION is missing"},
		{name: "two versions", args: []string{"v0.1.0", "v0.2.0"}, want: "usage: release"},
		{name: "modified file", setup: func(t *testing.T, dir string) { write(t, dir, "proj.go", "package proj\n") },
			args: []string{"v0.1.0"}, want: "the tree has uncommitted changes (1, the first: M proj.go)"},
		{name: "untracked file", setup: func(t *testing.T, dir string) { write(t, dir, "notes.txt", "x\n") },
			args: []string{"v0.1.0"}, want: "the tree has uncommitted changes (1, the first: ?? notes.txt)"},
		{name: "staged file", setup: func(t *testing.T, dir string) {
			write(t, dir, "proj.go", "package proj\n")
			git(t, dir, "add", "proj.go")
		}, args: []string{"v0.1.0"}, want: "uncommitted changes"},
		{name: "existing tag", first: true, args: []string{"v0.1.0"}, want: "tag v0.1.0 exists: choose a version above v0.1.0"},
		{name: "a nested module's tag exists", setup: func(t *testing.T, dir string) { git(t, dir, "tag", "lib/v0.2.0") },
			args: []string{"v0.2.0"}, want: "tag lib/v0.2.0 exists: choose another version"},
		{name: "below the newest", first: true, args: []string{"v0.0.9"}, want: "v0.0.9 is not above the newest release, v0.1.0"},
		{name: "major not asked", args: []string{"v1.0.0"}, want: "v1.0.0 is a major release (from no release): ask for it with MAJOR=yes"},
		{name: "major asked for a minor", first: true, args: []string{"-major", "yes", "v0.2.0"}, want: "MAJOR=yes, but v0.2.0 is a minor release from v0.1.0"},
		{name: "major neither yes nor empty", args: []string{"-major", "true", "v1.0.0"}, want: `MAJOR="true": want yes, or leave it out`},
		{name: "v2 without /v2 paths", args: []string{"-major", "yes", "v2.0.0"}, want: "v2.0.0 needs module paths that end in /v2 (example.com/proj/v2): move them first"},
		{name: "incompatible in a patch", first: true, setup: func(t *testing.T, dir string) { commitFiles(t, dir, "lib: D for B", removeB) },
			args: []string{"v0.1.1"}, want: "v0.1.1 is a patch release, but the API changed incompatibly since v0.1.0 (lib: B: removed): that takes a new minor version, or keep the API (make apidiff lists the changes)"},
		{name: "addition in a patch", first: true, setup: func(t *testing.T, dir string) { commitFiles(t, dir, "lib: C", addC) },
			args: []string{"v0.1.1"}, want: "v0.1.1 is a patch release, but the API grew since v0.1.0 (lib: C: added): that takes a new minor version"},
		{name: "a removed package in a patch", first: true, setup: func(t *testing.T, dir string) {
			commitFiles(t, dir, "proj: sub", map[string]string{"sub/sub.go": "// Package sub is gone soon.\npackage sub\n"})
			mustRelease(t, dir, "v0.2.0")
			git(t, dir, "rm", "-q", "sub/sub.go")
			git(t, dir, "commit", "-q", "-m", "proj: no sub")
		}, args: []string{"v0.2.1"}, want: "package example.com/proj/sub: removed"},
		{name: "no git identity", setup: func(t *testing.T, dir string) {
			git(t, dir, "config", "user.useConfigOnly", "true")
			for _, v := range []string{"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"} {
				t.Setenv(v, "")
				os.Unsetenv(v)
			}
		}, args: []string{"v0.1.0"}, want: "git has no name and email to commit and tag with"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := newRepo(t)
			if c.first {
				mustRelease(t, dir, "v0.1.0")
			}
			if c.setup != nil {
				c.setup(t, dir)
			}
			before := state(t, dir)
			stdout, stderr, code := releaseCLI(t, dir, c.args...)
			if code != 2 {
				t.Errorf("status %d, want 2\nstderr: %s\nstdout: %s", code, stderr, stdout)
			}
			if n := strings.Count(stderr, "\n"); n != 1 || !strings.HasPrefix(stderr, "release: ") || !strings.Contains(stderr, c.want) {
				t.Errorf("stderr (%d lines): %q\nwant one line, release: ... %s", n, stderr, c.want)
			}
			if after := state(t, dir); after != before {
				t.Errorf("the repository changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// TestIncompatibleWhereAllowed: an incompatible change is released in a
// new minor version before v1, and CHANGELOG.md lists it; from v1 on it
// takes a new major version, asked for.
func TestIncompatibleWhereAllowed(t *testing.T) {
	dir := newRepo(t)
	mustRelease(t, dir, "v0.1.0")
	commitFiles(t, dir, "lib: D in place of B", map[string]string{
		"lib/lib.go":      "// Package lib is a library module.\npackage lib\n\n// D returns 4.\nfunc D() int { return 4 }\n",
		"cmd/app/main.go": "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/proj/lib\"\n)\n\nfunc main() { fmt.Println(\"app\", lib.D()) }\n",
		"bench/bench.go":  "// Package bench uses both.\npackage bench\n\nimport (\n\t\"example.com/proj\"\n\t\"example.com/proj/lib\"\n)\n\n// C returns 5.\nfunc C() int { return proj.A() + lib.D() }\n",
	})
	mustRelease(t, dir, "v0.2.0")
	changelog := read(t, dir, "CHANGELOG.md")
	for _, want := range []string{
		"## v0.2.0 (", "The changes since v0.1.0", "### API\n\nIncompatible changes:\n\n- lib: B: removed\n\nAdded:\n\n- lib: D: added\n",
		"### Across modules\n\n- lib: D in place of B (",
	} {
		if !strings.Contains(changelog, want) {
			t.Errorf("CHANGELOG.md lacks %q:\n%s", want, changelog)
		}
	}
	if i, j := strings.Index(changelog, "## v0.2.0"), strings.Index(changelog, "## v0.1.0"); i < 0 || j < i {
		t.Errorf("the sections are not newest first:\n%s", changelog)
	}

	mustRelease(t, dir, "-major", "yes", "v1.0.0")
	commitFiles(t, dir, "proj: A takes an argument", map[string]string{
		"proj.go":        "// Package proj is the root package.\npackage proj\n\n// A returns n.\nfunc A(n int) int { return n }\n",
		"proj_test.go":   "package proj\n",
		"bench/bench.go": "// Package bench uses both.\npackage bench\n\nimport (\n\t\"example.com/proj\"\n\t\"example.com/proj/lib\"\n)\n\n// C returns 5.\nfunc C() int { return proj.A(1) + lib.D() }\n",
	})
	_, stderr, code := releaseCLI(t, dir, "v1.1.0")
	if code != 2 || !strings.Contains(stderr, "v1.1.0 is a minor release, but the API changed incompatibly since v1.0.0 (A: changed from func() int to func(int) int): that takes a new major version, or keep the API (make apidiff lists the changes)") {
		t.Errorf("v1.1.0 with an incompatible change: status %d, %q", code, stderr)
	}
}

// TestFailedCheckPutsBack: when the checks fail after the files were
// written, every file, the index and HEAD are as they were, no tag is made,
// and the version is not left in the module cache.
func TestFailedCheckPutsBack(t *testing.T) {
	cases := []struct {
		name, check string
		want        string
	}{
		{name: "check fails", check: "echo the check ran; exit 3", want: "exit status 3 (nothing committed or tagged; the files are as they were)"},
		{name: "check changes the tree", check: "touch stray.txt", want: "the checks changed the tree (git status: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := newRepo(t)
			before := state(t, dir)
			stdout, stderr, code := releaseCLI(t, dir, "-check", c.check, "v0.1.0")
			if code != 1 || !strings.Contains(stderr, c.want) {
				t.Errorf("status %d, stderr %q; want 1 and %q\nstdout: %s", code, stderr, c.want, stdout)
			}
			os.Remove(filepath.Join(dir, "stray.txt"))
			if after := state(t, dir); after != before {
				t.Errorf("the repository changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if cache := cached(t, "v0.1.0"); len(cache) > 0 {
				t.Errorf("the module cache keeps the failed release: %v", cache)
			}
		})
	}
}

// TestStandaloneFailurePutsBack: each module is vetted (or tested) on its
// own against the release, outside the workspace, and a failure there puts
// every file back.
func TestStandaloneFailurePutsBack(t *testing.T) {
	dir := newRepo(t)
	commitFiles(t, dir, "bench: a Printf that vet refuses", map[string]string{
		"bench/print.go": "package bench\n\nimport \"fmt\"\n\n// P prints.\nfunc P() { fmt.Printf(\"%d\\n\", \"x\") }\n",
	})
	before := state(t, dir)
	stdout, stderr, code := releaseCLI(t, dir, "-standalone", "vet", "v0.1.0")
	if code != 1 || !strings.Contains(stderr, "go vet in bench outside the workspace") {
		t.Errorf("status %d, stderr %q; want 1 and go vet failing in bench", code, stderr)
	}
	if !strings.Contains(stdout, "go vet ./... in lib, outside the workspace, against the release") {
		t.Errorf("the output does not show lib vetted on its own:\n%s", stdout)
	}
	if after := state(t, dir); after != before {
		t.Errorf("the repository changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestModulesListed: a module of go.work in neither list, a listed module
// not in go.work, and a released module importing an unreleased one are
// errors that say what to do.
func TestModulesListed(t *testing.T) {
	cases := []struct {
		name                 string
		released, unreleased []string
		files                map[string]string
		want                 string
	}{
		{name: "in neither list", released: []string{".", "cmd/app", "lib"},
			want: "module bench of go.work is neither released nor unreleased: add it to one of the lists in scripts/release/modules.go"},
		{name: "not in go.work", released: []string{".", "cmd/app", "lib", "extra"}, unreleased: []string{"bench"},
			want: "module extra of scripts/release/modules.go is not in go.work's use list"},
		{name: "released imports unreleased", released: []string{".", "cmd/app", "lib"}, unreleased: []string{"bench"},
			files: map[string]string{"lib/uses.go": "package lib\n\nimport _ \"example.com/proj/bench\"\n"},
			want:  "released module lib imports bench, which is not released"},
		{name: "the root not released", released: []string{"cmd/app", "lib"}, unreleased: []string{".", "bench"},
			want: "the root module must be in go.work and released"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := newRepo(t)
			for name, text := range c.files {
				write(t, dir, name, text)
			}
			_, err := loadProject(dir, c.released, c.unreleased)
			if err == nil || err.Error() != c.want {
				t.Errorf("loadProject: %v, want %q", err, c.want)
			}
		})
	}
	dir := newRepo(t)
	p, err := loadProject(dir, releasedDirs, unreleasedDirs)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range p.Modules {
		got = append(got, fmt.Sprintf("%s %v %v", m.Dir, m.Released, m.Imports))
	}
	want := []string{". true []", "lib true [example.com/proj]", "cmd/app true [example.com/proj/lib]", "bench false [example.com/proj example.com/proj/lib]"}
	if !slices.Equal(got, want) {
		t.Errorf("modules in order:\n%q\nwant\n%q", got, want)
	}
}

// TestTheRepository: this repository's go.work lists exactly the released
// and unreleased modules of modules.go.
func TestTheRepository(t *testing.T) {
	p, err := loadProject(filepath.Join("..", ".."), releasedDirs, unreleasedDirs)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(p.released()); got != len(releasedDirs) {
		t.Errorf("%d released modules, want %d", got, len(releasedDirs))
	}
}

// TestSecondAttempt: a release that failed after its modules were fetched
// into the module cache, then made again at the same version from changed
// code, is built and vetted from the new code. The go command keys its
// index of a module cache directory by the directory alone, so without
// care the second attempt would read the first one's list of files.
func TestSecondAttempt(t *testing.T) {
	dir := newRepo(t)
	if _, stderr, code := releaseCLI(t, dir, "-standalone", "vet", "-check", "exit 3", "v0.1.0"); code != 1 {
		t.Fatalf("the first attempt: status %d, %s", code, stderr)
	}
	commitFiles(t, dir, "proj: E, in a file of its own, which lib calls", map[string]string{
		"e.go":       "package proj\n\n// E returns 5.\nfunc E() int { return 5 }\n",
		"lib/lib.go": "// Package lib is a library module.\npackage lib\n\nimport \"example.com/proj\"\n\n// B returns 2.\nfunc B() int { return proj.A() + 1 }\n\n// F returns 5.\nfunc F() int { return proj.E() }\n",
	})
	stdout, stderr, code := releaseCLI(t, dir, "-standalone", "vet", "v0.1.0")
	if code != 0 {
		t.Errorf("the second attempt: status %d, %s\n%s", code, stderr, stdout)
	}
}
