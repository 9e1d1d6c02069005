package main

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/gatewayapi-ssa/rollouts-plugin/events"
)

// troubleshootingPackages are the packages whose errors reach a user: the
// plugin's answers to the controller and the plan, inspect and cleanup
// commands.
var troubleshootingPackages = []string{
	".", "plugin", "rollout", "orchestrator", "desired", "transform", "routes", "kube", "ssa", "peers", "events", "cleanup", "plan", "cli", "metrics",
}

// minFragment is the shortest fixed text worth documenting; anything shorter
// is a wrapper such as "%s: %w" or "rollout %s/%s: %s: %s".
const minFragment = 15

// undocumented are fixed texts of error messages that docs/troubleshooting.md
// deliberately does not quote, each with the reason. Keep it short: an entry
// that no longer matches any message fails the test.
var undocumented = map[string]string{
	"a key or value the scanner leaves to encoding/json":                                          "kube's resourceVersion scanner uses it between its own functions to hand the object to encoding/json; it is never returned",
	"the plugin reads no Services in this cluster: an experiment step cannot be carried out here": "orchestrator.ReadPorts says so only to an orchestrator built without ReadServicesWith; the plugin's backend gives every one the controller's cluster",
}

// Every error message the plugin and its commands build is documented in
// docs/troubleshooting.md: the non-test Go files of troubleshootingPackages
// are parsed, the messages collected (collector.file says which), and the
// longest fixed text of each (between its format verbs, trimmed, at least
// minFragment characters) must be quoted in the page, white space
// normalised. A new error without its entry fails here, with its file:line.
func TestTroubleshootingCoversEveryError(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	page := normalizeSpace(strings.ReplaceAll(string(doc), `\|`, "|"))
	msgs, err := errorMessages(troubleshootingPackages)
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	var missing []string
	checked := 0
	for _, m := range msgs {
		if m.fragment == "" {
			continue
		}
		checked++
		if _, ok := undocumented[m.fragment]; ok {
			used[m.fragment] = true
			continue
		}
		if !strings.Contains(page, m.fragment) {
			missing = append(missing, fmt.Sprintf("%s: %q", m.pos, m.fragment))
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d error messages are not documented in docs/troubleshooting.md; quote each fragment there "+
			"(its cause and its fix), or add it to undocumented with a reason:\n%s", len(missing), strings.Join(missing, "\n"))
	}
	for f := range undocumented {
		if !used[f] {
			t.Errorf("undocumented lists %q, which no error message contains any more: remove it", f)
		}
	}
	t.Logf("%d error messages read, %d with a fixed text of at least %d characters checked", len(msgs), checked, minFragment)
}

// The collector finds what the test relies on, and fails as it should.
func TestErrorMessageCollector(t *testing.T) {
	dir := t.TempDir()
	src := `package x

import ("errors"; "fmt"; "io"; "os")

const prefix = "a constant prefix: "

type BadError struct{ msg string }

func (e *BadError) Error() string { return "the thing went wrong badly: " + e.msg }

func limitf(format string, args ...any) error { return &BadError{fmt.Sprintf(format, args...)} }

type Problem struct{ Step, Reason string }

type finding struct{ Detail string }

func describe(n int) string {
	if n > 0 {
		return fmt.Sprintf("described %d times over the limit", n)
	}
	return "described by a plain literal"
}

func f(n int, errOut io.Writer) ([]error, []Problem, finding) {
	fmt.Fprintf(errOut, "printed to the error output: %s\n", "x")
	fmt.Fprintln(os.Stderr, "printed to standard error")
	fmt.Fprintln(os.Stdout, "printed to standard output")
	_ = fmt.Sprintf("not an error message at all %d", n)
	var d finding
	d.Detail = "a detail assigned to the field"
	return []error{
		fmt.Errorf("%s: %w", "short", nil),
		fmt.Errorf("route %s has %d rules; at most 16 are allowed", "r", n),
		errors.New(prefix + "and a literal"),
		limitf("%d%% of the rules are too many for %s", n, "r"),
		&BadError{msg: fmt.Sprintf("composite %s literal message text", "x")},
		errors.New(describe(n)),
	}, []Problem{{Step: "a step name, not a message", Reason: "the plan's problem reason"}}, d
}
`
	if err := os.MkdirAll(filepath.Join(dir, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"x.go":      src,
		"x_test.go": "package x\n\nimport \"errors\"\n\nvar errTest = errors.New(\"only in a test file, not a message\")\n",
		"other.go":  "//go:build neverset\n\npackage x\n\nimport \"errors\"\n\nvar errOther = errors.New(\"only in another build of the package\")\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, "x", name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := errorMessages([]string{filepath.Join(dir, "x")})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		got = append(got, m.fragment)
	}
	want := []string{
		"the thing went wrong badly", // a literal in an Error method
		"printed to the error output",
		"printed to standard error",
		"a detail assigned to the field",
		"", // "%s: %w" has no fragment long enough
		"rules; at most 16 are allowed",
		"a constant prefix: and a literal",
		"% of the rules are too many for",
		"literal message text", // of "composite %s literal message text"
		"times over the limit", // describe, whose result errors.New is given
		"described by a plain literal",
		"the plan's problem reason",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("fragments:\n got %q\nwant %q", got, want)
	}
}

// errorMessage is one error message found in the source, with its longest
// fixed text ("" if shorter than minFragment or not a constant).
type errorMessage struct {
	pos      string
	text     string
	fragment string
}

// errorMessages reads every non-test Go file of the default build in each
// directory and returns the messages of the errors built there.
func errorMessages(dirs []string) ([]errorMessage, error) {
	var out []errorMessage
	fset := token.NewFileSet()
	for _, dir := range dirs {
		names, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			return nil, err
		}
		sort.Strings(names)
		var files []*ast.File
		for _, name := range names {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			if ok, err := build.Default.MatchFile(dir, filepath.Base(name)); err != nil || !ok {
				if err != nil {
					return nil, err
				}
				continue // another build (the faultinject tag)
			}
			f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
			if err != nil {
				return nil, err
			}
			files = append(files, f)
		}
		c := collector{fset: fset, describers: describers(files), followed: map[string]bool{}}
		for _, f := range files {
			c.consts = constants(f)
			c.file(f)
		}
		out = append(out, c.out...)
	}
	return out, nil
}

// collector finds the messages of one package's errors.
type collector struct {
	fset *token.FileSet
	// consts are the current file's string constants.
	consts map[string]string
	// describers are the package's functions that return a string (such
	// as describeJSONError), followed when errors.New is given their result.
	describers map[string]*ast.FuncDecl
	followed   map[string]bool
	out        []errorMessage
}

// describers are the functions of the files, not methods, that return one string.
func describers(files []*ast.File) map[string]*ast.FuncDecl {
	out := map[string]*ast.FuncDecl{}
	for _, f := range files {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if ok && fn.Recv == nil && returnsString(fn) {
				out[fn.Name.Name] = fn
			}
		}
	}
	return out
}

func (c *collector) add(n ast.Node, text string, format bool) {
	c.out = append(c.out, errorMessage{pos: c.fset.Position(n.Pos()).String(), text: text, fragment: longestFragment(text, format)})
}

// expr adds a message given as an expression: a constant one, or the
// constant parts of a concatenation.
func (c *collector) expr(e ast.Expr, format bool) {
	if s, ok := constString(e, c.consts); ok {
		c.add(e, s, format)
		return
	}
	if b, ok := e.(*ast.BinaryExpr); ok && b.Op == token.ADD {
		c.expr(b.X, false)
		c.expr(b.Y, false)
	}
}

// value adds a message that is a value: fmt.Sprintf's format, or the
// constant parts of the expression.
func (c *collector) value(e ast.Expr) {
	if call, ok := e.(*ast.CallExpr); ok && callee(call) == "fmt.Sprintf" && len(call.Args) > 0 {
		c.expr(call.Args[0], true)
		return
	}
	c.expr(e, false)
}

// follow adds what a describer returns.
func (c *collector) follow(fn *ast.FuncDecl) {
	if c.followed[fn.Name.Name] {
		return
	}
	c.followed[fn.Name.Name] = true
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if r, ok := n.(*ast.ReturnStmt); ok && len(r.Results) == 1 {
			c.value(r.Results[0])
		}
		return true
	})
}

// file adds the messages of one file:
//   - the format of fmt.Errorf and limitf, the text of errors.New (or what
//     the package's function whose result it is given returns);
//   - in an Error() string method, the formats of fmt.Sprintf and
//     fmt.Fprintf and every other string constant;
//   - every value of a composite literal of a type named ...Error, and the
//     value of a field Reason (a plan's problem) or Detail (what VerifyWeight
//     found) in any composite literal or assignment;
//   - what is printed to errOut or os.Stderr (the commands and main).
func (c *collector) file(f *ast.File) {
	for _, decl := range f.Decls {
		fn, isFunc := decl.(*ast.FuncDecl)
		inError := isFunc && isErrorMethod(fn)
		done := map[ast.Node]bool{}
		ast.Inspect(decl, func(n ast.Node) bool {
			if n == nil || done[n] {
				return false
			}
			switch n := n.(type) {
			case *ast.CallExpr:
				name := callee(n)
				switch {
				case (name == "fmt.Errorf" || name == "limitf") && len(n.Args) > 0:
					c.expr(n.Args[0], true)
				case name == "errors.New" && len(n.Args) > 0:
					if call, ok := n.Args[0].(*ast.CallExpr); ok && c.describers[callee(call)] != nil {
						c.follow(c.describers[callee(call)])
						return true
					}
					c.expr(n.Args[0], false)
				case (name == "fmt.Fprintf" || name == "fmt.Fprintln") && len(n.Args) > 1 && (inError || toStderr(n.Args[0])):
					for _, a := range n.Args[1:] {
						c.expr(a, name == "fmt.Fprintf")
						done[a] = true
						if name == "fmt.Fprintf" {
							break
						}
					}
					return true
				case inError && name == "fmt.Sprintf" && len(n.Args) > 0:
					c.expr(n.Args[0], true)
				default:
					return true
				}
				done[n.Args[0]] = true
			case *ast.CompositeLit:
				all := strings.HasSuffix(typeName(n.Type), "Error")
				for _, el := range n.Elts {
					v := el
					if kv, ok := el.(*ast.KeyValueExpr); ok {
						v = kv.Value
						if !all && !messageField(kv.Key) {
							continue
						}
					} else if !all {
						continue
					}
					c.value(v)
					done[v] = true
				}
			case *ast.AssignStmt:
				for i, lhs := range n.Lhs {
					if sel, ok := lhs.(*ast.SelectorExpr); ok && messageField(sel.Sel) && i < len(n.Rhs) {
						c.value(n.Rhs[i])
						done[n.Rhs[i]] = true
					}
				}
			case ast.Expr:
				if !inError {
					return true
				}
				if _, ok := constString(n, c.consts); ok {
					c.expr(n, false)
					return false
				}
			}
			return true
		})
	}
}

// messageField says whether a field holds a message: Reason or Detail.
func messageField(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && (id.Name == "Reason" || id.Name == "Detail")
}

// toStderr says whether a writer is the commands' errOut or os.Stderr.
func toStderr(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == "errOut"
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		return ok && x.Name == "os" && e.Sel.Name == "Stderr"
	}
	return false
}

// isErrorMethod says whether fn is a method Error() string.
func isErrorMethod(fn *ast.FuncDecl) bool {
	return fn.Recv != nil && fn.Name.Name == "Error" && fn.Type.Params.NumFields() == 0 && returnsString(fn)
}

// returnsString says whether fn returns one string.
func returnsString(fn *ast.FuncDecl) bool {
	if fn.Type.Results.NumFields() != 1 {
		return false
	}
	id, ok := fn.Type.Results.List[0].Type.(*ast.Ident)
	return ok && id.Name == "string"
}

// callee is "pkg.Func" or "Func" for a call of a package's function or a
// local one.
func callee(c *ast.CallExpr) string {
	switch fun := c.Fun.(type) {
	case *ast.Ident:
		return fun.Name
	case *ast.SelectorExpr:
		if x, ok := fun.X.(*ast.Ident); ok {
			return x.Name + "." + fun.Sel.Name
		}
	}
	return ""
}

// typeName is the name of a composite literal's type, without its package.
func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	}
	return ""
}

// constants are a file's string constants that are literals.
func constants(f *ast.File) map[string]string {
	out := map[string]string{}
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i < len(vs.Values) {
					if s, ok := constString(vs.Values[i], out); ok {
						out[name.Name] = s
					}
				}
			}
		}
	}
	return out
}

// constString evaluates a string literal, a concatenation of them, or a
// constant of the file.
func constString(e ast.Expr, consts map[string]string) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.ParenExpr:
		return constString(e.X, consts)
	case *ast.Ident:
		s, ok := consts[e.Name]
		return s, ok
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		x, ok := constString(e.X, consts)
		if !ok {
			return "", false
		}
		y, ok := constString(e.Y, consts)
		return x + y, ok
	}
	return "", false
}

// verb is a format verb of package fmt (%% excepted).
var verb = regexp.MustCompile(`%[-+# 0]*(\[\d+\])?(\d+|\*)?(\.(\d+|\*)?)?(\[\d+\])?[a-zA-Z]`)

// longestFragment is the longest fixed text of a message, trimmed of white
// space and of the punctuation that joins it to a value (a bracket closing
// before it, one opening after it); "" if it is shorter than minFragment.
func longestFragment(text string, format bool) string {
	parts := []string{text}
	if format {
		// %% is a literal percent sign: keep it out of the verbs' way.
		parts = verb.Split(strings.ReplaceAll(text, "%%", "\x00"), -1)
	}
	best := ""
	for _, p := range parts {
		p = normalizeSpace(strings.ReplaceAll(p, "\x00", "%"))
		p = strings.TrimRight(strings.TrimLeft(p, " .:;,)]"), " .:;,([")
		if len(p) > len(best) {
			best = p
		}
	}
	if len(best) < minFragment {
		return ""
	}
	return best
}

var space = regexp.MustCompile(`\s+`)

func normalizeSpace(s string) string { return space.ReplaceAllString(s, " ") }

// saysReason is an error that says its Event reason, as the module's error
// types do.
type saysReason string

func (r saysReason) Error() string  { return "an error of reason " + string(r) }
func (r saysReason) Reason() string { return string(r) }

// reasonMethod is an error type's Event reason, as it says it.
var reasonMethod = regexp.MustCompile(`(?m)^func \([a-z]+ \*?([A-Za-z]+)\) Reason\(\) string \{ return "([A-Za-z]+)" \}`)

// Every Event reason an error type says of itself (its Reason method: how
// package events names the Warning on the Rollout) is a row of the table
// in docs/troubleshooting.md#events, and the reason its Warning takes.
func TestEveryErrorReasonIsInTheEventsTable(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, pkg := range append(troubleshootingPackages, "kubeclient") {
		files, _ := filepath.Glob(filepath.Join(pkg, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range reasonMethod.FindAllStringSubmatch(string(src), -1) {
				found++
				if !strings.Contains(string(doc), "| `"+m[2]+"` |") {
					t.Errorf("%s: %s says Event reason %s, which the table of docs/troubleshooting.md#events has no row for", f, m[1], m[2])
				}
				if got := events.Reason(saysReason(m[2])); got != m[2] {
					t.Errorf("%s: %s says Event reason %s, but package events names its Warning %s: add the reason to events.byPriority", f, m[1], m[2], got)
				}
			}
		}
	}
	if found < 10 {
		t.Errorf("found %d Reason methods; the pattern no longer matches how they are written", found)
	}
}
