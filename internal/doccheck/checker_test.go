package doccheck_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The checks themselves, on documents made to fail them.

func TestSlug(t *testing.T) {
	tests := []struct{ heading, want string }{
		{heading: "Try it", want: "try-it"},
		{heading: "Outages: budget, breaker, rate limit, adaptive defences", want: "outages-budget-breaker-rate-limit-adaptive-defences"},
		{heading: "Both ends of the wire: servers that shed load, retries at one layer", want: "both-ends-of-the-wire-servers-that-shed-load-retries-at-one-layer"},
		{heading: "The `retry` command", want: "the-retry-command"},
		{heading: "Fleet-wide, on Redis", want: "fleet-wide-on-redis"},
		{heading: "snake_case and Ünïcode", want: "snake_case-and-ünïcode"},
	}
	for _, tt := range tests {
		if got := slug(tt.heading); got != tt.want {
			t.Errorf("slug(%q) = %q, want %q", tt.heading, got, tt.want)
		}
	}
}

func TestAnchors(t *testing.T) {
	_, prose := parse("# A\n## Usage\n```\n## Not a heading\n```\n### Usage\n#NoSpace\n")
	got := anchors(prose)
	for _, want := range []string{"a", "usage", "usage-1"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	for _, not := range []string{"not-a-heading", "nospace"} {
		if got[not] {
			t.Errorf("anchor %q, which is not a heading, in %v", not, got)
		}
	}
}

func TestParse(t *testing.T) {
	doc := "text\n```go\nx := 1\n```\n- item\n\n  ```\n  indented\n  ```\nmore"
	blocks, prose := parse(doc)
	want := []block{{lang: "go", line: 3, text: "x := 1"}, {lang: "", line: 8, text: "indented"}}
	if !slices.Equal(blocks, want) {
		t.Errorf("blocks %+v, want %+v", blocks, want)
	}
	if got, want := strings.Count(prose, "\n"), strings.Count(doc, "\n"); got != want {
		t.Errorf("prose has %d lines, the document %d", got, want)
	}
}

func TestLinksSkipCode(t *testing.T) {
	_, prose := parse("see [a](a.md) and `[b](b.md)`,\n`code\n[c](c.md)` [d](d.md#x \"title\")\n```\n[e](e.md)\n```\n![f](f.svg)")
	var got []link
	got = append(got, links(prose)...)
	want := []link{{target: "a.md", line: 1}, {target: "d.md#x", line: 3}, {target: "f.svg", line: 7}}
	if !slices.Equal(got, want) {
		t.Errorf("links %+v, want %+v", got, want)
	}
}

func TestBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "docs", "guide.md"), "# Guide\n\n## Setting up\n\n[back](../README.md#try-it) [self](#setting-up) [pic](p.svg)\n")
	write(t, filepath.Join(dir, "docs", "p.svg"), "<svg/>")
	write(t, filepath.Join(dir, "README.md"), strings.Join([]string{
		"# R",
		"## Try it",
		"[ok](docs/guide.md) [ok](docs/guide.md#setting-up) [ok](#try-it) [web](https://example.com/x#y)",
		"[missing file](docs/nosuch.md)",
		"[missing heading](docs/guide.md#nosuch)",
		"[missing here](#nosuch)",
		"[fragment of a picture](docs/p.svg#x)",
		"[outside](../elsewhere.md)",
		"`[in code](docs/nosuch.md)`",
	}, "\n"))
	for _, tt := range []struct {
		doc  string
		want []string // patterns, one for each broken link, in order
	}{
		{doc: "docs/guide.md"},
		{doc: "README.md", want: []string{
			`^README.md:4: docs/nosuch.md: no file`,
			`^README.md:5: docs/guide.md#nosuch: docs/guide.md has no heading #nosuch`,
			`^README.md:6: #nosuch: README.md has no heading #nosuch`,
			`^README.md:7: docs/p.svg#x: .* not Markdown`,
			`^README.md:8: \.\./elsewhere.md points outside`,
		}},
	} {
		got, err := brokenLinks(dir, tt.doc)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(tt.want) {
			t.Errorf("%s: broken links %q, want %d", tt.doc, got, len(tt.want))
			continue
		}
		for i, re := range tt.want {
			if !regexp.MustCompile(re).MatchString(got[i]) {
				t.Errorf("%s: %q does not match %q", tt.doc, got[i], re)
			}
		}
	}
}

// TestVetBlocksFails: a block that does not compile fails with the
// document's name and line; a fragment that only sets things up, and one
// using the free names, compile.
func TestVetBlocksFails(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "docs", "good.md"), "# Good\n\n```go\nr := retry.New()\nresp, err := client.Check(ctx, req)\n```\n")
	if n, failed := vetBlocks(t, dir, []string{"docs/good.md"}); n != 1 || failed != nil {
		t.Fatalf("good.md: %d blocks, go vet: %s", n, failed)
	}
	write(t, filepath.Join(dir, "docs", "bad.md"), "# Bad\n\ntext\n\n```go\nr := retry.New()\nr.NoSuchMethod()\n```\n")
	n, failed := vetBlocks(t, dir, []string{"docs/bad.md"})
	if n != 1 || failed == nil {
		t.Fatalf("bad.md: %d blocks, go vet passed", n)
	}
	if !strings.Contains(string(failed), "docs/bad.md:7") {
		t.Errorf("go vet's output names no docs/bad.md:7:\n%s", failed)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
		t.Error("vetBlocks wrote into the documents' directory")
	}
}
