package retryz_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDocsShowMount: the Go blocks of README's section on the live page and
// of docs/debug.md are mount's body in example_test.go, which compiles.
func TestDocsShowMount(t *testing.T) {
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	body := regexp.MustCompile(`(?s)func mount\([^)]*\) \{\n(.*?)\n\}\n`).FindSubmatch(src)
	if body == nil {
		t.Fatal("no func mount in example_test.go")
	}
	want := regexp.MustCompile(`(?m)^\t`).ReplaceAllString(string(body[1]), "")
	for _, doc := range []struct{ file, section string }{
		{file: "../README.md", section: "## See the defences live"},
		{file: "../docs/debug.md", section: "## Mounting it"},
	} {
		b, err := os.ReadFile(doc.file)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		i := strings.Index(text, "\n"+doc.section+"\n")
		if i < 0 {
			t.Fatalf("%s has no section %q", doc.file, doc.section)
		}
		block := regexp.MustCompile("(?s)```go\n(.*?)\n```").FindStringSubmatch(text[i:])
		if block == nil || block[1] != want {
			t.Errorf("%s, %s: the Go block is not mount's body:\n%v\nwant:\n%s", doc.file, doc.section, block, want)
		}
	}
}
