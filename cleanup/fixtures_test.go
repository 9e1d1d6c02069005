package cleanup

import (
	"encoding/json"
	"maps"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// The routes and Rollouts of the tests, in namespace shop. Rollout <name>
// splits traffic between Services <name>-stable and <name>-canary.

const ns = "shop"

// canaryLabel is the label the plugin puts on a route while a Rollout is in
// progress there.
const canaryLabel = "rollouts.argoproj.io/gatewayapi-canary"

// split is a weighted rule of Rollout rollout for path: canary to
// <rollout>-canary, the rest to <rollout>-stable.
type split struct {
	path, rollout string
	canary        int64
}

// rule is the rule as the apiserver serves it on a route in namespace
// routeNS: its backendRefs name namespace shop when the route is in another.
func (s split) rule(routeNS string) map[string]any {
	ref := func(svc string, weight int64) any {
		r := map[string]any{"group": "", "kind": "Service", "name": svc, "port": int64(80), "weight": weight}
		if routeNS != ns {
			r["namespace"] = ns
		}
		return r
	}
	return map[string]any{
		"matches":     []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": s.path}}},
		"backendRefs": []any{ref(s.rollout+"-stable", 100-s.canary), ref(s.rollout+"-canary", s.canary)},
	}
}

// claim is what SetWeight records for the split in rule i.
func (s split) claim(i int) routes.Claim {
	return routes.Claim{CanaryWeight: s.canary, Weights: []routes.RecordedWeight{
		{Rule: i, Service: ns + "/" + s.rollout + "-stable", Weight: 100 - s.canary},
		{Rule: i, Service: ns + "/" + s.rollout + "-canary", Weight: s.canary},
	}}
}

// route is route shop/<name> with one rule per split, as the plugin leaves
// it after each split's Rollout called SetWeight with the split's canary
// weight: the claims annotation (encoded as the plugin encodes it), its
// label, and its apply owning spec.rules, the label and the annotation.
// Splits with canary weight 0 are the route before any rollout.
func route(t *testing.T, name string, splits ...split) *unstructured.Unstructured {
	t.Helper()
	return routeIn(t, ns, name, splits...)
}

// routeIn is route <namespace>/<name>, as route makes it, of the Rollouts
// of namespace shop.
func routeIn(t *testing.T, namespace, name string, splits ...split) *unstructured.Unstructured {
	t.Helper()
	claims := routes.Claims{}
	var rules []any
	for i, s := range splits {
		rules = append(rules, s.rule(namespace))
		if s.canary > 0 {
			claims[ns+"/"+s.rollout] = s.claim(i)
		}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": routes.Group + "/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": name, "namespace": namespace, "resourceVersion": "7"},
		"spec":     map[string]any{"parentRefs": []any{map[string]any{"name": "gw"}}, "rules": rules},
	}}
	u.SetAnnotations(map[string]string{"owner": "shop-team@example.com"})
	kubectlOwns := map[string]any{"f:metadata": map[string]any{"f:annotations": map[string]any{"f:owner": map[string]any{}}},
		"f:spec": map[string]any{"f:parentRefs": map[string]any{}, "f:rules": map[string]any{}}}
	kubectl := metav1.ManagedFieldsEntry{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: routes.Group + "/v1",
		FieldsType: "FieldsV1", FieldsV1: fields(t, kubectlOwns)}
	if len(claims) == 0 {
		u.SetManagedFields([]metav1.ManagedFieldsEntry{kubectl})
		return u
	}
	annotations := u.GetAnnotations()
	for k, v := range claims.Annotations() {
		annotations[k] = v
	}
	u.SetAnnotations(annotations)
	u.SetLabels(map[string]string{canaryLabel: "in-progress"})
	// The plugin's forced apply took spec.rules over from kubectl.
	delete(kubectlOwns["f:spec"].(map[string]any), "f:rules")
	kubectl.FieldsV1 = fields(t, kubectlOwns)
	plugin := metav1.ManagedFieldsEntry{Manager: fieldManager, Operation: metav1.ManagedFieldsOperationApply, APIVersion: routes.Group + "/v1",
		FieldsType: "FieldsV1", FieldsV1: fields(t, map[string]any{
			"f:metadata": map[string]any{
				"f:annotations": map[string]any{"f:" + routes.ClaimsAnnotation: map[string]any{}},
				"f:labels":      map[string]any{"f:" + canaryLabel: map[string]any{}},
			},
			"f:spec": map[string]any{"f:rules": map[string]any{}},
		})}
	u.SetManagedFields([]metav1.ManagedFieldsEntry{kubectl, plugin})
	return u
}

func fields(t *testing.T, set map[string]any) *metav1.FieldsV1 {
	t.Helper()
	raw, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return metav1.NewFieldsV1(string(raw))
}

// rolloutObject is Rollout shop/<name> as the apiserver holds it.
func rolloutObject(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
		"metadata": map[string]any{"name": name, "namespace": ns, "resourceVersion": "3"},
	}}
}

// madeBy is route u with the claims of rollouts recording that cluster
// made them (as the plugin records it since claims name their cluster).
func madeBy(t *testing.T, u *unstructured.Unstructured, cluster string, rollouts ...string) *unstructured.Unstructured {
	t.Helper()
	r, err := routes.FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := routes.ReadClaims(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, rollout := range rollouts {
		claim, ok := claims[rollout]
		if !ok {
			t.Fatalf("route %s carries no claim of %s", r.Ref, rollout)
		}
		claim.Cluster = cluster
		claims[rollout] = claim
	}
	annotations := u.GetAnnotations()
	maps.Copy(annotations, claims.Annotations())
	u.SetAnnotations(annotations)
	return u
}

// grant is a ReferenceGrant in namespace that lets the Rollouts of
// namespace shop reach its HTTPRoutes.
func grant(namespace string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": routes.Group + "/v1", "kind": "ReferenceGrant",
		"metadata": map[string]any{"name": "rollouts-of-shop", "namespace": namespace, "resourceVersion": "2"},
		"spec": map[string]any{
			"from": []any{map[string]any{"group": "argoproj.io", "kind": "Rollout", "namespace": ns}},
			"to":   []any{map[string]any{"group": routes.Group, "kind": "HTTPRoute"}},
		},
	}}
}
