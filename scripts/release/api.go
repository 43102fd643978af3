package main

import (
	"archive/tar"
	"fmt"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/exp/apidiff"
	"golang.org/x/tools/go/packages"
)

// An apiChange is one difference in a released module's API, as apidiff
// (golang.org/x/exp/apidiff) reports it.
type apiChange struct {
	Module     string // the module's directory
	Message    string
	Compatible bool // an addition: code that built still builds
}

func (c apiChange) String() string {
	if c.Module == "." {
		return c.Message
	}
	return c.Module + ": " + c.Message
}

// apiChanges compares the API of each released module at the tag base with
// the working tree's: the exported names of its packages other than main
// and internal ones. A package or module added since is an addition; one
// removed is an incompatible change.
func apiChanges(p *project, base string) ([]apiChange, error) {
	old, err := os.MkdirTemp("", "release-api-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(old)
	if err := extract(p.Root, base, old); err != nil {
		return nil, err
	}
	var changes []apiChange
	for _, m := range p.released() {
		before, err := loadAPI(filepath.Join(old, filepath.FromSlash(m.Dir)), m.Path)
		if err != nil {
			return nil, fmt.Errorf("the API of %s at %s: %w", m.Dir, base, err)
		}
		after, err := loadAPI(filepath.Join(p.Root, filepath.FromSlash(m.Dir)), m.Path)
		if err != nil {
			return nil, fmt.Errorf("the API of %s: %w", m.Dir, err)
		}
		r := apidiff.ModuleChanges(&apidiff.Module{Path: m.Path, Packages: before}, &apidiff.Module{Path: m.Path, Packages: after})
		for _, c := range r.Changes {
			changes = append(changes, apiChange{Module: m.Dir, Message: c.Message, Compatible: c.Compatible})
		}
	}
	return changes, nil
}

// checkAPI refuses a release from prev to next with changes that next's
// number does not allow: an incompatible change outside a major version
// (or, before v1, a minor one), or an addition in a patch release.
func checkAPI(prev, next string, changes []apiChange) error {
	var breaking, added []apiChange
	for _, c := range changes {
		if c.Compatible {
			added = append(added, c)
		} else {
			breaking = append(breaking, c)
		}
	}
	b := bumpOf(prev, next)
	if len(breaking) > 0 && !mayBreak(prev, next) {
		want := "a new major version"
		if strings.HasPrefix(prev, "v0.") {
			want = "a new minor version"
		}
		return refuse("%s is a %s release, but the API changed incompatibly since %s (%s): that takes %s, or keep the API (make apidiff lists the changes)",
			next, b, prev, first(breaking), want)
	}
	if len(added) > 0 && b == bumpPatch {
		return refuse("%s is a patch release, but the API grew since %s (%s): that takes a new minor version (make apidiff lists the changes)",
			next, prev, first(added))
	}
	return nil
}

// first describes the first of changes and counts the others.
func first(changes []apiChange) string {
	s := changes[0].String()
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	if n := len(changes) - 1; n == 1 {
		s += ", and 1 more"
	} else if n > 1 {
		s += fmt.Sprintf(", and %d more", n)
	}
	return s
}

// loadAPI type-checks the importable packages of the module path in dir
// (none when dir holds no go.mod: the module did not exist then).
func loadAPI(dir, path string) ([]*types.Package, error) {
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); os.IsNotExist(err) {
		return nil, nil
	}
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes | packages.NeedModule, Dir: dir}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		return nil, err
	}
	var out []*types.Package
	for _, pkg := range pkgs {
		if pkg.Module == nil || pkg.Module.Path != path || pkg.Name == "main" || internal(pkg.PkgPath) {
			continue
		}
		if len(pkg.Errors) > 0 {
			return nil, pkg.Errors[0]
		}
		out = append(out, pkg.Types)
	}
	return out, nil
}

// internal reports whether a package path is importable only by its own
// module's packages.
func internal(path string) bool {
	return strings.HasSuffix(path, "/internal") || strings.Contains(path, "/internal/") ||
		path == "internal" || strings.HasPrefix(path, "internal/")
}

// extract writes the files of the repository at root at revision rev into
// dir, as git archive gives them.
func extract(root, rev, dir string) (err error) {
	cmd := exec.Command("git", "archive", "--format=tar", rev)
	cmd.Dir = root
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		io.Copy(io.Discard, out)
		if werr := cmd.Wait(); werr != nil && err == nil {
			err = fmt.Errorf("git archive %s: %v: %s", rev, werr, strings.TrimSpace(stderr.String()))
		}
	}()
	tr := tar.NewReader(out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(name, dir+string(filepath.Separator)) {
			continue // git archive writes no such names
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(name, 0o755)
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, name)
		case tar.TypeReg:
			err = writeFrom(name, tr, os.FileMode(h.Mode)&0o777)
		}
		if err != nil {
			return err
		}
	}
}

func writeFrom(name string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
