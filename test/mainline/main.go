// Command mainline counts the main line of a call: every function of the
// module's own code that one SetWeight(30), and one RemoveManagedRoutes that
// removes a header rule, enter from the plugin's RPC method to the HTTP
// request of the route's apply, in the order they run (docs/architecture.md).
//
// It copies the module (the working tree, or -ref), makes every function of
// its own code record that it starts (package mltrace, written into the
// copy: tracer.go.txt), builds the plugin from the copy, and drives it over
// go-plugin RPC against envtest with one HTTPRoute, its watch caches warm
// (each traced call follows one of the same kind). It prints the counts:
// functions, packages, how often the line enters a package it had already
// entered and left, and what a reader opens (the stages, see usage and
// isStage); with -v the functions, indented by call depth, and the stages
// in order. It also counts the product code's functions and lines from the
// copy's source.
//
// With -longest N it lists instead the N longest functions of the module's
// own code (its packages for tests included; tests, test/ and hack/ left
// out), in lines from func to the closing brace, and counts those over 50.
//
//	go run ./test/mainline            # the working tree
//	go run ./test/mainline -ref ca4de60
//	go run ./test/mainline -md        # the rows of docs/architecture.md's tables
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

// options are run's flags.
type options struct {
	ref, keep, from string
	verbose, md     bool
}

func main() {
	var o options
	flag.StringVar(&o.ref, "ref", "", "git ref to measure (default: the working tree)")
	flag.BoolVar(&o.verbose, "v", false, "print every function of each line, indented by call depth, and its stages in order, indented by the stages enclosing them")
	flag.BoolVar(&o.md, "md", false, "print the counts as the rows of the tables in docs/architecture.md")
	flag.StringVar(&o.keep, "trace", "", "also write the calls' trace (JSON lines) to this file")
	flag.StringVar(&o.from, "from", "", "count the calls of a trace written with -trace instead of running the plugin (no apiserver needed; the product code is still counted at -ref)")
	longest := flag.Int("longest", 0, "instead, list this many of the longest functions of the module's own code, and count those over 50 lines (no apiserver needed)")
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), usage)
		flag.PrintDefaults()
	}
	flag.Parse()
	var err error
	if *longest > 0 {
		err = listLongest(o.ref, *longest)
	} else {
		err = run(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mainline:", err)
		os.Exit(1)
	}
}

const usage = `usage: go run ./test/mainline [flags]

Counts, for SetWeight(30) and a RemoveManagedRoutes that removes a header
rule, from the plugin's RPC method to the HTTP request of the route's apply:

  functions    every function of the module the call enters
  packages     the packages of those functions
  re-entries   how often the line enters a package it had entered and left;
               also counted leaving out routes, the model
  stages       the functions a reader opens to follow the call: the RPC
               method and every function entered from another package of
               the module (what a package calls inside itself is read as
               part of the stage that entered it), leaving out routes' (the
               model's accessors) and String and Error methods (formatting)

and the product code: functions and lines of the non-test Go files outside
test/, hack/ and the packages for tests, counted from the source at -ref.

`

func run(o options) error {
	work, err := os.MkdirTemp("", "mainline-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	src := filepath.Join(work, "src")
	if err := copySource(harness.RepoRoot(), o.ref, src); err != nil {
		return err
	}
	// Measured before instrument changes the copy.
	size, err := productSize(src)
	if err != nil {
		return err
	}
	trace := o.from
	if trace == "" {
		trace = filepath.Join(work, "trace.jsonl")
		if err := traceCalls(src, work, trace); err != nil {
			return err
		}
	}
	if o.keep != "" {
		data, err := os.ReadFile(trace)
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.keep, data, 0o644); err != nil {
			return err
		}
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
	measured := []struct {
		name string
		c    call
	}{{"`SetWeight(30)`", calls[1]}, {"`RemoveManagedRoutes`", calls[3]}}
	if o.md {
		at, err := describe(o.ref)
		if err != nil {
			return err
		}
		for _, m := range measured {
			n := count(walk(applyLine(m.c.Records)))
			fmt.Printf("| %s | %s | %d | %d | %d | %d | %d |\n", at, m.name, len(n.stages), len(n.pkgs), n.againOutside, len(n.funcs), n.again)
		}
		fmt.Printf("\n| %s | %d | %d |\n", at, size.funcs, size.lines)
		return nil
	}
	for _, m := range measured {
		report(os.Stdout, m.c, o.verbose)
	}
	fmt.Printf("product code: %d functions, %d lines (non-test Go outside test/, hack/ and the packages for tests)\n", size.funcs, size.lines)
	return nil
}

// describe names what was measured in a table row: ref's short commit, or
// HEAD's with "+ working tree" when the tree differs from it.
func describe(ref string) (string, error) {
	repo := harness.RepoRoot()
	rev := ref
	if rev == "" {
		rev = "HEAD"
	}
	out, err := exec.Command("git", "-C", repo, "rev-parse", "--short", rev).Output()
	if err != nil {
		return "", fmt.Errorf("git rev-parse %s: %w", rev, err)
	}
	at := "`" + strings.TrimSpace(string(out)) + "`"
	if ref == "" {
		if st, _ := exec.Command("git", "-C", repo, "status", "--porcelain").Output(); len(st) > 0 {
			at += " + working tree"
		}
	}
	return at, nil
}

// traceCalls instruments the copy in src, builds the plugin from it in work
// and writes the trace of the calls drive makes.
func traceCalls(src, work, trace string) error {
	if err := instrument(src); err != nil {
		return err
	}
	bin := filepath.Join(work, "plugin")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir, build.Env = src, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building the instrumented copy: %w\n%s", err, out)
	}
	return drive(bin, trace)
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
	err := goFiles(src, append([]string{".git"}, notProduct...), instrumentFile)
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

// applyLine is the call's line up to the HTTP request of its first apply
// (the first request the transport sends after ssa's Apply starts).
func applyLine(recs []record) []record {
	applying := false
	for i, r := range recs {
		if r.Name == "ssa.(Writer).Apply" {
			applying = true
		}
		if applying && strings.HasPrefix(r.Name, "kubeclient.(") && strings.HasSuffix(r.Name, ").RoundTrip") {
			return recs[:i+1]
		}
	}
	return recs
}

// report prints the counts of the call's line to the apply (applyLine);
// with verbose also the line, indented by depth, and the stages.
func report(w io.Writer, c call, verbose bool) {
	line := walk(applyLine(c.Records))
	n := count(line)
	if verbose {
		for _, s := range line {
			fmt.Fprintf(w, "%s%s\n", strings.Repeat("  ", s.indent), s.Name)
		}
	}
	fmt.Fprintf(w, "%s: %d functions in %d packages (%s) to the apply's HTTP request; packages entered again after leaving them: %d (%d leaving out %s, the model)\n",
		c.Call, len(n.funcs), len(n.pkgs), strings.Join(n.pkgs, ", "), n.again, n.againOutside, model)
	fmt.Fprintf(w, "  what a reader opens: %d stages, %d packages, %d re-entries outside %s\n", len(n.stages), len(n.pkgs), n.againOutside, model)
	if verbose {
		fmt.Fprintf(w, "  entries: %s\n", strings.Join(n.entered, " "))
		for i, s := range n.stages {
			fmt.Fprintf(w, "  %2d %s%s\n", i+1, strings.Repeat("  ", s.depth), s.name)
		}
		fmt.Fprintln(w)
	}
}
