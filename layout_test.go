package main

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The import graph docs/architecture.md draws, held to the code: each
// package of the module and the packages of the module it may import. An
// import not listed here fails the test; so does a listed package that is
// gone. Adding an edge is a decision about the layout: make it here and in
// docs/architecture.md.
var allowedImports = map[string][]string{
	"routes":       {},
	"transform":    {"routes"},
	"desired":      {"routes", "transform"},
	"rollout":      {"routes", "transform", "desired"},
	"retry":        {},
	"kubeclient":   {"retry"},
	"kube":         {"routes", "kubeclient"},
	"ssa":          {"routes", "kubeclient", "kube", "retry"},
	"orchestrator": {"routes", "desired", "rollout", "kubeclient", "kube", "ssa", "retry"},
	"peers":        {"retry"},
	"events":       {"rollout", "kubeclient", "retry"},
	"metrics":      {"kubeclient", "kube", "orchestrator", "events"},
	"plugin":       {"rollout", "orchestrator", "events", "metrics"},
	"cleanup":      {"routes", "desired", "rollout", "orchestrator"},
	"plan":         {"routes", "desired", "rollout", "kube", "orchestrator"},
	"cli":          {"routes", "desired", "rollout", "kube", "ssa", "orchestrator", "cleanup", "plan", "peers"},
	".":            {"plugin", "rollout", "kubeclient", "kube", "ssa", "orchestrator", "cleanup", "peers", "events", "cli", "metrics", "retry"},

	"routes/routestest": {"routes"},
	"kube/kubetest":     {"routes"},
}

// testSupport are the packages that serve other packages' tests (as
// net/http/httptest does), each with the packages whose tests import it. No
// package's own code may import one (allowedImports lists none).
var testSupport = map[string][]string{
	"routes/routestest": {"transform", "kube", "desired"},
	"kube/kubetest":     {"orchestrator", "cleanup", "cli", "peers", "kube", "ssa", "events", "."},
}

// The decision packages compute what a route must become from what it is:
// nothing they depend on may do I/O, log or know Argo Rollouts' types.
// rollout turns a Rollout into a call, so it may know the Rollout's types,
// and nothing else.
var pureDeps = map[string][]string{
	"routes":    nil,
	"transform": nil,
	"desired":   nil,
	"rollout":   {"github.com/argoproj/argo-rollouts/"},

	"routes/routestest": nil,
}

// forbiddenInPure are packages whose presence among a pure package's
// dependencies means it can reach the apiserver, a watch cache or a logger.
// (net/http is there anyway: apimachinery's types import it.)
var forbiddenInPure = []string{
	"k8s.io/client-go/rest",
	"k8s.io/client-go/tools/cache",
	"k8s.io/client-go/dynamic",
	"github.com/sirupsen/logrus",
	"github.com/argoproj/argo-rollouts/",
	"github.com/hashicorp/go-plugin",
}

const module = "github.com/gatewayapi-ssa/rollouts-plugin"

// goList runs go list with format f over the patterns.
func goList(t *testing.T, f string, patterns ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-f", f}, patterns...)...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var lines []string
	for s := bufio.NewScanner(bytes.NewReader(out)); s.Scan(); {
		if l := strings.TrimSpace(s.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// short is a package's path in the module ("." for the module's root), or
// "" for a package elsewhere.
func short(path string) string {
	switch {
	case path == module:
		return "."
	case strings.HasPrefix(path, module+"/"):
		return strings.TrimPrefix(path, module+"/")
	}
	return ""
}

func TestEveryImportIsAnEdgeOfTheLayout(t *testing.T) {
	seen := map[string]bool{}
	for _, line := range goList(t, `{{.ImportPath}} {{join .Imports " "}}`, "./...") {
		fields := strings.Fields(line)
		pkg := short(fields[0])
		if pkg == "test" || strings.HasPrefix(pkg, "test/") {
			continue // the tests' own tools import what they test
		}
		seen[pkg] = true
		allowed, ok := allowedImports[pkg]
		if !ok {
			t.Errorf("package %s is not in the layout: add it to allowedImports and to docs/architecture.md's import graph", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			if dep := short(imp); dep != "" && !slices.Contains(allowed, dep) {
				t.Errorf("%s imports %s: not an edge of the layout (docs/architecture.md)", pkg, dep)
			}
		}
	}
	for pkg := range allowedImports {
		if !seen[pkg] {
			t.Errorf("allowedImports lists %s, which is not a package any more", pkg)
		}
	}
	// The tests' imports of the test-support packages.
	tested := map[string]bool{}
	for _, line := range goList(t, `{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}`, "./...") {
		fields := strings.Fields(line)
		pkg := short(fields[0])
		if pkg == "test" || strings.HasPrefix(pkg, "test/") {
			continue
		}
		for _, imp := range fields[1:] {
			dep := short(imp)
			if _, ok := testSupport[dep]; !ok || dep == pkg {
				continue
			}
			tested[dep+" "+pkg] = true
			if !slices.Contains(testSupport[dep], pkg) {
				t.Errorf("the tests of %s import %s: not an edge of the layout (testSupport, docs/architecture.md)", pkg, dep)
			}
		}
	}
	for dep, pkgs := range testSupport {
		for _, pkg := range pkgs {
			if !tested[dep+" "+pkg] {
				t.Errorf("testSupport says the tests of %s import %s; they do not any more", pkg, dep)
			}
		}
	}
}

func TestTheDecisionPackagesDoNoIO(t *testing.T) {
	for pkg, allowed := range pureDeps {
		for _, dep := range goList(t, "{{.ImportPath}}", "-deps", "./"+pkg) {
			for _, bad := range forbiddenInPure {
				if (dep == bad || strings.HasPrefix(dep, bad) && strings.HasSuffix(bad, "/")) &&
					!slices.ContainsFunc(allowed, func(a string) bool { return strings.HasPrefix(dep, a) }) {
					t.Errorf("%s depends on %s: a decision package must do no I/O, log nothing and know no Rollout (go list -deps ./%s)", pkg, dep, pkg)
				}
			}
		}
	}
}

// An exported name is a promise to other packages. Every exported top-level
// function, variable and constant of a package must be used by the non-test
// code of another package of the module; one used only by tests or only at
// home is unexported (a test-support package's, by another package's
// tests). Types are left out: an exported function's results and
// errors.As targets must be nameable even where no other package names them;
// so are methods and fields, which interfaces and encoders use.
func TestEveryExportIsUsedByAnotherPackage(t *testing.T) {
	type pkgInfo struct {
		path, dir string
		files     []string
		test      bool // files are _test.go files
	}
	var pkgs []pkgInfo
	for _, line := range goList(t, `{{.ImportPath}}|{{.Dir}}|{{join .GoFiles ","}}`, "./...") {
		parts := strings.Split(line, "|")
		if p := short(parts[0]); p == "." || p == "test" || strings.HasPrefix(p, "test/") || parts[2] == "" {
			continue // main exports nothing; the tests' tools serve the tests
		}
		pkgs = append(pkgs, pkgInfo{parts[0], parts[1], strings.Split(parts[2], ","), false})
	}
	// Every file that is not a test, with the package it is in: outside
	// test/, and the programs under it (make demo, dev-cluster and bench
	// run them), not the tests' libraries.
	var all, tests []pkgInfo
	for _, line := range goList(t, `{{.ImportPath}}|{{.Dir}}|{{join .GoFiles ","}}|{{.Name}}|{{join .TestGoFiles ","}}|{{join .XTestGoFiles ","}}`, "./...") {
		parts := strings.Split(line, "|")
		if p := short(parts[0]); (p == "test" || strings.HasPrefix(p, "test/")) && parts[3] != "main" {
			continue
		}
		all = append(all, pkgInfo{parts[0], parts[1], strings.Split(parts[2], ","), false})
		for _, files := range parts[4:] {
			if files != "" {
				tests = append(tests, pkgInfo{parts[0], parts[1], strings.Split(files, ","), true})
			}
		}
	}
	fset := token.NewFileSet()
	parse := func(dir, name string) *ast.File {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	// used[path][name]: a file of another package refers to path.name;
	// usedByTests: a test of another package does.
	used, usedByTests := map[string]map[string]bool{}, map[string]map[string]bool{}
	for _, p := range append(all, tests...) {
		used := used
		if p.test {
			used = usedByTests
		}
		for _, name := range p.files {
			f := parse(p.dir, name)
			local := map[string]string{}
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if short(path) == "" || path == p.path {
					continue
				}
				alias := path[strings.LastIndex(path, "/")+1:]
				if imp.Name != nil {
					alias = imp.Name.Name
				}
				local[alias] = path
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok && local[id.Name] != "" {
						if used[local[id.Name]] == nil {
							used[local[id.Name]] = map[string]bool{}
						}
						used[local[id.Name]][sel.Sel.Name] = true
					}
				}
				return true
			})
		}
	}
	for _, p := range pkgs {
		for _, name := range p.files {
			for _, decl := range parse(p.dir, name).Decls {
				var names []*ast.Ident
				switch d := decl.(type) {
				case *ast.FuncDecl:
					if d.Recv == nil {
						names = append(names, d.Name)
					}
				case *ast.GenDecl:
					for _, spec := range d.Specs {
						switch s := spec.(type) {
						case *ast.ValueSpec:
							names = append(names, s.Names...)
						}
					}
				}
				users, by := used, "code"
				if _, ok := testSupport[short(p.path)]; ok {
					users, by = usedByTests, "tests"
				}
				for _, id := range names {
					if id.IsExported() && !users[p.path][id.Name] {
						t.Errorf("%s: %s.%s is exported but no other package's %s uses it: unexport it (or use it)",
							fset.Position(id.Pos()), short(p.path), id.Name, by)
					}
				}
			}
		}
	}
}

// The decision packages take every fact as a value: no exported function
// or method of theirs takes or returns a function, and no exported field of
// their types holds one, so nothing that reads can reach a decision as a
// closure (the reads are in package orchestrator: Decide).
func TestTheDecisionPackagesTakeNoFunctions(t *testing.T) {
	fset := token.NewFileSet()
	for pkg := range pureDeps {
		files, _ := filepath.Glob(filepath.Join(pkg, "*.go"))
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			funcTyped := func(fields *ast.FieldList, what string, exported func(*ast.Field) bool) {
				if fields == nil {
					return
				}
				for _, field := range fields.List {
					if _, ok := field.Type.(*ast.FuncType); ok && exported(field) {
						t.Errorf("%s: %s holds a function: hand a decision its facts as values (docs/architecture.md)", fset.Position(field.Pos()), what)
					}
				}
			}
			all := func(*ast.Field) bool { return true }
			ast.Inspect(f, func(n ast.Node) bool {
				switch d := n.(type) {
				case *ast.FuncDecl:
					if d.Name.IsExported() {
						funcTyped(d.Type.Params, d.Name.Name+"'s parameters", all)
						funcTyped(d.Type.Results, d.Name.Name+"'s results", all)
					}
				case *ast.TypeSpec:
					if st, ok := d.Type.(*ast.StructType); ok && d.Name.IsExported() {
						funcTyped(st.Fields, "type "+d.Name.Name, func(f *ast.Field) bool {
							return len(f.Names) == 0 || slices.ContainsFunc(f.Names, func(n *ast.Ident) bool { return n.IsExported() })
						})
					}
				}
				return true
			})
		}
	}
}
