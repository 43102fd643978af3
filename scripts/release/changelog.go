package main

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
)

// A commit, as the changelog lists it.
type commit struct {
	Hash    string
	Subject string
	Files   []string // the paths it changed
}

// logFormat is the format of git log that parseLog reads: each commit
// starts with a record separator, then its hash, a unit separator and its
// subject; --name-only lists the paths it changed on the lines after.
const logFormat = "--format=%x1e%H%x1f%s"

// commitsSince returns the commits after the revision base up to HEAD
// (every commit when base is ""), oldest first, merges left out.
func commitsSince(root, base string) ([]commit, error) {
	args := []string{"-c", "core.quotePath=false", "log", "--reverse", "--no-merges", "--name-only", logFormat}
	if base != "" {
		args = append(args, base+"..HEAD")
	}
	out, err := gitOutput(root, args...)
	if err != nil {
		return nil, err
	}
	return parseLog(out), nil
}

// parseLog reads git log's output in logFormat with --name-only. A record
// without a hash is skipped.
func parseLog(out string) []commit {
	var commits []commit
	for rec := range strings.SplitSeq(out, "\x1e") {
		head, files, _ := strings.Cut(rec, "\n")
		hash, subject, ok := strings.Cut(head, "\x1f")
		if !ok || hash == "" {
			continue
		}
		c := commit{Hash: hash, Subject: strings.TrimSpace(subject)}
		for f := range strings.Lines(files) {
			if f = strings.TrimSpace(f); f != "" {
				c.Files = append(c.Files, f)
			}
		}
		commits = append(commits, c)
	}
	return commits
}

// The changelog's groups besides one per released module.
const (
	groupAcross = "Across modules"
	groupDocs   = "Documentation"
	groupTools  = "Tests, benchmarks and tooling"
)

// group names the part of the changelog that lists c: the released module
// whose code (not its tests) it changes, groupAcross when it changes the
// code of several, else groupDocs when it changes documentation, else
// groupTools.
func (p *project) group(c commit) string {
	var mods []string
	docs := false
	for _, f := range c.Files {
		if strings.HasSuffix(f, ".md") || strings.HasPrefix(f, "docs/") {
			docs = true
			continue
		}
		m := p.ownerDir(f)
		if m == nil || !m.Released || isTest(f) {
			continue
		}
		if !slices.Contains(mods, m.Path) {
			mods = append(mods, m.Path)
		}
	}
	switch {
	case len(mods) == 1:
		return mods[0]
	case len(mods) > 1:
		return groupAcross
	case docs:
		return groupDocs
	}
	return groupTools
}

// ownerDir returns the module whose code the file is part of, or nil for
// the repository's own files: those at the top other than the root
// module's .go, go.mod and go.sum, hidden ones (.github, .ci) and scripts/.
func (p *project) ownerDir(file string) *module {
	var best *module
	for _, m := range p.Modules {
		if m.Dir != "." && strings.HasPrefix(file, m.Dir+"/") && (best == nil || len(m.Dir) > len(best.Dir)) {
			best = m
		}
	}
	switch {
	case best != nil:
		return best
	case strings.HasPrefix(file, ".") || strings.HasPrefix(file, "scripts/"):
		return nil
	case !strings.Contains(file, "/") && !strings.HasSuffix(file, ".go") && file != "go.mod" && file != "go.sum":
		return nil
	}
	return p.rootModule()
}

// isTest reports whether a file is only for a module's tests.
func isTest(file string) bool {
	return strings.HasSuffix(file, "_test.go") || slices.Contains(strings.Split(path.Dir(file), "/"), "testdata")
}

// section renders the changelog's section for version: the API changes
// since prev, then the commits, grouped, oldest first in each group.
func (p *project) section(version, prev string, date time.Time, changes []apiChange, commits []commit) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s (%s)\n\n", version, date.UTC().Format("2006-01-02"))
	if prev == "" {
		fmt.Fprintf(&b, "The first release: every commit up to it, by the module whose code it changes.\n")
	} else {
		fmt.Fprintf(&b, "The changes since %s, by the module whose code each commit changes.\n", prev)
	}
	var breaking, added []string
	for _, c := range changes {
		if c.Compatible {
			added = append(added, c.String())
		} else {
			breaking = append(breaking, c.String())
		}
	}
	if prev != "" {
		b.WriteString("\n### API\n\n")
		if len(breaking)+len(added) == 0 {
			b.WriteString("No change to the exported API.\n")
		}
		list := func(title string, items []string) {
			if len(items) == 0 {
				return
			}
			fmt.Fprintf(&b, "%s:\n\n", title)
			for _, s := range items {
				fmt.Fprintf(&b, "- %s\n", s)
			}
		}
		list("Incompatible changes", breaking)
		if len(breaking) > 0 && len(added) > 0 {
			b.WriteString("\n")
		}
		list("Added", added)
	}
	groups := map[string][]commit{}
	for _, c := range commits {
		g := p.group(c)
		groups[g] = append(groups[g], c)
	}
	var order []string
	for _, m := range p.released() {
		order = append(order, m.Path)
	}
	order = append(order, groupAcross, groupDocs, groupTools)
	for _, g := range order {
		if len(groups[g]) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n### %s\n\n", g)
		for _, c := range groups[g] {
			fmt.Fprintf(&b, "- %s (%s)\n", c.Subject, c.Hash[:min(7, len(c.Hash))])
		}
	}
	if len(commits) == 0 {
		b.WriteString("\nNo commits.\n")
	}
	return b.String()
}

// changelogHead starts a new CHANGELOG.md.
const changelogHead = `# Changelog

The changes of each release, newest first. ` + "`make release`" + ` writes each section from the
commits since the release before it, grouped by the module whose code they change, after the API
changes that apidiff finds. Every module of the repository is released at the same version.
`

// insertSection puts section before the newest section of the changelog
// text (a new changelog when text is empty).
func insertSection(text, section string) string {
	if strings.TrimSpace(text) == "" {
		return changelogHead + "\n" + section
	}
	if i := strings.Index(text, "\n## "); i >= 0 {
		return text[:i+1] + section + "\n" + text[i+1:]
	}
	return strings.TrimRight(text, "\n") + "\n\n" + section
}
