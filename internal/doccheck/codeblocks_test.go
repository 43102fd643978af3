package doccheck_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// packages are the package names the Go blocks use unimported, and the
// import path of each: a fragment gets the imports of the names it uses.
var packages = map[string]string{
	"context":    "context",
	"errors":     "errors",
	"fmt":        "fmt",
	"http":       "net/http",
	"log":        "log",
	"slog":       "log/slog",
	"sql":        "database/sql",
	"time":       "time",
	"retry":      "github.com/steadyhq/retry",
	"shed":       "github.com/steadyhq/retry/shed",
	"middleware": "github.com/steadyhq/retry/middleware",
	"redact":     "github.com/steadyhq/retry/redact",
	"retrytest":  "github.com/steadyhq/retry/retrytest",
	"retryz":     "github.com/steadyhq/retry/retryz",
	"retrygrpc":  "github.com/steadyhq/retry/grpc",
	"retryredis": "github.com/steadyhq/retry/redis",
	"grpc":       "google.golang.org/grpc",
	"codes":      "google.golang.org/grpc/codes",
	"insecure":   "google.golang.org/grpc/credentials/insecure",
	"redis":      "github.com/redis/go-redis/v9",
}

// freeNames declares the names the fragments use without declaring them:
// what the reader's own program would have (a context, an address, a
// mux, a generated gRPC client and its request, a queue, a dial func, the
// Retrier, Transport, Shedder and Redis store a live page shows).
const freeNames = `package snippets

import (
	"context"
	"database/sql"
	"net/http"

	"github.com/steadyhq/retry"
	retryredis "github.com/steadyhq/retry/redis"
	"github.com/steadyhq/retry/shed"
	"google.golang.org/grpc"
)

var (
	ctx    context.Context
	target string
	mux    *http.ServeMux
	queue  interface {
		Put(context.Context, retry.Event) error
	}
	client interface {
		Check(context.Context, *CheckRequest, ...grpc.CallOption) (*CheckResponse, error)
	}
	req      *CheckRequest
	payments *retry.Retrier
	search   *retry.Transport
	api      *shed.Shedder
	store    *retryredis.Store
)

type (
	CheckRequest  struct{}
	CheckResponse struct{}
)

func dial(context.Context) (*sql.Conn, error) { return nil, nil }
`

// goSource turns a Go block of the document doc into a file of a
// workspace module: a block that is a whole file (it has a package
// clause) as it is, and a fragment as the body of a function of package
// snippets, with the imports of the package names it uses and each name
// it declares used once, so that a fragment that only sets something up
// compiles. A //line directive makes the compiler's messages name the
// document's lines (path is the document's path for them). The second
// result says whether the block is a whole file.
func goSource(doc, path string, b block) (src string, whole bool, err error) {
	directive := fmt.Sprintf("//line %s:%d\n", path, b.line)
	fset := token.NewFileSet()
	if f, err := parser.ParseFile(fset, doc, b.text, parser.PackageClauseOnly); err == nil && f.Name != nil {
		if _, err := parser.ParseFile(fset, doc, b.text, parser.SkipObjectResolution); err != nil {
			return "", true, fmt.Errorf("%s:%d: %v", doc, b.line, err)
		}
		return directive + b.text + "\n", true, nil
	}
	const head = "package snippets\n\nfunc _() {\n"
	f, err := parser.ParseFile(fset, doc, head+b.text+"\n}\n", parser.SkipObjectResolution)
	if err != nil {
		return "", false, fmt.Errorf("%s:%d (a fragment, read as a function body; line 4 is its first): %v", doc, b.line, err)
	}
	body := f.Decls[0].(*ast.FuncDecl).Body
	var declared []string
	for _, s := range body.List {
		switch s := s.(type) {
		case *ast.AssignStmt:
			if s.Tok == token.DEFINE {
				for _, e := range s.Lhs {
					if id, ok := e.(*ast.Ident); ok && id.Name != "_" {
						declared = append(declared, id.Name)
					}
				}
			}
		case *ast.DeclStmt:
			if g, ok := s.Decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
				for _, spec := range g.Specs {
					for _, id := range spec.(*ast.ValueSpec).Names {
						if id.Name != "_" {
							declared = append(declared, id.Name)
						}
					}
				}
			}
		}
	}
	var imports []string
	ast.Inspect(body, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && !slices.Contains(declared, id.Name) {
				if path, ok := packages[id.Name]; ok {
					imp := fmt.Sprintf("%s %q", id.Name, path)
					if !slices.Contains(imports, imp) {
						imports = append(imports, imp)
					}
				}
			}
		}
		return true
	})
	slices.Sort(imports)
	var s strings.Builder
	s.WriteString("package snippets\n\n")
	for _, imp := range imports {
		fmt.Fprintf(&s, "import %s\n", imp)
	}
	s.WriteString("\nfunc _() {\n" + directive + b.text + "\n")
	for _, name := range slices.Compact(slices.Sorted(slices.Values(declared))) {
		fmt.Fprintf(&s, "\t_ = %s\n", name)
	}
	s.WriteString("}\n")
	return s.String(), false, nil
}

// workspace writes a module in dir, and a go.work there that uses it and
// every module of the repository's go.work with its replacements, so that
// the module's code builds as code in the repository does.
func workspace(t *testing.T, dir string) {
	t.Helper()
	cmd := exec.Command("go", "work", "edit", "-json")
	cmd.Dir = root
	// The repository's go.work, whatever GOWORK the tests run under (make
	// release runs them with GOWORK=off).
	cmd.Env = append(os.Environ(), "GOWORK=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go work edit -json: %v", err)
	}
	var work struct {
		Go      string
		Use     []struct{ DiskPath string }
		Replace []struct {
			Old, New struct{ Path, Version string }
		}
	}
	if err := json.Unmarshal(out, &work); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	var w strings.Builder
	fmt.Fprintf(&w, "go %s\n\nuse .\n", work.Go)
	for _, u := range work.Use {
		fmt.Fprintf(&w, "use %q\n", filepath.Join(abs, u.DiskPath))
	}
	for _, r := range work.Replace {
		to := r.New.Path
		if r.New.Version == "" && (strings.HasPrefix(to, "./") || strings.HasPrefix(to, "../") || to == ".") {
			// A directory of the repository (go.work serves the project's
			// modules from the checkout), relative to the repository.
			to = strconv.Quote(filepath.Join(abs, to))
		}
		fmt.Fprintf(&w, "replace %s %s => %s %s\n", r.Old.Path, r.Old.Version, to, r.New.Version)
	}
	write(t, filepath.Join(dir, "go.work"), w.String())
	write(t, filepath.Join(dir, "go.mod"), fmt.Sprintf("module docblocks\n\ngo %s\n", work.Go))
	if sum, err := os.ReadFile(filepath.Join(root, "go.work.sum")); err == nil {
		write(t, filepath.Join(dir, "go.work.sum"), string(sum))
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// vetBlocks writes the Go blocks of docs (Markdown files under dir) into
// a module of a new workspace and runs go vet over them. It returns the
// number of blocks, and go vet's output when it failed; a block that does
// not parse is reported through t.
func vetBlocks(t *testing.T, dir string, docs []string) (n int, failed []byte) {
	t.Helper()
	work := t.TempDir()
	workspace(t, work)
	write(t, filepath.Join(work, "snippets", "free.go"), freeNames)
	for _, doc := range docs {
		text, err := os.ReadFile(filepath.Join(dir, doc))
		if err != nil {
			t.Fatal(err)
		}
		blocks, _ := parse(string(text))
		for _, b := range blocks {
			if b.lang != "go" {
				continue
			}
			n++
			path, err := filepath.Abs(filepath.Join(dir, doc))
			if err != nil {
				t.Fatal(err)
			}
			src, whole, err := goSource(doc, path, b)
			if err != nil {
				t.Error(err)
				continue
			}
			name := fmt.Sprintf("block%03d.go", n)
			if whole {
				write(t, filepath.Join(work, fmt.Sprintf("program%03d", n), name), src)
			} else {
				write(t, filepath.Join(work, "snippets", name), src)
			}
		}
	}
	cmd := exec.Command("go", "vet", "./...")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(work, "go.work"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return n, append(out, err.Error()...)
	}
	return n, nil
}

// TestGoBlocks: every Go block of README.md and docs/*.md compiles (and
// passes go vet) against the packages of this workspace: a whole program
// as it is, a fragment as a function body, with the free names of
// freeNames. A compiler message names the document and its line.
func TestGoBlocks(t *testing.T) {
	docs, err := documents()
	if err != nil {
		t.Fatal(err)
	}
	n, failed := vetBlocks(t, root, docs)
	if n == 0 {
		t.Fatal("no Go block in README.md or docs/*.md")
	}
	if failed != nil {
		t.Fatalf("go vet of the %d Go blocks:\n%s", n, failed)
	}
	t.Logf("%d Go blocks compiled", n)
}

// TestLinks: every relative link and image of README.md and docs/*.md
// points to a file of the repository and, with a #fragment, to a heading
// of that Markdown file.
func TestLinks(t *testing.T) {
	docs, err := documents()
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range docs {
		broken, err := brokenLinks(root, doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range broken {
			t.Error(b)
		}
	}
}
