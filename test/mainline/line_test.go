package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// A made-up line: decode entered twice from plugin, routes from two
// stages, a goroutine started by the orchestrator, a String method.
var synthetic = []record{
	{G: 1, Depth: 0, Name: "plugin.(Plugin).SetWeight"},
	{G: 1, Depth: 1, Name: "plugin.(Plugin).run"},
	{G: 1, Depth: 2, Name: "decode.Decode"},
	{G: 1, Depth: 3, Name: "decode.parse"},
	{G: 1, Depth: 3, Name: "routes.Ref"},
	{G: 1, Depth: 2, Name: "orchestrator.(Orchestrator).Run"},
	{G: 1, Depth: 3, Name: "routes.Ref"},
	{G: 1, Depth: 3, Name: "orchestrator.write"},
	{G: 2, Parent: 1, Depth: 0, Name: "kube.Get"},
	{G: 2, Parent: 1, Depth: 1, Name: "kube.get"},
	{G: 1, Depth: 4, Name: "transform.(Change).String"},
	{G: 1, Depth: 2, Name: "decode.Decode"},
}

func TestWalk(t *testing.T) {
	line := walk(synthetic)
	var callers []string
	var indents []int
	for _, s := range line {
		callers = append(callers, s.caller)
		indents = append(indents, s.indent)
	}
	wantCallers := []string{"", "plugin.(Plugin).SetWeight", "plugin.(Plugin).run", "decode.Decode", "decode.Decode",
		"plugin.(Plugin).run", "orchestrator.(Orchestrator).Run", "orchestrator.(Orchestrator).Run",
		"orchestrator.write", "kube.Get", "orchestrator.write", "plugin.(Plugin).run"}
	if !reflect.DeepEqual(callers, wantCallers) {
		t.Errorf("callers\n got %q\nwant %q", callers, wantCallers)
	}
	if want := []int{0, 1, 2, 3, 3, 2, 3, 3, 4, 5, 4, 2}; !reflect.DeepEqual(indents, want) {
		t.Errorf("indents: got %v, want %v", indents, want)
	}
}

func TestCount(t *testing.T) {
	n := count(walk(synthetic))
	if len(n.funcs) != 10 {
		t.Errorf("functions: got %d (%q), want 10", len(n.funcs), n.funcs)
	}
	if want := []string{"plugin", "decode", "routes", "orchestrator", "kube", "transform"}; !reflect.DeepEqual(n.pkgs, want) {
		t.Errorf("packages: got %q, want %q", n.pkgs, want)
	}
	// decode and routes are each entered twice; routes is the model.
	if n.again != 2 || n.againOutside != 1 {
		t.Errorf("re-entries: got %d (%d outside routes), want 2 (1)", n.again, n.againOutside)
	}
	want := []stage{
		{"plugin.(Plugin).SetWeight", 0},
		{"decode.Decode", 1},
		{"orchestrator.(Orchestrator).Run", 1},
		{"kube.Get", 2},
	}
	if !reflect.DeepEqual(n.stages, want) {
		t.Errorf("stages\n got %v\nwant %v", n.stages, want)
	}
}

func TestApplyLine(t *testing.T) {
	recs := []record{
		{Name: "kubeclient.(transport).RoundTrip"}, // a read before the apply
		{Name: "ssa.(Writer).Apply"},
		{Name: "ssa.encode"},
		{Name: "kubeclient.(transport).RoundTrip"},
		{Name: "events.Send"},
	}
	if got := applyLine(recs); len(got) != 4 {
		t.Errorf("applyLine kept %d records, want 4", len(got))
	}
}

func TestProductSize(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"main.go":              "package main\n\nfunc main() {}\n\nfunc (t T) m() {}\n\ntype T int\n",
		"kube/kube.go":         "package kube\n\nfunc Get()\n\nfunc get() {\n}\n",
		"kube/kube_test.go":    "package kube\n\nfunc TestGet() {}\n",
		"kube/kubetest/k.go":   "package kubetest\n\nfunc Fake() {}\n",
		"test/harness/h.go":    "package harness\n\nfunc Start() {}\n",
		"hack/tool/main.go":    "package main\n\nfunc main() {}\n",
		"routes/routes.go.txt": "func notGo() {}\n",
	}
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := productSize(dir)
	if err != nil {
		t.Fatal(err)
	}
	// main.go: 7 lines, main and m; kube.go: 6 lines, get (Get has no body).
	if want := (size{funcs: 3, lines: 13}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
