// Command mainline counts the main line of a call: every function of the
// module's own code that one SetWeight(30), and one RemoveManagedRoutes that
// removes a header rule, enter from the plugin's RPC method to the HTTP
// request of the route's apply, in the order they run (docs/architecture.md).
//
// It copies the module (the working tree, or -ref), makes every function of
// its own code record that it starts (package mltrace, written into the
// copy: tracer.go.txt), builds the plugin from the copy, and drives it over
// go-plugin RPC against envtest with one HTTPRoute, its watch caches warm
// (each traced call follows one of the same kind). It prints the functions,
// indented by call depth, and the counts: functions, packages, and how
// often the line enters a package it had already entered and left.
//
// With -longest N it lists instead the N longest functions of the module's
// own code (its packages for tests included; tests, test/ and hack/ left
// out), in lines from func to the closing brace, and counts those over 50.
//
//	go run ./test/mainline            # the working tree
//	go run ./test/mainline -ref ca4de60
//	go run ./test/mainline -longest 10
package main

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

//go:embed tracer.go.txt
var tracer string

const module = "github.com/gatewayapi-ssa/rollouts-plugin"

func main() {
	ref := flag.String("ref", "", "git ref to measure (default: the working tree)")
	verbose := flag.Bool("v", false, "print every function of each line, indented by call depth")
	longest := flag.Int("longest", 0, "instead, list this many of the longest functions of the module's own code, and count those over 50 lines (no apiserver needed)")
	flag.Parse()
	var err error
	if *longest > 0 {
		err = listLongest(*ref, *longest)
	} else {
		err = run(*ref, *verbose)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mainline:", err)
		os.Exit(1)
	}
}

func run(ref string, verbose bool) error {
	work, err := os.MkdirTemp("", "mainline-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	src := filepath.Join(work, "src")
	if err := copySource(harness.RepoRoot(), ref, src); err != nil {
		return err
	}
	if err := instrument(src); err != nil {
		return err
	}
	bin := filepath.Join(work, "plugin")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir, build.Env = src, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building the instrumented copy: %w\n%s", err, out)
	}
	trace := filepath.Join(work, "trace.jsonl")
	if err := drive(bin, trace); err != nil {
		return err
	}
	calls, err := readTrace(trace)
	if err != nil {
		return err
	}
	// The calls, in order: SetWeight(10), SetWeight(30), SetHeaderRoute,
	// RemoveManagedRoutes; the second and the fourth are measured.
	if len(calls) != 4 {
		return fmt.Errorf("the trace holds %d calls, want 4", len(calls))
	}
	for _, c := range []call{calls[1], calls[3]} {
		report(os.Stdout, c, verbose)
	}
	return nil
}

// copySource writes the module's files at ref (the working tree's, tracked
// and untracked but not ignored, when ref is "") into dst.
func copySource(repo, ref, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if ref != "" {
		archive := exec.Command("sh", "-c", "git archive "+ref+" | tar -x -C "+dst)
		archive.Dir = repo
		out, err := archive.CombinedOutput()
		if err != nil {
			return fmt.Errorf("git archive %s: %w\n%s", ref, err, out)
		}
		return nil
	}
	files, err := exec.Command("git", "-C", repo, "ls-files", "-co", "--exclude-standard").Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %w", err)
	}
	for _, f := range strings.Split(strings.TrimSpace(string(files)), "\n") {
		data, err := os.ReadFile(filepath.Join(repo, f))
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the working tree
		} else if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, f)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, f), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// instrument makes every function of the module's own code (not its tests,
// test/, hack/ or the packages for tests) record that it starts, under the
// name pkg.Func or pkg.(Type).Method, and writes package mltrace.
func instrument(src string) error {
	err := goFiles(src, []string{"test", "hack", "kube/kubetest", "routes/routestest", ".git"}, instrumentFile)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(src, "mltrace"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(src, "mltrace", "mltrace.go"), []byte(tracer), 0o644)
}

// goFiles calls each with every non-test Go file under src and its
// package's path (main for the root), leaving out the directories skip
// names.
func goFiles(src string, skip []string, each func(path, pkg string) error) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			if slices.Contains(skip, rel) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		pkg := filepath.Dir(rel)
		if pkg == "." {
			pkg = "main"
		}
		return each(path, pkg)
	})
}

// funcName is fd's name in a trace and a listing: pkg.Func or
// pkg.(Type).Method.
func funcName(pkg string, fd *ast.FuncDecl) string {
	if fd.Recv != nil {
		return pkg + ".(" + receiver(fd.Recv.List[0].Type) + ")." + fd.Name.Name
	}
	return pkg + "." + fd.Name.Name
}

func instrumentFile(path, pkg string) error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil {
		return err
	}
	touched := false
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		name := funcName(pkg, fd)
		enter := &ast.DeferStmt{Call: &ast.CallExpr{Fun: &ast.CallExpr{
			Fun:  &ast.SelectorExpr{X: ast.NewIdent("mltrace"), Sel: ast.NewIdent("Enter")},
			Args: []ast.Expr{&ast.BasicLit{Kind: token.STRING, Value: strconv.Quote(name)}},
		}}}
		fd.Body.List = append([]ast.Stmt{enter}, fd.Body.List...)
		touched = true
	}
	if !touched {
		return nil
	}
	f.Imports = append(f.Imports, &ast.ImportSpec{Path: &ast.BasicLit{Kind: token.STRING, Value: strconv.Quote(module + "/mltrace")}})
	f.Decls = append([]ast.Decl{&ast.GenDecl{Tok: token.IMPORT, Specs: []ast.Spec{f.Imports[len(f.Imports)-1]}}}, f.Decls...)
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	defer out.Close()
	return format.Node(out, fset, f)
}

// receiver is the name of a method's receiver type, without * or type
// parameters.
func receiver(t ast.Expr) string {
	for {
		switch e := t.(type) {
		case *ast.StarExpr:
			t = e.X
		case *ast.IndexExpr:
			t = e.X
		case *ast.IndexListExpr:
			t = e.X
		case *ast.Ident:
			return e.Name
		default:
			return fmt.Sprintf("%T", t)
		}
	}
}

// drive runs the instrumented plugin against envtest: one HTTPRoute
// between stable and canary, and the four calls run reads.
func drive(bin, trace string) error {
	c, err := harness.Start(harness.Standard)
	if err != nil {
		return err
	}
	defer c.Stop()
	const ns = "shop"
	if err := c.Namespace(ns, "stable", "canary"); err != nil {
		return err
	}
	if _, err := c.CreateYAML(ns, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web}
spec:
  parentRefs: [{name: gw}]
  rules:
  - backendRefs:
    - {name: stable, port: 80, weight: 100}
    - {name: canary, port: 80, weight: 0}
`); err != nil {
		return err
	}
	os.Setenv("MLTRACE_OUT", trace)
	p, err := harness.StartPlugin(bin, c.Kubeconfig, io.Discard)
	if err != nil {
		return err
	}
	defer p.Stop()
	ro := &v1alpha1.Rollout{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, UID: "uid-web"},
		Spec: v1alpha1.RolloutSpec{Strategy: v1alpha1.RolloutStrategy{Canary: &v1alpha1.CanaryStrategy{
			StableService: "stable", CanaryService: "canary",
			TrafficRouting: &v1alpha1.RolloutTrafficRouting{
				ManagedRoutes: []v1alpha1.MangedRoutes{{Name: "beta"}},
				Plugins:       map[string]json.RawMessage{"argoproj-labs/gatewayAPI": json.RawMessage(`{"httpRoute": "web"}`)},
			},
		}}},
	}
	header := &v1alpha1.SetHeaderRoute{Name: "beta", Match: []v1alpha1.HeaderRoutingMatch{
		{HeaderName: "x-beta", HeaderValue: &v1alpha1.StringMatch{Exact: "1"}}}}
	for _, e := range []struct {
		name string
		err  func() string
	}{
		{"SetWeight(10)", func() string { return p.Plugin.SetWeight(ro, 10, nil).ErrorString }},
		{"SetWeight(30)", func() string { return p.Plugin.SetWeight(ro, 30, nil).ErrorString }},
		{"SetHeaderRoute(beta)", func() string { return p.Plugin.SetHeaderRoute(ro, header).ErrorString }},
		{"RemoveManagedRoutes", func() string { return p.Plugin.RemoveManagedRoutes(ro).ErrorString }},
	} {
		// The watch's event of the last call's write arrives a few
		// milliseconds after its answer; a call that starts before it reads
		// the route from the answer (kube's overlay, nine functions more)
		// and one after it from the watch cache, so the counts changed from
		// run to run. Rollout steps are minutes apart: the pause measures
		// that steady state.
		time.Sleep(time.Second)
		if msg := e.err(); msg != "" {
			return fmt.Errorf("%s: %s", e.name, msg)
		}
	}
	return nil
}

type record struct {
	Seq    int    `json:"seq"`
	G      int64  `json:"g"`
	Parent int64  `json:"parent"`
	Depth  int    `json:"depth"`
	Name   string `json:"name"`
}

type call struct {
	Call    string   `json:"call"`
	Records []record `json:"records"`
}

func readTrace(path string) ([]call, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var calls []call
	s := bufio.NewScanner(f)
	s.Buffer(nil, 64<<20)
	for s.Scan() {
		var c call
		if err := json.Unmarshal(s.Bytes(), &c); err != nil {
			return nil, err
		}
		calls = append(calls, c)
	}
	return calls, s.Err()
}

// pkgOf is the package of a recorded name.
func pkgOf(name string) string {
	pkg, _, _ := strings.Cut(name, ".")
	return pkg
}

// report prints the call's line up to the HTTP request of its first apply
// (the first request the transport sends after ssa's Apply starts) and the
// counts.
func report(w io.Writer, c call, verbose bool) {
	recs := c.Records
	cut := len(recs)
	applying := false
	for i, r := range recs {
		if r.Name == "ssa.(Writer).Apply" {
			applying = true
		}
		if applying && strings.HasPrefix(r.Name, "kubeclient.(") && strings.HasSuffix(r.Name, ").RoundTrip") {
			cut = i + 1
			break
		}
	}
	line := recs[:cut]
	// Who called each record: the last record of its goroutine one level
	// up, or, for a goroutine's first, what its parent goroutine ran last.
	stacks := map[int64][]string{} // each goroutine's functions, by depth
	indent := map[int64]int{}      // a goroutine's depth in its parent's line
	var funcs, pkgs []string
	entries := map[string]int{}
	var entered []string
	for _, r := range line {
		if _, seen := stacks[r.G]; !seen {
			indent[r.G] = indent[r.Parent] + len(stacks[r.Parent])
		}
		st := stacks[r.G][:min(r.Depth, len(stacks[r.G]))]
		caller := ""
		if len(st) > 0 {
			caller = pkgOf(st[len(st)-1])
		} else if up := stacks[r.Parent]; len(up) > 0 {
			caller = pkgOf(up[len(up)-1])
		}
		pkg := pkgOf(r.Name)
		if caller != pkg {
			entries[pkg]++
			entered = append(entered, caller+"→"+pkg)
		}
		stacks[r.G] = append(st, r.Name)
		if !slices.Contains(funcs, r.Name) {
			funcs = append(funcs, r.Name)
		}
		if !slices.Contains(pkgs, pkg) {
			pkgs = append(pkgs, pkg)
		}
		if verbose {
			fmt.Fprintf(w, "%s%s\n", strings.Repeat("  ", indent[r.G]+len(st)), r.Name)
		}
	}
	again, againNoRoutes := 0, 0
	for pkg, n := range entries {
		if n > 1 {
			again += n - 1
			if pkg != "routes" {
				againNoRoutes += n - 1
			}
		}
	}
	fmt.Fprintf(w, "%s: %d functions in %d packages (%s) to the apply's HTTP request; packages entered again after leaving them: %d (%d leaving out routes, the model)\n",
		c.Call, len(funcs), len(pkgs), strings.Join(pkgs, ", "), again, againNoRoutes)
	if verbose {
		fmt.Fprintf(w, "  entries: %s\n\n", strings.Join(entered, " "))
	}
}
