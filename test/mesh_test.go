package test

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/argoproj/argo-rollouts/utils/plugin/types"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"
)

// Service meshes (GAMMA: Istio ambient, Linkerd) attach an HTTPRoute to a
// Service instead of a Gateway; ListenerSets attach it to a set of listeners.
// The plugin does not care who the parent is: weights, experiment backends
// and header rules work the same, the rule's timeouts and the canary
// backendRef's own filters go into the header rule, VerifyWeight reads the
// status the mesh writes for its Service parent, and every other byte of the
// route stays.

const meshRoute = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: mesh}
spec:
  parentRefs:
  - {group: "", kind: Service, name: web, port: 80}
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    timeouts: {request: 10s}
    backendRefs:
    - {name: stable, port: 80, weight: 100}
    - name: canary
      port: 80
      weight: 0
      filters:
      - type: RequestHeaderModifier
        requestHeaderModifier: {set: [{name: x-version, value: canary}]}
`

// meshRules are the route's rules as the apiserver serves them for the
// given weights (defaults written out); extra backendRefs and rules follow.
func meshRules(t *testing.T, stable, canary int, extraRefs, extraRules string) []any {
	t.Helper()
	doc := `
- matches: [{path: {type: PathPrefix, value: /}}]
  timeouts: {request: 10s}
  backendRefs:
  - {group: "", kind: Service, name: stable, port: 80, weight: ` + strconv.Itoa(stable) + `}
  - group: ""
    kind: Service
    name: canary
    port: 80
    weight: ` + strconv.Itoa(canary) + `
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {set: [{name: x-version, value: canary}]}
` + extraRefs + extraRules
	var rules []any
	if err := yaml.Unmarshal([]byte(doc), &rules); err != nil {
		t.Fatalf("bad expected rules: %v\n%s", err, doc)
	}
	return normalizeJSON(t, rules).([]any)
}

func TestServiceParentAndListenerSetRoutes(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	for _, svc := range []string{"exp-baseline", "exp-canary"} {
		service(t, standard, ns, svc, "http:80")
	}
	created := create(t, standard, ns, meshRoute)
	p, _ := startPluginCapturingLogs(t, standard)
	cfg := `{"httpRoute": "mesh", "verifyWeight": true}`
	ro := managedRollout(ns, "demo", cfg, "beta")

	// check compares the whole spec with the route as created but for rules.
	check := func(what string, rules []any) *unstructured.Unstructured {
		t.Helper()
		u := get(t, standard, "v1", "HTTPRoute", ns, "mesh")
		want := normalizeJSON(t, specWith(created)).(map[string]any)
		want["rules"] = rules
		if diff := cmp.Diff(want, normalizeJSON(t, u.Object["spec"])); diff != "" {
			t.Errorf("%s: spec (-want +got):\n%s", what, diff)
		}
		return u
	}

	must(t, "SetWeight(30)", p.Plugin.SetWeight(ro, 30, nil))
	check("canary 30", meshRules(t, 70, 30, "", ""))

	must(t, "SetWeight(20, experiment)", p.Plugin.SetWeight(ro, 20, experimentDestinations(5, 25)))
	check("an experiment", meshRules(t, 50, 20, `  - {group: "", kind: Service, name: exp-baseline, port: 80, weight: 5}
  - {group: "", kind: Service, name: exp-canary, port: 80, weight: 25}
`, ""))
	must(t, "SetWeight(20)", p.Plugin.SetWeight(ro, 20, nil))

	must(t, "SetHeaderRoute(beta)", p.Plugin.SetHeaderRoute(ro, headerStep("beta", "X-Canary", "yes")))
	check("a header rule with the rule's timeouts and the canary backendRef's filters", meshRules(t, 80, 20, "", `- name: beta
  matches:
  - path: {type: PathPrefix, value: /}
    headers: [{name: X-Canary, type: Exact, value: "yes"}]
  timeouts: {request: 10s}
  backendRefs:
  - group: ""
    kind: Service
    name: canary
    port: 80
    weight: 1
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {set: [{name: x-version, value: canary}]}
`))

	// The mesh reports on its Service parent; VerifyWeight reads that.
	mesh := gatewayv1.ParentReference{Group: ptrTo(gatewayv1.Group("")), Kind: ptrTo(gatewayv1.Kind("Service")), Name: "web", Port: ptrTo(gatewayv1.PortNumber(80))}
	checkVerify(t, standard, p, ns, cfg, 20, types.NotVerified) // no status yet
	status := accepted(mesh, generation(t, standard, ns, "mesh"))
	status.ControllerName = "linkerd.io/gateway-controller"
	setRouteStatus(t, standard, ns, "mesh", status)
	checkVerify(t, standard, p, ns, cfg, 20, types.Verified)

	must(t, "RemoveManagedRoutes", p.Plugin.RemoveManagedRoutes(ro))
	must(t, "SetWeight(0)", p.Plugin.SetWeight(ro, 0, nil))
	u := check("back to stable", meshRules(t, 100, 0, "", ""))
	pluginOwnsNothing(t, u)

	// A ListenerSet parent, with the status its controller writes for it.
	create(t, standard, ns, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: listeners}
spec:
  parentRefs: [{kind: ListenerSet, name: team-a, sectionName: https}]
  rules:
  - backendRefs: [{name: stable, port: 80, weight: 100}, {name: canary, port: 80, weight: 0}]
`)
	lcfg := `{"httpRoute": "listeners", "verifyWeight": true}`
	must(t, "SetWeight(40) on the ListenerSet route", p.Plugin.SetWeight(rollout(ns, lcfg), 40, nil))
	if diff := cmp.Diff(map[string]int64{"0/stable": 60, "0/canary": 40}, weights(get(t, standard, "v1", "HTTPRoute", ns, "listeners"))); diff != "" {
		t.Errorf("weights (-want +got):\n%s", diff)
	}
	listenerSet := gatewayv1.ParentReference{Kind: ptrTo(gatewayv1.Kind("ListenerSet")), Name: "team-a", SectionName: ptrTo(gatewayv1.SectionName("https"))}
	setRouteStatus(t, standard, ns, "listeners", accepted(listenerSet, generation(t, standard, ns, "listeners")))
	checkVerify(t, standard, p, ns, lcfg, 40, types.Verified)
}

func ptrTo[T any](v T) *T { return &v }

// normalizeJSON is v after a JSON round trip, so that values from YAML and
// from the apiserver compare equal (numbers as float64).
func normalizeJSON(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
