package test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// stickyRoute is the route of the stickyCanary tests: a weighted rule with a
// rule filter and a filter of the user's on the canary backendRef, and a rule
// for static content.
const stickyRoute = `apiVersion: gateway.networking.k8s.io/v1
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
    - name: canary
      port: 80
      weight: 0
      filters:
      - type: RequestHeaderModifier
        requestHeaderModifier: {set: [{name: x-version, value: canary}]}
  - matches: [{path: {type: PathPrefix, value: /static}}]
    backendRefs: [{name: static, port: 80}]
`

// stickyRollout is Rollout demo with stickyCanary (cookie shop, ten minutes)
// on the route, stable revision aaa111 and canary revision canaryHash.
func stickyRollout(ns, canaryHash string) *v1alpha1.Rollout {
	ro := rollout(ns, `{"httpRoute": "route", "stickyCanary": {"cookieName": "shop", "maxAgeSeconds": 600}}`)
	ro.Status.StableRS, ro.Status.CurrentPodHash = "aaa111", canaryHash
	return ro
}

// stickySpec is the created route's spec with the weights set, the cookies
// on the weighted rule's backendRefs and the two cookie rules after the
// others (none when canaryHash is "").
func stickySpec(t *testing.T, created *unstructured.Unstructured, stable, canary int64, canaryHash string) map[string]any {
	t.Helper()
	spec := runtime.DeepCopyJSONValue(created.Object["spec"]).(map[string]any)
	rules := spec["rules"].([]any)
	refs := rules[0].(map[string]any)["backendRefs"].([]any)
	stableRef, canaryRef := refs[0].(map[string]any), refs[1].(map[string]any)
	stableRef["weight"], canaryRef["weight"] = stable, canary
	if canaryHash == "" {
		return spec
	}
	cookie := func(value string) map[string]any {
		return jsonObj(t, fmt.Sprintf(`{type: ResponseHeaderModifier, responseHeaderModifier: {add: [{name: Set-Cookie, value: "shop=%s; Path=/; Max-Age=600; HttpOnly; SameSite=Lax"}]}}`, value))
	}
	stableRef["filters"] = []any{cookie("stable-aaa111")}
	canaryRef["filters"] = append(canaryRef["filters"].([]any), cookie("canary-"+canaryHash))
	rule := func(name, value, backend string) map[string]any {
		r := jsonObj(t, fmt.Sprintf(`
name: %s
matches:
- path: {type: PathPrefix, value: /}
  headers: [{name: Cookie, type: RegularExpression, value: '^(.*;\s*)?shop=%s(;.*)?$'}]
filters:
- type: RequestHeaderModifier
  requestHeaderModifier: {add: [{name: x-via, value: gateway}]}
backendRefs: [{group: "", kind: Service, name: %s, port: 80, weight: 1}]
`, name, value, backend))
		if backend == "canary" {
			r["backendRefs"].([]any)[0].(map[string]any)["filters"] = []any{jsonObj(t, `{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: x-version, value: canary}]}}`)}
		}
		return r
	}
	spec["rules"] = append(rules, rule("demo-sticky-canary", "canary-"+canaryHash, "canary"), rule("demo-sticky-stable", "stable-aaa111", "stable"))
	return spec
}

// A canary walk with stickyCanary through the binary: at 20 % the cookies
// and their rules are on the route (one write); a restarted plugin finds
// them as it left them (no write), RemoveManagedRoutes leaves them; a new
// canary revision changes the canary cookie and its rule; at 100 % and at 0
// they leave, and the route is as created.
func TestStickyCanaryLifecycle(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	created := create(t, standard, ns, stickyRoute)
	first, err := harness.StartPlugin(pluginBin, standard.Kubeconfig, kubetest.Log(t))
	if err != nil {
		t.Fatal(err)
	}
	ro := stickyRollout(ns, "bbb222")
	standard.Recorder.Reset()
	must(t, "SetWeight(20)", first.Plugin.SetWeight(ro, 20, nil))
	u := get(t, standard, "v1", "HTTPRoute", ns, "route")
	if diff := cmp.Diff(stickySpec(t, created, 80, 20, "bbb222"), u.Object["spec"]); diff != "" {
		t.Errorf("spec at 20 %% (-want +got):\n%s", diff)
	}
	if n := len(pluginWrites(standard)); n != 1 {
		t.Errorf("SetWeight(20): %d writes, want 1", n)
	}
	claims := u.GetAnnotations()[claimsAnnotation]
	for _, want := range []string{`"stickyRules":["demo-sticky-canary","demo-sticky-stable"]`, `"backend":"` + ns + `/canary"`, `"backend":"` + ns + `/stable"`} {
		if !strings.Contains(claims, want) {
			t.Errorf("claims annotation = %s, want it to hold %s", claims, want)
		}
	}
	first.Stop()

	// A restarted plugin: the route says what it added.
	p := startPlugin(t, standard)
	standard.Recorder.Reset()
	must(t, "SetWeight(20) after the restart", p.SetWeight(ro, 20, nil))
	must(t, "RemoveManagedRoutes", p.RemoveManagedRoutes(ro))
	if w := pluginWrites(standard); len(w) != 0 {
		t.Errorf("SetWeight(20) again and RemoveManagedRoutes wrote %v", w)
	}

	ro = stickyRollout(ns, "ccc333")
	must(t, "SetWeight(20), new canary revision", p.SetWeight(ro, 20, nil))
	u = get(t, standard, "v1", "HTTPRoute", ns, "route")
	if diff := cmp.Diff(stickySpec(t, created, 80, 20, "ccc333"), u.Object["spec"]); diff != "" {
		t.Errorf("spec after a new canary revision (-want +got):\n%s", diff)
	}

	must(t, "SetWeight(100)", p.SetWeight(ro, 100, nil))
	u = get(t, standard, "v1", "HTTPRoute", ns, "route")
	if diff := cmp.Diff(stickySpec(t, created, 0, 100, ""), u.Object["spec"]); diff != "" {
		t.Errorf("spec at 100 %% (-want +got):\n%s", diff)
	}
	must(t, "SetWeight(0)", p.SetWeight(ro, 0, nil))
	u = get(t, standard, "v1", "HTTPRoute", ns, "route")
	if diff := cmp.Diff(created.Object["spec"], u.Object["spec"]); diff != "" {
		t.Errorf("spec at the end differs from the created route (-want +got):\n%s", diff)
	}
	if _, ok := u.GetAnnotations()[claimsAnnotation]; ok {
		t.Errorf("claims annotation left: %v", u.GetAnnotations())
	}
}

// An abort mid-canary (SetWeight(0) straight from 20 %) takes the cookies
// and rules away with the weight; a header rule added meanwhile copies no
// cookie and stays until RemoveManagedRoutes.
func TestStickyCanaryAbortWithAHeaderRule(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	created := create(t, standard, ns, stickyRoute)
	p := startPlugin(t, standard)
	ro := stickyRollout(ns, "bbb222")
	ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "beta"}}
	must(t, "SetWeight(20)", p.SetWeight(ro, 20, nil))
	must(t, "SetHeaderRoute", p.SetHeaderRoute(ro, headerStep("beta", "X-Canary", "yes")))
	u := get(t, standard, "v1", "HTTPRoute", ns, "route")
	header := ruleNamed(u, "beta")
	wantRef := jsonObj(t, `{group: "", kind: Service, name: canary, port: 80, weight: 1, filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: x-version, value: canary}]}}]}`)
	if diff := cmp.Diff([]any{wantRef}, header["backendRefs"]); diff != "" {
		t.Errorf("header rule's backendRefs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"-", "-", "beta", "demo-sticky-canary", "demo-sticky-stable"}, ruleNames(u)); diff != "" {
		t.Errorf("rule order (-want +got):\n%s", diff)
	}

	must(t, "SetWeight(0)", p.SetWeight(ro, 0, nil))
	must(t, "RemoveManagedRoutes", p.RemoveManagedRoutes(ro))
	must(t, "SetWeight(0)", p.SetWeight(ro, 0, nil))
	u = get(t, standard, "v1", "HTTPRoute", ns, "route")
	if diff := cmp.Diff(created.Object["spec"], u.Object["spec"]); diff != "" {
		t.Errorf("spec after the abort differs from the created route (-want +got):\n%s", diff)
	}
}

// stickyCanary on a Rollout that also names a GRPCRoute is refused before any
// route is read; a gateway whose class does not publish backendRef header
// modification refuses the cookies before any write.
func TestStickyCanaryErrors(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	created := create(t, standard, ns, stickyRoute)
	p := startPlugin(t, standard)

	ro := stickyRollout(ns, "bbb222")
	ro.Spec.Strategy.Canary.TrafficRouting.Plugins["argoproj-labs/gatewayAPI"] = []byte(`{"httpRoute": "route", "grpcRoute": "api", "stickyCanary": {}}`)
	err := p.SetWeight(ro, 20, nil)
	want := fmt.Sprintf(`key "stickyCanary" works on HTTPRoutes only, and the Rollout also names GRPCRoute %s/api; a GRPCRoute carries no cookies`, ns)
	if !strings.Contains(err.ErrorString, want) {
		t.Errorf("SetWeight(20) with a GRPCRoute: %q, want it to say %q", err.ErrorString, want)
	}

	// A class that carries response headers on rules, not filters on backendRefs (Traefik v3.6).
	// Gateway API allows one ResponseHeaderModifier per backendRef.
	create(t, standard, ns, strings.NewReplacer("name: route", "name: edge", "RequestHeaderModifier", "ResponseHeaderModifier", "requestHeaderModifier", "responseHeaderModifier").Replace(stickyRoute))
	ro = stickyRollout(ns, "bbb222")
	ro.Spec.Strategy.Canary.TrafficRouting.Plugins["argoproj-labs/gatewayAPI"] = []byte(`{"httpRoute": "edge", "stickyCanary": {}}`)
	err = p.SetWeight(ro, 20, nil)
	want = fmt.Sprintf("HTTPRoute %s/edge: stickyCanary: rule 0's backendRef to Service %s/canary has a ResponseHeaderModifier filter already, and Gateway API allows one per backendRef", ns, ns)
	if !strings.Contains(err.ErrorString, want) {
		t.Errorf("SetWeight(20) on a backendRef with a ResponseHeaderModifier: %q, want it to say %q", err.ErrorString, want)
	}

	gatewayClass(t, standard, ns+"-old-traefik", "HTTPRoute", "HTTPRouteResponseHeaderModification")
	create(t, standard, ns, gatewayOfClass("gw", ns+"-old-traefik"))
	err = p.SetWeight(stickyRollout(ns, "bbb222"), 20, nil)
	for _, want := range []string{
		"HTTPRoute " + ns + "/route: rollout " + ns + "/demo: rule \"demo-sticky-canary\" needs HTTPRouteBackendRequestHeaderModification (a RequestHeaderModifier filter on a backendRef); " +
			"rule 0 needs HTTPRouteBackendRequestHeaderModification (a ResponseHeaderModifier filter on a backendRef); GatewayClass",
		fmt.Sprintf("GatewayClass %s-old-traefik (of parent Gateway %s/gw) does not list HTTPRouteBackendRequestHeaderModification in status.supportedFeatures", ns, ns),
	} {
		if !strings.Contains(err.ErrorString, want) {
			t.Errorf("SetWeight(20) behind a class without backendRef filters: %q, want it to say %q", err.ErrorString, want)
		}
	}
	u := get(t, standard, "v1", "HTTPRoute", ns, "route")
	if diff := cmp.Diff(created.Object["spec"], u.Object["spec"]); diff != "" {
		t.Errorf("a refused call changed the route (-want +got):\n%s", diff)
	}
}

// The cleanup command undoes the cookies and rules of a deleted Rollout.
func TestStickyCanaryCleanup(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	created := create(t, standard, ns, stickyRoute)
	p := startPlugin(t, standard)
	must(t, "SetWeight(20)", p.SetWeight(stickyRollout(ns, "bbb222"), 20, nil))
	out, code := cleanupCommand(t, standard, ns+"/demo")
	if code != 0 || !strings.Contains(out, "− rule demo-sticky-canary") || !strings.Contains(out, "sticky cookie") {
		t.Errorf("cleanup: exit %d, %q", code, out)
	}
	u := get(t, standard, "v1", "HTTPRoute", ns, "route")
	if diff := cmp.Diff(created.Object["spec"], u.Object["spec"]); diff != "" {
		t.Errorf("spec after cleanup differs from the created route (-want +got):\n%s", diff)
	}
}
