package routes

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/client-go/rest"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
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

// The reader reads a version's OpenAPI document once and gives every route
// its kind's schema; a schema that lacks a field is read again after
// schemaRecheck (the CRDs may have been upgraded); a document it cannot
// read is logged, and the route then has every field.
func TestTheReaderReadsTheSchemaOncePerVersion(t *testing.T) {
	var docs atomic.Int32
	var refuse atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/openapi/v3/apis/" + Group + "/v1":
			docs.Add(1)
			if refuse.Load() {
				http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`, http.StatusForbidden)
				return
			}
			_, _ = w.Write([]byte(openAPIDoc))
		case "/apis/" + Group + "/v1/namespaces/" + wtNS + "/httproutes/web":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(jsonOf(t, servedRoute()))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	gw, err := gateway.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	logger, hook := logtest.NewNullLogger()
	c := NewCluster(gw.GatewayV1().RESTClient(), logrus.NewEntry(logger))
	c.versions[HTTPRoute] = "v1"
	ref := Ref{Kind: HTTPRoute, Namespace: wtNS, Name: "web"}
	read := func() Schema {
		t.Helper()
		r, err := c.Fresh(context.Background(), ref)
		if err != nil {
			t.Fatal(err)
		}
		return r.Schema
	}
	lacks := Schema{LacksRuleNames: true, LacksMirrorPercent: true}
	if got := read(); got != lacks || docs.Load() != 1 {
		t.Fatalf("first read: schema %+v after %d documents, want %+v after 1", got, docs.Load(), lacks)
	}
	if got := read(); got != lacks || docs.Load() != 1 {
		t.Fatalf("second read: schema %+v after %d documents, want %+v after 1", got, docs.Load(), lacks)
	}
	age := func() {
		c.mu.Lock()
		d := c.schemas["v1"]
		d.read = d.read.Add(-2 * schemaRecheck)
		c.schemas["v1"] = d
		c.mu.Unlock()
	}
	age()
	refuse.Store(true)
	if got := read(); got != (Schema{}) || docs.Load() != 2 {
		t.Fatalf("a refused document: schema %+v after %d documents, want every field after 2", got, docs.Load())
	}
	if n := len(hook.AllEntries()); n == 0 || !strings.Contains(hook.LastEntry().Message, "cannot read the Gateway API schema") {
		t.Errorf("no warning for the refused document: %v", hook.AllEntries())
	}
	if read(); docs.Load() != 2 {
		t.Errorf("the refused document was asked for again within schemaRecheck: %d", docs.Load())
	}
	age()
	refuse.Store(false)
	if got := read(); got != lacks || docs.Load() != 3 {
		t.Errorf("after schemaRecheck: schema %+v after %d documents, want %+v after 3", got, docs.Load(), lacks)
	}
}
