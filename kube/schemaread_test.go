package kube

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/client-go/rest"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

// The reader reads a version's OpenAPI document once and gives every route
// its kind's schema; a schema that lacks a field is read again after
// schemaRecheck (the CRDs may have been upgraded); a document it cannot
// read is logged, and the route then has every field.
func TestTheReaderReadsTheSchemaOncePerVersion(t *testing.T) {
	doc, err := os.ReadFile("../routes/testdata/openapi-v1.json") // the document of the routes tests
	if err != nil {
		t.Fatal(err)
	}
	var docs atomic.Int32
	var refuse atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/openapi/v3/apis/" + routes.Group + "/v1":
			docs.Add(1)
			if refuse.Load() {
				http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`, http.StatusForbidden)
				return
			}
			_, _ = w.Write(doc)
		case "/apis/" + routes.Group + "/v1/namespaces/" + wtNS + "/httproutes/web":
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
	c.versions[routes.HTTPRoute] = "v1"
	ref := routes.Ref{Kind: routes.HTTPRoute, Namespace: wtNS, Name: "web"}
	read := func() routes.Schema {
		t.Helper()
		r, err := c.Fresh(context.Background(), ref)
		if err != nil {
			t.Fatal(err)
		}
		return r.Schema
	}
	lacks := routes.Schema{LacksRuleNames: true, LacksMirrorPercent: true}
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
	if got := read(); got != (routes.Schema{}) || docs.Load() != 2 {
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
