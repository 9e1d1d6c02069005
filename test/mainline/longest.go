package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// maxLines is the most lines a function should have (docs/architecture.md).
const maxLines = 50

type length struct {
	name  string
	lines int
}

// listLongest prints how many functions of the module at ref (the working
// tree when "") are over maxLines lines, and the n longest.
func listLongest(ref string, n int) error {
	work, err := os.MkdirTemp("", "mainline-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if err := copySource(harness.RepoRoot(), ref, work); err != nil {
		return err
	}
	var fns []length
	fset := token.NewFileSet()
	err = goFiles(work, []string{"test", "hack", ".git"}, func(path, pkg string) error {
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok && fd.Body != nil {
				fns = append(fns, length{funcName(pkg, fd), fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortStableFunc(fns, func(a, b length) int { return b.lines - a.lines })
	over := 0
	for _, f := range fns {
		if f.lines > maxLines {
			over++
		}
	}
	fmt.Printf("over %d lines: %d of %d functions\n", maxLines, over, len(fns))
	for _, f := range fns[:min(n, len(fns))] {
		fmt.Printf("%4d %s\n", f.lines, f.name)
	}
	return nil
}
