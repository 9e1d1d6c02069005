package routes

import (
	"testing"

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

	first := c.newest(cached)
	if diff := cmp.Diff(want, first); diff != "" {
		t.Fatalf("newest (-want +got):\n%s", diff)
	}
	scribble(first)
	if diff := cmp.Diff(want, c.newest(cached)); diff != "" {
		t.Errorf("a caller's change reached the next caller (-want +got):\n%s", diff)
	}
}

func TestDeepCopyOfAnEmptyRouteStaysEmpty(t *testing.T) {
	if diff := cmp.Diff(Route{}, Route{}.DeepCopy()); diff != "" {
		t.Error(diff)
	}
}
