package routes

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The Reader contract: what a reader returns is the caller's own. A caller
// that changes the route it got changes nothing another caller sees.

func servedRoute() *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Group + "/v1",
		"kind":       "HTTPRoute",
		"metadata": map[string]any{
			"name": "web", "namespace": wtNS, "resourceVersion": "7",
			"labels":      map[string]any{"app": "web"},
			"annotations": map[string]any{"note": "kept"},
		},
		"spec": map[string]any{
			"parentRefs": []any{map[string]any{"name": "gw"}},
			"rules":      []any{map[string]any(wtRule("/", wtBackend("web-stable", 100), wtBackend("web-canary", 0)))},
		},
	}}
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:rules":{}}}`)}})
	return u
}

// scribble changes every part of a route a transform could touch.
func scribble(r Route) {
	r.Labels["app"] = "changed"
	r.Annotations["note"] = "changed"
	r.ManagedFields[0].Manager = "changed"
	r.ManagedFields[0].FieldsV1.SetRawString("{}")
	r.Rules[0].BackendRefs()[0].SetWeight(1)
	r.Rules[0]["name"] = "changed"
	r.Parents.Refs[0].Name = "changed"
}

func TestFromUnstructuredSharesNothingWithTheCachedObject(t *testing.T) {
	u := servedRoute()
	before := u.DeepCopy()
	r, err := FromUnstructured(u)
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
	c := NewCluster(nil, nil, logrus.NewEntry(logrus.New()))
	served := servedRoute()
	written, err := FromUnstructured(served)
	if err != nil {
		t.Fatal(err)
	}
	written.ResourceVersion = "8"
	c.Written(written)
	for _, tc := range []struct {
		rv   string
		kept bool
	}{{"7", true}, {"8", false}} {
		served.SetResourceVersion(tc.rv)
		event, err := keepWhatThePluginReads(served.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		c.caughtUp(event)
		c.mu.Lock()
		_, kept := c.written[written.Ref]
		c.mu.Unlock()
		if kept != tc.kept {
			t.Errorf("after the watch event of resourceVersion %s, the overlay holds the write of 8: %v, want %v", tc.rv, kept, tc.kept)
		}
	}
}

func TestWrittenOverlayHandsOutCopies(t *testing.T) {
	c := NewCluster(nil, nil, logrus.NewEntry(logrus.New()))
	cached, err := FromUnstructured(servedRoute())
	if err != nil {
		t.Fatal(err)
	}
	written := cached.DeepCopy()
	written.ResourceVersion = "8"
	c.Written(written)
	scribble(written) // the writer's copy is its own too
	want := cached.DeepCopy()
	want.ResourceVersion = "8"

	first := c.newest(cached, true)
	if diff := cmp.Diff(want, first); diff != "" {
		t.Fatalf("newest (-want +got):\n%s", diff)
	}
	scribble(first)
	if diff := cmp.Diff(want, c.newest(cached, true)); diff != "" {
		t.Errorf("a caller's change reached the next caller (-want +got):\n%s", diff)
	}
}

func TestDeepCopyOfAnEmptyRouteStaysEmpty(t *testing.T) {
	if diff := cmp.Diff(Route{}, Route{}.DeepCopy()); diff != "" {
		t.Error(diff)
	}
}

// Read field by field, managedFields come out as the reflecting converter of
// Unstructured.GetManagedFields makes them.
func TestManagedFieldsReadAsGetManagedFieldsReadsThem(t *testing.T) {
	u := servedRoute()
	at := metav1.NewTime(time.Date(2026, 5, 1, 12, 30, 0, 0, time.UTC))
	u.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: "kubectl-create", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: Group + "/v1", Time: &at,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:rules":{},"f:hostnames":{}}}`)},
		{Manager: "argo-rollouts-gatewayapi", Operation: metav1.ManagedFieldsOperationApply, APIVersion: Group + "/v1",
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{"f:x":{}}}}`)},
		{Manager: "gateway", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"},
	})
	got, err := managedFields(u)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(u.GetManagedFields(), got); diff != "" {
		t.Errorf("managedFields (-GetManagedFields +read):\n%s", diff)
	}
}

// Reading without a copy reads the same route.
func TestFromUnstructuredNoCopyReadsTheSameRoute(t *testing.T) {
	copied, err := FromUnstructured(servedRoute())
	if err != nil {
		t.Fatal(err)
	}
	shared, err := FromUnstructuredNoCopy(servedRoute())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(copied, shared); diff != "" {
		t.Errorf("(-copied +not copied):\n%s", diff)
	}
}

// The watch cache keeps the Route the plugin reads, made once; every read
// of it is the caller's own; the transform is idempotent, and an object it
// cannot read stays as served, so reading it says why.
func TestWatchCacheKeepsWhatThePluginReads(t *testing.T) {
	c := NewCluster(nil, nil, logrus.NewEntry(logrus.New()))
	want, err := FromUnstructured(servedRoute())
	if err != nil {
		t.Fatal(err)
	}
	kept, err := keepWhatThePluginReads(servedRoute())
	if err != nil {
		t.Fatal(err)
	}
	cr, ok := kept.(*cachedRoute)
	if !ok {
		t.Fatalf("the cache keeps a %T", kept)
	}
	if cr.GetName() != "web" || cr.GetNamespace() != wtNS || cr.GetResourceVersion() != "7" {
		t.Errorf("keys: %s/%s at %s", cr.GetNamespace(), cr.GetName(), cr.GetResourceVersion())
	}
	if again, _ := keepWhatThePluginReads(kept); again != kept {
		t.Error("the transform changed what it made before")
	}
	first, err := c.fromCache(kept)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, first); diff != "" {
		t.Errorf("read from the cache (-served +cached):\n%s", diff)
	}
	scribble(first)
	second, _ := c.fromCache(kept)
	if diff := cmp.Diff(want, second); diff != "" {
		t.Errorf("a caller's change reached the cache (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, kept.(*cachedRoute).DeepCopyObject().(*cachedRoute).route); diff != "" {
		t.Errorf("DeepCopyObject (-want +got):\n%s", diff)
	}

	bad := servedRoute()
	bad.Object["spec"] = map[string]any{"rules": "not a list"}
	if kept, _ := keepWhatThePluginReads(bad); kept != any(bad) {
		t.Errorf("an unreadable route became %T", kept)
	}
	if _, err := c.fromCache(bad); err == nil || !strings.Contains(err.Error(), "spec.rules") {
		t.Errorf("reading an unreadable cached route: %v", err)
	}
}
