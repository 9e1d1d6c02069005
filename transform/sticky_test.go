package transform

import (
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes/routestest"
)

var stSticky = &Sticky{Cookie: "shop-canary", MaxAge: 600, StableHash: "aaa111", CanaryHash: "bbb222", RuleBase: "shop-sticky"}

// stCookie is the filter that sets the cookie to value, as the plugin writes it.
func stCookie(value string) map[string]any {
	return map[string]any{"type": "ResponseHeaderModifier", "responseHeaderModifier": map[string]any{
		"add": []any{map[string]any{"name": "Set-Cookie", "value": "shop-canary=" + value + "; Path=/; Max-Age=600; HttpOnly; SameSite=Lax"}}}}
}

// stUserFilter is a filter a user put on a backendRef.
var stUserFilter = map[string]any{"type": "RequestHeaderModifier", "requestHeaderModifier": map[string]any{
	"set": []any{map[string]any{"name": "x-backend", "value": "canary"}}}}

func stWithFilters(b map[string]any, filters ...map[string]any) map[string]any {
	if len(filters) == 0 {
		return b
	}
	fs := make([]any, len(filters))
	for i, f := range filters {
		fs[i] = f
	}
	return wtWith(b, "filters", fs)
}

// stRule is the sticky rule the plugin generates from routestest.RuleWithUnmanaged("/", ...): the
// weighted rule's match and filters, the cookie match, one backend.
func stRule(name, value string, backend map[string]any) routes.Rule {
	r := routestest.RuleWithUnmanaged("/", backend)
	r["name"] = name
	r["matches"] = []any{map[string]any{
		"path":    map[string]any{"type": "PathPrefix", "value": "/"},
		"headers": []any{map[string]any{"name": "Cookie", "type": "RegularExpression", "value": `^(.*;\s*)?shop-canary=` + value + `(;.*)?$`}},
	}}
	return r
}

func stInput(sticky *Sticky, claimedRules []string, claimedFilters []routes.AddedRefFilter) StickyInput {
	return StickyInput{Sticky: sticky, Stable: wtStable, Canary: wtCanary, ClaimedRules: claimedRules, ClaimedFilters: claimedFilters,
		Targeting: Targeting{Added: map[string]bool{"shop-sticky-canary": true, "shop-sticky-stable": true}}}
}

func TestSetSticky(t *testing.T) {
	// The weighted rule at 20 %, its canary backendRef with a filter of the user's.
	weighted := func(canaryFilters, stableFilters []map[string]any) routes.Rule {
		return routestest.RuleWithUnmanaged("/", stWithFilters(routestest.Backend("web-stable", 80), stableFilters...), stWithFilters(routestest.Backend("web-canary", 20), canaryFilters...))
	}
	plain := weighted([]map[string]any{stUserFilter}, nil)
	canaryRule := stRule("shop-sticky-canary", "canary-bbb222", stWithFilters(routestest.Backend("web-canary", 1), stUserFilter))
	stableRule := stRule("shop-sticky-stable", "stable-aaa111", routestest.Backend("web-stable", 1))
	sticky := weighted([]map[string]any{stUserFilter, stCookie("canary-bbb222")}, []map[string]any{stCookie("stable-aaa111")})
	records := []routes.AddedRefFilter{
		{Rule: 1, Backend: "shop/web-canary", Filter: stCookie("canary-bbb222")},
		{Rule: 1, Backend: "shop/web-stable", Filter: stCookie("stable-aaa111")},
	}
	other := routestest.RuleWithUnmanaged("/other", routestest.Backend("other", 1))
	names := []string{"shop-sticky-canary", "shop-sticky-stable"}

	newRevision := *stSticky
	newRevision.CanaryHash = "ccc333"

	tests := []struct {
		name    string
		rules   []routes.Rule
		in      StickyInput
		want    StickyResult
		wantErr string
	}{{
		name:  "the canary gets weight: cookies on both backendRefs, a rule for each cookie after every other rule",
		rules: []routes.Rule{other, plain},
		in:    stInput(stSticky, nil, nil),
		want: StickyResult{Rules: []routes.Rule{other, sticky, canaryRule, stableRule}, Claimed: names, Filters: records,
			Changes: []routes.Change{routes.Changef(routes.CookieAdded, "rule 1 + sticky cookie on Service shop/web-canary"), routes.Changef(routes.CookieAdded, "rule 1 + sticky cookie on Service shop/web-stable"),
				routes.RuleChange(routes.RuleAdded, "shop-sticky-canary"), routes.RuleChange(routes.RuleAdded, "shop-sticky-stable")}},
	}, {
		name:  "already there as asked: nothing changes",
		rules: []routes.Rule{other, sticky, canaryRule, stableRule},
		in:    stInput(stSticky, names, records),
		want:  StickyResult{Rules: []routes.Rule{other, sticky, canaryRule, stableRule}, Claimed: names, Filters: records},
	}, {
		name:  "a new canary revision: a new canary cookie and rule, stable's stay",
		rules: []routes.Rule{other, sticky, canaryRule, stableRule},
		in:    stInput(&newRevision, names, records),
		want: StickyResult{
			Rules: []routes.Rule{other,
				weighted([]map[string]any{stUserFilter, stCookie("canary-ccc333")}, []map[string]any{stCookie("stable-aaa111")}),
				stRule("shop-sticky-canary", "canary-ccc333", stWithFilters(routestest.Backend("web-canary", 1), stUserFilter)), stableRule},
			Claimed: names,
			Filters: []routes.AddedRefFilter{records[1], {Rule: 1, Backend: "shop/web-canary", Filter: stCookie("canary-ccc333")}},
			Changes: []routes.Change{routes.Changef(routes.CookieRemoved, "rule 1 − sticky cookie on Service shop/web-canary"), routes.Changef(routes.CookieAdded, "rule 1 + sticky cookie on Service shop/web-canary"), routes.RuleChange(routes.RuleChanged, "shop-sticky-canary")}},
	}, {
		name:  "no sticky any more (weight 0, promotion, abort): exactly what the plugin added goes",
		rules: []routes.Rule{other, sticky, canaryRule, stableRule},
		in:    stInput(nil, names, records),
		want: StickyResult{Rules: []routes.Rule{other, weighted([]map[string]any{stUserFilter}, nil)},
			Changes: []routes.Change{routes.Changef(routes.CookieRemoved, "rule 1 − sticky cookie on Service shop/web-canary"), routes.Changef(routes.CookieRemoved, "rule 1 − sticky cookie on Service shop/web-stable"),
				routes.RuleChange(routes.RuleRemoved, "shop-sticky-canary"), routes.RuleChange(routes.RuleRemoved, "shop-sticky-stable")}},
	}, {
		name: "a user's filter equal to the cookie, there before the plugin's, stays",
		rules: []routes.Rule{weighted([]map[string]any{stCookie("canary-bbb222"), stCookie("canary-bbb222")}, []map[string]any{stCookie("stable-aaa111")}),
			stRule("shop-sticky-canary", "canary-bbb222", wtWith(routestest.Backend("web-canary", 1), "filters", []any{stCookie("canary-bbb222")})), stableRule},
		in: stInput(nil, names, []routes.AddedRefFilter{
			{Rule: 0, Backend: "shop/web-canary", Filter: stCookie("canary-bbb222"), Others: 1},
			{Rule: 0, Backend: "shop/web-stable", Filter: stCookie("stable-aaa111")}}),
		want: StickyResult{Rules: []routes.Rule{weighted([]map[string]any{stCookie("canary-bbb222")}, nil)},
			Changes: []routes.Change{routes.Changef(routes.CookieRemoved, "rule 0 − sticky cookie on Service shop/web-canary"), routes.Changef(routes.CookieRemoved, "rule 0 − sticky cookie on Service shop/web-stable"),
				routes.RuleChange(routes.RuleRemoved, "shop-sticky-canary"), routes.RuleChange(routes.RuleRemoved, "shop-sticky-stable")}},
	}, {
		name:    "a rule of the user's has the sticky rule's name",
		rules:   []routes.Rule{plain, mrNamed("shop-sticky-stable", routestest.RuleWithUnmanaged("/x", routestest.Backend("x", 1)))},
		in:      stInput(stSticky, nil, nil),
		wantErr: `stickyCanary: the route already has a rule named "shop-sticky-stable" that the plugin did not add for this Rollout; rename that rule`,
	}, {
		name: "the canary backendRef has a ResponseHeaderModifier already (Gateway API allows one)",
		rules: []routes.Rule{weighted([]map[string]any{{"type": "ResponseHeaderModifier", "responseHeaderModifier": map[string]any{
			"set": []any{map[string]any{"name": "x-version", "value": "2"}}}}}, nil)},
		in:      stInput(stSticky, nil, nil),
		wantErr: "stickyCanary: rule 0's backendRef to Service shop/web-canary has a ResponseHeaderModifier filter already, and Gateway API allows one per backendRef, so the plugin cannot add its Set-Cookie; move that filter to the rule, or remove stickyCanary",
	}, {
		name: "the weighted rule already matches the Cookie header",
		rules: []routes.Rule{wtWith(plain, "matches", []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/"},
			"headers": []any{map[string]any{"name": "cookie", "type": "Exact", "value": "beta=1"}}}})},
		in:      stInput(stSticky, nil, nil),
		wantErr: "stickyCanary: rule 0 already matches header Cookie in match 0, so the sticky rule cannot add its own match on it; match another header in rule 0, or remove stickyCanary",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			route := wtRoute(tt.rules...)
			before := routes.CopyRules(route.Rules)
			got, err := SetSticky(route, route.Rules, tt.in)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("SetSticky (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, route.Rules); diff != "" {
				t.Errorf("the live rules changed (-before +after):\n%s", diff)
			}
		})
	}
}

func TestSetStickyRefusesOtherKinds(t *testing.T) {
	r := wtRoute(routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 80), routestest.Backend("web-canary", 20)))
	r.Kind = routes.GRPCRoute
	_, err := SetSticky(r, r.Rules, stInput(stSticky, nil, nil))
	want := "stickyCanary works on HTTPRoutes only, not on a GRPCRoute: remove stickyCanary from the Rollout's plugin config or the GRPCRoute from its routes"
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %q", err, want)
	}
}

// The cookie match finds the cookie among others, in a gateway that matches
// the whole header value and in one that searches it, and nothing else.
func TestCookieMatch(t *testing.T) {
	expr := cookieMatch("shop.canary", "canary-bbb222")["value"].(string)
	re := regexp.MustCompile(expr)
	for header, want := range map[string]bool{
		"shop.canary=canary-bbb222":                  true,
		"a=1; shop.canary=canary-bbb222":             true,
		"a=1;shop.canary=canary-bbb222; b=2":         true,
		"shop.canary=canary-bbb222x":                 false,
		"xshop.canary=canary-bbb222":                 false,
		"shopXcanary=canary-bbb222":                  false,
		"a=shop.canary=canary-bbb222":                false,
		"shop.canary=stable-aaa111; b=canary-bbb222": false,
	} {
		// Go's regexp searches; Envoy's RE2 matches the whole value.
		whole := regexp.MustCompile("^(?:" + expr + ")$").MatchString(header)
		if got := re.MatchString(header); got != want || whole != want {
			t.Errorf("%q: search %v, whole %v, want %v", header, got, whole, want)
		}
	}
	if !strings.HasPrefix(expr, "^") {
		t.Errorf("%q is not anchored", expr)
	}
}

// A header rule copied from a weighted rule that carries the cookies leaves
// them out: the cookies belong to the weighted rule.
func TestHeaderRuleLeavesStickyCookiesOut(t *testing.T) {
	r := wtRoute(routestest.RuleWithUnmanaged("/", stWithFilters(routestest.Backend("web-stable", 80), stCookie("stable-aaa111")), stWithFilters(routestest.Backend("web-canary", 20), stUserFilter, stCookie("canary-bbb222"))))
	in := mrIn
	in.AddedRefFilters = []map[string]any{stCookie("canary-bbb222"), stCookie("stable-aaa111")}
	got, err := SetHeaderRules(r, in, "beta", mrMatch(exact("x-beta", "1")))
	if err != nil {
		t.Fatal(err)
	}
	want := mrHeaderRule("beta", "/", mrHeader("x-beta", "Exact", "1"))
	want["backendRefs"] = []any{stWithFilters(routestest.Backend("web-canary", 1), stUserFilter)}
	if diff := cmp.Diff(want, got.Rules[1]); diff != "" {
		t.Errorf("header rule (-want +got):\n%s", diff)
	}
}
