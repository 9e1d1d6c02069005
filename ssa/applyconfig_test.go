package ssa

import (
	"errors"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	gwv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"
	gwscheme "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/scheme"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

var liveHTTPRoute = routes.Route{Ref: routes.Ref{Kind: routes.HTTPRoute, Namespace: "shop", Name: "web"}, Version: "v1", ResourceVersion: "42"}

// fillHTTPRoute fills an HTTPRoute apply configuration with the rules.
func fillHTTPRoute(rules []routes.Rule) (*gwv1ac.HTTPRouteApplyConfiguration, error) {
	ac := &gwv1ac.HTTPRouteApplyConfiguration{}
	err := fillApplyConfig(liveHTTPRoute, Content{Rules: rules}, ac)
	return ac, err
}

// A served rule, defaults included, converts to the typed apply configuration
// and back without losing a byte.
func TestDecodeRulesKeepsEveryField(t *testing.T) {
	rules := servedRules()
	ac, err := fillHTTPRoute(rules)
	if err != nil {
		t.Fatal(err)
	}
	typed := ac.Spec.Rules
	if got := *typed[0].BackendRefs[1].Weight; got != 0 {
		t.Errorf("weight 0 became %d", got)
	}
	if got := *typed[0].BackendRefs[0].Group; got != "" {
		t.Errorf("group %q, want the explicit empty core group", got)
	}
	if diff := cmp.Diff("10s", string(*typed[0].Timeouts.Request)); diff != "" {
		t.Error(diff)
	}
}

// A field the plugin's Gateway API types do not know would be deleted by a
// typed apply of the atomic rules list: the typed path says so, and the
// writer applies the same object unstructured (test/evolution_test.go).
func TestDecodeRulesDetectsUnknownFields(t *testing.T) {
	for name, tc := range map[string]struct {
		rule routes.Rule
		lost string
	}{
		"unknown rule field":       {routes.Rule{"futureField": true, "backendRefs": []any{}}, "spec.rules[1].futureField"},
		"unknown backendRef field": {routes.Rule{"backendRefs": []any{map[string]any{"name": "stable", "futureWeightMode": "x"}}}, "spec.rules[1].backendRefs[0].futureWeightMode"},
	} {
		t.Run(name, func(t *testing.T) {
			known := routes.Rule{"backendRefs": []any{map[string]any{"name": "stable"}}}
			_, err := fillHTTPRoute([]routes.Rule{known, tc.rule})
			var unrep *unrepresentableError
			if !errors.As(err, &unrep) {
				t.Fatalf("got %v, want an UnrepresentableError", err)
			}
			if unrep.Reason != tc.lost {
				t.Errorf("reason %q, want the lost field %q", unrep.Reason, tc.lost)
			}
		})
	}
}

// An empty list means the same as none: the typed apply configuration omits
// it, and that is not a loss worth refusing a write for.
func TestDecodeRulesAcceptsEmptyLists(t *testing.T) {
	if _, err := fillHTTPRoute([]routes.Rule{{"filters": []any{}, "backendRefs": []any{map[string]any{"name": "stable"}}}}); err != nil {
		t.Fatal(err)
	}
}

// The apply configuration carries the route's identity, the resourceVersion
// precondition and the plugin's labels and annotations, for every kind and
// version the plugin writes.
func TestEveryKindAndVersionHasAnApply(t *testing.T) {
	for _, kind := range routes.Kinds {
		for _, version := range kind.Versions() {
			if _, ok := applies[kindVersion{kind, version}]; !ok {
				t.Errorf("no apply for %s %s", kind, version)
			}
		}
	}
	if len(applies) != 10 {
		t.Errorf("%d applies, want one per kind and version (10)", len(applies))
	}
	d := Content{
		Rules:       []routes.Rule{{"backendRefs": []any{map[string]any{"name": "stable", "port": int64(80), "weight": int64(100)}}}},
		Labels:      map[string]string{"l": "v"},
		Annotations: map[string]string{"a": "v"},
	}
	ac := &gwv1ac.HTTPRouteApplyConfiguration{}
	if err := fillApplyConfig(liveHTTPRoute, d, ac); err != nil {
		t.Fatal(err)
	}
	want := gwv1ac.HTTPRoute("web", "shop").WithResourceVersion("42").WithLabels(d.Labels).WithAnnotations(d.Annotations).
		WithSpec(gwv1ac.HTTPRouteSpec().WithRules(gwv1ac.HTTPRouteRule().WithBackendRefs(
			gwv1ac.HTTPBackendRef().WithName("stable").WithPort(80).WithWeight(100))))
	if diff := cmp.Diff(want, ac); diff != "" {
		t.Errorf("apply configuration (-want +got):\n%s", diff)
	}
}

// TestPatchParamsAsTheCodec holds patchParams to the query the typed
// client's ParameterCodec writes for the same options, for every option a
// write can carry.
func TestPatchParamsAsTheCodec(t *testing.T) {
	force, noForce := true, false
	for _, o := range []metav1.PatchOptions{
		{FieldManager: "rollouts-gatewayapi-ssa"},
		{FieldManager: "rollouts-gatewayapi-ssa", Force: &force},
		{FieldManager: "rollouts-gatewayapi-ssa", Force: &noForce, DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"},
		{},
	} {
		base := func() *rest.Request {
			return rest.NewRequestWithClient(&url.URL{Scheme: "https", Host: "apiserver"}, "/apis/gateway.networking.k8s.io/v1", rest.ClientContentConfig{GroupVersion: schema.GroupVersion{Group: "gateway.networking.k8s.io", Version: "v1"}}, nil).
				Verb("PATCH").Namespace("shop").Resource("httproutes").Name("web")
		}
		want := base().VersionedParams(&o, gwscheme.ParameterCodec).URL().String()
		if got := patchParams(base(), o).URL().String(); got != want {
			t.Errorf("options %+v:\n got %s\nwant %s", o, got, want)
		}
	}
}

// fillApplyConfig fills a typed apply configuration from applyObject, and
// refuses rules the types cannot carry exactly (UnrepresentableError).
func fillApplyConfig(live routes.Route, d Content, ac any) error {
	return decodeLossless(applyObject(live, d), ac, rulesOf)
}
