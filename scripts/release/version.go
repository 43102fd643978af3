package main

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/mod/semver"
)

// A refusal is a reason not to release that the person asking can act on:
// it is printed as one line, with exit status 2, before anything is written.
type refusal struct{ msg string }

func (r *refusal) Error() string { return r.msg }

func refuse(format string, args ...any) error {
	return &refusal{fmt.Sprintf(format, args...)}
}

// releaseVersion matches what a release may be called: vMAJOR.MINOR.PATCH,
// with an optional pre-release suffix (v1.2.0-rc.1); semver.IsValid then
// refuses leading zeros and malformed suffixes.
var releaseVersion = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// leadingNumbers finds the three numbers a malformed version starts with
// (v1.2.3.4, 1.2.3), for the hint of its refusal.
var leadingNumbers = regexp.MustCompile(`^v?([0-9]{1,9}\.[0-9]{1,9}\.[0-9]{1,9})[^0-9]`)

// checkVersion refuses a VERSION that is not a release version.
func checkVersion(v string) error {
	if v == "" {
		return refuse("VERSION is missing: make release VERSION=vMAJOR.MINOR.PATCH, as v0.1.0")
	}
	if len(v) > 64 || !releaseVersion.MatchString(v) || !semver.IsValid(v) || semver.Canonical(v) != v {
		hint := "v0.1.0"
		if m := leadingNumbers.FindStringSubmatch(v); m != nil {
			hint = "v" + m[1]
		} else if c := semver.Canonical("v" + strings.TrimPrefix(v, "v")); c != "" && len(v) <= 64 {
			hint = c
		}
		return refuse("VERSION %q is not a release version: want vMAJOR.MINOR.PATCH, as %s", clip(v), hint)
	}
	return nil
}

// clip shortens s for a message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// versionTags returns the root module's release tags among tags (those that
// are versions themselves, not DIR/vX.Y.Z), newest first.
func versionTags(tags []string) []string {
	var out []string
	for _, t := range tags {
		if checkVersion(t) == nil {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return semver.Compare(b, a) })
	return out
}

// newestRelease returns the newest tag among versions (newest first) that
// is not a pre-release, or "".
func newestRelease(versions []string) string {
	for _, v := range versions {
		if semver.Prerelease(v) == "" {
			return v
		}
	}
	return ""
}

// nextMinor returns the version after the newest release of versions
// (newest first) that may change the API: v0.1.0 when there is none.
func nextMinor(versions []string) string {
	prev := newestRelease(versions)
	if prev == "" {
		return "v0.1.0"
	}
	major, minor, _ := parts(prev)
	return fmt.Sprintf("v%d.%d.0", major, minor+1)
}

// parts returns a valid version's numbers.
func parts(v string) (major, minor, patch int) {
	f := strings.SplitN(strings.TrimPrefix(semver.Canonical(v), "v"), ".", 3)
	major, _ = strconv.Atoi(f[0])
	minor, _ = strconv.Atoi(f[1])
	patch, _ = strconv.Atoi(strings.SplitN(f[2], "-", 2)[0])
	return
}

// A bump is how far a version moves from the previous release.
type bump int

const (
	bumpPatch bump = iota
	bumpMinor
	bumpMajor
)

func (b bump) String() string {
	return [...]string{"patch", "minor", "major"}[b]
}

// bumpOf returns how far next moves from prev ("" when there is no release
// yet, counted as v0.0.0).
func bumpOf(prev, next string) bump {
	if prev == "" {
		prev = "v0.0.0"
	}
	pM, pm, _ := parts(prev)
	nM, nm, _ := parts(next)
	switch {
	case nM != pM:
		return bumpMajor
	case nm != pm:
		return bumpMinor
	}
	return bumpPatch
}

// mayBreak reports whether a release from prev to next may change the API
// incompatibly: a new major version, or, before v1, a new minor version
// (v0.1.x to v0.2.0), as Go's semantic import versioning has it.
func mayBreak(prev, next string) bool {
	switch bumpOf(prev, next) {
	case bumpMajor:
		return true
	case bumpMinor:
		return semver.Major(next) == "v0"
	}
	return false
}

// preflight returns the refusal, if any, of releasing version in a
// repository with these tags and uncommitted paths (git status --porcelain
// lines), with or without a major release asked for; rootPath is the root
// module's path. It needs no API comparison: checkAPI does that after.
func preflight(version string, tags, dirty []string, major bool, rootPath string, released []*module) error {
	if err := checkVersion(version); err != nil {
		return err
	}
	if len(dirty) > 0 {
		return refuse("the tree has uncommitted changes (%d, the first: %s): commit or stash them first", len(dirty), strings.TrimSpace(dirty[0]))
	}
	versions := versionTags(tags)
	for _, m := range released {
		if t := m.tagFor(version); slices.Contains(tags, t) {
			if len(versions) == 0 {
				return refuse("tag %s exists: choose another version", t)
			}
			return refuse("tag %s exists: choose a version above %s", t, versions[0])
		}
	}
	if len(versions) > 0 && semver.Compare(version, versions[0]) <= 0 {
		return refuse("%s is not above the newest release, %s", version, versions[0])
	}
	prev := newestRelease(versions)
	b := bumpOf(prev, version)
	if b == bumpMajor && !major {
		from := prev
		if from == "" {
			from = "no release"
		}
		return refuse("%s is a major release (from %s): ask for it with MAJOR=yes", version, from)
	}
	if major && b != bumpMajor {
		return refuse("MAJOR=yes, but %s is a %s release from %s: leave MAJOR out", version, b, prev)
	}
	if m := semver.Major(version); m != "v0" && m != "v1" && !strings.HasSuffix(rootPath, "/"+m) {
		return refuse("%s needs module paths that end in /%s (%s/%s): move them first", version, m, rootPath, m)
	}
	return nil
}
