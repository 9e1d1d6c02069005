package transform

import (
	"encoding/json"
	"testing"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/gateway-api/pkg/features"
)

func jsonRule(t *testing.T, s string) routes.Rule {
	t.Helper()
	var r routes.Rule
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestNeedsNamesWhatARuleAsksOfTheGateway(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind routes.Kind
		rule string
		want []Need
	}{
		{name: "weights and a path match are core", kind: routes.HTTPRoute,
			rule: `{"matches":[{"path":{"type":"PathPrefix","value":"/"},"headers":[{"name":"x","value":"1"}]}],
				"filters":[{"type":"RequestHeaderModifier","requestHeaderModifier":{"set":[{"name":"a","value":"b"}]}},{"type":"ExtensionRef","extensionRef":{"group":"traefik.io","kind":"Middleware","name":"m"}}],
				"backendRefs":[{"name":"stable","port":80,"weight":80},{"name":"canary","port":80,"weight":20}]}`},
		{name: "a mirror of every request", kind: routes.HTTPRoute,
			rule: `{"filters":[{"type":"RequestMirror","requestMirror":{"backendRef":{"name":"canary","port":80},"percent":100}}]}`,
			want: []Need{{Feature: "HTTPRouteRequestMirror", Why: "a RequestMirror filter"}}},
		{name: "a mirror of a share, twice", kind: routes.HTTPRoute,
			rule: `{"filters":[{"type":"RequestMirror","requestMirror":{"backendRef":{"name":"canary","port":80},"percent":25}},
				{"type":"RequestMirror","requestMirror":{"backendRef":{"name":"shadow","port":80},"fraction":{"numerator":1,"denominator":3}}}]}`,
			want: []Need{
				{Feature: "HTTPRouteRequestMirror", Why: "a RequestMirror filter"},
				{Feature: "HTTPRouteRequestMultipleMirrors", Why: "2 RequestMirror filters"},
				{Feature: "HTTPRouteRequestPercentageMirror", Why: "a RequestMirror filter with a percentage"},
			}},
		{name: "stickyCanary's Set-Cookie: a response header set on a backendRef", kind: routes.HTTPRoute,
			rule: `{"backendRefs":[{"name":"canary","filters":[{"type":"ResponseHeaderModifier","responseHeaderModifier":{"add":[{"name":"Set-Cookie","value":"c=1"}]}}]}]}`,
			want: []Need{
				{Feature: "HTTPRouteBackendRequestHeaderModification", Why: "a ResponseHeaderModifier filter on a backendRef"},
				{Feature: "HTTPRouteResponseHeaderModification", Why: "a ResponseHeaderModifier filter on a backendRef"},
			}},
		{name: "a whole fraction is every request", kind: routes.HTTPRoute,
			rule: `{"filters":[{"type":"RequestMirror","requestMirror":{"backendRef":{"name":"canary"},"fraction":{"numerator":100}}}]}`,
			want: []Need{{Feature: "HTTPRouteRequestMirror", Why: "a RequestMirror filter"}}},
		{name: "extended filters, matches, timeouts and retries", kind: routes.HTTPRoute,
			rule: `{"matches":[{"method":"GET"},{"queryParams":[{"name":"q","value":"1"}]}],
				"filters":[{"type":"ResponseHeaderModifier"},{"type":"URLRewrite","urlRewrite":{"hostname":"h","path":{"type":"ReplaceFullPath","replaceFullPath":"/"}}},
					{"type":"RequestRedirect","requestRedirect":{"scheme":"https","port":443,"path":{"type":"ReplaceFullPath","replaceFullPath":"/"},"statusCode":308}},{"type":"CORS"}],
				"backendRefs":[{"name":"canary","filters":[{"type":"RequestHeaderModifier"},{"type":"ResponseHeaderModifier"}]}],
				"timeouts":{"request":"10s","backendRequest":"5s"},"retry":{"attempts":2}}`,
			want: []Need{
				{Feature: "HTTPRoute308RedirectStatusCode", Why: "a RequestRedirect filter with status code 308"},
				{Feature: "HTTPRouteBackendRequestHeaderModification", Why: "a RequestHeaderModifier filter on a backendRef"},
				{Feature: "HTTPRouteBackendTimeout", Why: "timeouts.backendRequest"},
				{Feature: "HTTPRouteCORS", Why: "a CORS filter"},
				{Feature: "HTTPRouteHostRewrite", Why: "a URLRewrite filter of the hostname"},
				{Feature: "HTTPRouteMethodMatching", Why: "a method match"},
				{Feature: "HTTPRoutePathRedirect", Why: "a RequestRedirect filter with a path"},
				{Feature: "HTTPRoutePathRewrite", Why: "a URLRewrite filter of the path"},
				{Feature: "HTTPRoutePortRedirect", Why: "a RequestRedirect filter with a port"},
				{Feature: "HTTPRouteQueryParamMatching", Why: "a query parameter match"},
				{Feature: "HTTPRouteRequestTimeout", Why: "timeouts.request"},
				{Feature: "HTTPRouteResponseHeaderModification", Why: "a ResponseHeaderModifier filter"},
				{Feature: "HTTPRouteRetry", Why: "retry"},
				{Feature: "HTTPRouteSchemeRedirect", Why: "a RequestRedirect filter with a scheme"},
			}},
		{name: "a GRPCRoute's mirror has no feature name", kind: routes.GRPCRoute,
			rule: `{"filters":[{"type":"RequestMirror","requestMirror":{"backendRef":{"name":"canary","port":80},"percent":25}}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Needs(tc.kind, jsonRule(t, tc.rule))); diff != "" {
				t.Errorf("Needs (-want +got):\n%s", diff)
			}
		})
	}
}

// CheckedFeatures are Gateway API's own names, and exactly the ones Needs
// can give: the fixture above names each, and Gateway API's feature list
// (sigs.k8s.io/gateway-api/pkg/features) has each.
func TestCheckedFeaturesAreGatewayAPIsNames(t *testing.T) {
	known := features.SetsToNamesSet(features.AllFeatures)
	for _, f := range CheckedFeatures {
		if !known.Has(features.FeatureName(f)) {
			t.Errorf("%s is not a Gateway API feature name", f)
		}
	}
	rule := jsonRule(t, `{"matches":[{"method":"GET","queryParams":[{"name":"q","value":"1"}]}],
		"filters":[{"type":"ResponseHeaderModifier"},{"type":"URLRewrite","urlRewrite":{"hostname":"h","path":{}}},{"type":"CORS"},
			{"type":"RequestMirror","requestMirror":{"percent":5}},{"type":"RequestMirror","requestMirror":{}},
			{"type":"RequestRedirect","requestRedirect":{"scheme":"https","port":443,"path":{},"statusCode":303}},
			{"type":"RequestRedirect","requestRedirect":{"statusCode":307}},{"type":"RequestRedirect","requestRedirect":{"statusCode":308}}],
		"backendRefs":[{"name":"canary","filters":[{"type":"RequestHeaderModifier"}]}],
		"timeouts":{"request":"1s","backendRequest":"1s"},"retry":{}}`)
	var got []string
	for _, n := range Needs(routes.HTTPRoute, rule) {
		got = append(got, n.Feature)
	}
	if diff := cmp.Diff(CheckedFeatures, got); diff != "" {
		t.Errorf("CheckedFeatures against what Needs gives (-listed +given):\n%s", diff)
	}
}
