package test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// The ownership scenarios read like structured-merge-diff's
// multiple_appliers_test.go: a list of operations by named managers, and the
// route's weights, the plugin's answer and the owners of spec.rules after each.

// gitRoute is the route as kept in Git: all traffic on stable.
const gitRoute = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: route
spec:
  parentRefs: [{name: gw}]
  hostnames: [app.example.com]
  rules:
  - backendRefs:
    - {name: stable, port: 80, weight: 100}
    - {name: canary, port: 80, weight: 0}
  - matches: [{path: {type: PathPrefix, value: /static}}]
    backendRefs:
    - {name: static, port: 80}
`

// operation is one step of a scenario.
type operation interface {
	run(t *testing.T, s *scenario) string // returns the plugin's error, if any
}

type scenario struct {
	c   *harness.Cluster
	ns  string
	rpc interface {
		SetWeight(*v1alpha1.Rollout, int32, []v1alpha1.WeightDestination) rpcErr
	}
}

// setWeight is the plugin's SetWeight, as the controller calls it.
type setWeight struct {
	weight int32
	force  bool // the Rollout's plugin config says conflictPolicy: Force
}

func (o setWeight) run(t *testing.T, s *scenario) string {
	cfg := `{"httpRoute": "route"}`
	if o.force {
		cfg = `{"httpRoute": "route", "conflictPolicy": "Force"}`
	}
	ro := rollout(s.ns, cfg)
	return s.rpc.SetWeight(ro, o.weight, nil).ErrorString
}

// forceApply is a server-side apply with force, as Argo CD syncs with
// ServerSideApply=true: the Git manifest with the given weights.
type forceApply struct {
	manager        string
	stable, canary int
}

func (o forceApply) run(t *testing.T, s *scenario) string {
	manifest := strings.Replace(strings.Replace(gitRoute, "weight: 100}", fmt.Sprintf("weight: %d}", o.stable), 1),
		"weight: 0}", fmt.Sprintf("weight: %d}", o.canary), 1)
	obj := map[string]any{}
	if err := yaml.Unmarshal([]byte(manifest), &obj); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetNamespace(s.ns)
	data, _ := u.MarshalJSON()
	force := true
	if _, err := s.c.Dynamic.Resource(httpRoutes).Namespace(s.ns).Patch(context.Background(), "route", types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: o.manager, Force: &force}); err != nil {
		t.Fatalf("%s apply: %v", o.manager, err)
	}
	return ""
}

// update is a read-modify-write (kubectl edit, a controller) by manager.
type update struct {
	manager string
	edit    func(u *unstructured.Unstructured)
}

func (o update) run(t *testing.T, s *scenario) string {
	ctx := context.Background()
	res := s.c.Dynamic.Resource(httpRoutes).Namespace(s.ns)
	u, err := res.Get(ctx, "route", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o.edit(u)
	if _, err := res.Update(ctx, u, metav1.UpdateOptions{FieldManager: o.manager}); err != nil {
		t.Fatalf("%s update: %v", o.manager, err)
	}
	return ""
}

// expect is the state after an operation.
type expect struct {
	weights map[string]int64
	err     []string // substrings of the plugin's error; nil: no error
	owners  []string // managers owning spec.rules
	extra   func(t *testing.T, u *unstructured.Unstructured)
}

type step struct {
	op   operation
	want expect
}

func runScenario(t *testing.T, standard *harness.Cluster, steps []step) {
	ns := namespace(t, standard)
	create(t, standard, ns, gitRoute)
	s := &scenario{c: standard, ns: ns, rpc: rpcAdapter{startPlugin(t, standard)}}
	for i, st := range steps {
		errText := st.op.run(t, s)
		where := fmt.Sprintf("step %d (%T %+v)", i+1, st.op, st.op)
		switch {
		case st.want.err == nil && errText != "":
			t.Fatalf("%s: unexpected error: %s", where, errText)
		case st.want.err != nil && errText == "":
			t.Fatalf("%s: no error, want one mentioning %q", where, st.want.err)
		}
		for _, w := range st.want.err {
			if !strings.Contains(errText, w) {
				t.Errorf("%s: error %q does not mention %q", where, errText, w)
			}
		}
		if errText != "" {
			t.Logf("%s: error: %s", where, errText)
		}
		u := get(t, standard, "v1", "HTTPRoute", ns, "route")
		if st.want.weights != nil {
			if diff := cmp.Diff(st.want.weights, weights(u)); diff != "" {
				t.Errorf("%s: weights (-want +got):\n%s", where, diff)
			}
		}
		if diff := cmp.Diff(st.want.owners, rulesOwners(u)); diff != "" {
			t.Errorf("%s: owners of spec.rules (-want +got):\n%s", where, diff)
		}
		if st.want.extra != nil {
			st.want.extra(t, u)
		}
	}
}

// rulesOwners lists the managers whose managedFields entry holds f:spec.f:rules.
func rulesOwners(u *unstructured.Unstructured) []string {
	var out []string
	for _, e := range u.GetManagedFields() {
		if e.FieldsV1 != nil && strings.Contains(e.FieldsV1.GetRawString(), `"f:rules"`) {
			out = append(out, e.Manager)
		}
	}
	sort.Strings(out)
	return out
}

func weightsAB(stable, canary int64) map[string]int64 {
	return map[string]int64{"0/stable": stable, "0/canary": canary, "1/static": 1}
}

func TestOwnership(t *testing.T) {
	standard := parallel(t)
	plugin := fieldManager
	t.Run("kubectl creates, the plugin walks, owns nothing after", func(t *testing.T) {
		runScenario(t, standard, []step{
			{setWeight{weight: 30}, expect{weights: weightsAB(70, 30), owners: []string{plugin}}},
			{setWeight{weight: 100}, expect{weights: weightsAB(0, 100), owners: []string{plugin}}},
			{setWeight{weight: 0}, expect{weights: weightsAB(100, 0), owners: nil, extra: pluginOwnsNothing}},
		})
	})
	t.Run("argocd re-applies Git mid-rollout: conflict error, Argo CD's values kept; Force takes over", func(t *testing.T) {
		runScenario(t, standard, []step{
			{forceApply{"argocd-controller", 100, 0}, expect{weights: weightsAB(100, 0), owners: []string{"argocd-controller"}}},
			{setWeight{weight: 30}, expect{weights: weightsAB(70, 30), owners: []string{plugin}}},
			{forceApply{"argocd-controller", 100, 0}, expect{weights: weightsAB(100, 0), owners: []string{"argocd-controller"}}},
			{setWeight{weight: 50}, expect{weights: weightsAB(100, 0), owners: []string{"argocd-controller"},
				err: []string{"HTTPRoute", "/route: conflict", "argocd-controller (Apply)", "the plugin set 70, now 100, the plugin would set 50", "conflictPolicy: Force"}}},
			{setWeight{weight: 50, force: true}, expect{weights: weightsAB(50, 50), owners: []string{plugin}}},
			{setWeight{weight: 0}, expect{weights: weightsAB(100, 0), owners: nil, extra: pluginOwnsNothing}},
		})
	})
	t.Run("a GitOps sync to the values the rollout goes back to is no conflict", func(t *testing.T) {
		runScenario(t, standard, []step{
			{setWeight{weight: 30}, expect{weights: weightsAB(70, 30), owners: []string{plugin}}},
			{forceApply{"argocd-controller", 100, 0}, expect{weights: weightsAB(100, 0), owners: []string{"argocd-controller"}}},
			{setWeight{weight: 0}, expect{weights: weightsAB(100, 0), owners: []string{"argocd-controller"}, extra: pluginOwnsNothing}},
		})
	})
	t.Run("others edit hostnames and an unmanaged rule mid-rollout: no conflict, changes kept", func(t *testing.T) {
		runScenario(t, standard, []step{
			{setWeight{weight: 30}, expect{weights: weightsAB(70, 30), owners: []string{plugin}}},
			{update{"kubectl-edit", func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedStringSlice(u.Object, []string{"app.example.com", "app.example.org"}, "spec", "hostnames")
			}}, expect{weights: weightsAB(70, 30), owners: []string{plugin}}},
			{setWeight{weight: 40}, expect{weights: weightsAB(60, 40), owners: []string{plugin}, extra: hostnamesAre("app.example.com", "app.example.org")}},
			{update{"other-controller", func(u *unstructured.Unstructured) {
				rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
				rules[1].(map[string]any)["filters"] = []any{map[string]any{"type": "RequestHeaderModifier",
					"requestHeaderModifier": map[string]any{"set": []any{map[string]any{"name": "x-cache", "value": "on"}}}}}
				_ = unstructured.SetNestedSlice(u.Object, rules, "spec", "rules")
			}}, expect{weights: weightsAB(60, 40), owners: []string{"other-controller"}}},
			{setWeight{weight: 50}, expect{weights: weightsAB(50, 50), owners: []string{plugin}, extra: staticRuleHasFilter}},
			{setWeight{weight: 0}, expect{weights: weightsAB(100, 0), owners: nil, extra: func(t *testing.T, u *unstructured.Unstructured) {
				pluginOwnsNothing(t, u)
				staticRuleHasFilter(t, u)
				hostnamesAre("app.example.com", "app.example.org")(t, u)
			}}},
		})
	})
}

func pluginOwnsNothing(t *testing.T, u *unstructured.Unstructured) {
	t.Helper()
	for _, e := range u.GetManagedFields() {
		if e.Manager == fieldManager {
			t.Errorf("the plugin still has a managedFields entry after the rollout ended: %s %s", e.Operation, e.FieldsV1.GetRawString())
		}
	}
	if _, ok := u.GetAnnotations()["gatewayapi-ssa.dev/claims"]; ok {
		t.Errorf("claims annotation left: %v", u.GetAnnotations())
	}
	if _, ok := u.GetLabels()["rollouts.argoproj.io/gatewayapi-canary"]; ok {
		t.Errorf("in-progress label left: %v", u.GetLabels())
	}
}

func hostnamesAre(want ...string) func(*testing.T, *unstructured.Unstructured) {
	return func(t *testing.T, u *unstructured.Unstructured) {
		t.Helper()
		got, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "hostnames")
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("hostnames (-want +got):\n%s", diff)
		}
	}
}

func staticRuleHasFilter(t *testing.T, u *unstructured.Unstructured) {
	t.Helper()
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	if _, ok := rules[1].(map[string]any)["filters"]; !ok {
		t.Errorf("other-controller's filter on the static rule is gone: %v", rules[1])
	}
}

// Two Rollouts share one route (one rule each); their calls interleave from
// two goroutines through one plugin process, as the controller makes them.
// Neither sees a conflict, no update is lost, and the plugin gives the route
// back only when both have ended.
func TestTwoRolloutsShareOneRoute(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	for _, svc := range []string{"stable-b", "canary-b"} {
		service(t, standard, ns, svc, "http:80")
	}
	create(t, standard, ns, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: route}
spec:
  rules:
  - matches: [{path: {type: PathPrefix, value: /a}}]
    backendRefs:
    - {name: stable, port: 80, weight: 100}
    - {name: canary, port: 80, weight: 0}
  - matches: [{path: {type: PathPrefix, value: /b}}]
    backendRefs:
    - {name: stable-b, port: 80, weight: 100}
    - {name: canary-b, port: 80, weight: 0}
`)
	p := startPlugin(t, standard, "-loglevel=debug")
	a := rollout(ns, `{"httpRoute": "route"}`)
	b := rollout(ns, `{"httpRoute": "route"}`)
	b.Name = "demo-b"
	b.Spec.Strategy.Canary.StableService, b.Spec.Strategy.Canary.CanaryService = "stable-b", "canary-b"

	walk := func(ro *v1alpha1.Rollout, weights []int32) error {
		for _, w := range weights {
			if err := p.SetWeight(ro, w, nil); err.HasError() {
				return fmt.Errorf("%s SetWeight(%d): %s", ro.Name, w, err)
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, run := range []struct {
		ro *v1alpha1.Rollout
		w  []int32
	}{{a, []int32{5, 10, 20, 30, 40, 50, 60}}, {b, []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- walk(run.ro, run.w)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	u := get(t, standard, "v1", "HTTPRoute", ns, "route")
	if diff := cmp.Diff(map[string]int64{"0/stable": 40, "0/canary": 60, "1/stable-b": 90, "1/canary-b": 10}, weights(u)); diff != "" {
		t.Errorf("after both walks (-want +got):\n%s", diff)
	}

	// A ends; B is still in progress: the plugin keeps its label and ownership.
	if err := walk(a, []int32{0}); err != nil {
		t.Fatal(err)
	}
	u = get(t, standard, "v1", "HTTPRoute", ns, "route")
	if !ownsRules(u, fieldManager) || u.GetLabels()["rollouts.argoproj.io/gatewayapi-canary"] != "in-progress" {
		t.Errorf("after A ended, B is in progress: want the plugin to own spec.rules and the label to stay; labels %v", u.GetLabels())
	}
	// B ends too: everything given back.
	if err := walk(b, []int32{0}); err != nil {
		t.Fatal(err)
	}
	u = get(t, standard, "v1", "HTTPRoute", ns, "route")
	if diff := cmp.Diff(map[string]int64{"0/stable": 100, "0/canary": 0, "1/stable-b": 100, "1/canary-b": 0}, weights(u)); diff != "" {
		t.Errorf("after both ended (-want +got):\n%s", diff)
	}
	pluginOwnsNothing(t, u)
}
