// Package doccheck_test holds README.md and the guides in docs/ to what a
// reader relies on: every Go block in them compiles against this
// workspace, and every relative link points to a file that exists and,
// with a #fragment, to a heading of it.
package doccheck_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// documents returns README.md and every docs/*.md, as paths relative to
// the root.
func documents() ([]string, error) {
	guides, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	docs := []string{"README.md"}
	for _, g := range guides {
		rel, err := filepath.Rel(root, g)
		if err != nil {
			return nil, err
		}
		docs = append(docs, filepath.ToSlash(rel))
	}
	return docs, nil
}

// block is a fenced code block: its info string ("go", "sh", "" ...), the
// line of the document its first line of code is on (1-based), and its
// text with the fence's indentation removed.
type block struct {
	lang string
	line int
	text string
}

// parse splits a Markdown document into its fenced code blocks and the
// rest, its prose, in which each line of a block is left empty so that
// the prose keeps the document's line numbers. A fence is a line whose
// first non-blank characters are ```, at any indentation (a block inside
// a list item is indented); an unclosed block runs to the end.
func parse(doc string) (blocks []block, prose string) {
	lines := strings.Split(doc, "\n")
	var out []string
	var cur *block
	var indent string
	var body []string
	for i, l := range lines {
		trimmed := strings.TrimLeft(l, " \t")
		if strings.HasPrefix(trimmed, "```") {
			if cur == nil {
				cur = &block{lang: strings.TrimSpace(strings.TrimPrefix(trimmed, "```")), line: i + 2}
				indent = l[:len(l)-len(trimmed)]
				body = nil
			} else {
				cur.text = strings.Join(body, "\n")
				blocks = append(blocks, *cur)
				cur = nil
			}
			out = append(out, "")
			continue
		}
		if cur != nil {
			body = append(body, strings.TrimPrefix(l, indent))
			out = append(out, "")
			continue
		}
		out = append(out, l)
	}
	if cur != nil {
		cur.text = strings.Join(body, "\n")
		blocks = append(blocks, *cur)
	}
	return blocks, strings.Join(out, "\n")
}

// codeSpan is an inline code span of single backticks, which may run over
// a line break; a link inside one is code, not a link.
var codeSpan = regexp.MustCompile("`[^`]*`")

// linkTarget matches the target of an inline link or image, [text](target)
// or ![alt](target), with an optional "title".
var linkTarget = regexp.MustCompile(`\]\(([^()\s]*)(?:\s+"[^"]*")?\)`)

// link is a link's target and the line of the document it is on.
type link struct {
	target string
	line   int
}

// links returns the targets of the inline links and images in prose (the
// prose of parse), code spans left out.
func links(prose string) []link {
	// Blank each code span out, keeping its line breaks, so that a match's
	// offset still gives its line.
	prose = codeSpan.ReplaceAllStringFunc(prose, func(s string) string {
		return strings.Map(func(r rune) rune {
			if r == '\n' {
				return r
			}
			return ' '
		}, s)
	})
	var ls []link
	for _, m := range linkTarget.FindAllStringSubmatchIndex(prose, -1) {
		ls = append(ls, link{target: prose[m[2]:m[3]], line: 1 + strings.Count(prose[:m[0]], "\n")})
	}
	return ls
}

// headingPrefix matches an ATX heading's opening: one to six #, a space.
var headingPrefix = regexp.MustCompile(`^#{1,6} `)

// anchors returns the fragments GitHub gives the headings of prose, in the
// order they come: each heading's slug, and a repeated slug with -1, -2
// ... appended.
func anchors(prose string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, l := range strings.Split(prose, "\n") {
		loc := headingPrefix.FindStringIndex(l)
		if loc == nil {
			continue
		}
		s := slug(strings.TrimRight(strings.TrimSpace(l[loc[1]:]), "#"))
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// slug is GitHub's fragment for a heading's text: lower case, spaces as
// hyphens, and every character but letters, digits, hyphens and
// underscores left out (backticks and punctuation among them).
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// brokenLinks returns, for the document at path (relative to dir), one
// line for each relative link whose file does not exist under dir or
// whose fragment names no heading of the Markdown file it points to.
// Links with a scheme (https:, mailto:) are left alone.
func brokenLinks(dir, path string) ([]string, error) {
	doc, err := os.ReadFile(filepath.Join(dir, path))
	if err != nil {
		return nil, err
	}
	_, prose := parse(string(doc))
	var broken []string
	for _, l := range links(prose) {
		if l.target == "" || strings.Contains(l.target, ":") {
			if l.target == "" {
				broken = append(broken, fmt.Sprintf("%s:%d: empty link", path, l.line))
			}
			continue
		}
		file, frag, _ := strings.Cut(l.target, "#")
		to := path
		if file != "" {
			to = filepath.ToSlash(filepath.Join(filepath.Dir(path), file))
		}
		if strings.HasPrefix(to, "../") {
			broken = append(broken, fmt.Sprintf("%s:%d: %s points outside the repository", path, l.line, l.target))
			continue
		}
		target, err := os.ReadFile(filepath.Join(dir, to))
		if err != nil {
			broken = append(broken, fmt.Sprintf("%s:%d: %s: no file %s", path, l.line, l.target, to))
			continue
		}
		if frag == "" {
			continue
		}
		if !strings.HasSuffix(to, ".md") {
			broken = append(broken, fmt.Sprintf("%s:%d: %s: a fragment of %s, which is not Markdown", path, l.line, l.target, to))
			continue
		}
		if _, prose := parse(string(target)); !anchors(prose)[frag] {
			broken = append(broken, fmt.Sprintf("%s:%d: %s: %s has no heading #%s", path, l.line, l.target, to, frag))
		}
	}
	return broken, nil
}
