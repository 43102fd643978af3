package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	gomodule "golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"
	"golang.org/x/mod/zip"
)

// A file-based module proxy (GOPROXY=file://DIR): for each module version,
// DIR/PATH/@v/VERSION.info, .mod and .zip, and DIR/PATH/@v/list. Its zips
// are made as the public proxy makes them from a tag: golang.org/x/mod/zip
// over git archive of the revision, the root's LICENSE added to a nested
// module that has none.
type fileProxy struct{ Dir string }

// add writes version of module m as the repository at root holds it at
// revision rev (a commit, a tag or a tree), and returns the lines go.sum
// holds for it.
func (fp fileProxy) add(root, rev string, m *module, version string, at time.Time) (sums []string, err error) {
	escPath, err := gomodule.EscapePath(m.Path)
	if err != nil {
		return nil, err
	}
	escVersion, err := gomodule.EscapeVersion(version)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(fp.Dir, filepath.FromSlash(escPath), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	subdir := ""
	if m.Dir != "." {
		subdir = m.Dir
	}
	gomod, err := gitOutput(root, "cat-file", "blob", rev+":"+path.Join(subdir, "go.mod"))
	if err != nil {
		return nil, err
	}
	base := filepath.Join(dir, escVersion)
	if err := os.WriteFile(base+".mod", []byte(gomod), 0o644); err != nil {
		return nil, err
	}
	info, _ := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, at.UTC().Truncate(time.Second)})
	if err := os.WriteFile(base+".info", info, 0o644); err != nil {
		return nil, err
	}
	f, err := os.Create(base + ".zip")
	if err != nil {
		return nil, err
	}
	err = zip.CreateFromVCS(f, gomodule.Version{Path: m.Path, Version: version}, root, rev, subdir)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if err := addLine(filepath.Join(dir, "list"), version); err != nil {
		return nil, err
	}
	h1, err := dirhash.HashZip(base+".zip", dirhash.Hash1)
	if err != nil {
		return nil, err
	}
	h1mod, err := dirhash.Hash1([]string{"go.mod"}, func(string) (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader(gomod)), nil
	})
	if err != nil {
		return nil, err
	}
	return []string{
		fmt.Sprintf("%s %s %s", m.Path, version, h1),
		fmt.Sprintf("%s %s/go.mod %s", m.Path, version, h1mod),
	}, nil
}

// addLine appends line to the file unless it holds it already.
func addLine(file, line string) error {
	data, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	if slices.Contains(strings.Split(string(data), "\n"), line) {
		return nil
	}
	return os.WriteFile(file, append(data, line+"\n"...), 0o644)
}

// goproxy returns GOPROXY with the file proxy first, so that its modules
// come from it and every other module as before.
func (fp fileProxy) goproxy() string {
	abs, _ := filepath.Abs(fp.Dir)
	u := "file://" + filepath.ToSlash(abs)
	if cur := goEnv("GOPROXY"); cur != "" {
		return u + "," + cur
	}
	return u
}

// env returns the environment of a go command that takes the project's
// modules from the file proxy, outside the workspace, without asking the
// checksum database about them (it has never seen these versions), and
// without the go command's index of the module cache (GODEBUG=goindex=0):
// the index is keyed by a module's directory alone, so after a failed
// attempt at the same version it would list the files of the code that
// attempt was made from.
func (fp fileProxy) env(rootPath string) []string {
	nosum := rootPath
	if cur := goEnv("GONOSUMDB"); cur != "" {
		nosum += "," + cur
	}
	debug := "goindex=0"
	if cur := os.Getenv("GODEBUG"); cur != "" {
		debug = cur + "," + debug
	}
	return append(os.Environ(), "GOWORK=off", "GOPROXY="+fp.goproxy(), "GONOSUMDB="+nosum, "GODEBUG="+debug)
}

// checkSums returns an error unless every go.sum line of the modules at
// revision rev for the project's modules at version is among sums (the
// lines of the zips in the proxy): the hashes a module was tidied with
// before the tags existed are those of the tagged content.
func checkSums(p *project, rev, version string, sums []string) error {
	for _, m := range p.Modules {
		file := path.Join(m.Dir, "go.sum")
		data, err := gitOutput(p.Root, "cat-file", "blob", rev+":"+file)
		if err != nil {
			continue // no go.sum: it requires no module with a checksum
		}
		for line := range strings.Lines(data) {
			line = strings.TrimSpace(line)
			f := strings.Fields(line)
			if len(f) != 3 || p.byPath(f[0]) == nil || strings.TrimSuffix(f[1], "/go.mod") != version {
				continue
			}
			if !slices.Contains(sums, line) {
				return fmt.Errorf("%s at %s: %q does not match the module that %s holds", file, rev, line, version)
			}
		}
	}
	return nil
}

// forget removes version of the project's modules from the module cache:
// a version made here (a rehearsal's, or a release's before it is pushed)
// must not stand in the cache for what the public proxy will serve.
func forget(p *project, version string) error {
	cache := goEnv("GOMODCACHE")
	if cache == "" {
		return nil
	}
	escVersion, err := gomodule.EscapeVersion(version)
	if err != nil {
		return err
	}
	for _, m := range p.Modules {
		escPath, err := gomodule.EscapePath(m.Path)
		if err != nil {
			return err
		}
		extracted := filepath.Join(cache, filepath.FromSlash(escPath)+"@"+escVersion)
		if err := removeAll(extracted); err != nil {
			return err
		}
		dl := filepath.Join(cache, "cache", "download", filepath.FromSlash(escPath), "@v")
		names, _ := filepath.Glob(filepath.Join(dl, escVersion+".*"))
		for _, n := range names {
			if err := os.Remove(n); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
		if err := dropLine(filepath.Join(dl, "list"), version); err != nil {
			return err
		}
	}
	return nil
}

// removeAll removes dir, which the module cache made read-only.
func removeAll(dir string) error {
	if _, err := os.Lstat(dir); os.IsNotExist(err) {
		return nil
	}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// dropLine removes line from the file, if it is there, and the file when
// no line is left.
func dropLine(file, line string) error {
	data, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var kept bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if sc.Text() != line {
			kept.WriteString(sc.Text() + "\n")
		}
	}
	switch {
	case kept.Len() == len(data):
		return nil
	case kept.Len() == 0:
		return os.Remove(file)
	}
	return os.WriteFile(file, kept.Bytes(), 0o644)
}

// goEnv returns go env NAME.
func goEnv(name string) string {
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
