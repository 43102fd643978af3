//go:build !race

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// picture is one of README's pictures: the command that draws it, with
// its output in docs/, the guide in docs/ that tells of it, and the
// fragments of the command that guide gives, which together are the
// command.
type picture struct {
	file  string
	args  []string
	guide string
	frags []string
}

var pictures = []picture{
	{file: "curve.svg", args: []string{"plot", "--attempts", "11", "-o", "docs/curve.svg", "ojs", "zizq"},
		guide: "cli.md", frags: []string{"retry plot --attempts 11 -o docs/curve.svg ojs zizq"}},
	{file: "outage.svg", args: []string{"sim", "--rate", "100", "--duration", "2m", "--outage", "30s:60s", "--plot", "docs/outage.svg"},
		guide: "simulator.md", frags: []string{"retry sim --rate 100 --duration 2m --outage 30s:60s", "--plot docs/outage.svg"}},
	{file: "hedge.svg", args: []string{"sim", "--hedge", "--plot", "docs/hedge.svg"},
		guide: "hedging.md", frags: []string{"retry sim --hedge", "--plot docs/hedge.svg"}},
	{file: "metastable.svg", args: []string{"sim", "--metastable", "--plot", "docs/metastable.svg"},
		guide: "outages.md", frags: []string{"retry sim --metastable --plot docs/metastable.svg"}},
}

// drawnElsewhere are pictures in docs/ that another module's command
// draws and tests: shedding.svg, bench/cmd/shedload's (its TestPicture).
var drawnElsewhere = map[string]bool{"shedding.svg": true}

// TestPictures: each picture in docs/ is, byte for byte, what its
// guide's command for it draws now, run in-process with the guide's flags
// (deterministic under their default seed: sim runs in virtual time). A
// picture in docs/ without a command here, a command its guide does not
// give, or a picture its guide or README does not show, fails too. With
// -update, the pictures are drawn again. It builds without -race, as the
// docs' other figures do (figures_test.go).
func TestPictures(t *testing.T) {
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(docsDir, "*.svg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if drawnElsewhere[filepath.Base(f)] {
			continue
		}
		if !slices.ContainsFunc(pictures, func(p picture) bool { return p.file == filepath.Base(f) }) {
			t.Errorf("docs/%s: no command draws it here", filepath.Base(f))
		}
	}
	for _, p := range pictures {
		t.Run(p.file, func(t *testing.T) {
			guide, err := os.ReadFile(filepath.Join(docsDir, p.guide))
			if err != nil {
				t.Fatal(err)
			}
			for _, frag := range p.frags {
				if !bytes.Contains(guide, []byte(frag)) {
					t.Errorf("docs/%s does not give %q", p.guide, frag)
				}
			}
			if !bytes.Contains(guide, []byte("]("+p.file+")")) {
				t.Errorf("docs/%s does not show %s", p.guide, p.file)
			}
			if !bytes.Contains(readme, []byte("](docs/"+p.file+")")) {
				t.Errorf("README does not show docs/%s", p.file)
			}
			got := commandPicture(t, p.args)
			if want, same := matchFile(t, filepath.Join(docsDir, p.file), got); !same {
				t.Errorf("docs/%s is not what `retry %s` draws (%d bytes, drawn %d): go test -run TestPictures -update draws it again",
					p.file, strings.Join(p.args, " "), len(want), len(got))
			}
		})
	}
}

// commandPicture runs the command in-process, its output file moved from
// docs/ to a temporary directory, and returns the picture it wrote.
func commandPicture(t *testing.T, args []string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "picture.svg")
	args = slices.Clone(args)
	for i, a := range args {
		if strings.HasPrefix(a, "docs/") {
			args[i] = out
		}
	}
	_, stderr, code := cli(t, "", args...)
	if code != 0 {
		t.Fatalf("retry %s: status %d: %s", strings.Join(args, " "), code, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
