package test

import (
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// A route whose rules list only the stable Service, as platforms generate
// them (the second holds static besides), with addCanaryBackendRef: true:
// both rules get the canary while the rollout runs.
const stableOnlyRoute = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: route
  labels: {team: shop}
  annotations: {git: "abc123"}
spec:
  parentRefs: [{name: gw}]
  hostnames: [shop.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    backendRefs:
    - {name: stable, port: 80}
  - matches: [{path: {type: PathPrefix, value: /static}}]
    backendRefs:
    - {name: stable, port: 80, weight: 5}
    - {name: static, port: 8080}
`

// asGitWroteIt is the route without what every write changes: its
// managedFields, resourceVersion and generation.
func asGitWroteIt(u *unstructured.Unstructured) map[string]any {
	c := u.DeepCopy()
	c.SetManagedFields(nil)
	c.SetResourceVersion("")
	c.SetGeneration(0)
	return c.Object
}

type stableOnlyStep struct {
	canary int32
	exp    []v1alpha1.WeightDestination
	want   map[string]int64
}

// walkStableOnly walks the steps with a plugin restart after the
// restartAfter-th, and checks the route ends byte for byte as it began,
// its managedFields aside, with the plugin owning nothing.
func walkStableOnly(t *testing.T, standard *harness.Cluster, steps []stableOnlyStep, restartAfter int) {
	ns := namespace(t, standard)
	service(t, standard, ns, "static", "http:8080")
	service(t, standard, ns, "exp-baseline", "http:80")
	service(t, standard, ns, "exp-canary", "http:80")
	began := create(t, standard, ns, stableOnlyRoute)
	ro := rollout(ns, `{"httpRoute": "route", "addCanaryBackendRef": true}`)
	first, err := harness.StartPlugin(pluginBin, standard.Kubeconfig, kubetest.Log(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(first.Stop)
	p := first.Plugin
	for i, step := range steps {
		if i == restartAfter {
			first.Stop()
			p = startPlugin(t, standard)
			ro.Status = v1alpha1.RolloutStatus{} // the claim on the route is all there is
		}
		if step.exp != nil {
			ro.Status.Canary.CurrentExperiment = "demo-exp-1"
		}
		if err := p.SetWeight(ro, step.canary, step.exp); err.HasError() {
			t.Fatalf("step %d: SetWeight(%d, %v): %s", i, step.canary, step.exp, err)
		}
		if diff := cmp.Diff(step.want, weights(get(t, standard, "v1", "HTTPRoute", ns, "route"))); diff != "" {
			t.Errorf("step %d: SetWeight(%d, %v) (-want +got):\n%s", i, step.canary, step.exp, diff)
		}
	}
	ended := get(t, standard, "v1", "HTTPRoute", ns, "route")
	if diff := cmp.Diff(asGitWroteIt(began), asGitWroteIt(ended)); diff != "" {
		t.Errorf("the route after the rollout (-began +ended):\n%s", diff)
	}
	// The first apply was forced (it took spec.rules from kubectl-create); the release leaves them to nobody.
	if got := rulesOwners(ended); len(got) > 0 {
		t.Errorf("spec.rules owned by %v after the rollout; want nobody", got)
	}
	for _, e := range ended.GetManagedFields() {
		if e.Manager == fieldManager {
			t.Errorf("the plugin still has a managedFields entry: %s", e.FieldsV1.GetRawString())
		}
	}
}

// both is the weights of rule 0 also in rule 1, which holds stable alone
// besides static (at stableWeight when the rollout has left it).
func both(rule0 map[string]int64, stableWeight int64) map[string]int64 {
	out := map[string]int64{"1/static": 1}
	for k, v := range rule0 {
		out[k] = v
		k1 := "1/" + k[2:]
		if k == "0/stable" && len(rule0) == 1 {
			v = stableWeight
		}
		out[k1] = v
	}
	return out
}

// 0 → 30 → 100 → 0 with a plugin restart at 30: the canary's backendRef is
// added as a copy of stable's (port 80, the defaults as stored) and leaves
// at the end, stable back at its default weight.
func TestStableOnlyRouteWalk(t *testing.T) {
	standard := parallel(t)
	with := func(m map[string]int64) map[string]int64 { return both(m, 5) }
	walkStableOnly(t, standard, []stableOnlyStep{
		{0, nil, with(map[string]int64{"0/stable": 1})},
		{30, nil, with(map[string]int64{"0/stable": 70, "0/canary": 30})},
		{30, nil, with(map[string]int64{"0/stable": 70, "0/canary": 30})},
		{100, nil, with(map[string]int64{"0/stable": 0, "0/canary": 100})},
		{0, nil, with(map[string]int64{"0/stable": 1})},
	}, 2)
}

// The same with an experiment step, the plugin restarted during it.
func TestStableOnlyRouteWithAnExperiment(t *testing.T) {
	standard := parallel(t)
	with := func(m map[string]int64) map[string]int64 { return both(m, 5) }
	walkStableOnly(t, standard, []stableOnlyStep{
		{0, nil, with(map[string]int64{"0/stable": 1})},
		{0, experimentDestinations(5, 25), with(map[string]int64{"0/stable": 70, "0/canary": 0, "0/exp-baseline": 5, "0/exp-canary": 25})},
		{0, experimentDestinations(5, 25), with(map[string]int64{"0/stable": 70, "0/canary": 0, "0/exp-baseline": 5, "0/exp-canary": 25})},
		{30, nil, with(map[string]int64{"0/stable": 70, "0/canary": 30})},
		{100, nil, with(map[string]int64{"0/stable": 0, "0/canary": 100})},
		{0, nil, with(map[string]int64{"0/stable": 1})},
	}, 2)
}
