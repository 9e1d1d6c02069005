package test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// What Traefik v3.7.13's GatewayClass publishes (make e2e prints it: "GatewayClass
// traefik publishes 27 supportedFeatures"): still no RequestMirror.
var traefikClassFeatures = []string{"BackendTLSPolicy", "GRPCRoute", "GRPCRouteNamedRouteRule", "Gateway", "GatewayPort8080", "HTTPRoute",
	"HTTPRoute303RedirectStatusCode", "HTTPRoute307RedirectStatusCode", "HTTPRoute308RedirectStatusCode", "HTTPRouteBackendProtocolH2C",
	"HTTPRouteBackendProtocolWebSocket", "HTTPRouteBackendRequestHeaderModification", "HTTPRouteDestinationPortMatching", "HTTPRouteHostRewrite",
	"HTTPRouteMethodMatching", "HTTPRouteNamedRouteRule", "HTTPRouteParentRefPort", "HTTPRoutePathRedirect", "HTTPRoutePathRewrite",
	"HTTPRoutePortRedirect", "HTTPRouteQueryParamMatching", "HTTPRouteResponseHeaderModification", "HTTPRouteSchemeRedirect",
	"ReferenceGrant", "TLSRoute", "TLSRouteModeMixed", "TLSRouteModeTerminate"}

var gatewayClassGVR = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gatewayclasses"}

// gatewayClass creates a GatewayClass and, when features are given, has its
// controller publish them in status.supportedFeatures. Its name starts with
// the test's namespace (classes are cluster-scoped).
func gatewayClass(t *testing.T, c *harness.Cluster, name string, features ...string) {
	t.Helper()
	ctx := context.Background()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"controllerName": "example.com/" + name},
	}}
	out, err := c.Dynamic.Resource(gatewayClassGVR).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Dynamic.Resource(gatewayClassGVR).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if len(features) == 0 {
		return
	}
	var list []any
	for _, f := range features {
		list = append(list, map[string]any{"name": f})
	}
	out.Object["status"] = map[string]any{"supportedFeatures": list}
	if _, err := c.Dynamic.Resource(gatewayClassGVR).UpdateStatus(ctx, out, metav1.UpdateOptions{FieldManager: "gateway-controller"}); err != nil {
		t.Fatal(err)
	}
}

func gatewayOfClass(name, class string) string {
	return fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: %s}
spec:
  gatewayClassName: %s
  listeners: [{name: http, port: 80, protocol: HTTP}]
`, name, class)
}

func routeWithParents(parents ...string) string {
	return fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: route}
spec:
  parentRefs: [%s]
  rules:
  - backendRefs:
    - {name: stable, port: 80, weight: 100}
    - {name: canary, port: 80, weight: 0}
`, strings.Join(parents, ", "))
}

func mirrorStep(pct int32) *v1alpha1.SetMirrorRoute {
	return &v1alpha1.SetMirrorRoute{Name: "mirror", Percentage: &pct, Match: []v1alpha1.RouteMatch{{Path: &v1alpha1.StringMatch{Prefix: "/api"}}}}
}

// Through the binary, on a real apiserver: a route behind a gateway whose
// class publishes its features and lacks RequestMirror gets no mirror rule
// (the error names the route, the rule, the class and the feature; the
// route is byte for byte as before), while weights and header rules go on;
// assumeGatewayFeatures lets it through. A route with two parents of
// different classes needs both to carry it. A class that publishes nothing
// is written as before, and the log says so once.
func TestStepsTheGatewayCannotCarryAreRefused(t *testing.T) {
	standard := parallel(t)
	c := standard
	ns := namespace(t, c)
	gatewayClass(t, c, ns+"-traefik", traefikClassFeatures...)
	gatewayClass(t, c, ns+"-envoy", "HTTPRoute", "HTTPRouteRequestMirror", "HTTPRouteRequestPercentageMirror")
	gatewayClass(t, c, ns+"-old")
	create(t, c, ns, gatewayOfClass("traefik", ns+"-traefik"))
	create(t, c, ns, gatewayOfClass("envoy", ns+"-envoy"))
	create(t, c, ns, gatewayOfClass("old", ns+"-old"))
	p, log := startPluginWith(t, pluginBin, c.Kubeconfig)
	managed := []v1alpha1.MangedRoutes{{Name: "beta"}, {Name: "mirror"}}
	rolloutOn := func(route, extra string) *v1alpha1.Rollout {
		ro := rollout(ns, fmt.Sprintf(`{"httpRoute": %q%s}`, route, extra))
		ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = managed
		return ro
	}
	routeNamed := func(name string, parents ...string) {
		create(t, c, ns, strings.Replace(routeWithParents(parents...), "name: route", "name: "+name, 1))
	}
	rules := func(name string) []any {
		u := get(t, c, "v1", "HTTPRoute", ns, name)
		r, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
		return r
	}

	// Behind Traefik alone.
	routeNamed("traefik", "{name: traefik}")
	ro := rolloutOn("traefik", "")
	if err := p.SetWeight(ro, 20, nil); err.HasError() {
		t.Fatal(err)
	}
	before := get(t, c, "v1", "HTTPRoute", ns, "traefik")
	err := p.SetMirrorRoute(ro, mirrorStep(50))
	want := fmt.Sprintf(`HTTPRoute %s/traefik: rollout %s/demo: rule "mirror" needs HTTPRouteRequestMirror (a RequestMirror filter) `+
		`and HTTPRouteRequestPercentageMirror (a RequestMirror filter with a percentage); GatewayClass %s-traefik (of parent Gateway %s/traefik) `+
		`does not list HTTPRouteRequestMirror, HTTPRouteRequestPercentageMirror in status.supportedFeatures`, ns, ns, ns, ns)
	if !strings.Contains(err.ErrorString, want) || !strings.Contains(err.ErrorString, "nothing was written") {
		t.Errorf("SetMirrorRoute behind Traefik:\n%s\nwant it to say\n%s", err.ErrorString, want)
	}
	if after := get(t, c, "v1", "HTTPRoute", ns, "traefik"); after.GetResourceVersion() != before.GetResourceVersion() {
		t.Errorf("the refused step wrote the route (resourceVersion %s → %s)", before.GetResourceVersion(), after.GetResourceVersion())
	}
	if err := p.SetHeaderRoute(ro, &v1alpha1.SetHeaderRoute{Name: "beta",
		Match: []v1alpha1.HeaderRoutingMatch{{HeaderName: "X-Beta", HeaderValue: &v1alpha1.StringMatch{Exact: "1"}}}}); err.HasError() {
		t.Errorf("a header route behind Traefik: %s", err)
	}
	if err := p.SetWeight(ro, 40, nil); err.HasError() {
		t.Errorf("SetWeight behind Traefik after the refusal: %s", err)
	}
	// The opt-out: the user says the gateway carries it.
	assumed := rolloutOn("traefik", `, "assumeGatewayFeatures": ["HTTPRouteRequestMirror", "HTTPRouteRequestPercentageMirror"]`)
	if err := p.SetMirrorRoute(assumed, mirrorStep(50)); err.HasError() {
		t.Errorf("SetMirrorRoute with assumeGatewayFeatures: %s", err)
	}
	if n := len(rules("traefik")); n != 3 {
		t.Errorf("with assumeGatewayFeatures the route has %d rules, want 3 (weighted, header, mirror)", n)
	}

	// Two parents: Envoy Gateway carries mirrors, Traefik does not.
	routeNamed("both", "{name: envoy}", "{name: traefik}")
	both := rolloutOn("both", "")
	before = get(t, c, "v1", "HTTPRoute", ns, "both")
	err = p.SetMirrorRoute(both, mirrorStep(100))
	if want := fmt.Sprintf("GatewayClass %s-traefik (of parent Gateway %s/traefik) does not list HTTPRouteRequestMirror in", ns, ns); !strings.Contains(err.ErrorString, want) {
		t.Errorf("two parents, one without mirrors:\n%s\nwant it to say\n%s", err.ErrorString, want)
	}
	if diff := cmp.Diff(before.Object["spec"], get(t, c, "v1", "HTTPRoute", ns, "both").Object["spec"]); diff != "" {
		t.Errorf("the refused step changed the spec (-before +after):\n%s", diff)
	}
	routeNamed("envoy", "{name: envoy}")
	if err := p.SetMirrorRoute(rolloutOn("envoy", ""), mirrorStep(25)); err.HasError() {
		t.Errorf("behind Envoy Gateway alone: %s", err)
	}

	// A class that publishes nothing, and a parent that is not there:
	// written as before the check, said once each.
	routeNamed("old", "{name: old}", "{name: missing}")
	oldRo := rolloutOn("old", "")
	for range 2 {
		if err := p.SetMirrorRoute(oldRo, mirrorStep(50)); err.HasError() {
			t.Errorf("behind a class that publishes nothing: %s", err)
		}
		if err := p.SetMirrorRoute(oldRo, mirrorStep(0)); err.HasError() {
			t.Errorf("removing the mirror: %s", err)
		}
	}
	if n := log.Count(fmt.Sprintf("GatewayClass %s-old (of parent Gateway %s/old): its status.supportedFeatures lists nothing; written without checking", ns, ns)); n != 1 {
		t.Errorf("the log says %d times that the old class was not checked, want 1", n)
	}
	if n := log.Count(fmt.Sprintf("parent Gateway %s/missing: reading Gateway %s/missing: ", ns, ns)); n != 1 {
		t.Errorf("the log says %d times that the missing Gateway was not checked, want 1", n)
	}
}

// The same verdict in a plan, from the files a user gives (no cluster):
// the mirror step fails behind Traefik's class, and a parent the files do
// not hold is not checked, which the plan says.
func TestPlanSaysWhatTheGatewayCannotCarry(t *testing.T) {
	t.Parallel()
	gw := func(name, class string) string {
		return strings.Replace(gatewayOfClass(name, class), "metadata: {name: "+name+"}", "metadata: {name: "+name+", namespace: shop}", 1)
	}
	var features []string
	for _, f := range traefikClassFeatures {
		features = append(features, fmt.Sprintf("{name: %s}", f))
	}
	files := strings.Join([]string{
		"apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: traefik}\nspec: {controllerName: traefik.io/gateway-controller}\nstatus:\n  supportedFeatures: [" + strings.Join(features, ", ") + "]\n",
		gw("traefik", "traefik"),
		strings.Replace(routeWithParents("{name: traefik}", "{name: elsewhere}"), "metadata: {name: route}", "metadata: {name: route, namespace: shop}", 1),
		"apiVersion: v1\nkind: Service\nmetadata: {name: stable, namespace: shop}\nspec:\n  ports: [{name: http, port: 80}]\n",
	}, "---\n")
	ro := strings.Replace(strings.Replace(planRollout("shop", "route"), "managedRoutes: [{name: beta}]", "managedRoutes: [{name: beta}, {name: mirror}]", 1),
		"      - pause: {}\n", "      - setMirrorRoute: {name: mirror, percentage: 50, match: [{path: {prefix: /api}}]}\n      - pause: {}\n", 1)
	out, code := runBinary(t, []string{"KUBECONFIG=/nonexistent"}, "plan", "-f", writeFile(t, "rollout.yaml", ro), "--routes", writeFile(t, "routes.yaml", files))
	if code == 0 {
		t.Errorf("plan of a step the gateway cannot carry: exit 0")
	}
	for _, want := range []string{
		`setMirrorRoute mirror`, `HTTPRoute shop/route: FAILS: SetMirrorRoute(mirror): HTTPRoute shop/route: rollout shop/demo: rule "mirror" needs HTTPRouteRequestMirror`,
		`GatewayClass traefik (of parent Gateway shop/traefik) does not list HTTPRouteRequestMirror`,
		// The header step is not checked behind the Gateway the files lack; it needs nothing beyond core anyway.
		"step 3: setHeaderRoute beta",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the plan does not say %q:\n%s", want, out)
		}
	}
}
