package kube

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes/routestest"
)

// The Reader contract: what a reader returns is the caller's own. A caller
// that changes the route it got changes nothing another caller sees.

func servedRoute() *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": routes.Group + "/v1",
		"kind":       "HTTPRoute",
		"metadata": map[string]any{
			"name": "web", "namespace": wtNS, "resourceVersion": "7",
			"labels":      map[string]any{"app": "web"},
			"annotations": map[string]any{"note": "kept"},
		},
		"spec": map[string]any{
			"parentRefs": []any{map[string]any{"name": "gw"}},
			"rules":      []any{map[string]any(routestest.Rule("/", routestest.Backend("web-stable", 100), routestest.Backend("web-canary", 0)))},
		},
	}}
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:rules":{}}}`)}})
	return u
}

// scribble changes every part of a route a transform could touch.
func scribble(r routes.Route) {
	r.Labels["app"] = "changed"
	r.Annotations["note"] = "changed"
	r.ManagedFields.Entries()[0].Manager = "changed"
	r.ManagedFields.Entries()[0].FieldsV1.SetRawString("{}")
	r.Rules[0].BackendRefs()[0].SetWeight(1)
	r.Rules[0]["name"] = "changed"
	r.Parents.Refs[0].Name = "changed"
}

// A Route read from a cached object is the caller's own: changing any part
// of it a transform could touch leaves the cached object as it was.
func TestFromUnstructuredSharesNothingWithTheCachedObject(t *testing.T) {
	u := servedRoute()
	before := u.DeepCopy()
	r, err := routes.FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	scribble(r)
	if diff := cmp.Diff(before.Object, u.Object); diff != "" {
		t.Errorf("changing the route changed the cached object (-before +after):\n%s", diff)
	}
}

// The overlay keeps a written route only until the watch cache has it: an
// event of an older version keeps it, the event of the write (or a newer
// one) drops it.
func TestWrittenOverlayEndsWithTheWatchEvent(t *testing.T) {
	c := NewCluster(nil, logrus.NewEntry(logrus.New()))
	served := servedRoute()
	written, err := routes.FromUnstructured(served)
	if err != nil {
		t.Fatal(err)
	}
	written.ResourceVersion = "8"
	c.Written(Answered(written, nil))
	for _, tc := range []struct {
		rv   string
		kept bool
	}{{"7", true}, {"8", false}} {
		served.SetResourceVersion(tc.rv)
		c.caughtUp(cached(t, served))
		c.mu.Lock()
		_, kept := c.overlay[written.Ref]
		c.mu.Unlock()
		if kept != tc.kept {
			t.Errorf("after the watch event of resourceVersion %s, the overlay holds the write of 8: %v, want %v", tc.rv, kept, tc.kept)
		}
	}
}

// A read that races the watch event of the plugin's own write still sees
// the write. A call lists the watch cache (the route before the write); then
// the event of the write arrives: the informer stores it and caughtUp drops
// the answer from the overlay; only then does the call look at the overlay
// for the route it listed. It must not answer with the route it listed: a
// call deciding on it finds the weight it had before the write, takes the
// route as unchanged and writes nothing, and the route keeps the weight of
// the call before (seen in make bench: two SetWeight steps back to back).
func TestAReadRacingTheWatchEventOfTheWriteSeesTheWrite(t *testing.T) {
	c := NewCluster(nil, logrus.NewEntry(logrus.New()))
	served := servedRoute() // resourceVersion 7
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	if err := store.Add(cached(t, served)); err != nil {
		t.Fatal(err)
	}
	ref := routes.Ref{Kind: routes.HTTPRoute, Namespace: wtNS, Name: "web"}
	answer, err := AnswerOf(ref, answerJSON(t, served, "8"))
	if err != nil {
		t.Fatal(err)
	}
	c.Written(answer)

	listed := store.List()[0] // the call lists the cache: 7
	served.SetResourceVersion("8")
	event := cached(t, served) // the watch event of the write: 8
	if err := store.Update(event); err != nil {
		t.Fatal(err)
	}
	c.caughtUp(event)

	got, _, err := c.fromCache(store, listed)
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != "8" {
		t.Errorf("the call read resourceVersion %s, after the plugin wrote 8", got.ResourceVersion)
	}
	want := event.route.DeepCopy()
	wantPtr := &want
	scribble(got)
	if diff := cmp.Diff(wantPtr, event.route); diff != "" {
		t.Errorf("changing what the call read changed the cache (-before +after):\n%s", diff)
	}
}

// A fresh read counts as much as a write's answer. When the answer to a
// write is lost and its repeat is refused (409), the plugin knows the route
// only from the GET that follows; the watch cache may still be behind it, and
// a call reading the cache then must get what the GET read.
func TestAFreshReadIsAheadOfAStaleCache(t *testing.T) {
	served := servedRoute()
	served.SetResourceVersion("8")
	f := kubetest.New(t)
	f.Script("/apis/"+routes.Group+"/v1/namespaces/"+wtNS+"/httproutes/web", http.StatusOK, string(jsonOf(t, served)))
	gw, err := gateway.NewForConfig(&rest.Config{Host: f.URL()})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCluster(gw.GatewayV1().RESTClient(), logrus.NewEntry(logrus.New()))
	c.versions[routes.HTTPRoute] = "v1" // discovered already
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	if err := store.Add(cached(t, servedRoute())); err != nil { // the cache: 7
		t.Fatal(err)
	}

	fresh, err := c.Fresh(context.Background(), routes.Ref{Kind: routes.HTTPRoute, Namespace: wtNS, Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	want := fresh.DeepCopy()
	scribble(fresh) // the caller's own: the overlay keeps its own copy
	got, _, err := c.fromCache(store, store.List()[0])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("a read of the cache after the fresh read (-fresh +got):\n%s", diff)
	}
}

// Two calls writing one route (Rollouts that share it) may record their
// answers in the other order: the overlay keeps the newer.
func TestTheOverlayKeepsTheNewerOfTwoAnswers(t *testing.T) {
	c := NewCluster(nil, logrus.NewEntry(logrus.New()))
	cached, err := routes.FromUnstructured(servedRoute()) // 7
	if err != nil {
		t.Fatal(err)
	}
	answer := func(rv string) *Answer {
		a, err := AnswerOf(cached.Ref, answerJSON(t, servedRoute(), rv))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	c.Written(answer("9"))
	c.Written(answer("8"))
	if got := newestOf(c, cached).ResourceVersion; got != "9" {
		t.Errorf("after the answers of 9 and then 8, a read gives %s; want 9", got)
	}
}

// jsonOf is u as the apiserver serves it.
func jsonOf(t *testing.T, u *unstructured.Unstructured) []byte {
	t.Helper()
	data, err := u.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// answerJSON is the apiserver's answer to a write of u at resourceVersion rv.
func answerJSON(t *testing.T, u *unstructured.Unstructured, rv string) []byte {
	t.Helper()
	u = u.DeepCopy()
	u.SetResourceVersion(rv)
	return jsonOf(t, u)
}

// The overlay holds the apiserver's answer and reads it only when a call
// reads the route before the watch cache has the write; every call gets its
// own copy.
func TestWrittenOverlayHandsOutCopies(t *testing.T) {
	c := NewCluster(nil, logrus.NewEntry(logrus.New()))
	cached, err := routes.FromUnstructured(servedRoute())
	if err != nil {
		t.Fatal(err)
	}
	answer, err := AnswerOf(cached.Ref, answerJSON(t, servedRoute(), "8"))
	if err != nil {
		t.Fatal(err)
	}
	if answer.ResourceVersion != "8" {
		t.Fatalf("AnswerOf read resourceVersion %q, want 8", answer.ResourceVersion)
	}
	c.Written(answer)
	want := cached.DeepCopy()
	want.ResourceVersion = "8"

	first := newestOf(c, cached)
	if diff := cmp.Diff(want, first); diff != "" {
		t.Fatalf("newest (-want +got):\n%s", diff)
	}
	scribble(first)
	if diff := cmp.Diff(want, newestOf(c, cached)); diff != "" {
		t.Errorf("a caller's change reached the next caller (-want +got):\n%s", diff)
	}
}

// An answer that cannot be read as a route is forgotten: reads answer with
// the cache's route, as if the plugin had not written.
func TestAnUnreadableAnswerIsForgotten(t *testing.T) {
	c := NewCluster(nil, logrus.NewEntry(logrus.New()))
	cached, err := routes.FromUnstructured(servedRoute())
	if err != nil {
		t.Fatal(err)
	}
	bad := servedRoute()
	bad.Object["spec"] = map[string]any{"rules": "not a list"}
	answer, err := AnswerOf(cached.Ref, answerJSON(t, bad, "8"))
	if err != nil {
		t.Fatal(err)
	}
	c.Written(answer)
	if diff := cmp.Diff(cached, newestOf(c, cached)); diff != "" {
		t.Errorf("newest (-cache +got):\n%s", diff)
	}
	if _, kept := c.overlay[cached.Ref]; kept {
		t.Error("the overlay still holds the unreadable answer")
	}
}

// cached is what a watch cache keeps of the served object u.
func cached(t *testing.T, u *unstructured.Unstructured) *cachedRoute {
	t.Helper()
	cr, err := toCache(jsonOf(t, u), nil)
	if err != nil {
		t.Fatal(err)
	}
	return cr
}

// The watch cache keeps the Route the plugin reads, made once; every read
// of it is the caller's own; an object decodeRoute cannot read is kept by its
// name with the reason, so reading it says why.
func TestWatchCacheKeepsWhatThePluginReads(t *testing.T) {
	c := NewCluster(nil, logrus.NewEntry(logrus.New()))
	want, err := routes.FromUnstructured(servedRoute())
	if err != nil {
		t.Fatal(err)
	}
	kept := cached(t, servedRoute())
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	if err := store.Add(kept); err != nil {
		t.Fatal(err)
	}
	if kept.GetObjectMeta().GetName() != "web" || kept.GetObjectMeta().GetNamespace() != wtNS || kept.GetObjectMeta().GetResourceVersion() != "7" {
		t.Errorf("keys: %s/%s at %s", kept.GetObjectMeta().GetNamespace(), kept.GetObjectMeta().GetName(), kept.GetObjectMeta().GetResourceVersion())
	}
	first, _, err := c.fromCache(store, kept)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, first); diff != "" {
		t.Errorf("read from the cache (-served +cached):\n%s", diff)
	}
	scribble(first)
	second, _, _ := c.fromCache(store, kept)
	if diff := cmp.Diff(want, second); diff != "" {
		t.Errorf("a caller's change reached the cache (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&want, kept.DeepCopyObject().(*cachedRoute).route); diff != "" {
		t.Errorf("DeepCopyObject (-want +got):\n%s", diff)
	}

	bad := servedRoute()
	bad.Object["spec"] = map[string]any{"rules": "not a list"}
	unreadable := cached(t, bad)
	if unreadable.GetObjectMeta().GetName() != "web" || unreadable.GetObjectMeta().GetNamespace() != wtNS {
		t.Errorf("an unreadable route is kept as %s/%s", unreadable.GetObjectMeta().GetNamespace(), unreadable.GetObjectMeta().GetName())
	}
	if _, _, err := c.fromCache(cache.NewStore(cache.MetaNamespaceKeyFunc), unreadable); err == nil || !strings.Contains(err.Error(), "spec.rules") {
		t.Errorf("reading an unreadable cached route: %v", err)
	}
}

// newestOf is newest of a whole route the cache holds.
func newestOf(c *Cluster, r routes.Route) routes.Route {
	out, _ := c.newest(r, false, true)
	return out
}

// A hundred calls that need a kind's served version at once (Rollouts
// starting on a fresh process) wait for one discovery.
func TestCallsStartingTogetherShareOneDiscovery(t *testing.T) {
	url, requests := kubetest.Answering(t, kubetest.Canned{Code: 200, ContentType: "application/json", Delay: 50 * time.Millisecond,
		Body: `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"gateway.networking.k8s.io/v1","resources":[{"name":"httproutes","namespaced":true,"kind":"HTTPRoute","verbs":["get"]}]}`})
	gw, err := gateway.NewForConfig(&rest.Config{Host: url, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCluster(gw.GatewayV1().RESTClient(), logrus.NewEntry(logrus.New()))
	var wg sync.WaitGroup
	errs := make([]error, 100)
	for i := range 100 {
		wg.Go(func() {
			var v string
			v, errs[i] = c.ServedVersion(context.Background(), routes.HTTPRoute)
			if errs[i] == nil && v != "v1" {
				errs[i] = fmt.Errorf("version %q", v)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if got := requests(); len(got) != 1 || got[0].Path != "/apis/gateway.networking.k8s.io/v1" {
		t.Errorf("100 calls at once asked %v, want one discovery of gateway.networking.k8s.io/v1", got)
	}
}

// ResourceVersion is what a call checks before it writes a route it decided
// on (has anything newer come?): the newer of what the watch cache holds
// and what the plugin's own writes answered, read without a request; ""
// when the cache cannot say.
func TestResourceVersionReadsTheCacheAndTheWritesWithoutARequest(t *testing.T) {
	const collection = "/apis/" + routes.Group + "/v1/namespaces/" + wtNS + "/httproutes"
	served := func(name string) map[string]any {
		u := servedRoute() // resourceVersion 7
		u.SetName(name)
		return u.Object
	}
	api := kubetest.New(t)
	api.Serve(collection, served("web"), served("shop"))
	gw, err := gateway.NewForConfig(&rest.Config{Host: api.URL(), QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCluster(gw.GatewayV1().RESTClient(), logrus.NewEntry(logrus.New()))
	defer c.Close()
	c.versions[routes.HTTPRoute] = "v1" // discovered already
	ctx := context.Background()
	ref := func(namespace, name string) routes.Ref {
		return routes.Ref{Kind: routes.HTTPRoute, Namespace: namespace, Name: name}
	}
	written := func(name, rv string) {
		u := servedRoute()
		u.SetName(name)
		a, err := AnswerOf(ref(wtNS, name), answerJSON(t, u, rv))
		if err != nil {
			t.Fatal(err)
		}
		c.Written(a)
	}

	if got := c.ResourceVersion(ctx, ref(wtNS, "web")); got != "7" {
		t.Fatalf("the cache holds web at 7; ResourceVersion says %q", got)
	}
	before := len(api.Requests())
	written("web", "8")  // ahead of the cache
	written("shop", "5") // behind it (an answer the watch has passed)
	for _, tc := range []struct {
		ref  routes.Ref
		want string
	}{
		{ref(wtNS, "web"), "8"},
		{ref(wtNS, "shop"), "7"},
		{ref(wtNS, "gone"), ""},
	} {
		if got := c.ResourceVersion(ctx, tc.ref); got != tc.want {
			t.Errorf("%s: ResourceVersion %q, want %q", tc.ref.Name, got, tc.want)
		}
	}
	if n := len(api.Requests()) - before; n != 0 {
		t.Errorf("reading resourceVersions from a synced cache sent %d requests, want 0", n)
	}
	if got := c.ResourceVersion(ctx, ref("locked", "web")); got != "" {
		t.Errorf("a namespace whose cache cannot list: ResourceVersion %q, want \"\"", got)
	}
}
