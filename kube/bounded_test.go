package kube

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// boundsCluster is a Cluster on an apiserver holding no route, HTTPRoute
// discovered already, with a clock the test moves (*now).
func boundsCluster(t *testing.T) (*Cluster, *kubetest.Server, *time.Time) {
	t.Helper()
	api := kubetest.New(t)
	gw, err := gateway.NewForConfig(&rest.Config{Host: api.URL(), QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCluster(gw.GatewayV1().RESTClient(), logrus.NewEntry(logrus.New()))
	t.Cleanup(c.Close)
	c.versions[routes.HTTPRoute] = "v1"
	now := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return now }
	return c, api, &now
}

func named(name string) routes.Ref {
	return routes.Ref{Kind: routes.HTTPRoute, Namespace: wtNS, Name: name}
}

// getMissing reads ref, which must be missing.
func getMissing(t *testing.T, c *Cluster, ref routes.Ref) {
	t.Helper()
	if _, err := c.Get(context.Background(), ref); !apierrors.IsNotFound(err) {
		t.Fatalf("reading %s: %v; want not found", ref, err)
	}
}

// A Rollout names a route that is not there, and the controller calls
// again and again: the route is read with one GET while the Cluster
// remembers it missing (missingFor), and with another after. Its watch
// event, or an answer of the apiserver that has it (a write, a fresh
// read), makes the next read ask again at once.
func TestAMissingRouteIsReadOnceWhileItIsRememberedMissing(t *testing.T) {
	c, api, now := boundsCluster(t)
	ref := named("gone")
	path := routesOf(wtNS) + "/gone"
	asked := func(want int, after string) {
		t.Helper()
		if got := api.Asked(path); got != want {
			t.Errorf("after %s: %d GETs of the missing route; want %d", after, got, want)
		}
	}
	getMissing(t, c, ref)
	getMissing(t, c, ref)
	getMissing(t, c, ref)
	asked(1, "three reads in a row")
	if got := c.Held().MissingRoutes; got != 1 {
		t.Errorf("held: %d missing routes; want 1", got)
	}

	*now = now.Add(missingFor)
	getMissing(t, c, ref)
	asked(2, "a read missingFor later")

	served := servedRoute()
	served.SetName("gone")
	c.caughtUp(cached(t, served)) // its watch event
	if got := c.Held().MissingRoutes; got != 0 {
		t.Errorf("after its watch event: %d missing routes remembered; want 0", got)
	}
	getMissing(t, c, ref) // the fake does not hold it
	asked(3, "its watch event")

	r, err := routes.FromUnstructured(served)
	if err != nil {
		t.Fatal(err)
	}
	c.Written(Answered(r, nil))
	if got := c.Held().MissingRoutes; got != 0 {
		t.Errorf("after a write: %d missing routes remembered; want 0", got)
	}
}

// A tenant names ever new routes that are not there: what the Cluster
// remembers of them stays within its bounds, and the one read longest ago
// goes first (read again, it costs a GET again).
func TestWhatATenantsNamesMakeTheClusterRememberStaysWithinItsBounds(t *testing.T) {
	c, api, _ := boundsCluster(t)
	c.readByCalls = newBounded[routes.Ref, struct{}](3)
	c.missing = newBounded[routes.Ref, time.Time](2)
	for i := range 5 {
		getMissing(t, c, named(fmt.Sprintf("r%d", i)))
	}
	if diff := cmp.Diff(Held{RouteCaches: 1, WholeRoutes: 3, MissingRoutes: 2}, c.Held()); diff != "" {
		t.Errorf("held after 5 routes named (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]routes.Ref{named("r2"), named("r3"), named("r4")}, keptOf(c).ReadByCalls); diff != "" {
		t.Errorf("the routes kept whole (-want +got):\n%s", diff)
	}
	getMissing(t, c, named("r4"))
	getMissing(t, c, named("r0"))
	for name, want := range map[string]int{"r4": 1, "r0": 2} {
		if got := api.Asked(routesOf(wtNS) + "/" + name); got != want {
			t.Errorf("%s: %d GETs; want %d", name, got, want)
		}
	}
}

// Rollouts of ever new namespaces come from the argoproj-labs plugin: the
// reads of its ConfigMaps remembered stay within their bound, the oldest
// forgotten first.
func TestTheReadsOfThePredecessorsConfigMapsStayWithinTheirBound(t *testing.T) {
	c, api, _ := boundsCluster(t)
	c.predecessors = newBounded[string, predecessorRead](2)
	const path = "/api/v1/namespaces/%s/configmaps/" + routes.PredecessorConfigMap
	for _, ns := range []string{"a", "b", "c"} {
		api.Script(fmt.Sprintf(path, ns), http.StatusNotFound, kubetest.Status(http.StatusNotFound, "NotFound"))
	}
	ctx := context.Background()
	for _, ns := range []string{"a", "b", "c", "c", "a"} {
		if _, err := c.PredecessorRecords(ctx, ns, routes.PredecessorConfigMap); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Held().PredecessorReads; got != 2 {
		t.Errorf("held: %d reads; want 2", got)
	}
	for ns, want := range map[string]int{"a": 2, "b": 1, "c": 1} {
		if got := api.Asked(fmt.Sprintf(path, ns)); got != want {
			t.Errorf("namespace %s: %d GETs; want %d", ns, got, want)
		}
	}
}
