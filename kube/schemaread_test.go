package kube

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/client-go/rest"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
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
	const docPath = "/openapi/v3/apis/" + routes.Group + "/v1"
	f := kubetest.New(t)
	f.Add(servedRoute())
	f.Script(docPath, http.StatusOK, string(doc))
	docs := func() int { return f.Asked(docPath) }
	gw, err := gateway.NewForConfig(&rest.Config{Host: f.URL()})
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
	if got := read(); got != lacks || docs() != 1 {
		t.Fatalf("first read: schema %+v after %d documents, want %+v after 1", got, docs(), lacks)
	}
	if got := read(); got != lacks || docs() != 1 {
		t.Fatalf("second read: schema %+v after %d documents, want %+v after 1", got, docs(), lacks)
	}
	age := func() {
		c.mu.Lock()
		d := c.schemas["v1"]
		d.read = d.read.Add(-2 * schemaRecheck)
		c.schemas["v1"] = d
		c.mu.Unlock()
	}
	age()
	f.Script(docPath, http.StatusForbidden, kubetest.Status(http.StatusForbidden, "Forbidden"))
	if got := read(); got != (routes.Schema{}) || docs() != 2 {
		t.Fatalf("a refused document: schema %+v after %d documents, want every field after 2", got, docs())
	}
	if n := len(hook.AllEntries()); n == 0 || !strings.Contains(hook.LastEntry().Message, "cannot read the Gateway API schema") {
		t.Errorf("no warning for the refused document: %v", hook.AllEntries())
	}
	if read(); docs() != 2 {
		t.Errorf("the refused document was asked for again within schemaRecheck: %d", docs())
	}
	age()
	f.Script(docPath, http.StatusOK, string(doc))
	if got := read(); got != lacks || docs() != 3 {
		t.Errorf("after schemaRecheck: schema %+v after %d documents, want %+v after 3", got, docs(), lacks)
	}
}
