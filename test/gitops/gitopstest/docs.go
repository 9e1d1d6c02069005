package gitopstest

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// RecipeDoc is the page whose recipes the tests run: docs/gitops.md, or the
// file named by $GITOPS_DOC (to show what an older recipe does).
func RecipeDoc() string {
	if p := os.Getenv("GITOPS_DOC"); p != "" {
		return p
	}
	return filepath.Join(RepoRoot(), "docs", "gitops.md")
}

// Recipe returns the object of the given kind in RecipeDoc's ```yaml blocks
// that has the given name, unmarshalled into out.
func Recipe(t *testing.T, kind, name string, out any) {
	t.Helper()
	recipe(t, RecipeDoc(), kind, name, out)
}

// DocObject returns the first object of the given kind in the ```yaml blocks
// of the doc at path, unmarshalled into out.
func DocObject(t *testing.T, path, kind string, out any) {
	t.Helper()
	recipe(t, path, kind, "", out)
}

// DocObjects returns every object of the given kind in the ```yaml blocks
// of the doc at path, in the page's order.
func DocObjects(t *testing.T, path, kind string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, block := range yamlBlocks(string(data)) {
		for _, doc := range strings.Split(block, "\n---\n") {
			var m map[string]any
			if err := yaml.Unmarshal([]byte(doc), &m); err == nil && m["kind"] == kind {
				out = append(out, m)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no %s in a ```yaml block", path, kind)
	}
	return out
}

// recipe finds the object of kind named name ("": any name) in path's ```yaml blocks.
func recipe(t *testing.T, path, kind, name string, out any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range yamlBlocks(string(data)) {
		for _, doc := range strings.Split(block, "\n---\n") {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil || u.GetKind() != kind || name != "" && u.GetName() != name {
				continue
			}
			if err := yaml.Unmarshal([]byte(doc), out); err != nil {
				t.Fatalf("%s: %s %s: %v", path, kind, name, err)
			}
			t.Logf("recipe: %s %s from %s", kind, name, path)
			return
		}
	}
	t.Fatalf("%s has no %s named %s in a ```yaml block", path, kind, name)
}

func yamlBlocks(md string) []string {
	var out []string
	var cur *strings.Builder
	sc := bufio.NewScanner(strings.NewReader(md))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```yaml":
			cur = &strings.Builder{}
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	return out
}
