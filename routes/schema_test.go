package routes

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// openAPIDoc (testdata/openapi-v1.json) is an OpenAPI v3 document as the
// apiserver publishes it for a group version, cut to the routes' rules:
// HTTPRoute of the v1.2 standard channel (no rule name, no mirror percent),
// GRPCRoute of v1.4 (both), a TCPRoute with rule names, and a kind the plugin
// does not manage.
func openAPIDoc(t *testing.T) []byte {
	t.Helper()
	doc, err := os.ReadFile("testdata/openapi-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestSchemasFromOpenAPI(t *testing.T) {
	got, err := SchemasFromOpenAPI(openAPIDoc(t), "v1")
	if err != nil {
		t.Fatal(err)
	}
	want := map[Kind]Schema{
		HTTPRoute: {LacksRuleNames: true, LacksMirrorPercent: true},
		GRPCRoute: {},
		TCPRoute:  {},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("schemas (-want +got):\n%s", diff)
	}
	// Another version's document names its schemas after that version.
	if got, _ := SchemasFromOpenAPI(openAPIDoc(t), "v1beta1"); len(got) != 0 {
		t.Errorf("v1beta1 schemas from a v1 document: %v", got)
	}
	if _, err := SchemasFromOpenAPI([]byte(`{"components": [`), "v1"); err == nil || !strings.Contains(err.Error(), "gateway.networking.k8s.io/v1") {
		t.Errorf("a broken document: error %v, want one naming the group version", err)
	}
}
