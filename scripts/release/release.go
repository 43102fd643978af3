package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
)

// What a release does and where.
type options struct {
	Root    string // the repository
	Version string
	Major   bool // a new major version is asked for
	// Check is a shell command run in the repository on the edited tree
	// before the commit ("" for none): make test by default.
	Check string
	// Standalone is what each module runs on its own, outside the
	// workspace, against a module proxy that holds the release: "test"
	// (go test ./...), "vet" (go vet ./..., which builds the packages and
	// type-checks their tests) or "none".
	Standalone string
	Released   []string // releasedDirs, or a test's
	Unreleased []string
	Now        func() time.Time
	Out        io.Writer // what it is doing, and the output of what it runs
}

// release makes a release as options say: nothing is written before every
// refusal has been ruled out, and a failure after puts every file back.
func release(ctx context.Context, o options) (err error) {
	if err := checkVersion(o.Version); err != nil {
		return err
	}
	if !slices.Contains([]string{"test", "vet", "none"}, o.Standalone) {
		return refuse("-standalone %q: want test, vet or none", clip(o.Standalone))
	}
	p, err := loadProject(o.Root, o.Released, o.Unreleased)
	if err != nil {
		return err
	}
	dirty, err := gitLines(o.Root, "status", "--porcelain")
	if err != nil {
		return err
	}
	tags, err := gitLines(o.Root, "tag", "--list")
	if err != nil {
		return err
	}
	if err := preflight(o.Version, tags, dirty, o.Major, p.rootModule().Path, p.released()); err != nil {
		return err
	}
	if _, err := gitOutput(o.Root, "var", "GIT_COMMITTER_IDENT"); err != nil {
		return refuse("git has no name and email to commit and tag with: set them (git config --global user.name NAME; git config --global user.email EMAIL)")
	}
	say := func(format string, args ...any) {
		fmt.Fprintf(o.Out, "release %s: %s\n", o.Version, fmt.Sprintf(format, args...))
	}
	versions := versionTags(tags)
	prevTag, prev := "", newestRelease(versions)
	if len(versions) > 0 {
		prevTag = versions[0]
	}
	var changes []apiChange
	if prev == "" {
		say("the first release: no API to compare with")
	} else {
		say("comparing the API of the released modules with %s's (apidiff)", prev)
		if changes, err = apiChanges(p, prev); err != nil {
			return err
		}
		if err := checkAPI(prev, o.Version, changes); err != nil {
			return err
		}
	}
	commits, err := commitsSince(o.Root, prevTag)
	if err != nil {
		return err
	}

	// What the module cache holds of this version (a failed attempt's, say)
	// is not the release: the go command would take it in place of the
	// proxy's zips.
	if err := forget(p, o.Version); err != nil {
		return err
	}

	// From here on files change; a failure puts them back.
	saved, err := save(p)
	if err != nil {
		return err
	}
	proxyDir, err := os.MkdirTemp("", "release-proxy-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(proxyDir)
	defer func() {
		if ferr := forget(p, o.Version); ferr != nil && err == nil {
			err = ferr
		}
	}()
	committed := false
	defer func() {
		if err != nil && !committed {
			if rerr := restore(p.Root, saved); rerr != nil {
				err = fmt.Errorf("%w; and putting the files back failed: %v", err, rerr)
			} else {
				err = fmt.Errorf("%w (nothing committed or tagged; the files are as they were)", err)
			}
		}
	}()
	fp := fileProxy{Dir: proxyDir}
	if err := setRequirements(ctx, p, o.Version); err != nil {
		return err
	}
	changelog := filepath.Join(p.Root, "CHANGELOG.md")
	text, err := os.ReadFile(changelog)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	section := p.section(o.Version, prevTag, o.Now(), changes, commits)
	if err := os.WriteFile(changelog, []byte(insertSection(string(text), section)), 0o644); err != nil {
		return err
	}
	say("CHANGELOG.md: a section of %s since %s", plural(len(commits), "commit"), cmp(prevTag, "the first commit"))

	// Each module that requires the project's modules is tidied against
	// the release, whose modules the file proxy serves as their tags will
	// hold them, each zipped after the modules it imports.
	env := fp.env(p.rootModule().Path)
	var sums []string
	for _, m := range p.Modules {
		if m.Dir != "." {
			if err := run(ctx, o.Out, filepath.Join(p.Root, m.Dir), env, "go", "mod", "tidy"); err != nil {
				return fmt.Errorf("go mod tidy in %s: %w", m.Dir, err)
			}
		}
		if !m.Released {
			continue
		}
		if err := gitRun(p.Root, "add", "-A"); err != nil {
			return err
		}
		tree, err := gitOutput(p.Root, "write-tree")
		if err != nil {
			return err
		}
		s, err := fp.add(p.Root, strings.TrimSpace(tree), m, o.Version, o.Now())
		if err != nil {
			return fmt.Errorf("the zip of %s: %w", m.Dir, err)
		}
		sums = append(sums, s...)
	}
	if err := gitRun(p.Root, "add", "-A"); err != nil {
		return err
	}
	edited, err := gitLines(p.Root, "status", "--porcelain", "--untracked-files=all")
	if err != nil {
		return err
	}

	if o.Standalone != "none" {
		for _, m := range p.Modules {
			say("go %s ./... in %s, outside the workspace, against the release", o.Standalone, m.Dir)
			args := []string{o.Standalone}
			if o.Standalone == "test" {
				args = append(args, "-count=1")
			}
			if err := run(ctx, o.Out, filepath.Join(p.Root, m.Dir), env, "go", append(args, "./...")...); err != nil {
				return fmt.Errorf("go %s in %s outside the workspace: %w", o.Standalone, m.Dir, err)
			}
		}
	}
	if o.Check != "" {
		say("%s", o.Check)
		if err := run(ctx, o.Out, p.Root, os.Environ(), "bash", "-c", o.Check); err != nil {
			return fmt.Errorf("%s: %w", o.Check, err)
		}
	}
	after, err := gitLines(p.Root, "status", "--porcelain", "--untracked-files=all")
	if err != nil {
		return err
	}
	if !slices.Equal(after, edited) {
		return fmt.Errorf("the checks changed the tree (git status: %s)", strings.Join(after, "; "))
	}

	msg := fmt.Sprintf("release %s: every module requires the project's modules it imports at %s; CHANGELOG.md's section for it", o.Version, o.Version)
	if err := gitRun(p.Root, "commit", "-q", "-m", msg); err != nil {
		return err
	}
	committed = true
	var made []string
	for _, m := range p.released() {
		tag := m.tagFor(o.Version)
		if err := gitRun(p.Root, "tag", "-a", "-m", m.Path+" "+o.Version, tag, "HEAD"); err != nil {
			for _, t := range made {
				gitRun(p.Root, "tag", "-d", t)
			}
			gitRun(p.Root, "reset", "-q", "--hard", "HEAD~1")
			return fmt.Errorf("%w (the release commit and its tags are undone)", err)
		}
		made = append(made, tag)
	}
	// The tags hold what the modules were tidied against.
	if err := checkSums(p, "HEAD", o.Version, sums); err != nil {
		return err
	}
	head, _ := gitOutput(p.Root, "rev-parse", "--short", "HEAD")
	say("committed %s and tagged %s; nothing is pushed. To publish: git push origin HEAD %s",
		strings.TrimSpace(head), strings.Join(made, " "), strings.Join(made, " "))
	return nil
}

// plural says n things.
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// cmp returns s, or def when s is empty.
func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// setRequirements makes every module require each project module it
// imports or requires already (indirect requirements too) at version, and
// go.work serve that version of each released module from the checkout.
func setRequirements(ctx context.Context, p *project, version string) error {
	for _, m := range p.Modules {
		data, err := os.ReadFile(filepath.Join(p.Root, filepath.FromSlash(m.Dir), "go.mod"))
		if err != nil {
			return err
		}
		f, err := modfile.ParseLax("go.mod", data, nil)
		if err != nil {
			return err
		}
		paths := slices.Clone(m.Imports)
		for _, r := range f.Require {
			if p.byPath(r.Mod.Path) != nil && !slices.Contains(paths, r.Mod.Path) {
				paths = append(paths, r.Mod.Path)
			}
		}
		if len(paths) == 0 {
			continue
		}
		args := []string{"mod", "edit"}
		for _, path := range paths {
			args = append(args, "-require="+path+"@"+version)
		}
		if err := run(ctx, nil, filepath.Join(p.Root, m.Dir), os.Environ(), "go", args...); err != nil {
			return err
		}
	}
	return setWork(p, version)
}

// setWork makes go.work replace each released module at version with its
// directory, in place of the version it replaced before.
func setWork(p *project, version string) error {
	file := filepath.Join(p.Root, "go.work")
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	work, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return err
	}
	done := map[string]bool{}
	for _, r := range work.Replace {
		m := p.byPath(r.Old.Path)
		if m == nil || !m.Released {
			continue
		}
		if done[m.Path] {
			if err := work.DropReplace(r.Old.Path, r.Old.Version); err != nil {
				return err
			}
			continue
		}
		// The line's tokens: [replace] PATH [VERSION] => DIR [VERSION].
		tok := r.Syntax.Token
		i := slices.Index(tok, r.Old.Path)
		if r.Old.Version == "" {
			tok = slices.Insert(tok, i+1, version)
		} else {
			tok[i+1] = version
		}
		r.Syntax.Token = tok
		r.Old.Version = version
		done[m.Path] = true
	}
	for _, m := range p.released() {
		if !done[m.Path] {
			if err := work.AddReplace(m.Path, version, "./"+strings.TrimPrefix(m.Dir, "."), ""); err != nil {
				return err
			}
		}
	}
	work.Cleanup()
	return os.WriteFile(file, modfile.Format(work.Syntax), 0o644)
}

// A saved file: its content, or nil when it did not exist.
type saved map[string][]byte

// save reads the files a release may change: go.work, CHANGELOG.md and
// each module's go.mod and go.sum.
func save(p *project) (saved, error) {
	files := []string{"go.work", "CHANGELOG.md"}
	for _, m := range p.Modules {
		files = append(files, path.Join(m.Dir, "go.mod"), path.Join(m.Dir, "go.sum"))
	}
	s := saved{}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(p.Root, filepath.FromSlash(f)))
		if err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		if err == nil && data == nil {
			data = []byte{}
		}
		s[f] = data
	}
	return s, nil
}

// restore puts the saved files back and the index as HEAD has it.
func restore(root string, s saved) error {
	for f, data := range s {
		name := filepath.Join(root, filepath.FromSlash(f))
		var err error
		if data == nil {
			err = os.Remove(name)
			if os.IsNotExist(err) {
				err = nil
			}
		} else {
			err = os.WriteFile(name, data, 0o644)
		}
		if err != nil {
			return err
		}
	}
	return gitRun(root, "reset", "-q")
}

// run runs a command in dir with env, its output to out, or, when out is
// nil, into the error it returns. When ctx ends, the command and what it
// started are stopped.
func run(ctx context.Context, out io.Writer, dir string, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	var buf strings.Builder
	if out == nil {
		out = &buf
	}
	cmd.Stdout = out
	cmd.Stderr = out
	stopGroup(cmd)
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted: %w", context.Cause(ctx))
		}
		if buf.Len() > 0 {
			return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(buf.String()))
		}
		return err
	}
	return ctx.Err()
}
