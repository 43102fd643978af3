package main

import (
	"strings"
	"testing"
	"time"
)

// testProject is the test project's layout, without a repository.
func testProject() *project {
	return &project{Modules: []*module{
		{Dir: ".", Path: "example.com/proj", Released: true},
		{Dir: "lib", Path: "example.com/proj/lib", Released: true},
		{Dir: "cmd/app", Path: "example.com/proj/cmd/app", Released: true},
		{Dir: "bench", Path: "example.com/proj/bench"},
	}}
}

func TestParseLog(t *testing.T) {
	out := "\x1eaaa111\x1fredis: a fix\n\nredis/store.go\nredis/store_test.go\n" +
		"\x1ebbb222\x1fdocs: words: with colons\n\nREADME.md\n" +
		"\x1eccc333\x1fan empty commit\n" +
		"\x1e\x1fno hash\n\nx.go\n" +
		"\x1egarbage without a separator\n"
	got := parseLog(out)
	if len(got) != 3 {
		t.Fatalf("parseLog: %d commits, want 3: %+v", len(got), got)
	}
	want := []commit{
		{Hash: "aaa111", Subject: "redis: a fix", Files: []string{"redis/store.go", "redis/store_test.go"}},
		{Hash: "bbb222", Subject: "docs: words: with colons", Files: []string{"README.md"}},
		{Hash: "ccc333", Subject: "an empty commit"},
	}
	for i := range want {
		if got[i].Hash != want[i].Hash || got[i].Subject != want[i].Subject || strings.Join(got[i].Files, ",") != strings.Join(want[i].Files, ",") {
			t.Errorf("commit %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// FuzzParseLog: any output parses without a panic, in time linear in its
// length, into commits that each have a hash.
func FuzzParseLog(f *testing.F) {
	f.Add("\x1eaaa\x1fsubject\n\nfile.go\n")
	f.Add("\x1e\x1e\x1f\n\n\n")
	f.Add(strings.Repeat("\x1e", 1000))
	f.Fuzz(func(t *testing.T, out string) {
		for _, c := range parseLog(out) {
			if c.Hash == "" || strings.ContainsAny(c.Hash, "\x1e\x1f\n") {
				t.Errorf("a commit with hash %q", c.Hash)
			}
		}
	})
}

func TestParseLogLong(t *testing.T) {
	for _, out := range []string{strings.Repeat("\x1e", 1<<16), strings.Repeat("a", 1<<16), "\x1eh\x1f" + strings.Repeat("\n", 1<<16)} {
		start := time.Now()
		parseLog(out)
		if d := time.Since(start); d > time.Second {
			t.Errorf("parseLog of 64 KiB took %v", d) // linear: about a millisecond
		}
	}
}

func TestGroup(t *testing.T) {
	p := testProject()
	cases := []struct {
		files []string
		want  string
	}{
		{files: []string{"proj.go"}, want: "example.com/proj"},
		{files: []string{"shed/shed.go", "proj_test.go"}, want: "example.com/proj"},
		{files: []string{"lib/lib.go", "lib/lib_test.go", "README.md"}, want: "example.com/proj/lib"},
		{files: []string{"cmd/app/main.go"}, want: "example.com/proj/cmd/app"},
		{files: []string{"lib/lib.go", "proj.go"}, want: groupAcross},
		{files: []string{"README.md", "docs/http.md"}, want: groupDocs},
		{files: []string{"lib/README.md", "bench/b_test.go"}, want: groupDocs},
		{files: []string{"proj_test.go", "lib/testdata/x.golden"}, want: groupTools},
		{files: []string{"bench/bench.go"}, want: groupTools},
		{files: []string{".github/workflows/test.yml", "Makefile", "scripts/release/main.go", "go.work", "LICENSE"}, want: groupTools},
		{files: []string{"go.mod"}, want: "example.com/proj"},
		{files: nil, want: groupTools},
	}
	for _, c := range cases {
		if got := p.group(commit{Hash: "h", Files: c.files}); got != c.want {
			t.Errorf("group(%v) = %q, want %q", c.files, got, c.want)
		}
	}
}

func TestSection(t *testing.T) {
	p := testProject()
	date := time.Date(2026, 3, 4, 23, 30, 0, 0, time.FixedZone("east", 3*3600))
	commits := []commit{
		{Hash: "1111111aaaa", Subject: "lib: first", Files: []string{"lib/lib.go"}},
		{Hash: "2222222bbbb", Subject: "docs: words", Files: []string{"README.md"}},
		{Hash: "3333333cccc", Subject: "proj: second", Files: []string{"proj.go"}},
		{Hash: "4444444dddd", Subject: "lib: third", Files: []string{"lib/other.go"}},
	}
	changes := []apiChange{{Module: "lib", Message: "F: removed"}, {Module: ".", Message: "G: added", Compatible: true}}
	got := p.section("v0.2.0", "v0.1.0", date, changes, commits)
	want := `## v0.2.0 (2026-03-04)

The changes since v0.1.0, by the module whose code each commit changes.

### API

Incompatible changes:

- lib: F: removed

Added:

- G: added

### example.com/proj

- proj: second (3333333)

### example.com/proj/lib

- lib: first (1111111)
- lib: third (4444444)

### Documentation

- docs: words (2222222)
`
	if got != want {
		t.Errorf("section:\n%s\nwant:\n%s", got, want)
	}
	first := p.section("v0.1.0", "", date, nil, nil)
	if !strings.Contains(first, "The first release") || strings.Contains(first, "### API") || !strings.Contains(first, "No commits.") {
		t.Errorf("the first release's section without commits:\n%s", first)
	}
	if s := p.section("v0.1.1", "v0.1.0", date, nil, commits[:1]); !strings.Contains(s, "### API\n\nNo change to the exported API.\n") {
		t.Errorf("a section without API changes:\n%s", s)
	}
}

func TestInsertSection(t *testing.T) {
	sec := "## v0.2.0 (2026-03-04)\n\nnew\n"
	cases := []struct{ in, want string }{
		{in: "", want: changelogHead + "\n" + sec},
		{in: "  \n", want: changelogHead + "\n" + sec},
		{in: "# Changelog\n\nintro\n\n## v0.1.0 (2026-01-01)\n\nold\n", want: "# Changelog\n\nintro\n\n" + sec + "\n## v0.1.0 (2026-01-01)\n\nold\n"},
		{in: "# Changelog\n\nintro\n", want: "# Changelog\n\nintro\n\n" + sec},
	}
	for _, c := range cases {
		if got := insertSection(c.in, sec); got != c.want {
			t.Errorf("insertSection(%q):\n%q\nwant\n%q", c.in, got, c.want)
		}
	}
}
