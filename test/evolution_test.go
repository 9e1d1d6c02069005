package test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// The Gateway API CRDs change under a running plugin, as a cluster upgrade
// changes them: a field this build's types do not know appears, and the
// version a kind is served in changes. On a cluster of its own, since the
// CRDs are changed.
func TestCRDsChangeUnderARunningPlugin(t *testing.T) {
	t.Parallel()
	c, err := harness.Start(harness.V1Alpha2Only)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	crds := apiextensions.NewForConfigOrDie(c.Config).ApiextensionsV1().CustomResourceDefinitions()
	ctx := context.Background()

	// A newer CRD has fields this build's Gateway API types do not know: a
	// typed apply would delete them (spec.rules is atomic), so the plugin
	// applies the same object unstructured, under the same field manager,
	// resourceVersion-guarded, and says so in its log line.
	t.Run("a field this build does not know", func(t *testing.T) {
		updateCRD(t, crds, "httproutes.gateway.networking.k8s.io", func(crd *apiextensionsv1.CustomResourceDefinition) {
			for _, v := range crd.Spec.Versions {
				rule := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["rules"].Items.Schema
				rule.Properties["futureField"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
				rule.Properties["backendRefs"].Items.Schema.Properties["futureWeighting"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
			}
		})
		ns := namespace(t, c)
		manifest := strings.Replace(strings.Replace(routeYAML("v1", "HTTPRoute", "route"),
			"  - backendRefs:\n", "  - futureField: keep-me\n    backendRefs:\n", 1),
			"{name: stable, port: 80, weight: 100}", "{name: stable, port: 80, weight: 100, futureWeighting: keep-me-too}", 1)
		// The apiserver prunes fields of a CRD it has not reloaded yet.
		var before *unstructured.Unstructured
		eventually(t, "the apiserver to keep the new fields", func() bool {
			before = create(t, c, ns, manifest)
			if strings.Contains(string(mustJSON(t, before)), "keep-me-too") {
				return true
			}
			_ = c.Dynamic.Resource(httpRoutes).Namespace(ns).Delete(ctx, "route", metav1.DeleteOptions{})
			return false
		})
		p, log := startPluginWith(t, pluginBin, c.Kubeconfig)
		ro := rollout(ns, `{"httpRoute": "route"}`)
		if err := p.SetWeight(ro, 30, nil); err.HasError() {
			t.Fatalf("SetWeight(30) on a route with fields this build does not know: %s", err)
		}
		after := get(t, c, "v1", "HTTPRoute", ns, "route")
		want := before.DeepCopy()
		rules, _, _ := unstructured.NestedSlice(want.Object, "spec", "rules")
		refs := rules[0].(map[string]any)["backendRefs"].([]any)
		refs[0].(map[string]any)["weight"], refs[1].(map[string]any)["weight"] = int64(70), int64(30)
		_ = unstructured.SetNestedSlice(want.Object, rules, "spec", "rules")
		if diff := cmp.Diff(want.Object["spec"], after.Object["spec"]); diff != "" {
			t.Errorf("spec (-want +got):\n%s", diff)
		}
		if !ownsRules(after, fieldManager) {
			t.Errorf("the plugin's Apply entry does not own spec.rules: %v", after.GetManagedFields())
		}
		if n := log.Count("applied route", "unstructured=", "spec.rules[0].backendRefs[0].futureWeighting, spec.rules[0].futureField"); n != 1 {
			t.Errorf("%d log lines say the route was applied unstructured because of futureField; want 1", n)
		}
		if err := p.SetWeight(ro, 0, nil); err.HasError() {
			t.Fatal(err)
		}
		final := get(t, c, "v1", "HTTPRoute", ns, "route")
		if diff := cmp.Diff(before.Object["spec"], final.Object["spec"]); diff != "" {
			t.Errorf("after the rollout, spec (-before +after):\n%s", diff)
		}
		for _, e := range final.GetManagedFields() {
			if e.Manager == fieldManager {
				t.Errorf("the plugin did not give its ownership back: %+v", e)
			}
		}
	})

	// The CRD is upgraded: TCPRoute moves from v1alpha2 to v1 and v1alpha2
	// is no longer served. The running plugin finds the new version on the
	// first 404 for the old one; no restart.
	t.Run("the served version changes", func(t *testing.T) {
		ns := namespace(t, c)
		create(t, c, ns, routeYAML("v1alpha2", "TCPRoute", "route"))
		p, log := startPluginWith(t, pluginBin, c.Kubeconfig)
		ro := rollout(ns, `{"tcpRoute": "route"}`)
		if err := p.SetWeight(ro, 30, nil); err.HasError() {
			t.Fatalf("SetWeight(30) on v1alpha2: %s", err)
		}
		experimental, err := harness.CRDs(harness.Experimental)
		if err != nil {
			t.Fatal(err)
		}
		updateCRD(t, crds, "tcproutes.gateway.networking.k8s.io", func(crd *apiextensionsv1.CustomResourceDefinition) {
			for _, e := range experimental {
				if e.Name == crd.Name {
					crd.Spec.Versions = e.Spec.Versions
				}
			}
			for i := range crd.Spec.Versions {
				v := &crd.Spec.Versions[i]
				v.Served, v.Storage = v.Name == "v1", v.Name == "v1"
			}
		})
		tcp := func(version string) schema.GroupVersionResource {
			return schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: version, Resource: "tcproutes"}
		}
		upgraded := time.Now()
		eventually(t, "the apiserver to serve TCPRoute as v1 only", func() bool {
			_, errV1 := c.Dynamic.Resource(tcp("v1")).Namespace(ns).Get(ctx, "route", metav1.GetOptions{})
			_, errOld := c.Dynamic.Resource(tcp("v1alpha2")).Namespace(ns).Get(ctx, "route", metav1.GetOptions{})
			return errV1 == nil && errOld != nil
		})
		t.Logf("the apiserver serves TCPRoute v1 only %s after the CRD update", time.Since(upgraded).Round(time.Millisecond))
		if err := p.SetWeight(ro, 60, nil); err.HasError() {
			t.Fatalf("SetWeight(60) after the upgrade, same plugin process: %s", err)
		}
		if diff := cmp.Diff(map[string]int64{"0/stable": 40, "0/canary": 60}, weights(get(t, c, "v1", "TCPRoute", ns, "route"))); diff != "" {
			t.Errorf("weights after the upgrade (-want +got):\n%s", diff)
		}
		if log.Count("no longer serves this version") == 0 {
			t.Error("the plugin did not log that it discovered the version again")
		}
	})
}

func mustJSON(t *testing.T, u *unstructured.Unstructured) []byte {
	t.Helper()
	data, err := u.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// updateCRD changes the CRD named name with change and updates it, reading
// it again when the apiserver's own CRD controllers wrote its status in
// between (a cluster just started still does, and the update then gets a
// conflict).
func updateCRD(t *testing.T, crds apiextensionsclient.CustomResourceDefinitionInterface, name string, change func(*apiextensionsv1.CustomResourceDefinition)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := crds.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(crd)
		_, err = crds.Update(context.Background(), crd, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
