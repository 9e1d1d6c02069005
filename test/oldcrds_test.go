package test

import (
	"context"
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// Clusters that run Gateway API CRDs older than the plugin's module: the
// standard channel has no rule names before v1.4 and no mirror percentage
// before v1.3 (docs/compatibility.md).

// releaseCluster starts a cluster of its own with a release's CRDs.
func releaseCluster(t *testing.T, release string, ch harness.Channel) *harness.Cluster {
	t.Helper()
	c, err := harness.StartRelease(release, ch)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	return c
}

// oldCRDsRoute has a weighted rule, a user's rule that is byte for byte the
// rule the plugin would add for header X-Canary: preview (the lookalike),
// and a static rule.
const oldCRDsRoute = `apiVersion: gateway.networking.k8s.io/v1
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
  - matches: [{path: {type: PathPrefix, value: /}, headers: [{name: X-Canary, type: Exact, value: preview}]}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {add: [{name: x-via, value: gateway}]}
    backendRefs: [{group: "", kind: Service, name: canary, port: 80, weight: 1}]
  - matches: [{path: {type: PathPrefix, value: /static}}]
    backendRefs: [{name: static, port: 80}]
`

// The rules the plugin adds to oldCRDsRoute, as stored (no name when the
// CRD has none).
func oldCRDsHeaderRule(t *testing.T, value, name string) map[string]any {
	r := jsonObj(t, `
matches:
- path: {type: PathPrefix, value: /}
  headers: [{name: X-Canary, type: Exact, value: "`+value+`"}]
filters:
- type: RequestHeaderModifier
  requestHeaderModifier: {add: [{name: x-via, value: gateway}]}
backendRefs: [{group: "", kind: Service, name: canary, port: 80, weight: 1}]
`)
	if name != "" {
		r["name"] = name
	}
	return r
}

func oldCRDsMirrorRule(t *testing.T, percent string) map[string]any {
	pct := ""
	if percent != "" {
		pct = ", percent: " + percent
	}
	return jsonObj(t, `
matches: [{path: {type: PathPrefix, value: /api}}]
filters:
- type: RequestHeaderModifier
  requestHeaderModifier: {add: [{name: x-via, value: gateway}]}
- type: RequestMirror
  requestMirror: {backendRef: {group: "", kind: Service, name: canary, port: 80}`+pct+`}
backendRefs: [{group: "", kind: Service, name: stable, port: 80, weight: 1}]
`)
}

// specWithWeights is a route's spec with the first rule's stable and canary
// weights set and the given rules appended.
func specWithWeights(u *unstructured.Unstructured, stable, canary int64, extra ...map[string]any) map[string]any {
	spec := specWith(u, extra...)
	refs := spec["rules"].([]any)[0].(map[string]any)["backendRefs"].([]any)
	refs[0].(map[string]any)["weight"], refs[1].(map[string]any)["weight"] = stable, canary
	return spec
}

func mirrorTo(path string, percent *int32) *v1alpha1.SetMirrorRoute {
	return &v1alpha1.SetMirrorRoute{Name: "mirror", Percentage: percent, Match: []v1alpha1.RouteMatch{{Path: &v1alpha1.StringMatch{Prefix: path}}}}
}

// On Gateway API v1.2.1's standard CRDs (no rule names, no mirror
// percentage), through the binary: a header route and a mirror step are
// added without names, left alone by weight steps, found again by a new
// plugin process, removed exactly; the lookalike rule is never touched; a
// mirror percentage fails before any write, naming the field and the
// release that has it.
func TestHeaderAndMirrorRoutesOnV12StandardCRDs(t *testing.T) {
	t.Parallel()
	c := releaseCluster(t, "v1.2.1", harness.Standard)
	ns := namespace(t, c)
	created := create(t, c, ns, oldCRDsRoute)
	p, log := startPluginWith(t, pluginBin, c.Kubeconfig)
	ro := managedRollout(ns, "demo", `{"httpRoute": "route"}`, "beta", "mirror")
	spec := func() any { return get(t, c, "v1", "HTTPRoute", ns, "route").Object["spec"] }
	check := func(what string, want map[string]any) {
		t.Helper()
		if diff := cmp.Diff(want, spec()); diff != "" {
			t.Errorf("spec after %s (-want +got):\n%s", what, diff)
		}
	}

	must(t, "SetWeight(10)", p.SetWeight(ro, 10, nil))
	must(t, "SetHeaderRoute", p.SetHeaderRoute(ro, headerStep("beta", "X-Canary", "yes")))
	check("SetHeaderRoute", specWithWeights(created, 90, 10, oldCRDsHeaderRule(t, "yes", "")))
	must(t, "SetMirrorRoute", p.SetMirrorRoute(ro, mirrorTo("/api", nil)))
	withRules := specWithWeights(created, 90, 10, oldCRDsHeaderRule(t, "yes", ""), oldCRDsMirrorRule(t, ""))
	check("SetMirrorRoute", withRules)
	if log.Count("the installed CRD lacks fields of newer Gateway API releases", "HTTPRoute") != 1 {
		t.Error("the plugin did not say once that the CRD lacks fields")
	}

	c.Recorder.Reset()
	half := int32(50)
	err := p.SetMirrorRoute(ro, mirrorTo("/api", &half))
	if !err.HasError() || !strings.Contains(err.Error(), "spec.rules[].filters[].requestMirror.percent, which the installed HTTPRoute CRD (v1) does not have") ||
		!strings.Contains(err.Error(), "Gateway API v1.3") || !strings.Contains(err.Error(), "HTTPRoute "+ns+"/route") {
		t.Errorf("SetMirrorRoute with 50%%: %q, want the field, the release that has it and the route", err.Error())
	}
	if w := pluginWrites(c); len(w) != 0 {
		t.Errorf("a refused step wrote: %v", w)
	}
	check("the refused step", withRules)

	must(t, "SetWeight(50)", p.SetWeight(ro, 50, nil))
	withRules = specWithWeights(created, 50, 50, oldCRDsHeaderRule(t, "yes", ""), oldCRDsMirrorRule(t, ""))
	check("SetWeight(50)", withRules)

	// A new plugin process (a controller restart) knows its rules from the route alone.
	p, _ = startPluginWith(t, pluginBin, c.Kubeconfig)
	c.Recorder.Reset()
	must(t, "SetHeaderRoute again", p.SetHeaderRoute(ro, headerStep("beta", "X-Canary", "yes")))
	must(t, "SetMirrorRoute again", p.SetMirrorRoute(ro, mirrorTo("/api", nil)))
	must(t, "SetWeight(50) again", p.SetWeight(ro, 50, nil))
	if w := pluginWrites(c); len(w) != 0 {
		t.Errorf("the same steps after a restart wrote %d times, want none", len(w))
	}
	must(t, "RemoveManagedRoutes", p.RemoveManagedRoutes(ro))
	check("RemoveManagedRoutes", specWithWeights(created, 50, 50))
	must(t, "SetWeight(0)", p.SetWeight(ro, 0, nil))
	final := get(t, c, "v1", "HTTPRoute", ns, "route")
	if diff := cmp.Diff(created.Object["spec"], final.Object["spec"]); diff != "" {
		t.Errorf("after the rollout, spec (-created +final):\n%s", diff)
	}
	if _, has := final.GetAnnotations()[claimsAnnotation]; has || ownsRules(final, fieldManager) {
		t.Errorf("the plugin left its claims or its ownership: %v %v", final.GetAnnotations(), final.GetManagedFields())
	}

	// ruleName needs rule names: refused before any write.
	named := managedRollout(ns, "named", `{"httpRoutes": [{"name": "route", "ruleName": "split"}]}`)
	if err := p.SetWeight(named, 30, nil); !strings.Contains(err.Error(), `ruleName "split" in the Rollout's plugin config needs rule names (spec.rules[].name)`) {
		t.Errorf("SetWeight with ruleName on v1.2 standard: %q", err.Error())
	}
}

// The CRDs are upgraded in the middle of a rollout, v1.3.0 → v1.4.1 standard
// (rules gain names): the running plugin goes on; its rules added without a
// name stay so while it leaves them as they are; after a restart, a header
// rule it writes anew gets its name; removal is exact either way.
func TestCRDUpgradeGivesRulesNamesMidRollout(t *testing.T) {
	t.Parallel()
	c := releaseCluster(t, "v1.3.0", harness.Standard)
	ns := namespace(t, c)
	created := create(t, c, ns, oldCRDsRoute)
	p, _ := startPluginWith(t, pluginBin, c.Kubeconfig)
	ro := managedRollout(ns, "demo", `{"httpRoute": "route"}`, "beta", "mirror")
	spec := func() any { return get(t, c, "v1", "HTTPRoute", ns, "route").Object["spec"] }
	half := int32(50)
	must(t, "SetWeight(20)", p.SetWeight(ro, 20, nil))
	must(t, "SetHeaderRoute", p.SetHeaderRoute(ro, headerStep("beta", "X-Canary", "yes")))
	must(t, "SetMirrorRoute 50%", p.SetMirrorRoute(ro, mirrorTo("/api", &half)))
	unnamed := specWithWeights(created, 80, 20, oldCRDsHeaderRule(t, "yes", ""), oldCRDsMirrorRule(t, "50"))
	if diff := cmp.Diff(unnamed, spec()); diff != "" {
		t.Fatalf("spec on v1.3.0 (-want +got):\n%s", diff)
	}

	newer, err := harness.ReleaseCRDs("v1.4.1", harness.Standard)
	if err != nil {
		t.Fatal(err)
	}
	crds := apiextensions.NewForConfigOrDie(c.Config).ApiextensionsV1().CustomResourceDefinitions()
	for _, crd := range newer {
		if crd.Name != "httproutes.gateway.networking.k8s.io" {
			continue
		}
		updateCRD(t, crds, crd.Name, func(old *apiextensionsv1.CustomResourceDefinition) {
			old.Spec.Versions, old.Annotations = crd.Spec.Versions, crd.Annotations
		})
	}
	eventually(t, "the apiserver to take rule names", func() bool {
		u := &unstructured.Unstructured{Object: jsonObj(t, strings.Replace(oldCRDsRoute, "name: route}", "name: probe}", 1))}
		rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
		rules[0].(map[string]any)["name"] = "named"
		_ = unstructured.SetNestedSlice(u.Object, rules, "spec", "rules")
		_, err := c.Dynamic.Resource(httpRoutes).Namespace(ns).Create(context.Background(), u,
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
		return err == nil
	})

	// The same process goes on: weights change, the added rules stay unnamed.
	must(t, "SetWeight(40)", p.SetWeight(ro, 40, nil))
	must(t, "SetHeaderRoute again", p.SetHeaderRoute(ro, headerStep("beta", "X-Canary", "yes")))
	if diff := cmp.Diff(specWithWeights(created, 60, 40, oldCRDsHeaderRule(t, "yes", ""), oldCRDsMirrorRule(t, "50")), spec()); diff != "" {
		t.Errorf("spec after the upgrade, same process (-want +got):\n%s", diff)
	}
	// A new process reads the new schema: a header rule written anew is named.
	p, _ = startPluginWith(t, pluginBin, c.Kubeconfig)
	must(t, "SetHeaderRoute always", p.SetHeaderRoute(ro, headerStep("beta", "X-Canary", "always")))
	// Back in its place before the mirror rule (managedRoutes order), now with its name.
	if diff := cmp.Diff(specWithWeights(created, 60, 40, oldCRDsHeaderRule(t, "always", "beta"), oldCRDsMirrorRule(t, "50")), spec()); diff != "" {
		t.Errorf("spec after a header step on v1.4.1 (-want +got):\n%s", diff)
	}
	u := get(t, c, "v1", "HTTPRoute", ns, "route")
	claims, err := routes.ReadClaims(routes.Route{Annotations: u.GetAnnotations()})
	if err != nil {
		t.Fatal(err)
	}
	if got := claims[ns+"/demo"].Unnamed; !cmp.Equal(got, []string{"mirror"}) {
		t.Errorf("claim's rules stored without a name: %v, want [mirror]", got)
	}
	must(t, "RemoveManagedRoutes", p.RemoveManagedRoutes(ro))
	must(t, "SetWeight(0)", p.SetWeight(ro, 0, nil))
	final := get(t, c, "v1", "HTTPRoute", ns, "route")
	if diff := cmp.Diff(created.Object["spec"], final.Object["spec"]); diff != "" {
		t.Errorf("after the rollout, spec (-created +final):\n%s", diff)
	}
}

// plan without a cluster, given the CRDs the cluster runs (--crds): a mirror
// percentage the v1.2 standard CRDs cannot carry fails the plan with the
// error the plugin would return; without --crds it plans as for the newest
// CRDs.
func TestPlanWithOldCRDs(t *testing.T) {
	t.Parallel()
	crds, err := harness.ReleaseCRDs("v1.2.1", harness.Standard)
	if err != nil {
		t.Fatal(err)
	}
	var bundle []string
	for _, crd := range crds {
		crd.APIVersion, crd.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
		data, err := yaml.Marshal(crd)
		if err != nil {
			t.Fatal(err)
		}
		bundle = append(bundle, string(data))
	}
	crdFile := writeFile(t, "standard-install.yaml", strings.Join(bundle, "---\n"))
	routesFile := writeFile(t, "routes.yaml", strings.Replace(oldCRDsRoute, "metadata: {name: route}", "metadata: {name: route, namespace: shop}", 1)+`---
apiVersion: v1
kind: Service
metadata: {name: stable, namespace: shop}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: canary, namespace: shop}
spec: {ports: [{name: http, port: 80}]}
`)
	rolloutFile := writeFile(t, "rollout.yaml", `apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: demo, namespace: shop}
spec:
  selector: {matchLabels: {app: demo}}
  template:
    metadata: {labels: {app: demo}}
    spec:
      containers: [{name: app, image: "app:v2"}]
  strategy:
    canary:
      stableService: stable
      canaryService: canary
      trafficRouting:
        managedRoutes: [{name: beta}, {name: mirror}]
        plugins:
          argoproj-labs/gatewayAPI: {httpRoute: route}
      steps:
      - setWeight: 20
      - setHeaderRoute:
          name: beta
          match: [{headerName: X-Canary, headerValue: {exact: "yes"}}]
      - setMirrorRoute:
          name: mirror
          percentage: 50
          match: [{path: {prefix: /api}}]
      - pause: {}
`)
	out, code := runBinary(t, nil, "plan", "-f", rolloutFile, "--routes", routesFile, "--crds", crdFile)
	if code != 1 || !strings.Contains(out, `mirror route "mirror": mirroring 50% of the requests needs spec.rules[].filters[].requestMirror.percent, which the installed HTTPRoute CRD (v1) does not have`) {
		t.Errorf("plan with the v1.2.1 standard CRDs: exit %d, want 1 and the mirror percentage error", code)
	}
	if !strings.Contains(out, "step 2: setHeaderRoute beta\n  calls: SetHeaderRoute(beta), SetWeight(20)\n  HTTPRoute shop/route:\n    + rule beta (without a name: the CRD has no rule names)\n") {
		t.Errorf("plan with the v1.2.1 standard CRDs: the header step does not add its rule without a name")
	}
	if _, code := runBinary(t, nil, "plan", "-f", rolloutFile, "--routes", routesFile); code != 0 {
		t.Errorf("plan without --crds (CRDs with every field): exit %d, want 0", code)
	}
	if _, code := runBinary(t, nil, "plan", "-f", rolloutFile, "--crds", crdFile); code != 2 {
		t.Errorf("plan --crds without --routes: exit %d, want 2 (usage)", code)
	}
}
