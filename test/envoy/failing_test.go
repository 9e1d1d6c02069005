//go:build envoy

package envoy

import (
	"context"
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/argoproj/argo-rollouts/utils/plugin/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// edit changes the route as someone else would (kubectl edit), after the
// plugin's write: change gets the rules.
func (s *scenario) edit(r ref, change func(rules []any)) {
	s.t.Helper()
	u := s.get(r)
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	change(rules)
	if err := unstructured.SetNestedSlice(u.Object, rules, "spec", "rules"); err != nil {
		s.t.Fatal(err)
	}
	if _, err := cluster.Dynamic.Resource(gatewayAPI(strings.ToLower(r.Kind)+"s")).Namespace(s.ns).Update(context.Background(), u, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		s.t.Fatal(err)
	}
}

// wantFailure records a check that must fail, and fails the test if it
// passed or failed for another reason than the one named.
func (s *scenario) wantFailure(step, what string, err error, mentions ...string) {
	s.t.Helper()
	if err == nil {
		s.check(step, what, errString("the check passed"))
		return
	}
	s.t.Logf("%s: %s: the check reports: %v", step, what, err)
	for _, m := range mentions {
		if !strings.Contains(err.Error(), m) {
			s.check(step, what, errString("the check failed, but its report does not mention "+m+": "+err.Error()))
			return
		}
	}
	s.check(step, what, nil)
}

type errString string

func (e errString) Error() string { return string(e) }

// The checks fail where Envoy would carry another split than the step's:
// a route whose weights someone changed after the plugin's write, and a
// mirror whose percentage someone changed. Each check is first shown to
// fail against the step's values, then to pass against what the route now
// says, so it is the translation that differs.
func TestTheChecksFailOnAnotherSplit(t *testing.T) {
	s := newScenario(t, "the checks fail: tampered weights and mirror", "", "stable", "canary")
	s.create(routeYAML("HTTPRoute", 100))
	ro := s.rollout(`{"httpRoute": "route"}`)
	ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "mirror"}}

	tr := s.do("SetWeight(30)", func() types.RpcError { return s.plugin.SetWeight(ro, 30, nil) })
	s.check("SetWeight(30)", "weights", checkWeights(tr.envoy, s.ns, httpRoute, 0, canary(70, 30)))

	step := "weights edited to 50/50"
	s.edit(httpRoute, func(rules []any) {
		for _, b := range rules[0].(map[string]any)["backendRefs"].([]any) {
			b.(map[string]any)["weight"] = int64(50)
		}
	})
	tr = s.translate()
	s.wantFailure(step, "the weights check fails for 70/30", checkWeights(tr.envoy, s.ns, httpRoute, 0, canary(70, 30)), `"canary": 50`, `"stable": 50`)
	s.check(step, "Envoy carries 50/50", checkWeights(tr.envoy, s.ns, httpRoute, 0, canary(50, 50)))
	split := taken{Rule: "0", Served: map[string]uint32{"stable": 50, "canary": 50}}
	s.wantFailure(step, "the route-table check fails for 70/30", checkTaken(tr.envoy, s.ns, httpRoute, request{Method: "GET", Path: "/"},
		taken{Rule: "0", Served: map[string]uint32{"stable": 70, "canary": 30}}), "50")

	step = "SetMirrorRoute(35 %), edited to 10 %"
	must(t, step, s.plugin.SetMirrorRoute(ro, mirrorStep(percent(35))))
	s.edit(httpRoute, func(rules []any) {
		for _, r := range rules {
			if r.(map[string]any)["name"] == "mirror" {
				f := r.(map[string]any)["filters"].([]any)[0].(map[string]any)
				f["requestMirror"].(map[string]any)["percent"] = int64(10)
			}
		}
	})
	tr = s.translate()
	get := request{Method: "GET", Path: "/api/items"}
	mirrored := func(pct float64) taken {
		return taken{Rule: "mirror", Served: map[string]uint32{"stable": 1}, Mirrors: []mirrorShare{{"canary", pct}}}
	}
	s.wantFailure(step, "the mirror check fails for 35 %", checkTaken(tr.envoy, s.ns, httpRoute, get, mirrored(35)), "Percent: 10")
	s.check(step, "Envoy mirrors 10 %", checkTaken(tr.envoy, s.ns, httpRoute, get, mirrored(10)))
	s.check(step, "other requests keep the edited split", checkTaken(tr.envoy, s.ns, httpRoute, request{Method: "GET", Path: "/"}, split))
}
