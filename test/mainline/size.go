package main

import (
	"go/ast"
	"go/parser"
	"go/token"
)

// notProduct are the directories of the module whose Go files are not the
// plugin's code: the tests' and tools' trees and the packages for tests.
var notProduct = []string{"test", "hack", "kube/kubetest", "routes/routestest"}

type size struct{ funcs, lines int }

// productSize counts the functions (with a body, methods included) and the
// lines (every line of the file, as wc -l) of the non-test Go files under
// src outside notProduct. It reads the source, not a build, so that -ref
// gives it for another commit.
func productSize(src string) (size, error) {
	var n size
	fset := token.NewFileSet()
	err := goFiles(src, append([]string{".git"}, notProduct...), func(path, _ string) error {
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		n.lines += fset.File(f.Pos()).LineCount()
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok && fd.Body != nil {
				n.funcs++
			}
		}
		return nil
	})
	return n, err
}
