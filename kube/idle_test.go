package kube

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	"k8s.io/client-go/rest"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// idleNS is a namespace whose routes a call reads once and then no more.
const idleNS = "idle"

// routesOf is the path of the HTTPRoutes of a namespace (their LIST and watch).
func routesOf(namespace string) string {
	return "/apis/" + routes.Group + "/v1/namespaces/" + namespace + "/httproutes"
}

// idleCluster is a Cluster on an apiserver serving HTTPRoute web in namespaces
// shop and idle, and no ReferenceGrant in idle; HTTPRoute and ReferenceGrant
// are discovered already.
func idleCluster(t *testing.T) (*Cluster, *kubetest.Server) {
	t.Helper()
	in := func(namespace string) map[string]any {
		u := servedRoute() // resourceVersion 7
		u.SetNamespace(namespace)
		return u.Object
	}
	api := kubetest.New(t)
	api.Serve(routesOf(wtNS), in(wtNS))
	api.Serve(routesOf(idleNS), in(idleNS))
	api.Serve("/apis/" + routes.Group + "/v1/namespaces/" + idleNS + "/referencegrants")
	gw, err := gateway.NewForConfig(&rest.Config{Host: api.URL(), QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCluster(gw.GatewayV1().RESTClient(), logrus.NewEntry(logrus.New()))
	t.Cleanup(c.Close) // before the server's Close
	c.versions[routes.HTTPRoute] = "v1"
	c.grantsServed = "v1"
	return c, api
}

func web(namespace string) routes.Ref {
	return routes.Ref{Kind: routes.HTTPRoute, Namespace: namespace, Name: "web"}
}

// A call reads a route; then no call reads that namespace for longer than
// the Cluster lets a cache idle: its watch ends. The next read starts a new
// one, and answers as the first did.
func TestAWatchCacheNoCallUsesIsStoppedAndTheNextReadStartsItAgain(t *testing.T) {
	c, api := idleCluster(t)
	ctx := context.Background()
	first, err := c.Get(ctx, web(wtNS))
	if err != nil {
		t.Fatal(err)
	}
	api.AwaitWatches("the watch of shop's routes", func(open, _ map[string]int) bool { return open[routesOf(wtNS)] == 1 })

	c.StopIdleCaches(time.Millisecond)
	api.AwaitWatches("the idle watch to end", func(open, _ map[string]int) bool { return open[routesOf(wtNS)] == 0 })
	c.StopIdleCaches(0) // from here on every cache runs until Close

	again, err := c.Get(ctx, web(wtNS))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("the read after the cache was stopped (-first +again):\n%s", diff)
	}
	api.AwaitWatches("a new watch of shop's routes", func(open, opened map[string]int) bool {
		return open[routesOf(wtNS)] == 1 && opened[routesOf(wtNS)] == 2
	})
}

// A call reads the routes of shop and idle and idle's ReferenceGrants;
// later calls read only shop's routes. The caches of idle (routes and
// grants) are stopped, shop's runs on; what the Cluster kept beside the
// route cache of idle (the answer to a write, the routes calls read, a route
// read whole, a waiter for the next event) is gone, and the waiter woken.
func TestAWatchCacheACallUsesRunsOnWhileTheOthersStop(t *testing.T) {
	c, api := idleCluster(t)
	ctx := context.Background()
	for _, ns := range []string{wtNS, idleNS} {
		if _, err := c.Get(ctx, web(ns)); err != nil {
			t.Fatal(err)
		}
		u := servedRoute()
		u.SetNamespace(ns)
		a, err := AnswerOf(web(ns), answerJSON(t, u, "8")) // ahead of the cache
		if err != nil {
			t.Fatal(err)
		}
		c.Written(a)
		c.keepWhole(routes.Route{Ref: web(ns), ResourceVersion: "8"})
	}
	if _, err := c.ReferenceGrants(ctx, idleNS); err != nil {
		t.Fatal(err)
	}
	grantsOfIdle := "/apis/" + routes.Group + "/v1/namespaces/" + idleNS + "/referencegrants"
	api.AwaitWatches("three watches", func(open, _ map[string]int) bool {
		return open[routesOf(wtNS)] == 1 && open[routesOf(idleNS)] == 1 && open[grantsOfIdle] == 1
	})
	shopChanged, idleChanged := c.NextEvent(web(wtNS)), c.NextEvent(web(idleNS))

	cutoff := time.Now()
	if _, err := c.Get(ctx, web(wtNS)); err != nil { // shop's cache is in use
		t.Fatal(err)
	}
	c.stopUnusedSince(cutoff)

	api.AwaitWatches("the watches of idle to end", func(open, _ map[string]int) bool {
		return open[routesOf(idleNS)] == 0 && open[grantsOfIdle] == 0
	})
	select {
	case <-idleChanged:
	default:
		t.Error("a waiter for the next event of a route of the stopped cache was not woken")
	}
	select {
	case <-shopChanged:
		t.Error("a waiter for the next event of a route of the running cache was woken")
	default:
	}
	shopWeb := []routes.Ref{web(wtNS)}
	want := kept{Overlay: shopWeb, ReadByCalls: shopWeb, FreshWhole: shopWeb, Changes: shopWeb}
	if diff := cmp.Diff(want, keptOf(c)); diff != "" {
		t.Errorf("kept after idle's caches stopped (-want +got):\n%s", diff)
	}
	c.mu.Lock()
	shop, running := c.informers[informerKey{kind: routes.HTTPRoute, namespace: wtNS}]
	caches := len(c.informers) + len(c.parents)
	c.mu.Unlock()
	if !running || caches != 1 {
		t.Fatalf("running: shop's cache %v, %d caches in all; want shop's alone", running, caches)
	}
	select {
	case <-shop.stop:
		t.Error("the cache a call uses was stopped")
	default:
	}
}

// kept is what a Cluster keeps beside its route caches, by route.
type kept struct {
	Overlay, ReadByCalls, FreshWhole, Changes []routes.Ref
}

func keptOf(c *Cluster) kept {
	c.mu.Lock()
	defer c.mu.Unlock()
	return kept{Overlay: keysOf(c.overlay), ReadByCalls: sortedRefs(c.readByCalls.keys()), FreshWhole: keysOf(c.freshWhole), Changes: keysOf(c.changes)}
}

func keysOf[V any](m map[routes.Ref]V) []routes.Ref {
	var out []routes.Ref
	for ref := range m {
		out = append(out, ref)
	}
	return sortedRefs(out)
}

func sortedRefs(out []routes.Ref) []routes.Ref {
	if len(out) == 0 {
		return nil
	}
	slices.SortFunc(out, func(a, b routes.Ref) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// What a Cluster holds follows the calls: two namespaces' routes read and
// one namespace's ReferenceGrants give two route caches, one grant cache
// and two routes kept whole; once idle's caches stopped, shop's remain.
func TestHeldCountsTheCachesRunningAndTheRoutesKeptWhole(t *testing.T) {
	c, _ := idleCluster(t)
	ctx := context.Background()
	if diff := cmp.Diff(Held{}, c.Held()); diff != "" {
		t.Errorf("held before any call (-want +got):\n%s", diff)
	}
	for _, ns := range []string{wtNS, idleNS} {
		if _, err := c.Get(ctx, web(ns)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.ReferenceGrants(ctx, idleNS); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Held{RouteCaches: 2, GrantCaches: 1, WholeRoutes: 2}, c.Held()); diff != "" {
		t.Errorf("held after the calls (-want +got):\n%s", diff)
	}
	cutoff := time.Now()
	if _, err := c.Get(ctx, web(wtNS)); err != nil {
		t.Fatal(err)
	}
	c.stopUnusedSince(cutoff)
	if diff := cmp.Diff(Held{RouteCaches: 1, WholeRoutes: 1}, c.Held()); diff != "" {
		t.Errorf("held after idle's caches stopped (-want +got):\n%s", diff)
	}
}
