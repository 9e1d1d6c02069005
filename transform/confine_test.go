package transform

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// A route of namespace shared that two tenants share: rule 0 serves what
// tenant a's Rollout walks (its matches vary by test), rule 1 serves /c from
// tenant c's Services.

var (
	cfA = RuleInput{RolloutServices: RolloutServices{Stable: routes.ServiceRef("a", "stable"), Canary: routes.ServiceRef("a", "canary"), ManagedRoutes: []string{"beta", "mirror"}}}
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
		t.Run(tc.name, func(t *testing.T) { mirrorConfined(t, routes.HTTPRoute, tc.source, tc.step, tc.want, tc.err) })
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
		t.Run(tc.name, func(t *testing.T) { mirrorConfined(t, routes.GRPCRoute, tc.source, tc.step, tc.want, tc.err) })
	}
}

// cfRequest is a request as Gateway API matches it; for a GRPCRoute, path is
// /<service>/<method>.
type cfRequest struct {
	path, method string
	headers      map[string]string
	query        map[string]string
}

// cfFullMatch says whether re matches all of s (as Envoy's RE2 does).
func cfFullMatch(re, s string) bool {
	ok, err := regexp.MatchString("^(?:"+re+")$", s)
	return err == nil && ok
}

// cfElements are a path's elements, empty ones (a trailing /) dropped.
func cfElements(p string) []string {
	var out []string
	for _, e := range strings.Split(p, "/") {
		if e != "" {
			out = append(out, e)
		}
	}
	return out
}

// takes says whether rule takes request q on a route of kind: a model of
// Gateway API's matching written apart from the code under test.
func (q cfRequest) takes(kind routes.Kind, rule routes.Rule) bool {
	matches, _ := rule["matches"].([]any)
	if len(matches) == 0 {
		return true
	}
	for _, m := range matches {
		if q.meets(kind, m.(map[string]any)) {
			return true
		}
	}
	return false
}

func (q cfRequest) meets(kind routes.Kind, m map[string]any) bool {
	if kind == routes.GRPCRoute {
		if mm, ok := m["method"].(map[string]any); ok && !q.meetsGRPCMethod(mm) {
			return false
		}
	} else {
		if p, ok := m["path"].(map[string]any); ok && !q.meetsPath(p["type"].(string), p["value"].(string)) {
			return false
		}
		if method, ok := m["method"].(string); ok && method != q.method {
			return false
		}
	}
	for _, h := range listOf(m["headers"]) {
		var value string
		found := false
		for k, v := range q.headers {
			if strings.EqualFold(k, h["name"].(string)) {
				value, found = v, true
			}
		}
		if !found || !cfValueMatches(h, value) {
			return false
		}
	}
	for _, p := range listOf(m["queryParams"]) {
		v, found := q.query[p["name"].(string)]
		if !found || !cfValueMatches(p, v) {
			return false
		}
	}
	return true
}

func listOf(v any) []map[string]any {
	list, _ := v.([]any)
	out := make([]map[string]any, len(list))
	for i, x := range list {
		out[i] = x.(map[string]any)
	}
	return out
}

func cfValueMatches(m map[string]any, v string) bool {
	if m["type"] == "RegularExpression" {
		return cfFullMatch(m["value"].(string), v)
	}
	return m["value"] == v
}

func (q cfRequest) meetsPath(typ, value string) bool {
	switch typ {
	case "Exact":
		return q.path == value
	case "RegularExpression":
		return cfFullMatch(value, q.path)
	}
	prefix, path := cfElements(value), cfElements(q.path)
	return len(path) >= len(prefix) && slices.Equal(path[:len(prefix)], prefix)
}

func (q cfRequest) meetsGRPCMethod(m map[string]any) bool {
	service, method, _ := strings.Cut(strings.TrimPrefix(q.path, "/"), "/")
	for k, v := range map[string]string{"service": service, "method": method} {
		want, ok := m[k].(string)
		switch {
		case !ok:
		case m["type"] == "RegularExpression" && !cfFullMatch(want, v), m["type"] != "RegularExpression" && want != v:
			return false
		}
	}
	return true
}

// cfRequests are every combination of the paths, the methods and the header
// sets.
func cfRequests(paths []string, headers []map[string]string) []cfRequest {
	var out []cfRequest
	for _, p := range paths {
		for _, m := range []string{"GET", "POST"} {
			for _, h := range headers {
				out = append(out, cfRequest{path: p, method: m, headers: h, query: map[string]string{"tenant": "a"}})
				out = append(out, cfRequest{path: p, method: m, headers: h})
			}
		}
	}
	return out
}

// confinedTo fails the test for every request that a rule the plugin added
// (named in added) takes and the Rollout's rule source does not.
func confinedTo(t *testing.T, kind routes.Kind, source routes.Rule, rules []routes.Rule, added []string, requests []cfRequest) {
	t.Helper()
	for _, rule := range rules {
		if !slices.Contains(added, rule.Name()) {
			continue
		}
		for _, q := range requests {
			if q.takes(kind, rule) && !q.takes(kind, source) {
				t.Errorf("added rule %q takes %+v, which the Rollout's rule does not: %v", rule.Name(), q, rule["matches"])
			}
		}
	}
}

// On a route shared by tenants a and c, every rule a step adds for tenant
// a's Rollout (header rules, mirror rules, sticky rules) takes only requests
// that a's own rule takes, whatever a's rule matches; a step that would take
// others' requests is refused. Filter-mode mirroring changes no match at all.
// Checked on a grid of requests against a model of Gateway API's matching.
func TestAddedRulesTakeOnlyTheRolloutsRequests(t *testing.T) {
	requests := cfRequests([]string{"/", "/a", "/a/", "/a/login", "/ab", "/b", "/b/x", "/c", "/c/login", "/cat"}, []map[string]string{
		{}, {"X-Canary": "yes"}, {"x-canary": "yes", "X-Tenant": "a"}, {"X-Tenant": "c"}, {"X-Mirror": "1", "X-Tenant": "a"},
		{"Cookie": "shop-canary=canary-bbb222"}, {"Cookie": "a=1; shop-canary=stable-aaa111", "X-Tenant": "a"},
	})
	tenantA := cfHeaders(mrHeader("X-Tenant", "Exact", "a"))
	sources := map[string][]any{
		"no matches":           nil,
		"a prefix":             {cfMatch(cfPath("PathPrefix", "/a"))},
		"an exact path, GET":   {cfMatch(cfPath("Exact", "/a/login"), cfMethod("GET")), cfMatch(cfPath("PathPrefix", "/b"))},
		"a header":             {cfMatch(cfPath("PathPrefix", "/"), tenantA)},
		"a query param":        {cfMatch(cfPath("PathPrefix", "/a"), map[string]any{"queryParams": []any{mrHeader("tenant", "Exact", "a")}})},
		"a regular expression": {cfMatch(cfPath("RegularExpression", "/a/.*"))},
	}
	steps := [][]RequestMatch{
		{cfPathStep(StringMatch{Exact: "/c/login"})},
		{cfPathStep(StringMatch{Exact: "/a/login"})},
		{cfPathStep(StringMatch{Prefix: "/a"})},
		{{Method: &StringMatch{Exact: "GET"}}},
		{{Method: &StringMatch{Exact: "POST"}, Headers: map[string]StringMatch{"X-Tenant": {Exact: "c"}}}},
		{{Headers: map[string]StringMatch{"X-Mirror": {Exact: "1"}}}, cfPathStep(StringMatch{Prefix: "/b"})},
		{cfPathStep(StringMatch{Regex: "/.*"})},
	}
	for name, matches := range sources {
		t.Run(name, func(t *testing.T) {
			route := cfRoute(routes.HTTPRoute, matches...)
			source, other := route.Rules[0], routes.CopyRules(route.Rules[1:])
			header, err := SetHeaderRules(route, cfA, "beta", mrMatch(exact("X-Canary", "yes")))
			if err != nil {
				t.Fatal(err)
			}
			confinedTo(t, routes.HTTPRoute, source, header.Rules, header.Claimed, requests)
			accepted := 0
			for _, step := range steps {
				mirror, err := SetMirrorRule(route, cfA, "mirror", step, nil)
				if err != nil {
					continue // refused: nothing added
				}
				accepted++
				confinedTo(t, routes.HTTPRoute, source, mirror.Rules, mirror.Claimed, requests)
			}
			if accepted == 0 {
				t.Error("every mirror step was refused")
			}
			in := StickyInput{Sticky: stSticky, Stable: cfA.Stable, Canary: cfA.Canary}
			sticky, err := SetSticky(route, route.Rules, in)
			if err != nil {
				t.Fatal(err)
			}
			confinedTo(t, routes.HTTPRoute, source, sticky.Rules, sticky.Claimed, requests)
			filters, err := SetMirrorFilters(route, cfA, nil, "mirror", nil, true)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(other, filters.Rules[1:]); diff != "" {
				t.Errorf("filter mode changed tenant c's rule (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(route.Rules[0]["matches"], filters.Rules[0]["matches"]); diff != "" {
				t.Errorf("filter mode changed tenant a's matches (-before +after):\n%s", diff)
			}
		})
	}
}

// The same on a GRPCRoute, whose tenants share by service.
func TestAddedGRPCRulesTakeOnlyTheRolloutsRequests(t *testing.T) {
	requests := cfRequests([]string{"/a.Shop/Buy", "/a.Shop/Login", "/c.Shop/Login", "/a.Cart/Buy"}, []map[string]string{
		{}, {"x-canary": "yes"}, {"x-canary": "yes", "x-tenant": "a"}, {"x-mirror": "1"},
	})
	method := map[string]any{"method": map[string]any{"type": "Exact", "service": "a.Shop"}}
	sources := map[string][]any{
		"no matches":         nil,
		"a service":          {method},
		"a method, a header": {cfMatch(map[string]any{"method": map[string]any{"type": "Exact", "method": "Buy"}}, cfHeaders(mrHeader("x-tenant", "Exact", "a")))},
	}
	steps := [][]RequestMatch{
		{cfPathStep(StringMatch{Exact: "/c.Shop/Login"})},
		{cfPathStep(StringMatch{Exact: "/a.Shop/Buy"})},
		{cfPathStep(StringMatch{Prefix: "/a.Shop/"})},
		{{Headers: map[string]StringMatch{"x-mirror": {Exact: "1"}}}},
	}
	for name, matches := range sources {
		t.Run(name, func(t *testing.T) {
			route := cfRoute(routes.GRPCRoute, matches...)
			source := route.Rules[0]
			header, err := SetHeaderRules(route, cfA, "beta", mrMatch(exact("x-canary", "yes")))
			if err != nil {
				t.Fatal(err)
			}
			confinedTo(t, routes.GRPCRoute, source, header.Rules, header.Claimed, requests)
			accepted := 0
			for _, step := range steps {
				mirror, err := SetMirrorRule(route, cfA, "mirror", step, nil)
				if err != nil {
					continue
				}
				accepted++
				confinedTo(t, routes.GRPCRoute, source, mirror.Rules, mirror.Claimed, requests)
			}
			if accepted == 0 {
				t.Error("every mirror step was refused")
			}
		})
	}
}

// mirrorConfined adds a mirror rule with the step's matches to a route whose
// one weighted rule has matches source: the rules are the route's and the
// mirror rule with matches want, or the step is refused saying err.
func mirrorConfined(t *testing.T, kind routes.Kind, source []any, step []RequestMatch, want []any, err string) {
	t.Helper()
	route := cfRoute(kind, source...)
	before := routes.CopyRules(route.Rules)
	got, gotErr := SetMirrorRule(route, cfA, "mirror", step, nil)
	if err != "" {
		if gotErr == nil || !strings.Contains(gotErr.Error(), err) {
			t.Fatalf("error %v, want one saying %q", gotErr, err)
		}
		return
	}
	if gotErr != nil {
		t.Fatal(gotErr)
	}
	if diff := cmp.Diff(append(before, cfMirror(want...)), got.Rules); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
}
