// Command release tags a release of every module of the repository, and
// serves the rest of the release work: make release, make apidiff and the
// rehearsal that make test runs (scripts/installcheck) call it.
//
//	release [-C DIR] [-major yes] [-check CMD] [-standalone test|vet|none] VERSION
//	release [-C DIR] modules          the released modules' directories, one a line
//	release [-C DIR] next             the next minor version after the newest release (v0.1.0 when none)
//	release [-C DIR] api [BASE]       the API changes since BASE (the newest release by default)
//	release [-C DIR] proxy DIR VERSION  a file-based module proxy (GOPROXY=file://DIR) of VERSION's tags
//	release [-C DIR] forget VERSION   VERSION of the project's modules out of the module cache
//
// A release refuses, with one line on standard error and exit status 2,
// before writing anything: a VERSION that is not vMAJOR.MINOR.PATCH (a
// pre-release suffix allowed), a tree with uncommitted changes, a tag that
// exists or a version not above the newest release, a major version not
// asked for with -major yes, and an API change (apidiff against the newest
// release's tag) that the version's number does not allow: an incompatible
// one outside a major version (before v1, outside a minor one), an addition
// in a patch release.
//
// Then it makes every module require each of the project's modules it
// imports at VERSION, and go.work serve VERSION of each released module from
// the checkout; writes CHANGELOG.md's section from the commits since the
// newest tag, grouped by module; tidies each module against a file-based
// module proxy holding the release as its tags will; runs each module's
// tests outside the workspace against that proxy (-standalone), then the
// check command (-check, make test by default); commits, and tags vX.Y.Z
// and DIR/vX.Y.Z for each released module. It never pushes. A failure after
// the first write puts every file back. Other errors exit 1.
//
// The released modules are listed in modules.go: adding one is one line.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	// The workspace is the repository's own (go.work) wherever the tool
	// does not turn it off for a module on its own.
	os.Unsetenv("GOWORK")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// cli runs the command line args and returns the exit status.
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("C", ".", "the repository's `directory`")
	major := fs.String("major", "", "yes: a new major version is asked for")
	check := fs.String("check", "make test", "a shell `command` run on the edited tree before the commit; empty for none")
	standalone := fs.String("standalone", "test", "what each module runs outside the workspace against the release: test, vet or none")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	err := command(ctx, fs.Args(), *dir, *major, *check, *standalone, stdout)
	var r *refusal
	switch {
	case err == nil:
		return 0
	case errors.As(err, &r):
		fmt.Fprintf(stderr, "release: %s\n", r.msg)
		return 2
	}
	fmt.Fprintf(stderr, "release: %v\n", err)
	return 1
}

func command(ctx context.Context, args []string, dir, major, check, standalone string, stdout io.Writer) error {
	load := func() (*project, error) { return loadProject(dir, releasedDirs, unreleasedDirs) }
	want := func(n int, usage string) error {
		if len(args) != n+1 {
			return refuse("usage: release %s", usage)
		}
		return nil
	}
	name := ""
	if len(args) > 0 {
		name = args[0]
	}
	switch name {
	case "modules":
		if err := want(0, "modules"); err != nil {
			return err
		}
		p, err := load()
		if err != nil {
			return err
		}
		for _, m := range p.released() {
			fmt.Fprintln(stdout, m.Dir)
		}
		return nil
	case "next":
		if err := want(0, "next"); err != nil {
			return err
		}
		tags, err := gitLines(dir, "tag", "--list")
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, nextMinor(versionTags(tags)))
		return nil
	case "api":
		if len(args) > 2 {
			return refuse("usage: release api [BASE]")
		}
		p, err := load()
		if err != nil {
			return err
		}
		base := ""
		if len(args) == 2 {
			base = args[1]
		} else {
			tags, err := gitLines(dir, "tag", "--list")
			if err != nil {
				return err
			}
			if base = newestRelease(versionTags(tags)); base == "" {
				return refuse("no release yet: no API to compare with")
			}
		}
		changes, err := apiChanges(p, base)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s to the API since %s\n", plural(len(changes), "change"), base)
		for _, c := range changes {
			kind := "incompatible"
			if c.Compatible {
				kind = "added"
			}
			fmt.Fprintf(stdout, "%-12s  %s\n", kind, c)
		}
		return nil
	case "proxy":
		if err := want(2, "proxy DIR VERSION"); err != nil {
			return err
		}
		p, err := load()
		if err != nil {
			return err
		}
		return serveTags(p, fileProxy{Dir: args[1]}, args[2])
	case "forget":
		if err := want(1, "forget VERSION"); err != nil {
			return err
		}
		if err := checkVersion(args[1]); err != nil {
			return err
		}
		p, err := load()
		if err != nil {
			return err
		}
		return forget(p, args[1])
	}
	if err := want(0, "[-C DIR] [-major yes] [-check CMD] [-standalone test|vet|none] VERSION"); err != nil {
		return err
	}
	switch major {
	case "", "yes":
	default:
		return refuse("MAJOR=%q: want yes, or leave it out", clip(major))
	}
	return release(ctx, options{
		Root: dir, Version: args[0], Major: major == "yes", Check: check, Standalone: standalone,
		Released: releasedDirs, Unreleased: unreleasedDirs, Now: time.Now, Out: stdout,
	})
}

// serveTags writes version of every released module, as its tag holds it,
// into the file proxy, and checks every module's go.sum at the root tag
// against the zips.
func serveTags(p *project, fp fileProxy, version string) error {
	if err := checkVersion(version); err != nil {
		return err
	}
	var sums []string
	for _, m := range p.released() {
		tag := m.tagFor(version)
		at, err := gitOutput(p.Root, "log", "-1", "--format=%cI", tag)
		if err != nil {
			return err
		}
		t, err := time.Parse(time.RFC3339, strings.TrimSpace(at))
		if err != nil {
			return err
		}
		s, err := fp.add(p.Root, tag, m, version, t)
		if err != nil {
			return fmt.Errorf("%s: %w", tag, err)
		}
		sums = append(sums, s...)
	}
	return checkSums(p, version, version, sums)
}
