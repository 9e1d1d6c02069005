package kube

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// pathsCluster is a Cluster of the fake, which knows HTTPRoutes in v1.
func pathsCluster(t *testing.T, f *kubetest.Server) *Cluster {
	t.Helper()
	gw, err := gateway.NewForConfig(&rest.Config{Host: f.URL(), QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCluster(gw.GatewayV1().RESTClient(), logrus.NewEntry(logrus.New()))
	t.Cleanup(c.Close)
	c.versions[routes.HTTPRoute] = "v1" // discovered already
	c.importVersions["net.gke.io"] = "v1"
	return c
}

// A name that is no name, from a Rollout or from a route, never becomes a
// request: client-go's AbsPath would resolve "../../other/httproutes/web"
// to a route of another namespace, and anything else the controller may
// read. Each read refuses it, saying which segment, and sends nothing.
func TestANameThatIsNoNameSendsNoRequest(t *testing.T) {
	f := kubetest.New(t)
	c := pathsCluster(t, f)
	ctx := context.Background()
	route := func(name string) routes.Ref { return routes.Ref{Kind: routes.HTTPRoute, Namespace: wtNS, Name: name} }
	for _, tc := range []struct {
		name string
		read func() error
		want string
	}{
		{"a route that climbs out", func() error { _, err := c.Fresh(ctx, route("../../other/httproutes/web")); return err },
			`refusing a request whose path segment "../../other/httproutes/web" is no name (may not contain '/')`},
		{"a route that is ..", func() error { _, err := c.Fresh(ctx, route("..")); return err },
			`refusing a request whose path segment ".." is no name (may not be '..')`},
		{"an escaped slash", func() error { _, err := c.Fresh(ctx, route("..%2Fother")); return err },
			`path segment "..%2Fother" is no name (may not contain '%')`},
		{"no namespace", func() error {
			_, err := c.Fresh(ctx, routes.Ref{Kind: routes.HTTPRoute, Name: "web"})
			return err
		}, `refusing a request whose path has an empty segment (a missing name)`},
		{"a ConfigMap that climbs out", func() error {
			_, err := c.PredecessorRecords(ctx, wtNS, "../../../../api/v1/namespaces/kube-system/secrets/db")
			return err
		}, `reading ConfigMap shop/../../../../api/v1/namespaces/kube-system/secrets/db, where the argoproj-labs/gatewayAPI plugin recorded its header rules: refusing a request whose path segment`},
		{"a ServiceImport that climbs out", func() error {
			_, err := c.ServiceImported(ctx, routes.ObjectRef{Group: "net.gke.io", Kind: "ServiceImport", Namespace: wtNS, Name: "../web"})
			return err
		}, `reading ServiceImport.net.gke.io shop/../web: refusing a request whose path segment "../web" is no name`},
		{"a group that climbs out", func() error {
			_, err := c.ServiceImported(ctx, routes.ObjectRef{Group: "../api", Kind: "ServiceImport", Namespace: wtNS, Name: "web"})
			return err
		}, `discovering the versions of ../api: refusing a request whose path segment "../api" is no name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(f.Requests())
			if err := tc.read(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
			if got := f.Requests()[before:]; len(got) > 0 {
				t.Errorf("requests sent: %v", got)
			}
		})
	}

	// A route's parents are names the route gives: each is checked before
	// its watch or its read.
	before := len(f.Requests())
	got := c.Gateways(ctx, routes.Parents{Refs: []routes.ParentRef{
		{Group: routes.Group, Kind: "Gateway", Namespace: wtNS, Name: "../../../../../api/v1/namespaces/kube-system/secrets/db"},
		{Group: routes.Group, Kind: "Gateway", Namespace: "..", Name: "edge"},
	}})
	var unknown []string
	for _, g := range got {
		unknown = append(unknown, g.Unknown)
	}
	want := []string{
		`reading Gateway shop/../../../../../api/v1/namespaces/kube-system/secrets/db: refusing a request whose path segment "../../../../../api/v1/namespaces/kube-system/secrets/db" is no name (may not contain '/')`,
		`reading Gateway ../edge: refusing a request whose path segment ".." is no name (may not be '..')`,
	}
	if diff := cmp.Diff(want, unknown); diff != "" {
		t.Errorf("what the parents say (-want +got):\n%s", diff)
	}
	if got := f.Requests()[before:]; len(got) > 0 {
		t.Errorf("requests sent for the parents: %v", got)
	}
}

// An answer for another object than the one asked for is refused, naming
// both, and nothing of it is used: not another route (whose namespace the
// Rollout's reach was never checked for), not a Secret where a ConfigMap
// was asked for.
func TestAnAnswerForAnotherObjectIsRefused(t *testing.T) {
	f := kubetest.New(t)
	c := pathsCluster(t, f)
	ctx := context.Background()
	other := servedRoute()
	other.SetNamespace("other")
	f.Script("/apis/"+routes.Group+"/v1/namespaces/shop/httproutes/web", http.StatusOK, string(jsonOf(t, other)))
	f.Script("/api/v1/namespaces/shop/configmaps/cm", http.StatusOK,
		`{"kind":"Secret","apiVersion":"v1","metadata":{"name":"cm","namespace":"shop"},"data":{"httpManagedRoutes":"e30="}}`)
	f.Script("/api/v1/namespaces/shop/configmaps/moved", http.StatusOK,
		`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"db","namespace":"kube-system"},"data":{}}`)
	f.Script("/apis/net.gke.io/v1/namespaces/shop/serviceimports/web", http.StatusOK,
		`{"kind":"ServiceImport","apiVersion":"net.gke.io/v1","metadata":{"name":"web","namespace":"other"}}`)
	f.Script("/apis/"+routes.Group+"/v1/namespaces/shop/gateways/edge", http.StatusOK,
		`{"kind":"Gateway","apiVersion":"gateway.networking.k8s.io/v1","metadata":{"name":"edge","namespace":"infra"},"spec":{"gatewayClassName":"x"}}`)

	var got []string
	say := func(err error) {
		if err == nil {
			got = append(got, "no error")
			return
		}
		got = append(got, err.Error())
	}
	_, err := c.Fresh(ctx, routes.Ref{Kind: routes.HTTPRoute, Namespace: wtNS, Name: "web"})
	say(err)
	_, err = c.PredecessorRecords(ctx, wtNS, "cm")
	say(err)
	_, err = c.PredecessorRecords(ctx, wtNS, "moved")
	say(err)
	_, err = c.ServiceImported(ctx, routes.ObjectRef{Group: "net.gke.io", Kind: "ServiceImport", Namespace: wtNS, Name: "web"})
	say(err)
	got = append(got, c.Gateways(ctx, routes.Parents{Refs: []routes.ParentRef{{Group: routes.Group, Kind: "Gateway", Namespace: wtNS, Name: "edge"}}})[0].Unknown)
	want := []string{
		"asked for HTTPRoute shop/web, the apiserver answered with HTTPRoute other/web: the answer is refused, and nothing of it is used",
		"asked for ConfigMap shop/cm, the apiserver answered with Secret shop/cm: the answer is refused, and nothing of it is used",
		"asked for ConfigMap shop/moved, the apiserver answered with ConfigMap kube-system/db: the answer is refused, and nothing of it is used",
		"asked for ServiceImport shop/web, the apiserver answered with ServiceImport other/web: the answer is refused, and nothing of it is used",
		"asked for Gateway shop/edge, the apiserver answered with Gateway infra/edge: the answer is refused, and nothing of it is used",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

// A parent's GET answered with an object of another kind, whose status
// looks like a GatewayClass's but is not one, says which object came back
// and quotes none of it.
func TestAParentAnsweredByAnotherKindQuotesNothing(t *testing.T) {
	f := kubetest.New(t)
	c := pathsCluster(t, f)
	f.Script("/apis/"+routes.Group+"/v1/gatewayclasses/edge", http.StatusOK,
		`{"kind":"Secret","apiVersion":"v1","metadata":{"name":"db","namespace":"kube-system"},"status":{"supportedFeatures":[["aHVudGVyMg=="]]}}`)
	get := func(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*parentObject, error) {
		return c.parentObject(ctx, gvr, namespace, name)
	}
	_, err := get(context.Background(), gatewayClasses, "", "edge")
	want := "asked for GatewayClass edge, the apiserver answered with Secret kube-system/db: the answer is refused, and nothing of it is used"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}
