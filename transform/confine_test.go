package transform

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// A route of namespace shared that two tenants share: rule 0 serves what
// tenant a's Rollout walks (its matches vary by test), rule 1 serves /c from
// tenant c's Services.

var (
	cfA = RuleInput{RolloutServices: RolloutServices{Stable: routes.ServiceRef("a", "stable"), Canary: routes.ServiceRef("a", "canary"), ManagedRoutes: []string{"mirror"}}}
	cfC = map[string]any{
		"matches":     []any{cfMatch(cfPath("PathPrefix", "/c"))},
		"backendRefs": []any{cfBackend("c", "stable", 100), cfBackend("c", "canary", 0)},
	}
)

func cfBackend(ns, name string, weight int64) map[string]any {
	return map[string]any{"group": "", "kind": "Service", "name": name, "namespace": ns, "port": int64(80), "weight": weight}
}

func cfPath(typ, value string) map[string]any {
	return map[string]any{"path": map[string]any{"type": typ, "value": value}}
}

// cfMatch is a match of the fields of parts (path, method, headers, ...).
func cfMatch(parts ...map[string]any) map[string]any {
	m := map[string]any{}
	for _, p := range parts {
		for k, v := range p {
			m[k] = v
		}
	}
	return m
}

func cfMethod(m string) map[string]any { return map[string]any{"method": m} }

func cfHeaders(hs ...map[string]any) map[string]any {
	list := make([]any, len(hs))
	for i, h := range hs {
		list[i] = h
	}
	return map[string]any{"headers": list}
}

// cfRoute is the shared route with tenant a's rule matching matches (none:
// every request) on a route of kind.
func cfRoute(kind routes.Kind, matches ...any) routes.Route {
	a := routes.Rule{"backendRefs": []any{cfBackend("a", "stable", 90), cfBackend("a", "canary", 10)}}
	if len(matches) > 0 {
		a["matches"] = matches
	}
	rules := []routes.Rule{a, routes.CopyRules([]routes.Rule{cfC})[0]}
	if kind == routes.GRPCRoute {
		delete(rules[1], "matches")
		rules[1]["matches"] = []any{map[string]any{"method": map[string]any{"type": "Exact", "service": "c.Shop"}}}
	}
	return routes.Route{Ref: routes.Ref{Kind: kind, Namespace: "shared", Name: "front"}, Version: "v1", Rules: rules}
}

// cfMirror is the mirror rule of tenant a with matches.
func cfMirror(matches ...any) routes.Rule {
	return routes.Rule{
		"name":        "mirror",
		"matches":     matches,
		"backendRefs": []any{cfBackend("a", "stable", 1)},
		"filters": []any{map[string]any{"type": "RequestMirror", "requestMirror": map[string]any{
			"backendRef": map[string]any{"group": "", "kind": "Service", "name": "canary", "namespace": "a", "port": int64(80)},
			"percent":    int64(100),
		}}},
	}
}

func cfPathStep(s StringMatch) RequestMatch { return RequestMatch{Path: &s} }

// Each step match is intersected with each match of the Rollout's rule: the
// mirror rule matches only requests that rule takes, or the step is refused
// saying which match, which rule and what to write instead. The other
// tenant's rule stays as it is.
func TestMirrorRuleIsConfinedToTheRolloutsRule(t *testing.T) {
	get := cfMethod("GET")
	tenantA := mrHeader("X-Tenant", "Exact", "a")
	for _, tc := range []struct {
		name   string
		source []any // the matches of tenant a's rule
		step   []RequestMatch
		want   []any  // the mirror rule's matches
		err    string // or the error
	}{
		{
			name:   "an exact path under the rule's prefix",
			source: []any{cfMatch(cfPath("PathPrefix", "/a"))},
			step:   []RequestMatch{cfPathStep(StringMatch{Exact: "/a/login"})},
			want:   []any{cfMatch(cfPath("Exact", "/a/login"))},
		},
		{
			name:   "an exact path of the other tenant's prefix is refused",
			source: []any{cfMatch(cfPath("PathPrefix", "/a"))},
			step:   []RequestMatch{cfPathStep(StringMatch{Exact: "/c/login"})},
			err: `match 0 (path Exact /c/login) matches no request that the Rollout's rule 0 of HTTPRoute shared/front matches (path PathPrefix /a), ` +
				`so it would take other rules' traffic; match a path within /a (path prefix /a or below it, or exact)`,
		},
		{
			name:   "prefixes compare by whole path elements: /ab is not under /a",
			source: []any{cfMatch(cfPath("PathPrefix", "/a"))},
			step:   []RequestMatch{cfPathStep(StringMatch{Prefix: "/ab"})},
			err:    "match 0 (path PathPrefix /ab) matches no request",
		},
		{
			name:   "a longer prefix stays",
			source: []any{cfMatch(cfPath("PathPrefix", "/a"))},
			step:   []RequestMatch{cfPathStep(StringMatch{Prefix: "/a/api"})},
			want:   []any{cfMatch(cfPath("PathPrefix", "/a/api"))},
		},
		{
			name:   "a shorter prefix becomes the rule's",
			source: []any{cfMatch(cfPath("PathPrefix", "/a/api"))},
			step:   []RequestMatch{{Path: &StringMatch{Prefix: "/a"}, Method: &StringMatch{Exact: "GET"}}},
			want:   []any{cfMatch(cfPath("PathPrefix", "/a/api"), get)},
		},
		{
			name:   "a trailing slash of a prefix is ignored",
			source: []any{cfMatch(cfPath("PathPrefix", "/a/"))},
			step:   []RequestMatch{cfPathStep(StringMatch{Exact: "/a"}), {Path: &StringMatch{Prefix: "/a"}, Method: &StringMatch{Exact: "GET"}}},
			want:   []any{cfMatch(cfPath("Exact", "/a")), cfMatch(cfPath("PathPrefix", "/a/"), get)},
		},
		{
			name:   "exact paths must be equal",
			source: []any{cfMatch(cfPath("Exact", "/a/x"))},
			step:   []RequestMatch{cfPathStep(StringMatch{Exact: "/a/y"})},
			err:    "(path Exact /a/x), so it would take other rules' traffic; match path exact /a/x, or give no path",
		},
		{
			name:   "no path takes the rule's",
			source: []any{cfMatch(cfPath("PathPrefix", "/a"))},
			step:   []RequestMatch{{Method: &StringMatch{Exact: "GET"}}},
			want:   []any{cfMatch(cfPath("PathPrefix", "/a"), get)},
		},
		{
			name:   "a regular expression against a prefix cannot be decided",
			source: []any{cfMatch(cfPath("PathPrefix", "/a"))},
			step:   []RequestMatch{cfPathStep(StringMatch{Regex: "^/c/.*"})},
			err: `match 0 (path RegularExpression ^/c/.*): the plugin cannot tell which requests both it and the Rollout's rule 0 of HTTPRoute shared/front (path PathPrefix /a) match, ` +
				`path RegularExpression ^/c/.* and path PathPrefix /a (a regular expression is compared only with itself or with PathPrefix /); ` +
				`so it cannot keep the rule to the Rollout's own requests: match a path within /a (path prefix /a or below it, or exact)`,
		},
		{
			name: "a regular expression within a rule of every request",
			step: []RequestMatch{cfPathStep(StringMatch{Regex: "^/a/v[0-9]+$"})},
			want: []any{cfMatch(cfPath("RegularExpression", "^/a/v[0-9]+$"))},
		},
		{
			name:   "the rule's regular expression, with a method",
			source: []any{cfMatch(cfPath("RegularExpression", "^/a/.*"))},
			step:   []RequestMatch{{Method: &StringMatch{Exact: "GET"}}, {Path: &StringMatch{Regex: "^/a/.*"}, Headers: map[string]StringMatch{"X-Mirror": {Exact: "1"}}}},
			want: []any{cfMatch(cfPath("RegularExpression", "^/a/.*"), get),
				cfMatch(cfPath("RegularExpression", "^/a/.*"), cfHeaders(mrHeader("X-Mirror", "Exact", "1")))},
		},
		{
			name:   "another method than the rule's",
			source: []any{cfMatch(cfPath("PathPrefix", "/a"), get)},
			step:   []RequestMatch{{Method: &StringMatch{Exact: "POST"}}},
			err:    "(path PathPrefix /a, method GET), so it would take other rules' traffic; match method GET, or give no method",
		},
		{
			name:   "headers: both must hold, the rule's first",
			source: []any{cfMatch(cfPath("PathPrefix", "/"), cfHeaders(tenantA))},
			step:   []RequestMatch{{Headers: map[string]StringMatch{"X-Canary": {Exact: "yes"}}}},
			want:   []any{cfMatch(cfPath("PathPrefix", "/"), cfHeaders(tenantA, mrHeader("X-Canary", "Exact", "yes")))},
		},
		{
			name:   "the rule's own header, named in another case, is matched once",
			source: []any{cfMatch(cfPath("PathPrefix", "/"), cfHeaders(mrHeader("x-tenant", "Exact", "a")))},
			step:   []RequestMatch{{Method: &StringMatch{Exact: "GET"}, Headers: map[string]StringMatch{"X-Tenant": {Exact: "a"}}}},
			want:   []any{cfMatch(cfPath("PathPrefix", "/"), get, cfHeaders(mrHeader("x-tenant", "Exact", "a")))},
		},
		{
			name:   "another value of the rule's header",
			source: []any{cfMatch(cfPath("PathPrefix", "/"), cfHeaders(tenantA))},
			step:   []RequestMatch{{Headers: map[string]StringMatch{"X-Tenant": {Exact: "c"}}}},
			err:    "(path PathPrefix /, header X-Tenant Exact a), so it would take other rules' traffic; match header X-Tenant as the Rollout's rule does (Exact a), or leave it out",
		},
		{
			name:   "a prefix of the rule's header value cannot be decided",
			source: []any{cfMatch(cfPath("PathPrefix", "/"), cfHeaders(tenantA))},
			step:   []RequestMatch{{Headers: map[string]StringMatch{"X-Tenant": {Prefix: "a"}}}},
			err:    "cannot tell which requests both it and the Rollout's rule 0 of HTTPRoute shared/front (path PathPrefix /, header X-Tenant Exact a) match, header X-Tenant RegularExpression ^a.* and header X-Tenant Exact a;",
		},
		{
			name:   "the rule's query params stay",
			source: []any{cfMatch(cfPath("PathPrefix", "/a"), map[string]any{"queryParams": []any{mrHeader("tenant", "Exact", "a")}})},
			step:   []RequestMatch{{Method: &StringMatch{Exact: "GET"}}},
			want:   []any{cfMatch(cfPath("PathPrefix", "/a"), get, map[string]any{"queryParams": []any{mrHeader("tenant", "Exact", "a")}})},
		},
		{
			name:   "each step match with each of the rule's matches, those no request meets left out",
			source: []any{cfMatch(cfPath("PathPrefix", "/a")), cfMatch(cfPath("PathPrefix", "/b"))},
			step:   []RequestMatch{cfPathStep(StringMatch{Exact: "/a/x"}), cfPathStep(StringMatch{Prefix: "/b/y"}), {Method: &StringMatch{Exact: "GET"}}},
			want: []any{cfMatch(cfPath("Exact", "/a/x")), cfMatch(cfPath("PathPrefix", "/b/y")),
				cfMatch(cfPath("PathPrefix", "/a"), get), cfMatch(cfPath("PathPrefix", "/b"), get)},
		},
		{
			name:   "a step match none of the rule's matches meets",
			source: []any{cfMatch(cfPath("PathPrefix", "/a")), cfMatch(cfPath("PathPrefix", "/b"))},
			step:   []RequestMatch{cfPathStep(StringMatch{Exact: "/a/x"}), cfPathStep(StringMatch{Exact: "/c"})},
			err: "match 1 (path Exact /c) matches no request that the Rollout's rule 0 of HTTPRoute shared/front matches (path PathPrefix /a or path PathPrefix /b), " +
				"so it would take other rules' traffic; match a path within /a (path prefix /a or below it, or exact); or match a path within /b (path prefix /b or below it, or exact)",
		},
		{
			name:   "a step match equal to the rule's is still refused as never used",
			source: []any{cfMatch(cfPath("PathPrefix", "/a"))},
			step:   []RequestMatch{cfPathStep(StringMatch{Prefix: "/a/"})},
			err:    "its match 0 is the same as a match of rule 0",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			route := cfRoute(routes.HTTPRoute, tc.source...)
			before := routes.CopyRules(route.Rules)
			got, err := SetMirrorRule(route, cfA, "mirror", tc.step, nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(append(before, cfMirror(tc.want...)), got.Rules); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
		})
	}
}

// On a GRPCRoute a step's service or method is intersected with the rule's
// method match: an exact service or method within it.
func TestGRPCMirrorRuleIsConfinedToTheRolloutsRule(t *testing.T) {
	method := func(kv ...string) map[string]any {
		m := map[string]any{"type": "Exact"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return map[string]any{"method": m}
	}
	for _, tc := range []struct {
		name   string
		source []any
		step   []RequestMatch
		want   []any
		err    string
	}{
		{
			name:   "a method of the rule's service",
			source: []any{method("service", "a.Shop")},
			step:   []RequestMatch{cfPathStep(StringMatch{Exact: "/a.Shop/Buy"})},
			want:   []any{method("service", "a.Shop", "method", "Buy")},
		},
		{
			name:   "another tenant's service is refused",
			source: []any{method("service", "a.Shop")},
			step:   []RequestMatch{cfPathStep(StringMatch{Exact: "/c.Shop/Login"})},
			err: "match 0 (method Exact c.Shop/Login) matches no request that the Rollout's rule 0 of GRPCRoute shared/front matches (method Exact a.Shop/*), " +
				"so it would take other rules' traffic; match a method of service a.Shop (path prefix /a.Shop/ or exact /a.Shop/<method>), or give no path",
		},
		{
			name:   "a service for the rule's method of any service",
			source: []any{method("method", "Buy")},
			step:   []RequestMatch{cfPathStep(StringMatch{Prefix: "/a.Shop/"})},
			want:   []any{method("service", "a.Shop", "method", "Buy")},
		},
		{
			name:   "headers only: the rule's method, both headers",
			source: []any{cfMatch(method("service", "a.Shop"), cfHeaders(mrHeader("x-tenant", "Exact", "a")))},
			step:   []RequestMatch{{Headers: map[string]StringMatch{"x-mirror": {Exact: "1"}}}},
			want:   []any{cfMatch(method("service", "a.Shop"), cfHeaders(mrHeader("x-tenant", "Exact", "a"), mrHeader("x-mirror", "Exact", "1")))},
		},
		{
			name:   "a method against the rule's regular expression cannot be decided",
			source: []any{map[string]any{"method": map[string]any{"type": "RegularExpression", "service": `a\..*`}}},
			step:   []RequestMatch{cfPathStep(StringMatch{Exact: "/a.Shop/Buy"})},
			err:    `(method RegularExpression a\..*/*) match, method Exact a.Shop/Buy and method RegularExpression a\..*/* (a regular expression is compared only with itself); so it cannot keep the rule to the Rollout's own requests: give no path`,
		},
		{
			name: "a rule of every request takes any method",
			step: []RequestMatch{cfPathStep(StringMatch{Exact: "/a.Shop/Buy"})},
			want: []any{method("service", "a.Shop", "method", "Buy")},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			route := cfRoute(routes.GRPCRoute, tc.source...)
			before := routes.CopyRules(route.Rules)
			got, err := SetMirrorRule(route, cfA, "mirror", tc.step, nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(append(before, cfMirror(tc.want...)), got.Rules); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
		})
	}
}
