package main

import (
	"strings"
	"testing"
)

// TestSetWork: go.work's lines for the released modules move to the
// version where they are, comments kept; a line without a version gets
// one; a missing line is added; other replacements stay.
func TestSetWork(t *testing.T) {
	dir := newRepo(t)
	write(t, dir, "go.work", `go 1.25.0

use (
	.
	./bench
	./cmd/app
	./lib
)

replace other.example/x => other.example/x v1.0.0

// The project's modules.
replace (
	example.com/proj v0.3.0 => ./ // the root
	example.com/proj/lib => ./lib
)
`)
	p, err := loadProject(dir, releasedDirs, unreleasedDirs)
	if err != nil {
		t.Fatal(err)
	}
	if err := setWork(p, "v0.4.0"); err != nil {
		t.Fatal(err)
	}
	got := read(t, dir, "go.work")
	for _, want := range []string{
		"replace other.example/x => other.example/x v1.0.0\n",
		"// The project's modules.\nreplace (\n\texample.com/proj v0.4.0 => ./ // the root\n\texample.com/proj/lib v0.4.0 => ./lib\n",
		"example.com/proj/cmd/app v0.4.0 => ./cmd/app\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("go.work lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "v0.3.0") {
		t.Errorf("go.work keeps v0.3.0:\n%s", got)
	}
}
