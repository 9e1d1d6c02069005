package test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

const claimsAnnotation = "gatewayapi-ssa.dev/claims"

// jsonObj parses YAML into the form the dynamic client serves: numbers as int64.
func jsonObj(t *testing.T, s string) map[string]any {
	t.Helper()
	data, err := yaml.YAMLToJSON([]byte(s))
	if err != nil {
		t.Fatalf("bad test YAML: %v\n%s", err, s)
	}
	var out map[string]any
	if err := utiljson.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// ruleNames lists the rules' names, "-" for an unnamed rule.
func ruleNames(u *unstructured.Unstructured) []string {
	var out []string
	for _, r := range kubetest.Rules(u) {
		n, _ := r.(map[string]any)["name"].(string)
		if n == "" {
			n = "-"
		}
		out = append(out, n)
	}
	return out
}

// ruleNamed returns the rule with the given name, nil if there is none.
func ruleNamed(u *unstructured.Unstructured, name string) map[string]any {
	for _, r := range kubetest.Rules(u) {
		if m := r.(map[string]any); m["name"] == name {
			return m
		}
	}
	return nil
}

// specWith returns a deep copy of a route's spec with the given rules appended.
func specWith(u *unstructured.Unstructured, extra ...map[string]any) map[string]any {
	spec := runtime.DeepCopyJSONValue(u.Object["spec"]).(map[string]any)
	rules := spec["rules"].([]any)
	for _, r := range extra {
		rules = append(rules, r)
	}
	spec["rules"] = rules
	return spec
}

func managedRollout(ns, name, config string, managed ...string) *v1alpha1.Rollout {
	ro := rollout(ns, config)
	ro.Name = name
	for _, m := range managed {
		ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = append(ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes, v1alpha1.MangedRoutes{Name: m})
	}
	return ro
}

func headerStep(name, header, value string) *v1alpha1.SetHeaderRoute {
	return &v1alpha1.SetHeaderRoute{Name: name, Match: []v1alpha1.HeaderRoutingMatch{{HeaderName: header, HeaderValue: &v1alpha1.StringMatch{Exact: value}}}}
}

func must(t *testing.T, what string, err interface {
	HasError() bool
	Error() string
}) {
	t.Helper()
	if err.HasError() {
		t.Fatalf("%s: %s", what, err.Error())
	}
}

// headerRoute is the route of the header tests: a managed rule with a filter,
// a user's rule that sends only to the canary (named like a rule the plugin
// could add), and an unnamed rule for static content.
const headerRoute = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: route}
spec:
  parentRefs: [{name: gw}]
  hostnames: [shop.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {add: [{name: x-via, value: gateway}]}
    backendRefs:
    - {name: stable, port: 80, weight: 100}
    - {name: canary, port: 80, weight: 0}
  - name: preview
    matches: [{path: {type: PathPrefix, value: /preview}}]
    backendRefs: [{name: canary, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /static}}]
    backendRefs: [{name: static, port: 80}]
`

// The whole life of a header route on one HTTPRoute, as the controller drives
// it: added (one write, then none), weights changed around it (the rule not
// touched), removed by a step without match, added again, removed by
// RemoveManagedRoutes. The user's canary-only rule and every other byte of
// the route stay. Run on the standard and the experimental channel (where CEL
// enforces unique rule names).
func TestHeaderRouteLifecycle(t *testing.T) {
	standard := parallel(t)
	lifecycle := func(t *testing.T, c *harness.Cluster) {
		ns := namespace(t, c)
		created := create(t, c, ns, headerRoute)
		p := startPlugin(t, c)
		ro := managedRollout(ns, "demo", `{"httpRoute": "route"}`, "beta")
		wantRule := jsonObj(t, `
name: beta
matches:
- path: {type: PathPrefix, value: /}
  headers: [{name: X-Canary, type: Exact, value: "yes"}]
filters:
- type: RequestHeaderModifier
  requestHeaderModifier: {add: [{name: x-via, value: gateway}]}
backendRefs: [{group: "", kind: Service, name: canary, port: 80, weight: 1}]
`)
		c.Recorder.Reset()
		must(t, "SetHeaderRoute", p.SetHeaderRoute(ro, headerStep("beta", "X-Canary", "yes")))
		u := get(t, c, "v1", "HTTPRoute", ns, "route")
		if diff := cmp.Diff(specWith(created, wantRule), u.Object["spec"]); diff != "" {
			t.Errorf("spec after SetHeaderRoute (-want +got):\n%s", diff)
		}
		if got := claimsOn(t, u)[ns+"/demo"].Rules; !slices.Equal(got, []string{"beta"}) {
			t.Errorf("claims annotation = %s, want the rule recorded for the Rollout", u.GetAnnotations()[claimsAnnotation])
		}
		if _, ok := u.GetLabels()["rollouts.argoproj.io/gatewayapi-canary"]; !ok {
			t.Errorf("no in-progress label while the header rule is on the route")
		}
		if n := len(pluginWrites(c)); n != 1 {
			t.Errorf("SetHeaderRoute: %d writes, want 1", n)
		}

		// The controller calls the step again on every reconcile: nothing to send.
		c.Recorder.Reset()
		for range 3 {
			must(t, "SetHeaderRoute again", p.SetHeaderRoute(ro, headerStep("beta", "X-Canary", "yes")))
		}
		if w := pluginWrites(c); len(w) != 0 {
			t.Errorf("repeating SetHeaderRoute wrote %v", w)
		}

		for _, w := range []int32{30, 60} {
			must(t, "SetWeight", p.SetWeight(ro, w, nil))
			u = get(t, c, "v1", "HTTPRoute", ns, "route")
			if diff := cmp.Diff(wantRule, ruleNamed(u, "beta")); diff != "" {
				t.Errorf("SetWeight(%d) changed the header rule (-want +got):\n%s", w, diff)
			}
			want := map[string]int64{"0/stable": int64(100 - w), "0/canary": int64(w), "1/canary": 1, "2/static": 1, "3/canary": 1}
			if diff := cmp.Diff(want, weights(u)); diff != "" {
				t.Errorf("SetWeight(%d) weights (-want +got):\n%s", w, diff)
			}
		}

		must(t, "SetHeaderRoute without match", p.SetHeaderRoute(ro, &v1alpha1.SetHeaderRoute{Name: "beta"}))
		u = get(t, c, "v1", "HTTPRoute", ns, "route")
		if diff := cmp.Diff([]string{"-", "preview", "-"}, ruleNames(u)); diff != "" {
			t.Errorf("rules after removal by a step without match (-want +got):\n%s", diff)
		}
		if got := u.GetAnnotations()[claimsAnnotation]; strings.Contains(got, "beta") {
			t.Errorf("claims annotation = %s, still records the removed rule", got)
		}

		must(t, "SetHeaderRoute", p.SetHeaderRoute(ro, headerStep("beta", "X-Canary", "yes")))
		must(t, "RemoveManagedRoutes", p.RemoveManagedRoutes(ro))
		must(t, "SetWeight(0)", p.SetWeight(ro, 0, nil))
		u = get(t, c, "v1", "HTTPRoute", ns, "route")
		if diff := cmp.Diff(created.Object["spec"], u.Object["spec"]); diff != "" {
			t.Errorf("spec at the end differs from the created route (-want +got):\n%s", diff)
		}
		if _, ok := u.GetAnnotations()[claimsAnnotation]; ok {
			t.Errorf("claims annotation left: %v", u.GetAnnotations())
		}
		if _, ok := u.GetLabels()["rollouts.argoproj.io/gatewayapi-canary"]; ok {
			t.Errorf("in-progress label left")
		}
		// Idempotent: again, nothing to do and nothing sent.
		c.Recorder.Reset()
		must(t, "RemoveManagedRoutes again", p.RemoveManagedRoutes(ro))
		if w := pluginWrites(c); len(w) != 0 {
			t.Errorf("RemoveManagedRoutes with nothing to remove wrote %v", w)
		}
	}
	t.Run("standard", func(t *testing.T) { lifecycle(t, standard) })
	t.Run("experimental", func(t *testing.T) {
		exp, err := harness.Start(harness.Experimental)
		if err != nil {
			t.Fatal(err)
		}
		defer exp.Stop()
		lifecycle(t, exp)
		// CEL there refuses duplicate rule names; the plugin refuses first, naming the rule.
		ns := namespace(t, exp)
		create(t, exp, ns, strings.Replace(headerRoute, "name: preview", "name: beta", 1))
		p := startPlugin(t, exp)
		e := p.SetHeaderRoute(managedRollout(ns, "demo", `{"httpRoute": "route"}`, "beta"), headerStep("beta", "X-Canary", "yes"))
		if !strings.Contains(e.ErrorString, `already has a rule named "beta"`) {
			t.Errorf("error = %q, want one about the existing rule named beta", e.ErrorString)
		}
		headerRuleKeepsRetryAndSessionPersistence(t, exp)
	})
}

// The experimental channel's rule fields (retry, sessionPersistence) go into
// the header rule as the weighted rule has them.
func headerRuleKeepsRetryAndSessionPersistence(t *testing.T, c *harness.Cluster) {
	ns := namespace(t, c)
	create(t, c, ns, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: route}
spec:
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    retry: {attempts: 3, codes: [503], backoff: 100ms}
    sessionPersistence: {sessionName: shop, type: Cookie}
    backendRefs:
    - {name: stable, port: 80, weight: 100}
    - {name: canary, port: 80, weight: 0}
`)
	p := startPlugin(t, c)
	must(t, "SetHeaderRoute", p.SetHeaderRoute(managedRollout(ns, "demo", `{"httpRoute": "route"}`, "beta"), headerStep("beta", "X-Canary", "yes")))
	u := get(t, c, "v1", "HTTPRoute", ns, "route")
	weighted, header := kubetest.Rules(u)[0].(map[string]any), ruleNamed(u, "beta")
	for _, field := range []string{"retry", "sessionPersistence"} {
		if header[field] == nil || !cmp.Equal(weighted[field], header[field]) {
			t.Errorf("header rule %s = %v, want the weighted rule's %v", field, header[field], weighted[field])
		}
	}
}

// A route with two managed rules gets one header rule per managed rule, in
// route order, named beta and beta-1; a GRPCRoute gets them too.
func TestHeaderRoutePerManagedRule(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	create(t, standard, ns, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: route}
spec:
  rules:
  - matches: [{path: {type: PathPrefix, value: /api}}]
    backendRefs:
    - {name: stable, port: 80, weight: 100}
    - {name: canary, port: 80, weight: 0}
  - matches: [{path: {type: PathPrefix, value: /static}}]
    backendRefs: [{name: static, port: 80}]
  - matches: [{path: {type: Exact, value: /checkout}, method: POST}]
    backendRefs:
    - {name: stable, port: 80, weight: 100}
    - {name: canary, port: 80, weight: 0}
`)
	create(t, standard, ns, `apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: api}
spec:
  rules:
  - backendRefs:
    - {name: stable, port: 80, weight: 100}
    - {name: canary, port: 80, weight: 0}
`)
	p := startPlugin(t, standard)
	ro := managedRollout(ns, "demo", `{"httpRoute": "route", "grpcRoute": "api"}`, "beta")
	must(t, "SetHeaderRoute", p.SetHeaderRoute(ro, &v1alpha1.SetHeaderRoute{Name: "beta", Match: []v1alpha1.HeaderRoutingMatch{
		{HeaderName: "X-Canary", HeaderValue: &v1alpha1.StringMatch{Exact: "yes"}},
		{HeaderName: "X-Version", HeaderValue: &v1alpha1.StringMatch{Prefix: "2.0"}},
	}}))
	u := get(t, standard, "v1", "HTTPRoute", ns, "route")
	headers := `[{name: X-Canary, type: Exact, value: "yes"}, {name: X-Version, type: RegularExpression, value: '^2\.0.*'}]`
	for name, want := range map[string]string{
		"beta": `
name: beta
matches: [{path: {type: PathPrefix, value: /api}, headers: ` + headers + `}]
backendRefs: [{group: "", kind: Service, name: canary, port: 80, weight: 1}]`,
		"beta-1": `
name: beta-1
matches: [{path: {type: Exact, value: /checkout}, method: POST, headers: ` + headers + `}]
backendRefs: [{group: "", kind: Service, name: canary, port: 80, weight: 1}]`,
	} {
		if diff := cmp.Diff(jsonObj(t, want), ruleNamed(u, name)); diff != "" {
			t.Errorf("rule %s (-want +got):\n%s", name, diff)
		}
	}
	if diff := cmp.Diff([]string{"-", "-", "-", "beta", "beta-1"}, ruleNames(u)); diff != "" {
		t.Errorf("rule names (-want +got):\n%s", diff)
	}
	g := get(t, standard, "v1", "GRPCRoute", ns, "api")
	want := jsonObj(t, `
name: beta
matches: [{headers: `+headers+`}]
backendRefs: [{group: "", kind: Service, name: canary, port: 80, weight: 1}]`)
	if diff := cmp.Diff(want, ruleNamed(g, "beta")); diff != "" {
		t.Errorf("GRPCRoute rule beta (-want +got):\n%s", diff)
	}
	must(t, "RemoveManagedRoutes", p.RemoveManagedRoutes(ro))
	if got := ruleNames(get(t, standard, "v1", "HTTPRoute", ns, "route")); len(got) != 3 {
		t.Errorf("HTTPRoute rules after RemoveManagedRoutes: %v", got)
	}
	if got := ruleNames(get(t, standard, "v1", "GRPCRoute", ns, "api")); len(got) != 1 {
		t.Errorf("GRPCRoute rules after RemoveManagedRoutes: %v", got)
	}
}

// A mirror rule sends matching requests to stable and mirrors a percentage
// of them to the canary; the weights step around it; RemoveManagedRoutes
// takes it away.
func TestMirrorRoute(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	created := create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route"))
	p := startPlugin(t, standard)
	ro := managedRollout(ns, "demo", `{"httpRoute": "route"}`, "mirror")
	pct := int32(20)
	step := &v1alpha1.SetMirrorRoute{Name: "mirror", Percentage: &pct, Match: []v1alpha1.RouteMatch{
		{Method: &v1alpha1.StringMatch{Exact: "GET"}, Path: &v1alpha1.StringMatch{Prefix: "/api"}},
		{Headers: map[string]v1alpha1.StringMatch{"X-Mirror": {Exact: "yes"}}},
	}}
	must(t, "SetWeight", p.SetWeight(ro, 10, nil))
	must(t, "SetMirrorRoute", p.SetMirrorRoute(ro, step))
	wantRule := jsonObj(t, `
name: mirror
matches:
- {path: {type: PathPrefix, value: /api}, method: GET}
- {path: {type: PathPrefix, value: /}, headers: [{name: X-Mirror, type: Exact, value: "yes"}]}
backendRefs: [{group: "", kind: Service, name: stable, port: 80, weight: 1}]
filters:
- type: RequestMirror
  requestMirror:
    backendRef: {group: "", kind: Service, name: canary, port: 80}
    percent: 20
`)
	u := get(t, standard, "v1", "HTTPRoute", ns, "route")
	if diff := cmp.Diff(wantRule, ruleNamed(u, "mirror")); diff != "" {
		t.Errorf("mirror rule (-want +got):\n%s", diff)
	}
	standard.Recorder.Reset()
	must(t, "SetMirrorRoute again", p.SetMirrorRoute(ro, step))
	if w := pluginWrites(standard); len(w) != 0 {
		t.Errorf("repeating SetMirrorRoute wrote %v", w)
	}
	must(t, "SetWeight", p.SetWeight(ro, 50, nil))
	u = get(t, standard, "v1", "HTTPRoute", ns, "route")
	if diff := cmp.Diff(wantRule, ruleNamed(u, "mirror")); diff != "" {
		t.Errorf("SetWeight changed the mirror rule (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int64{"0/stable": 50, "0/canary": 50, "1/stable": 1}, weights(u)); diff != "" {
		t.Errorf("weights (-want +got):\n%s", diff)
	}
	must(t, "RemoveManagedRoutes", p.RemoveManagedRoutes(ro))
	must(t, "SetWeight(0)", p.SetWeight(ro, 0, nil))
	u = get(t, standard, "v1", "HTTPRoute", ns, "route")
	if diff := cmp.Diff(created.Object["spec"], u.Object["spec"]); diff != "" {
		t.Errorf("spec at the end differs from the created route (-want +got):\n%s", diff)
	}

	// Percentage 0 cannot be told from no percentage here: Argo Rollouts'
	// RPC (gob) drops zero values, so &0 arrives as nil, which mirrors every
	// request (transform.TestSetMirrorRule covers percentage 0 itself).
	zero := int32(0)
	must(t, "SetMirrorRoute(0%)", p.SetMirrorRoute(ro, &v1alpha1.SetMirrorRoute{Name: "mirror", Match: step.Match, Percentage: &zero}))
	mirror := ruleNamed(get(t, standard, "v1", "HTTPRoute", ns, "route"), "mirror")
	if mirror == nil {
		t.Fatal("no mirror rule")
	}
	if got := mirror["filters"].([]any)[0].(map[string]any)["requestMirror"].(map[string]any)["percent"]; got != int64(100) {
		t.Errorf("a step with percentage 0 arrives as no percentage: want percent 100, got %v", got)
	}
	must(t, "RemoveManagedRoutes", p.RemoveManagedRoutes(ro))
}

// One Rollout with two managed routes on two HTTPRoutes: removing one managed
// route by a step without match leaves the other on both routes; a route not
// marked for header routes gets the mirror rule but no header rule; a
// TCPRoute gets neither. RemoveManagedRoutes then removes the rest.
func TestTwoManagedRoutesOfOneRollout(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	for _, name := range []string{"a", "b", "c"} {
		create(t, standard, ns, routeYAML("v1", "HTTPRoute", name))
	}
	create(t, standard, ns, routeYAML("v1", "TCPRoute", "db"))
	p := startPlugin(t, standard)
	ro := managedRollout(ns, "demo", `{"httpRoutes": [{"name": "a", "useHeaderRoutes": true}, {"name": "b", "useHeaderRoutes": true}, {"name": "c"}], "tcpRoute": "db"}`, "beta", "mirror")
	must(t, "SetHeaderRoute", p.SetHeaderRoute(ro, headerStep("beta", "X-Canary", "yes")))
	must(t, "SetMirrorRoute", p.SetMirrorRoute(ro, &v1alpha1.SetMirrorRoute{Name: "mirror", Match: []v1alpha1.RouteMatch{{Method: &v1alpha1.StringMatch{Exact: "POST"}}}}))
	names := func() map[string][]string {
		out := map[string][]string{}
		for _, r := range []string{"a", "b", "c"} {
			out[r] = ruleNames(get(t, standard, "v1", "HTTPRoute", ns, r))
		}
		out["db"] = ruleNames(get(t, standard, "v1", "TCPRoute", ns, "db"))
		return out
	}
	want := map[string][]string{"a": {"-", "beta", "mirror"}, "b": {"-", "beta", "mirror"}, "c": {"-", "mirror"}, "db": {"-"}}
	if diff := cmp.Diff(want, names()); diff != "" {
		t.Errorf("after both steps (-want +got):\n%s", diff)
	}
	must(t, "SetHeaderRoute without match", p.SetHeaderRoute(ro, &v1alpha1.SetHeaderRoute{Name: "beta"}))
	want = map[string][]string{"a": {"-", "mirror"}, "b": {"-", "mirror"}, "c": {"-", "mirror"}, "db": {"-"}}
	if diff := cmp.Diff(want, names()); diff != "" {
		t.Errorf("after removing beta (-want +got):\n%s", diff)
	}
	must(t, "RemoveManagedRoutes", p.RemoveManagedRoutes(ro))
	want = map[string][]string{"a": {"-"}, "b": {"-"}, "c": {"-"}, "db": {"-"}}
	if diff := cmp.Diff(want, names()); diff != "" {
		t.Errorf("after RemoveManagedRoutes (-want +got):\n%s", diff)
	}
	// A TCPRoute listed for header routes cannot take one: an error naming it.
	bad := managedRollout(ns, "demo", `{"httpRoute": "a", "tcpRoutes": [{"name": "db", "useHeaderRoutes": true}]}`, "beta")
	e := p.SetHeaderRoute(bad, headerStep("beta", "X-Canary", "yes"))
	if !strings.Contains(e.ErrorString, "TCPRoute "+ns+"/db") || !strings.Contains(e.ErrorString, "has no matches") {
		t.Errorf("error = %q, want one naming the TCPRoute", e.ErrorString)
	}
}

// Two Rollouts share one route, each with its own rule pair: each adds and
// removes only its own header rule; the in-progress label stays while either
// has one; a Rollout cannot take a rule name the other uses.
func TestTwoRolloutsOnOneRoute(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	service(t, standard, ns, "cart-stable", "http:80")
	service(t, standard, ns, "cart-canary", "http:80")
	create(t, standard, ns, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: route}
spec:
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    backendRefs:
    - {name: stable, port: 80, weight: 100}
    - {name: canary, port: 80, weight: 0}
  - matches: [{path: {type: PathPrefix, value: /cart}}]
    backendRefs:
    - {name: cart-stable, port: 80, weight: 100}
    - {name: cart-canary, port: 80, weight: 0}
`)
	p := startPlugin(t, standard)
	web := managedRollout(ns, "web", `{"httpRoute": "route"}`, "web-beta")
	cart := managedRollout(ns, "cart", `{"httpRoute": "route"}`, "cart-beta", "web-beta")
	cart.Spec.Strategy.Canary.StableService, cart.Spec.Strategy.Canary.CanaryService = "cart-stable", "cart-canary"
	must(t, "web SetHeaderRoute", p.SetHeaderRoute(web, headerStep("web-beta", "X-Canary", "web")))
	must(t, "cart SetHeaderRoute", p.SetHeaderRoute(cart, headerStep("cart-beta", "X-Canary", "cart")))
	u := get(t, standard, "v1", "HTTPRoute", ns, "route")
	if diff := cmp.Diff([]string{"-", "-", "web-beta", "cart-beta"}, ruleNames(u)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if refs := ruleNamed(u, "cart-beta")["backendRefs"].([]any); refs[0].(map[string]any)["name"] != "cart-canary" {
		t.Errorf("cart's header rule sends to %v", refs)
	}

	// cart may not add a rule under a name web's rule has.
	standard.Recorder.Reset()
	e := p.SetHeaderRoute(cart, headerStep("web-beta", "X-Other", "1"))
	if !strings.Contains(e.ErrorString, `already has a rule named "web-beta"`) || !strings.Contains(e.ErrorString, "HTTPRoute "+ns+"/route") {
		t.Errorf("error = %q", e.ErrorString)
	}
	if w := pluginWrites(standard); len(w) != 0 {
		t.Errorf("a refused call wrote %v", w)
	}

	must(t, "web RemoveManagedRoutes", p.RemoveManagedRoutes(web))
	u = get(t, standard, "v1", "HTTPRoute", ns, "route")
	if diff := cmp.Diff([]string{"-", "-", "cart-beta"}, ruleNames(u)); diff != "" {
		t.Errorf("after web's RemoveManagedRoutes (-want +got):\n%s", diff)
	}
	if _, ok := u.GetLabels()["rollouts.argoproj.io/gatewayapi-canary"]; !ok {
		t.Error("in-progress label gone while cart still has a rule")
	}
	must(t, "cart RemoveManagedRoutes", p.RemoveManagedRoutes(cart))
	u = get(t, standard, "v1", "HTTPRoute", ns, "route")
	if diff := cmp.Diff([]string{"-", "-"}, ruleNames(u)); diff != "" {
		t.Errorf("after cart's RemoveManagedRoutes (-want +got):\n%s", diff)
	}
	if _, ok := u.GetLabels()["rollouts.argoproj.io/gatewayapi-canary"]; ok {
		t.Error("in-progress label left")
	}
	// The plugin lets go at the SetWeight the controller makes next in the
	// same reconcile (not in RemoveManagedRoutes: while the canary has no
	// available pods the controller removes and re-adds the rule every time).
	if !ownsRules(u, fieldManager) {
		t.Error("RemoveManagedRoutes gave up spec.rules; the SetWeight after it does")
	}
	must(t, "cart SetWeight(0)", p.SetWeight(cart, 0, nil))
	u = get(t, standard, "v1", "HTTPRoute", ns, "route")
	if ownsRules(u, fieldManager) {
		t.Error("the plugin still owns spec.rules with nothing left on the route")
	}
}

// A route that already has 16 rules cannot take a header rule: an RpcError
// naming the route and the limit, and nothing written.
func TestManagedRuleOverTheLimit(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	var b strings.Builder
	b.WriteString(routeYAML("v1", "HTTPRoute", "route"))
	for i := range 15 {
		fmt.Fprintf(&b, "  - matches: [{path: {type: PathPrefix, value: /r%d}}]\n    backendRefs: [{name: static, port: 80}]\n", i)
	}
	create(t, standard, ns, b.String())
	p := startPlugin(t, standard)
	ro := managedRollout(ns, "demo", `{"httpRoute": "route"}`, "beta")
	before := get(t, standard, "v1", "HTTPRoute", ns, "route")
	standard.Recorder.Reset()
	e := p.SetHeaderRoute(ro, headerStep("beta", "X-Canary", "yes"))
	t.Logf("error: %s", e.ErrorString)
	for _, want := range []string{"rollout " + ns + "/demo", "HTTPRoute " + ns + "/route", "17 rules", "at most 16 rules per HTTPRoute", "nothing was written"} {
		if !strings.Contains(e.ErrorString, want) {
			t.Errorf("error does not mention %q", want)
		}
	}
	if w := pluginWrites(standard); len(w) != 0 {
		t.Errorf("the plugin wrote %v", w)
	}
	if after := get(t, standard, "v1", "HTTPRoute", ns, "route"); after.GetResourceVersion() != before.GetResourceVersion() {
		t.Error("the route changed")
	}
}

// Someone edits a header rule the plugin added, mid-rollout: setting the same
// header route again would undo that edit, so it is a conflict error naming
// the editor; weight changes, which leave the rule alone, go on; Force takes
// the rule back.
func TestEditedHeaderRuleIsAConflict(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	create(t, standard, ns, headerRoute)
	p := startPlugin(t, standard)
	ro := managedRollout(ns, "demo", `{"httpRoute": "route"}`, "beta")
	must(t, "SetWeight(10)", p.SetWeight(ro, 10, nil))
	must(t, "SetHeaderRoute", p.SetHeaderRoute(ro, headerStep("beta", "X-Canary", "yes")))

	update{"kubectl-edit", func(u *unstructured.Unstructured) {
		rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
		for _, r := range rules {
			if r.(map[string]any)["name"] == "beta" {
				r.(map[string]any)["timeouts"] = map[string]any{"request": "3s"}
			}
		}
		_ = unstructured.SetNestedSlice(u.Object, rules, "spec", "rules")
	}}.run(t, &scenario{c: standard, ns: ns})

	// The plugin reads from a watch cache: until it has seen the edit, the route
	// looks as the plugin left it and the call is a no-op. The controller calls
	// again on its next reconcile; so does this test.
	var err rpcErr
	eventually(t, "a conflict error after the edit", func() bool {
		err = p.SetHeaderRoute(ro, headerStep("beta", "X-Canary", "yes"))
		return err.HasError()
	})
	for _, want := range []string{"conflict", "kubectl-edit (Update", `rule "beta": changed since the plugin wrote it`} {
		if !strings.Contains(err.ErrorString, want) {
			t.Errorf("SetHeaderRoute after kubectl edit: error %q does not mention %q", err.ErrorString, want)
		}
	}
	if timeouts := ruleNamed(get(t, standard, "v1", "HTTPRoute", ns, "route"), "beta")["timeouts"]; timeouts == nil {
		t.Error("the edited rule was overwritten")
	}
	must(t, "SetWeight(20) leaves the edited rule alone", p.SetWeight(ro, 20, nil))

	force := managedRollout(ns, "demo", `{"httpRoute": "route", "conflictPolicy": "Force"}`, "beta")
	must(t, "SetHeaderRoute with Force", p.SetHeaderRoute(force, headerStep("beta", "X-Canary", "yes")))
	if timeouts := ruleNamed(get(t, standard, "v1", "HTTPRoute", ns, "route"), "beta")["timeouts"]; timeouts != nil {
		t.Errorf("with Force the plugin should have taken the rule back, timeouts still %v", timeouts)
	}
}

// Routes found by a selector take header routes when the config says
// selectedRoutesUseHeaderRoutes: true; a named route keeps its own setting.
func TestHeaderRouteOnSelectedRoutes(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	for _, name := range []string{"sel-a", "sel-b", "named"} {
		manifest := strings.Replace(routeYAML("v1", "HTTPRoute", name), "  name: "+name, "  name: "+name+"\n  labels: {canary-of: demo}", 1)
		create(t, standard, ns, manifest)
	}
	p := startPlugin(t, standard)
	without := managedRollout(ns, "demo", `{"httpRouteSelector": {"matchLabels": {"canary-of": "demo"}}}`, "beta")
	if err := p.SetHeaderRoute(without, headerStep("beta", "X-Canary", "yes")); !strings.Contains(err.ErrorString, "selectedRoutesUseHeaderRoutes") {
		t.Errorf("without the key: %q, want an error pointing to selectedRoutesUseHeaderRoutes", err.ErrorString)
	}
	ro := managedRollout(ns, "demo", `{"httpRoutes": [{"name": "named"}],
		"httpRouteSelector": {"matchLabels": {"canary-of": "demo"}}, "selectedRoutesUseHeaderRoutes": true}`, "beta")
	must(t, "SetHeaderRoute", p.SetHeaderRoute(ro, headerStep("beta", "X-Canary", "yes")))
	for name, want := range map[string][]string{"sel-a": {"-", "beta"}, "sel-b": {"-", "beta"}, "named": {"-"}} {
		if diff := cmp.Diff(want, ruleNames(get(t, standard, "v1", "HTTPRoute", ns, name))); diff != "" {
			t.Errorf("%s rules (-want +got):\n%s", name, diff)
		}
	}
	must(t, "RemoveManagedRoutes", p.RemoveManagedRoutes(ro))
	for _, name := range []string{"sel-a", "sel-b"} {
		if diff := cmp.Diff([]string{"-"}, ruleNames(get(t, standard, "v1", "HTTPRoute", ns, name))); diff != "" {
			t.Errorf("%s after RemoveManagedRoutes (-want +got):\n%s", name, diff)
		}
	}
}
