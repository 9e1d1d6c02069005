package routes

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// openAPIDoc is an OpenAPI v3 document as the apiserver publishes it for a
// group version, cut to the routes' rules: HTTPRoute of the v1.2 standard
// channel (no rule name, no mirror percent), GRPCRoute of v1.4 (both), a
// TCPRoute with rule names, and a kind the plugin does not manage.
const openAPIDoc = `{"openapi": "3.0.0", "components": {"schemas": {
  "io.k8s.networking.gateway.v1.HTTPRoute": {"type": "object", "properties": {"spec": {"properties": {"rules": {"type": "array", "items": {"properties": {
    "matches": {"type": "array"}, "backendRefs": {"type": "array"},
    "filters": {"type": "array", "items": {"properties": {"type": {"type": "string"}, "requestMirror": {"properties": {"backendRef": {"type": "object"}}}}}}}}}}}}},
  "io.k8s.networking.gateway.v1.GRPCRoute": {"properties": {"spec": {"properties": {"rules": {"items": {"properties": {
    "name": {"type": "string"}, "backendRefs": {"type": "array"},
    "filters": {"items": {"properties": {"requestMirror": {"properties": {"backendRef": {}, "percent": {"type": "integer"}}}}}}}}}}}}},
  "io.k8s.networking.gateway.v1.TCPRoute": {"properties": {"spec": {"properties": {"rules": {"items": {"properties": {"name": {}, "backendRefs": {}}}}}}}},
  "io.k8s.networking.gateway.v1.Gateway": {"properties": {"spec": {"properties": {"listeners": {}}}}},
  "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {"type": "object"}
}}}`

func TestSchemasFromOpenAPI(t *testing.T) {
	got, err := SchemasFromOpenAPI([]byte(openAPIDoc), "v1")
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
	if got, _ := SchemasFromOpenAPI([]byte(openAPIDoc), "v1beta1"); len(got) != 0 {
		t.Errorf("v1beta1 schemas from a v1 document: %v", got)
	}
	if _, err := SchemasFromOpenAPI([]byte(`{"components": [`), "v1"); err == nil || !strings.Contains(err.Error(), "gateway.networking.k8s.io/v1") {
		t.Errorf("a broken document: error %v, want one naming the group version", err)
	}
}

func TestSchemaErrorSaysWhatToDo(t *testing.T) {
	r := Route{Ref: Ref{Kind: HTTPRoute, Namespace: "shop", Name: "web"}, Version: "v1", Schema: Schema{LacksRuleNames: true, LacksMirrorPercent: true}}
	err := r.checkMirrorPercent("mirror", 25)
	want := `mirror route "mirror": mirroring 25% of the requests needs spec.rules[].filters[].requestMirror.percent, which the installed HTTPRoute CRD (v1) does not have: ` +
		`it is in Gateway API v1.3 (standard channel; the experimental channel has it since v1.2) and later; upgrade the Gateway API CRDs, or mirror every request (leave the step's percentage out, or set it to 100)`
	if err == nil || err.Error() != want {
		t.Errorf("error:\n%v\nwant:\n%s", err, want)
	}
	if err := r.checkMirrorPercent("mirror", 100); err != nil {
		t.Errorf("100%% needs no percentage: %v", err)
	}
	r.Schema.LacksMirrorPercent = false
	if err := r.checkMirrorPercent("mirror", 25); err != nil {
		t.Errorf("a CRD with the field: %v", err)
	}
}
