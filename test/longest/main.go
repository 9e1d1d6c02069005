// Command longest lists the longest functions of the module's own code (its
// non-test Go files, test/ and hack/ left out), counted in lines from func to
// the closing brace, and how many are over 50 lines: what
// docs/architecture.md asks of a function.
//
//	go run ./test/longest          # the ten longest
//	go run ./test/longest -n 40
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// limit is the most lines a function should have.
const limit = 50

type function struct {
	name  string
	lines int
}

func main() {
	n := flag.Int("n", 10, "how many functions to list")
	flag.Parse()
	fns, err := functions(harness.RepoRoot())
	if err != nil {
		fmt.Fprintln(os.Stderr, "longest:", err)
		os.Exit(1)
	}
	slices.SortStableFunc(fns, func(a, b function) int { return b.lines - a.lines })
	over := 0
	for _, f := range fns {
		if f.lines > limit {
			over++
		}
	}
	fmt.Printf("over %d lines: %d of %d functions\n", limit, over, len(fns))
	for _, f := range fns[:min(*n, len(fns))] {
		fmt.Printf("%4d %s\n", f.lines, f.name)
	}
}

// functions are the functions with a body in the non-test Go files under
// root, test/, hack/ and hidden directories left out, named package-path.name
// or package-path.(Receiver).name.
func functions(root string) ([]function, error) {
	var fns []function
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() && rel != "." && (rel == "test" || rel == "hack" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok && fd.Body != nil {
				lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
				fns = append(fns, function{filepath.Dir(rel) + "." + funcName(fd), lines})
			}
		}
		return nil
	})
	return fns, err
}

// funcName is fd's name, with its receiver's type for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch ix := t.(type) {
	case *ast.IndexExpr:
		t = ix.X
	case *ast.IndexListExpr:
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return "(" + id.Name + ")." + fd.Name.Name
	}
	return fd.Name.Name
}
