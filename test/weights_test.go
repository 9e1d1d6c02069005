package test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// routeYAML is a route of the given kind and version whose one rule sends all
// traffic to stable and none to canary.
func routeYAML(version, kind, name string) string {
	hostnames := ""
	if kind == "TLSRoute" {
		hostnames = "  hostnames: [tls.example.com]\n"
	}
	return fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/%s
kind: %s
metadata:
  name: %s
spec:
  parentRefs: [{name: gw}]
%s  rules:
  - backendRefs:
    - {name: stable, port: 80, weight: 100}
    - {name: canary, port: 80, weight: 0}
`, version, kind, name, hostnames)
}

// The real plugin walks a canary 0 → 30 → 100 → 0 on every route kind; each
// change is one server-side apply under the plugin's field manager, which
// then owns spec.rules; the in-progress label comes and goes with the canary.
// When the rollout ends the plugin gives its ownership back with one JSON
// patch of its managedFields entry that keeps every value (the one write
// that is not an apply).
func TestWeightWalkOnEveryKind(t *testing.T) {
	standard := parallel(t)
	walk := func(t *testing.T, c *harness.Cluster, version, kind string) {
		ns := namespace(t, c)
		create(t, c, ns, routeYAML(version, kind, "route"))
		p := startPlugin(t, c)
		cfg := fmt.Sprintf(`{"%sRoute": "route"}`, strings.ToLower(strings.TrimSuffix(kind, "Route")))
		ro := rollout(ns, cfg)
		for _, step := range []struct {
			weight   int32
			stable   int64
			canary   int64
			labelled bool
			writes   []string // "apply" or "release"
			owns     bool     // the plugin owns spec.rules afterwards
		}{
			{0, 100, 0, false, nil, false},
			{30, 70, 30, true, []string{"apply"}, true},
			{100, 0, 100, true, []string{"apply"}, true},
			{0, 100, 0, false, []string{"apply", "release"}, false},
		} {
			c.Recorder.Reset()
			if err := p.SetWeight(ro, step.weight, nil); err.HasError() {
				t.Fatalf("SetWeight(%d): %s", step.weight, err)
			}
			if slices.Contains(step.writes, "release") {
				// The release patches the managedFields of the object the
				// apply answered with; it does not read the route again.
				for _, r := range c.Recorder.Requests() {
					if strings.HasPrefix(r.UserAgent, "rollouts-gatewayapi-ssa") && r.Method == http.MethodGet && strings.HasSuffix(r.Path, "/route") {
						t.Errorf("SetWeight(%d): the release read the route again: GET %s", step.weight, r.Path)
					}
				}
			}
			u := get(t, c, version, kind, ns, "route")
			want := map[string]int64{"0/stable": step.stable, "0/canary": step.canary}
			if diff := cmp.Diff(want, weights(u)); diff != "" {
				t.Errorf("SetWeight(%d): weights (-want +got):\n%s", step.weight, diff)
			}
			_, labelled := u.GetLabels()["rollouts.argoproj.io/gatewayapi-canary"]
			if labelled != step.labelled {
				t.Errorf("SetWeight(%d): in-progress label present = %v, want %v", step.weight, labelled, step.labelled)
			}
			var writes []string
			for _, w := range pluginWrites(c) {
				switch {
				case w.IsApply():
					writes = append(writes, "apply")
				case w.Method == http.MethodPatch && w.ContentType == "application/json-patch+json":
					writes = append(writes, "release")
				default:
					writes = append(writes, w.Method+" "+w.ContentType)
				}
			}
			if diff := cmp.Diff(step.writes, writes); diff != "" {
				t.Errorf("SetWeight(%d): writes (-want +got):\n%s", step.weight, diff)
			}
			if got := ownsRules(u, fieldManager); got != step.owns {
				t.Errorf("SetWeight(%d): plugin's Apply entry owns f:spec.f:rules = %v, want %v: %v", step.weight, got, step.owns, u.GetManagedFields())
			}
			if !step.owns {
				for _, e := range u.GetManagedFields() {
					if e.Manager == fieldManager {
						t.Errorf("SetWeight(%d): the plugin still has a managedFields entry: %+v", step.weight, e)
					}
				}
			}
		}
	}
	for _, kind := range []string{"HTTPRoute", "GRPCRoute", "TCPRoute", "TLSRoute", "UDPRoute"} {
		t.Run(kind+"/v1", func(t *testing.T) { walk(t, standard, "v1", kind) })
	}
	t.Run("v1alpha2-only cluster", func(t *testing.T) {
		old, err := harness.Start(harness.V1Alpha2Only)
		if err != nil {
			t.Fatal(err)
		}
		defer old.Stop()
		for _, kind := range []string{"TCPRoute", "TLSRoute", "UDPRoute"} {
			t.Run(kind+"/v1alpha2", func(t *testing.T) { walk(t, old, "v1alpha2", kind) })
		}
	})
}

// A second SetWeight with the same weight sends nothing and leaves the
// resourceVersion as it was.
func TestSameWeightTwiceWritesOnce(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route"))
	p := startPlugin(t, standard)
	ro := rollout(ns, `{"httpRoute": "route"}`)
	if err := p.SetWeight(ro, 30, nil); err.HasError() {
		t.Fatal(err)
	}
	before := get(t, standard, "v1", "HTTPRoute", ns, "route").GetResourceVersion()
	standard.Recorder.Reset()
	for range 3 {
		if err := p.SetWeight(ro, 30, nil); err.HasError() {
			t.Fatal(err)
		}
	}
	if w := pluginWrites(standard); len(w) != 0 {
		t.Errorf("repeating SetWeight(30) sent %d writes: %v", len(w), w)
	}
	if after := get(t, standard, "v1", "HTTPRoute", ns, "route").GetResourceVersion(); after != before {
		t.Errorf("resourceVersion changed from %s to %s", before, after)
	}
}

// richRoute has everything a real route has besides the two backends the
// rollout shifts: hostnames, parentRefs with sections, annotations, labels, a
// filter, a third backendRef with its own weight, and a second rule.
const richRoute = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: shop
  labels: {team: shop}
  annotations: {owner: shop-team@example.com}
spec:
  parentRefs:
  - {name: gw, sectionName: https}
  - {name: internal-gw, namespace: infra}
  hostnames: [shop.example.com, www.shop.example.com]
  rules:
  - matches:
    - path: {type: PathPrefix, value: /api}
      headers: [{name: x-env, value: prod}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier:
        add: [{name: x-routed-by, value: gateway}]
    timeouts: {request: 10s}
    backendRefs:
    - {name: stable, port: 80, weight: 90}
    - {name: canary, port: 80, weight: 0}
    - {name: legacy, port: 8080, weight: 10}
  - matches:
    - path: {type: PathPrefix, value: /static}
    backendRefs:
    - {name: static, port: 80}
`

// Everything but the two weights, the plugin's label and its claims
// annotation is equal before and after a weight change, compared on the whole
// object.
func TestOnlyWeightsChange(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	before := create(t, standard, ns, richRoute)
	p := startPlugin(t, standard)
	if err := p.SetWeight(rollout(ns, `{"httpRoute": "shop"}`), 30, nil); err.HasError() {
		t.Fatal(err)
	}
	after := get(t, standard, "v1", "HTTPRoute", ns, "shop")

	want := before.DeepCopy()
	rules, _, _ := unstructured.NestedSlice(want.Object, "spec", "rules")
	refs := rules[0].(map[string]any)["backendRefs"].([]any)
	refs[0].(map[string]any)["weight"] = int64(70)
	refs[1].(map[string]any)["weight"] = int64(30)
	_ = unstructured.SetNestedSlice(want.Object, rules, "spec", "rules")
	want.SetLabels(map[string]string{"team": "shop", "rollouts.argoproj.io/gatewayapi-canary": "in-progress"})
	// The plugin's own bookkeeping: what each Rollout has on the route (no
	// cluster: claims on a cluster's own routes are that cluster's).
	want.SetAnnotations(map[string]string{"owner": "shop-team@example.com",
		"gatewayapi-ssa.dev/claims": `{"` + ns + `/demo":{"canaryWeight":30,"weights":[` +
			`{"rule":0,"service":"` + ns + `/stable","weight":70},{"rule":0,"service":"` + ns + `/canary","weight":30}]}}`})
	ignore := func(u *unstructured.Unstructured) map[string]any {
		u = u.DeepCopy()
		u.SetResourceVersion("")
		u.SetManagedFields(nil)
		u.SetGeneration(0)
		return u.Object
	}
	if diff := cmp.Diff(ignore(want), ignore(after)); diff != "" {
		t.Errorf("route after SetWeight(30) (-want +got):\n%s", diff)
	}
	if after.GetGeneration() != before.GetGeneration()+1 {
		t.Errorf("generation %d → %d, want one spec change", before.GetGeneration(), after.GetGeneration())
	}
}

// Changes by other managers to what the plugin does not manage survive, both
// when made between two calls and when made between the plugin's read and its
// write (the apply's resourceVersion precondition fails and the plugin
// recomputes from a fresh read).
func TestOthersChangesSurvive(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	create(t, standard, ns, richRoute)
	p := startPlugin(t, standard)
	ro := rollout(ns, `{"httpRoute": "shop"}`)
	ctx := context.Background()
	routes := standard.Gateway.GatewayV1().HTTPRoutes(ns)
	if err := p.SetWeight(ro, 10, nil); err.HasError() {
		t.Fatal(err)
	}

	// Between two calls: kubectl edit adds a hostname.
	r, err := routes.Get(ctx, "shop", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.Spec.Hostnames = append(r.Spec.Hostnames, "shop.example.org")
	if _, err := routes.Update(ctx, r, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}

	// Between the plugin's read and its write: another controller changes the
	// filter of the rule the plugin does not manage, just before the plugin's
	// apply reaches the apiserver.
	var injected atomic.Bool
	standard.Recorder.Before(func(req *http.Request) {
		if req.Method != http.MethodPatch || injected.Swap(true) {
			return
		}
		r, err := routes.Get(ctx, "shop", metav1.GetOptions{})
		if err != nil {
			t.Error(err)
			return
		}
		r.Spec.Rules[1].Timeouts = nil
		r.Spec.Rules[1].Matches[0].Headers = append(r.Spec.Rules[1].Matches[0].Headers, gwHeader("x-cache", "hit"))
		if _, err := routes.Update(ctx, r, metav1.UpdateOptions{FieldManager: "other-controller"}); err != nil {
			t.Error(err)
		}
	})
	defer standard.Recorder.Before(nil)
	standard.Recorder.Reset()
	if err := p.SetWeight(ro, 40, nil); err.HasError() {
		t.Fatal(err)
	}
	if !injected.Load() {
		t.Fatal("the plugin sent no apply; nothing was injected")
	}
	if n := len(pluginWrites(standard)); n != 2 {
		t.Errorf("%d applies, want 2 (one refused as stale, one recomputed)", n)
	}
	got, err := routes.Get(ctx, "shop", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"shop.example.com", "www.shop.example.com", "shop.example.org"}, hostnames(got.Spec.Hostnames)); diff != "" {
		t.Errorf("kubectl edit's hostname lost (-want +got):\n%s", diff)
	}
	if h := got.Spec.Rules[1].Matches[0].Headers; len(h) != 1 || h[0].Name != "x-cache" {
		t.Errorf("other-controller's header match lost: %+v", h)
	}
	if w := *got.Spec.Rules[0].BackendRefs[1].Weight; w != 40 {
		t.Errorf("canary weight %d, want 40", w)
	}
}

// Two routes by name and three by label selector are all written; a route
// without the label is not. maxTrafficWeight 1000 splits SetWeight(300) 700/300.
func TestNamedAndSelectedRoutes(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	for _, name := range []string{"named-a", "named-b", "sel-a", "sel-b", "sel-c", "other"} {
		manifest := routeYAML("v1", "HTTPRoute", name)
		if strings.HasPrefix(name, "sel-") {
			manifest = strings.Replace(manifest, "  name: "+name, "  name: "+name+"\n  labels: {canary-of: demo}", 1)
		}
		create(t, standard, ns, manifest)
	}
	// named-a is also selected by label: it must be written once, not twice.
	if _, err := standard.Dynamic.Resource(httpRoutes).Namespace(ns).Patch(context.Background(), "named-a", "application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"canary-of":"demo"}}}`), metav1.PatchOptions{FieldManager: "kubectl-label"}); err != nil {
		t.Fatal(err)
	}
	otherBefore := get(t, standard, "v1", "HTTPRoute", ns, "other").GetResourceVersion()
	p := startPlugin(t, standard)
	ro := rollout(ns, `{"httpRoutes": [{"name": "named-a"}, {"name": "named-b", "useHeaderRoutes": true}],
		"httpRouteSelector": {"matchLabels": {"canary-of": "demo"}}}`)
	max := int32(1000)
	ro.Spec.Strategy.Canary.TrafficRouting.MaxTrafficWeight = &max
	standard.Recorder.Reset()
	if err := p.SetWeight(ro, 300, nil); err.HasError() {
		t.Fatal(err)
	}
	for _, name := range []string{"named-a", "named-b", "sel-a", "sel-b", "sel-c"} {
		got := weights(get(t, standard, "v1", "HTTPRoute", ns, name))
		if diff := cmp.Diff(map[string]int64{"0/stable": 700, "0/canary": 300}, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	if n := len(pluginWrites(standard)); n != 5 {
		t.Errorf("%d writes, want 5 (one per managed route)", n)
	}
	if after := get(t, standard, "v1", "HTTPRoute", ns, "other").GetResourceVersion(); after != otherBefore {
		t.Errorf("the unlabelled route was written (resourceVersion %s → %s)", otherBefore, after)
	}
}

// Steps one right after the other (the controller's reconciles can come that
// close) each write every route. The next call reads the watch cache while
// the events of the last call's writes are still coming in; a route whose
// event arrives between the call's listing of the cache and its look at what
// the plugin wrote must still be read as written, or the call takes it for
// unchanged at the weight of two steps ago, writes nothing and answers that
// the step is done (make bench saw this: 49 of 50 routes written, twice in a
// row). TestAReadRacingTheWatchEventOfTheWriteSeesTheWrite in routes/ holds
// that interleaving still; this walks the real binary through it.
func TestBackToBackStepsWriteEveryRoute(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	const routes, steps = 30, 60
	for i := range routes {
		name := fmt.Sprintf("route-%02d", i)
		create(t, standard, ns, strings.Replace(routeYAML("v1", "HTTPRoute", name), "  name: "+name, "  name: "+name+"\n  labels: {canary-of: demo}", 1))
	}
	p := startPlugin(t, standard, "-kubeClientQPS=1000", "-kubeClientBurst=2000")
	ro := rollout(ns, `{"httpRouteSelector": {"matchLabels": {"canary-of": "demo"}}}`)
	if err := p.SetWeight(ro, 10, nil); err.HasError() {
		t.Fatal(err)
	}
	for i := range steps {
		weight := int32(20 + 10*(i%2))
		standard.Recorder.Reset()
		if err := p.SetWeight(ro, weight, nil); err.HasError() {
			t.Fatalf("step %d, SetWeight(%d): %s", i, weight, err)
		}
		if n := len(pluginWrites(standard)); n != routes {
			t.Fatalf("step %d, SetWeight(%d) answered done after %d writes; every one of the %d routes had the weight of the step before", i, weight, n, routes)
		}
	}
	for i := range routes {
		got := weights(get(t, standard, "v1", "HTTPRoute", ns, fmt.Sprintf("route-%02d", i)))
		if want := map[string]int64{"0/stable": 70, "0/canary": 30}; !cmp.Equal(want, got) {
			t.Errorf("route-%02d after the last step, SetWeight(30): %v", i, got)
		}
	}
}

// A namespace that holds many routes no Rollout selects (one namespace for
// all of a gateway's routes): the plugin's watch cache keeps only the
// identity and labels of those, and reads the routes a call uses whole,
// once: by one LIST of the selector for the selected routes, by one GET for
// a route named. After that, a step reads nothing and an unchanged call
// sends nothing.
func TestRoutesNoCallUsesAreReadWholeOnceWhenUsed(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	for i := range 200 {
		create(t, standard, ns, routeYAML("v1", "HTTPRoute", fmt.Sprintf("other-%03d", i)))
	}
	for i := range 3 {
		name := fmt.Sprintf("selected-%d", i)
		create(t, standard, ns, strings.Replace(routeYAML("v1", "HTTPRoute", name), "  name: "+name, "  name: "+name+"\n  labels: {canary-of: demo}", 1))
	}
	create(t, standard, ns, routeYAML("v1", "HTTPRoute", "named"))
	p := startPlugin(t, standard)
	bySelector := rollout(ns, `{"httpRouteSelector": {"matchLabels": {"canary-of": "demo"}}}`)
	byName := rollout(ns, `{"httpRoute": "named"}`)
	byName.Name = "named"
	reads := func(from int) (gets, selectorLists int) {
		for _, r := range standard.Recorder.RequestsSince(from) {
			switch {
			case !strings.HasPrefix(r.UserAgent, "rollouts-gatewayapi-ssa") || r.Method != http.MethodGet || !strings.Contains(r.Path, "/namespaces/"+ns+"/httproutes"):
			case strings.HasSuffix(r.Path, "/httproutes") && strings.Contains(r.Query, "labelSelector") && !strings.Contains(r.Query, "watch"):
				selectorLists++
			case !strings.HasSuffix(r.Path, "/httproutes"):
				gets++
			}
		}
		return gets, selectorLists
	}
	for i, step := range []struct {
		weight              int32
		gets, selectorLists int
		writes              int
	}{
		{10, 1, 1, 4}, // the first: the selected routes by one LIST, the named one by one GET
		{20, 0, 0, 4},
		{20, 0, 0, 0}, // unchanged: nothing sent
	} {
		standard.Recorder.Reset()
		for _, ro := range []*v1alpha1.Rollout{bySelector, byName} {
			if err := p.SetWeight(ro, step.weight, nil); err.HasError() {
				t.Fatalf("step %d, %s: %s", i, ro.Name, err.ErrorString)
			}
		}
		gets, lists := reads(0)
		writes := len(pluginWrites(standard))
		t.Logf("SetWeight(%d) on both Rollouts: %d GETs of a route, %d LISTs of the selector, %d writes", step.weight, gets, lists, writes)
		if gets != step.gets || lists != step.selectorLists || writes != step.writes {
			t.Errorf("SetWeight(%d): %d GETs, %d LISTs, %d writes; want %d, %d, %d", step.weight, gets, lists, writes, step.gets, step.selectorLists, step.writes)
		}
	}
}
