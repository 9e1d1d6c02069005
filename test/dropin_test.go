package test

import (
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/google/go-cmp/cmp"
)

// Keys users bring from the argoproj-labs plugin's open pull requests:
// ruleName (PR 226) and mirrorMode (PR 229), through the real binary, with
// the whole spec compared after each call.

const twoWeightedRules = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: route}
spec:
  parentRefs: [{name: gw}]
  rules:
  - name: live
    matches: [{path: {type: PathPrefix, value: /}}]
    backendRefs:
    - {name: stable, port: 80, weight: 100}
    - {name: canary, port: 80, weight: 0}
    - {name: static, port: 80, weight: 0}
  - name: split
    matches: [{path: {type: PathPrefix, value: /shop}}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {set: [{name: x-shop, value: "1"}]}
    backendRefs:
    - {name: stable, port: 80, weight: 100}
    - {name: canary, port: 80, weight: 0}
`

// withWeight returns the rules of a spec with rule i's backendRef j at weight w.
func withWeight(t *testing.T, rules []any, i, j int, w int64) []any {
	t.Helper()
	out := normalizeJSON(t, rules).([]any)
	out[i].(map[string]any)["backendRefs"].([]any)[j].(map[string]any)["weight"] = float64(w)
	return out
}

func TestRuleNameTouchesOnlyThatRule(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	created := create(t, standard, ns, twoWeightedRules)
	original := normalizeJSON(t, created.Object["spec"]).(map[string]any)
	rules := original["rules"].([]any)
	p := startPlugin(t, standard)
	ro := managedRollout(ns, "demo", `{"httpRoutes": [{"name": "route", "ruleName": "split", "useHeaderRoutes": true}]}`, "beta")
	spec := func() map[string]any {
		return normalizeJSON(t, get(t, standard, "v1", "HTTPRoute", ns, "route").Object["spec"]).(map[string]any)
	}
	specWithRules := func(rules []any) map[string]any {
		s := normalizeJSON(t, original).(map[string]any)
		s["rules"] = rules
		return s
	}

	must(t, "SetWeight(30)", p.SetWeight(ro, 30, nil))
	want := withWeight(t, withWeight(t, rules, 1, 0, 70), 1, 1, 30)
	if diff := cmp.Diff(specWithRules(want), spec()); diff != "" {
		t.Errorf("after SetWeight(30) (-want +got):\n%s", diff)
	}

	must(t, "SetHeaderRoute(beta)", p.SetHeaderRoute(ro, headerStep("beta", "X-Canary", "yes")))
	header := normalizeJSON(t, jsonObj(t, `{"name": "beta",
		"matches": [{"path": {"type": "PathPrefix", "value": "/shop"}, "headers": [{"name": "X-Canary", "type": "Exact", "value": "yes"}]}],
		"filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "x-shop", "value": "1"}]}}],
		"backendRefs": [{"group": "", "kind": "Service", "name": "canary", "port": 80, "weight": 1}]}`))
	if diff := cmp.Diff(specWithRules(append(want, header)), spec()); diff != "" {
		t.Errorf("after SetHeaderRoute (-want +got):\n%s", diff)
	}

	must(t, "RemoveManagedRoutes", p.RemoveManagedRoutes(ro))
	must(t, "SetWeight(0)", p.SetWeight(ro, 0, nil))
	if diff := cmp.Diff(original, spec()); diff != "" {
		t.Errorf("after the rollout (-want +got):\n%s", diff)
	}

	// A rule name the route does not have: an error listing the names it has, nothing written.
	standard.Recorder.Reset()
	bad := rollout(ns, `{"httpRoute": "route", "httpRouteRuleName": "spilt"}`)
	e := p.SetWeight(bad, 30, nil)
	for _, w := range []string{"HTTPRoute " + ns + "/route has no rule named \"spilt\"", "rules named live, split"} {
		if !strings.Contains(e.ErrorString, w) {
			t.Errorf("error %q does not mention %q", e.ErrorString, w)
		}
	}
	if w := pluginWrites(standard); len(w) != 0 {
		t.Errorf("a refused call wrote %v", w)
	}
}

func TestMirrorModeFilter(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	created := create(t, standard, ns, twoWeightedRules)
	original := normalizeJSON(t, created.Object["spec"]).(map[string]any)
	p := startPlugin(t, standard)
	ro := managedRollout(ns, "demo", `{"httpRoute": "route", "httpRouteRuleName": "split", "mirrorMode": "filter"}`, "mirror")
	pct := int32(20)
	step := &v1alpha1.SetMirrorRoute{Name: "mirror", Percentage: &pct, Match: []v1alpha1.RouteMatch{{Path: &v1alpha1.StringMatch{Prefix: "/"}}}}

	must(t, "SetWeight(10)", p.SetWeight(ro, 10, nil))
	must(t, "SetMirrorRoute(20%)", p.SetMirrorRoute(ro, step))
	u := get(t, standard, "v1", "HTTPRoute", ns, "route")
	want := normalizeJSON(t, original).(map[string]any)
	rules := withWeight(t, withWeight(t, want["rules"].([]any), 1, 0, 90), 1, 1, 10)
	split := rules[1].(map[string]any)
	split["filters"] = append(split["filters"].([]any), normalizeJSON(t, jsonObj(t, `{"type": "RequestMirror", "requestMirror": {
		"backendRef": {"group": "", "kind": "Service", "name": "canary", "port": 80}, "percent": 20}}`)))
	want["rules"] = rules
	if diff := cmp.Diff(want, normalizeJSON(t, u.Object["spec"])); diff != "" {
		t.Errorf("after SetMirrorRoute (-want +got):\n%s", diff)
	}

	standard.Recorder.Reset()
	must(t, "SetMirrorRoute again", p.SetMirrorRoute(ro, step))
	if w := pluginWrites(standard); len(w) != 0 {
		t.Errorf("the same mirror step again wrote %v", w)
	}
	must(t, "SetMirrorRoute without match", p.SetMirrorRoute(ro, &v1alpha1.SetMirrorRoute{Name: "mirror"}))
	must(t, "SetWeight(0)", p.SetWeight(ro, 0, nil))
	u = get(t, standard, "v1", "HTTPRoute", ns, "route")
	if diff := cmp.Diff(original, normalizeJSON(t, u.Object["spec"])); diff != "" {
		t.Errorf("after the rollout (-want +got):\n%s", diff)
	}
	pluginOwnsNothing(t, u)
}
