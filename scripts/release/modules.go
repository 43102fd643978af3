package main

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
)

// The modules a release tags, by directory from the repository's root: the
// root module (tag vX.Y.Z) and each nested module a user imports or installs
// (tag DIR/vX.Y.Z). To release a new nested module, add its directory here
// (and to go.work's use list, as for any module).
var releasedDirs = []string{
	".",
	"cmd/retry",
	"grpc",
	"middleware/retryablehttp",
	"otel",
	"redis",
}

// The workspace's modules that are never tagged: their go.mod files require
// the released modules at the release's version all the same, so that they
// build on their own against it. A module of go.work listed in neither is
// an error, so that a new module is released or not by decision.
var unreleasedDirs = []string{
	"bench",
	"chaos",
	"retryz/browsertest",
}

// A module of the workspace.
type module struct {
	Dir      string   // from the repository's root, slash-separated; "." for the root
	Path     string   // its module path
	Released bool     // tagged by a release
	Imports  []string // the paths of the project's other modules whose packages it imports
}

// tagFor returns the tag that marks version of m: vX.Y.Z for the root
// module, DIR/vX.Y.Z for a nested one.
func (m *module) tagFor(version string) string {
	if m.Dir == "." {
		return version
	}
	return m.Dir + "/" + version
}

// A project: a repository whose go.work lists its modules.
type project struct {
	Root    string    // the repository's directory
	Modules []*module // go.work's, released first, each after the modules it imports
}

// loadProject reads go.work and each module's go.mod and imports, and
// checks that every module is released or unreleased by name.
func loadProject(root string, released, unreleased []string) (*project, error) {
	data, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		return nil, err
	}
	work, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return nil, err
	}
	p := &project{Root: root}
	for _, u := range work.Use {
		dir := path.Clean(filepath.ToSlash(u.Path))
		m := &module{Dir: dir, Released: slices.Contains(released, dir)}
		if !m.Released && !slices.Contains(unreleased, dir) {
			return nil, fmt.Errorf("module %s of go.work is neither released nor unreleased: add it to one of the lists in scripts/release/modules.go", dir)
		}
		gomod := filepath.Join(root, filepath.FromSlash(dir), "go.mod")
		data, err := os.ReadFile(gomod)
		if err != nil {
			return nil, err
		}
		if m.Path = modfile.ModulePath(data); m.Path == "" {
			return nil, fmt.Errorf("%s: no module line", gomod)
		}
		p.Modules = append(p.Modules, m)
	}
	for _, dir := range slices.Concat(released, unreleased) {
		if p.module(dir) == nil {
			return nil, fmt.Errorf("module %s of scripts/release/modules.go is not in go.work's use list", dir)
		}
	}
	if root := p.module("."); root == nil || !root.Released {
		return nil, fmt.Errorf("the root module must be in go.work and released")
	}
	for _, m := range p.Modules {
		if m.Imports, err = p.imports(m); err != nil {
			return nil, err
		}
	}
	return p, p.order()
}

// module returns the module in dir, or nil.
func (p *project) module(dir string) *module {
	for _, m := range p.Modules {
		if m.Dir == dir {
			return m
		}
	}
	return nil
}

// byPath returns the module whose path is path, or nil.
func (p *project) byPath(path string) *module {
	for _, m := range p.Modules {
		if m.Path == path {
			return m
		}
	}
	return nil
}

// rootModule returns the module at the repository's root.
func (p *project) rootModule() *module { return p.module(".") }

// released returns the released modules, each after those it imports.
func (p *project) released() []*module {
	var out []*module
	for _, m := range p.Modules {
		if m.Released {
			out = append(out, m)
		}
	}
	return out
}

// owner returns the project module that holds the package importPath, or
// nil: the one with the longest path that is a prefix of it.
func (p *project) owner(importPath string) *module {
	var best *module
	for _, m := range p.Modules {
		if (importPath == m.Path || strings.HasPrefix(importPath, m.Path+"/")) &&
			(best == nil || len(m.Path) > len(best.Path)) {
			best = m
		}
	}
	return best
}

// imports returns the paths of the other project modules that m's Go files
// (tests included) import, sorted.
func (p *project) imports(m *module) ([]string, error) {
	dir := filepath.Join(p.Root, filepath.FromSlash(m.Dir))
	fset := token.NewFileSet()
	var out []string
	err := filepath.WalkDir(dir, func(file string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if file == dir {
				return nil
			}
			if name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(file, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			return nil
		}
		f, err := parser.ParseFile(fset, file, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			o := p.owner(strings.Trim(imp.Path.Value, "`\""))
			if o != nil && o != m && !slices.Contains(out, o.Path) {
				out = append(out, o.Path)
			}
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

// order sorts the modules: released ones first, each module after those it
// imports, otherwise in go.work's order. An unreleased module imported by a
// released one, or a cycle, is an error.
func (p *project) order() error {
	var sorted []*module
	state := map[*module]int{} // 1 visiting, 2 done
	var visit func(m *module) error
	visit = func(m *module) error {
		switch state[m] {
		case 1:
			return fmt.Errorf("module %s imports itself through the modules it imports", m.Dir)
		case 2:
			return nil
		}
		state[m] = 1
		for _, path := range m.Imports {
			dep := p.byPath(path)
			if m.Released && !dep.Released {
				return fmt.Errorf("released module %s imports %s, which is not released", m.Dir, dep.Dir)
			}
			if err := visit(dep); err != nil {
				return err
			}
		}
		state[m] = 2
		sorted = append(sorted, m)
		return nil
	}
	for _, released := range []bool{true, false} {
		for _, m := range p.Modules {
			if m.Released == released {
				if err := visit(m); err != nil {
					return err
				}
			}
		}
	}
	p.Modules = sorted
	return nil
}
