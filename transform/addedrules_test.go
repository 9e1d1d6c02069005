package transform

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes/routestest"
	"github.com/google/go-cmp/cmp"
)

// Rules here are in the form the apiserver serves them (see weights_test.go).

var mrIn = RuleInput{RolloutServices: RolloutServices{Stable: wtStable, Canary: wtCanary, ManagedRoutes: []string{"beta", "mirror", "other"}}}

// mrInput is in as the core passes it for route r: with the Rollout's
// claimed rule names and every Rollout's added rule names read from r's
// claims annotation.
func mrInput(in RuleInput, r routes.Route, claimed []string) RuleInput {
	claims, err := routes.ReadClaims(r)
	if err != nil {
		panic(err)
	}
	in.Claimed, in.Targeting.Added = claimed, claims.AddedRules()
	return in
}

func mrHeader(name, typ, value string) map[string]any {
	return map[string]any{"name": name, "type": typ, "value": value}
}

// mrHeaderRule is routestest.RuleWithUnmanaged(path, ...) turned into a header rule: named, the
// headers added to its match, only the canary backendRef with weight 1.
func mrHeaderRule(name, path string, headers ...map[string]any) routes.Rule {
	r := routestest.RuleWithUnmanaged(path, routestest.Backend("web-canary", 1))
	hs := make([]any, len(headers))
	for i, h := range headers {
		hs[i] = h
	}
	r["name"] = name
	r["matches"] = []any{map[string]any{
		"path":    map[string]any{"type": "PathPrefix", "value": path},
		"headers": hs,
	}}
	return r
}

func mrNamed(name string, r routes.Rule) routes.Rule {
	r["name"] = name
	return r
}

// mrWithClaims returns the route with the claims annotation recording rules
// for Rollouts (key → names).
func mrWithClaims(r routes.Route, rules map[string][]string) routes.Route {
	c := routes.Claims{}
	for k, names := range rules {
		c[k] = routes.Claim{Rules: names}
	}
	r.Annotations = c.Annotations()
	return r
}

func mrMatch(headers ...HeaderMatch) []HeaderMatch { return headers }

func exact(name, v string) HeaderMatch {
	return HeaderMatch{Name: name, Value: &StringMatch{Exact: v}}
}

func TestSetHeaderRules(t *testing.T) {
	managed := func(path string, canary int64) routes.Rule {
		return routestest.RuleWithUnmanaged(path, routestest.Backend("web-stable", 100-canary), routestest.Backend("web-canary", canary))
	}
	userCanaryOnly := mrNamed("preview", routestest.RuleWithUnmanaged("/preview", routestest.Backend("web-canary", 1)))
	tests := []struct {
		name        string
		route       routes.Route
		claimed     []string
		set         string
		match       []HeaderMatch
		wantRules   []routes.Rule
		wantClaimed []string
		wantChanges []routes.Change
	}{
		{
			name:        "one managed rule: a header rule appended, canary only with weight 1 although the canary has 0",
			route:       wtRoute(managed("/", 0)),
			set:         "beta",
			match:       mrMatch(exact("X-Canary", "yes")),
			wantRules:   []routes.Rule{managed("/", 0), mrHeaderRule("beta", "/", mrHeader("X-Canary", "Exact", "yes"))},
			wantClaimed: []string{"beta"},
			wantChanges: []routes.Change{routes.RuleChange(routes.RuleAdded, "beta")},
		},
		{
			name:  "prefix becomes an escaped, anchored regular expression; regex passes as is",
			route: wtRoute(managed("/", 30)),
			set:   "beta",
			match: mrMatch(
				HeaderMatch{Name: "X-Version", Value: &StringMatch{Prefix: "v1.2+"}},
				HeaderMatch{Name: "X-User", Value: &StringMatch{Regex: "^(alice|bob)$"}},
			),
			wantRules: []routes.Rule{managed("/", 30), mrHeaderRule("beta", "/",
				mrHeader("X-Version", "RegularExpression", `^v1\.2\+.*`),
				mrHeader("X-User", "RegularExpression", "^(alice|bob)$"))},
			wantClaimed: []string{"beta"},
			wantChanges: []routes.Change{routes.RuleChange(routes.RuleAdded, "beta")},
		},
		{
			name:  "one header rule per managed rule, named beta, beta-1; other rules stay, a user's canary-only rule too",
			route: wtRoute(managed("/a", 10), routestest.RuleWithUnmanaged("/static", routestest.Backend("static", 1)), userCanaryOnly, managed("/b", 10)),
			set:   "beta",
			match: mrMatch(exact("X-Canary", "yes")),
			wantRules: []routes.Rule{
				managed("/a", 10), routestest.RuleWithUnmanaged("/static", routestest.Backend("static", 1)), userCanaryOnly, managed("/b", 10),
				mrHeaderRule("beta", "/a", mrHeader("X-Canary", "Exact", "yes")),
				mrHeaderRule("beta-1", "/b", mrHeader("X-Canary", "Exact", "yes")),
			},
			wantClaimed: []string{"beta", "beta-1"},
			wantChanges: []routes.Change{routes.RuleChange(routes.RuleAdded, "beta"), routes.RuleChange(routes.RuleAdded, "beta-1")},
		},
		{
			name: "the same call again changes nothing, even with the set not last",
			route: mrWithClaims(wtRoute(managed("/", 30),
				mrHeaderRule("beta", "/", mrHeader("X-Canary", "Exact", "yes")),
				mrNamed("mirror", routestest.RuleWithUnmanaged("/m", routestest.Backend("web-stable", 1)))), map[string][]string{"ns/demo": {"mirror", "beta"}}),
			claimed: []string{"mirror", "beta"},
			set:     "beta",
			match:   mrMatch(exact("X-Canary", "yes")),
			wantRules: []routes.Rule{managed("/", 30),
				mrHeaderRule("beta", "/", mrHeader("X-Canary", "Exact", "yes")),
				mrNamed("mirror", routestest.RuleWithUnmanaged("/m", routestest.Backend("web-stable", 1)))},
			wantClaimed: []string{"mirror", "beta"},
		},
		{
			name: "a new match replaces the set",
			route: mrWithClaims(wtRoute(managed("/", 30), mrHeaderRule("beta", "/", mrHeader("X-Canary", "Exact", "yes"))),
				map[string][]string{"ns/demo": {"beta"}}),
			claimed:     []string{"beta"},
			set:         "beta",
			match:       mrMatch(exact("X-Canary", "always")),
			wantRules:   []routes.Rule{managed("/", 30), mrHeaderRule("beta", "/", mrHeader("X-Canary", "Exact", "always"))},
			wantClaimed: []string{"beta"},
			wantChanges: []routes.Change{routes.RuleChange(routes.RuleChanged, "beta")},
		},
		{
			name: "no match removes the set, recorded names whose rules are gone too; other sets and a look-alike stay",
			route: mrWithClaims(wtRoute(managed("/a", 30), managed("/b", 30),
				mrHeaderRule("beta", "/a", mrHeader("X-Canary", "Exact", "yes")),
				mrHeaderRule("other", "/a", mrHeader("X-Other", "Exact", "yes")),
				mrHeaderRule("beta-7", "/b", mrHeader("X-Canary", "Exact", "yes"))),
				map[string][]string{"ns/demo": {"beta", "beta-1", "other"}}),
			claimed: []string{"beta", "beta-1", "other"},
			set:     "beta",
			wantRules: []routes.Rule{managed("/a", 30), managed("/b", 30),
				mrHeaderRule("other", "/a", mrHeader("X-Other", "Exact", "yes")),
				mrHeaderRule("beta-7", "/b", mrHeader("X-Canary", "Exact", "yes"))},
			wantClaimed: []string{"other"},
			wantChanges: []routes.Change{routes.RuleChange(routes.RuleRemoved, "beta")},
		},
		{
			name:        "no match and nothing recorded: nothing changes",
			route:       wtRoute(managed("/", 30), userCanaryOnly),
			set:         "beta",
			wantRules:   []routes.Rule{managed("/", 30), userCanaryOnly},
			wantClaimed: nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := routes.CopyRules(tc.route.Rules)
			got, err := SetHeaderRules(tc.route, mrInput(mrIn, tc.route, tc.claimed), tc.set, tc.match)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantRules, got.Rules); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantClaimed, got.Claimed); diff != "" {
				t.Errorf("claimed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantChanges, got.Changes); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.route.Rules); diff != "" {
				t.Errorf("the live rules changed (-before +after):\n%s", diff)
			}
		})
	}
}

func TestSetHeaderRulesGRPC(t *testing.T) {
	method := map[string]any{"type": "Exact", "service": "shop.Cart", "method": "Add"}
	source := routes.Rule{
		"matches":     []any{map[string]any{"method": method}},
		"backendRefs": []any{routestest.Backend("web-stable", 80), routestest.Backend("web-canary", 20)},
	}
	catchAll := routes.Rule{"backendRefs": []any{routestest.Backend("web-stable", 80), routestest.Backend("web-canary", 20)}}
	r := routes.Route{Ref: routes.Ref{Kind: routes.GRPCRoute, Namespace: wtNS, Name: "api"}, Rules: []routes.Rule{source, catchAll}}
	got, err := SetHeaderRules(r, mrInput(mrIn, r, nil), "beta", mrMatch(exact("x-canary", "yes")))
	if err != nil {
		t.Fatal(err)
	}
	h := []any{mrHeader("x-canary", "Exact", "yes")}
	want := []routes.Rule{source, catchAll,
		{"name": "beta", "matches": []any{map[string]any{"method": method, "headers": h}}, "backendRefs": []any{routestest.Backend("web-canary", 1)}},
		{"name": "beta-1", "matches": []any{map[string]any{"headers": h}}, "backendRefs": []any{routestest.Backend("web-canary", 1)}},
	}
	if diff := cmp.Diff(want, got.Rules); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestSetHeaderRulesErrors(t *testing.T) {
	managed := routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 100), routestest.Backend("web-canary", 0))
	withHeader := wtWith(managed, "matches", []any{map[string]any{
		"path":    map[string]any{"type": "PathPrefix", "value": "/"},
		"headers": []any{mrHeader("x-canary", "Exact", "no")},
	}})
	var fifteen []routes.Rule
	for i := range 15 {
		fifteen = append(fifteen, routestest.RuleWithUnmanaged(fmt.Sprintf("/r%d", i), routestest.Backend("web-stable", 100), routestest.Backend("web-canary", 0)))
	}
	manyMatches := func() routes.Rule {
		var ms []any
		for i := range 64 {
			ms = append(ms, map[string]any{"path": map[string]any{"type": "PathPrefix", "value": fmt.Sprintf("/m%d", i)}})
		}
		return wtWith(managed, "matches", ms)
	}
	tests := []struct {
		name  string
		route routes.Route
		set   string
		match []HeaderMatch
		in    RuleInput
		want  []string
	}{
		{"a rule the plugin did not record has the name", wtRoute(managed, mrNamed("beta", routestest.RuleWithUnmanaged("/x", routestest.Backend("web-canary", 1)))), "beta",
			mrMatch(exact("X-Canary", "yes")), mrIn, []string{`already has a rule named "beta"`, "did not add for this Rollout"}},
		{"another Rollout's rule has the name", mrWithClaims(wtRoute(managed, mrNamed("beta", routestest.RuleWithUnmanaged("/x", routestest.Backend("web-canary", 1)))), map[string][]string{"ns/other": {"beta"}}), "beta",
			mrMatch(exact("X-Canary", "yes")), mrIn, []string{`already has a rule named "beta"`}},
		{"not a section name", wtRoute(managed), "Beta_Route", mrMatch(exact("X-Canary", "yes")), mrIn, []string{`"Beta_Route" is not a valid rule name`}},
		{"generated name is another managed route", wtRoute(managed, managed), "beta", mrMatch(exact("X-Canary", "yes")),
			RuleInput{RolloutServices: RolloutServices{Stable: wtStable, Canary: wtCanary, ManagedRoutes: []string{"beta", "beta-1"}}}, []string{`"beta-1", which is also a managed route`}},
		{"source already matches the header", wtRoute(withHeader), "beta", mrMatch(exact("X-Canary", "yes")), mrIn, []string{"already matches header x-canary"}},
		{"header twice", wtRoute(managed), "beta", mrMatch(exact("X-Canary", "yes"), exact("x-canary", "no")), mrIn, []string{"matched twice"}},
		{"no value", wtRoute(managed), "beta", mrMatch(HeaderMatch{Name: "X-Canary"}), mrIn, []string{"no value"}},
		{"two values", wtRoute(managed), "beta", mrMatch(HeaderMatch{Name: "X-Canary", Value: &StringMatch{Exact: "a", Prefix: "b"}}), mrIn, []string{"exactly one of exact, prefix and regex"}},
		{"bad header name", wtRoute(managed), "beta", mrMatch(exact("X Canary", "yes")), mrIn, []string{`"X Canary" is not an HTTP header name`}},
		{"no managed rule", wtRoute(routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 1))), "beta", mrMatch(exact("X-Canary", "yes")), mrIn, []string{"has no rule whose backendRefs include both"}},
		{"a TCPRoute", routes.Route{Ref: routes.Ref{Kind: routes.TCPRoute, Namespace: wtNS, Name: "db"}, Rules: []routes.Rule{{"backendRefs": []any{routestest.Backend("web-stable", 1), routestest.Backend("web-canary", 0)}}}}, "beta",
			mrMatch(exact("X-Canary", "yes")), mrIn, []string{"a TCPRoute has no matches"}},
		{"more than 16 rules", wtRoute(fifteen...), "beta", mrMatch(exact("X-Canary", "yes")), mrIn,
			[]string{"header route \"beta\"", "30 rules", "at most 16 rules per HTTPRoute"}},
		{"more than 128 matches", wtRoute(manyMatches(), manyMatches()), "beta", mrMatch(exact("X-Canary", "yes")), mrIn,
			[]string{"256 matches in all", "at most 128 per HTTPRoute"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var claimed []string
			_, err := SetHeaderRules(tc.route, mrInput(tc.in, tc.route, claimed), tc.set, tc.match)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestSetMirrorRule(t *testing.T) {
	managed := routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 70), routestest.Backend("web-canary", 30))
	pct := func(p int32) *int32 { return &p }
	mirrorRule := func(percent int64, matches ...any) routes.Rule {
		r := routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 1))
		r["name"] = "mirror"
		r["matches"] = matches
		filters := r["filters"].([]any)
		r["filters"] = append(filters, map[string]any{
			"type": "RequestMirror",
			"requestMirror": map[string]any{
				"backendRef": map[string]any{"group": "", "kind": "Service", "name": "web-canary", "port": int64(8080)},
				"percent":    percent,
			},
		})
		return r
	}
	get := map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/"}, "method": "GET"}
	api := map[string]any{
		"path":    map[string]any{"type": "PathPrefix", "value": "/api"},
		"headers": []any{mrHeader("X-A", "Exact", "1"), mrHeader("X-B", "RegularExpression", `^b\..*`)},
	}
	tests := []struct {
		name        string
		route       routes.Route
		claimed     []string
		match       []RequestMatch
		percent     *int32
		wantRules   []routes.Rule
		wantClaimed []string
	}{
		{
			name:        "method match, 25 percent: stable only, the canary as the mirror",
			route:       wtRoute(managed),
			match:       []RequestMatch{{Method: &StringMatch{Exact: "GET"}}},
			percent:     pct(25),
			wantRules:   []routes.Rule{managed, mirrorRule(25, get)},
			wantClaimed: []string{"mirror"},
		},
		{
			name:  "path and headers (sorted by name), no percentage: every request",
			route: wtRoute(managed),
			match: []RequestMatch{{
				Path:    &StringMatch{Prefix: "/api"},
				Headers: map[string]StringMatch{"X-B": {Prefix: "b."}, "X-A": {Exact: "1"}},
			}},
			wantRules:   []routes.Rule{managed, mirrorRule(100, api)},
			wantClaimed: []string{"mirror"},
		},
		{
			name:        "percentage 0 removes it",
			route:       mrWithClaims(wtRoute(managed, mirrorRule(25, get)), map[string][]string{"ns/demo": {"mirror"}}),
			claimed:     []string{"mirror"},
			match:       []RequestMatch{{Method: &StringMatch{Exact: "GET"}}},
			percent:     pct(0),
			wantRules:   []routes.Rule{managed},
			wantClaimed: nil,
		},
		{
			name:        "no match removes it",
			route:       mrWithClaims(wtRoute(managed, mirrorRule(25, get)), map[string][]string{"ns/demo": {"mirror"}}),
			claimed:     []string{"mirror"},
			wantRules:   []routes.Rule{managed},
			wantClaimed: nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SetMirrorRule(tc.route, mrInput(mrIn, tc.route, tc.claimed), "mirror", tc.match, tc.percent)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantRules, got.Rules); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantClaimed, got.Claimed); diff != "" {
				t.Errorf("claimed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetMirrorRuleErrors(t *testing.T) {
	managed := routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 70), routestest.Backend("web-canary", 30))
	grpc := routes.Route{Ref: routes.Ref{Kind: routes.GRPCRoute, Namespace: wtNS, Name: "api"}, Rules: []routes.Rule{{"backendRefs": []any{routestest.Backend("web-stable", 1), routestest.Backend("web-canary", 0)}}}}
	pct := int32(101)
	for _, tc := range []struct {
		name    string
		route   routes.Route
		match   []RequestMatch
		percent *int32
		want    string
	}{
		{"a match the route's own rule already has: the mirror rule would never be used", wtRoute(managed),
			[]RequestMatch{{Path: &StringMatch{Prefix: "/"}}}, nil, "same as a match of rule 0"},
		{"an empty match is the catch-all", wtRoute(managed), []RequestMatch{{}}, nil, "same as a match of rule 0"},
		{"method by prefix", wtRoute(managed), []RequestMatch{{Method: &StringMatch{Prefix: "G"}}}, nil, "give method exact"},
		{"unknown method", wtRoute(managed), []RequestMatch{{Method: &StringMatch{Exact: "get"}}}, nil, `method "get" is not one of`},
		{"percentage over 100", wtRoute(managed), []RequestMatch{{Method: &StringMatch{Exact: "GET"}}}, &pct, "percentage 101 is outside 0..100"},
		{"gRPC with an HTTP method", grpc, []RequestMatch{{Method: &StringMatch{Exact: "POST"}}}, nil, "not HTTP methods"},
		{"gRPC path by regex", grpc, []RequestMatch{{Path: &StringMatch{Regex: ".*"}}}, nil, "must be exact /<service>/<method> or prefix /<service>/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := SetMirrorRule(tc.route, mrInput(mrIn, tc.route, nil), "mirror", tc.match, tc.percent)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestSetMirrorRuleGRPC(t *testing.T) {
	source := routes.Rule{"backendRefs": []any{routestest.Backend("web-stable", 80), routestest.Backend("web-canary", 20)}}
	r := routes.Route{Ref: routes.Ref{Kind: routes.GRPCRoute, Namespace: wtNS, Name: "api"}, Rules: []routes.Rule{source}}
	got, err := SetMirrorRule(r, mrInput(mrIn, r, nil), "mirror", []RequestMatch{
		{Path: &StringMatch{Exact: "/shop.Cart/Add"}},
		{Path: &StringMatch{Prefix: "/shop.Orders/"}, Headers: map[string]StringMatch{"x-tenant": {Exact: "a"}}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []routes.Rule{source, {
		"name": "mirror",
		"matches": []any{
			map[string]any{"method": map[string]any{"type": "Exact", "service": "shop.Cart", "method": "Add"}},
			map[string]any{"method": map[string]any{"type": "Exact", "service": "shop.Orders"}, "headers": []any{mrHeader("x-tenant", "Exact", "a")}},
		},
		"backendRefs": []any{routestest.Backend("web-stable", 1)},
		"filters": []any{map[string]any{"type": "RequestMirror", "requestMirror": map[string]any{
			"backendRef": map[string]any{"group": "", "kind": "Service", "name": "web-canary", "port": int64(8080)},
			"percent":    int64(100),
		}}},
	}}
	if diff := cmp.Diff(want, got.Rules); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// RemoveAddedRules removes exactly the recorded names: not another Rollout's
// rule, not a user's rule of the same shape, not an unnamed rule.
func TestRemoveAddedRules(t *testing.T) {
	managed := routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 70), routestest.Backend("web-canary", 30))
	mine := mrHeaderRule("beta", "/", mrHeader("X-Canary", "Exact", "yes"))
	theirs := mrHeaderRule("gamma", "/", mrHeader("X-Gamma", "Exact", "yes"))
	userLookAlike := mrHeaderRule("beta-9", "/", mrHeader("X-Canary", "Exact", "yes"))
	unnamed := routestest.RuleWithUnmanaged("/c", routestest.Backend("web-canary", 1))
	r := mrWithClaims(wtRoute(managed, mine, theirs, userLookAlike, unnamed), map[string][]string{"ns/demo": {"beta", "mirror"}, "ns/other": {"gamma"}})
	got := RemoveAddedRules(r, []string{"beta", "mirror"})
	if diff := cmp.Diff([]routes.Rule{managed, theirs, userLookAlike, unnamed}, got.Rules); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]routes.Change{routes.RuleChange(routes.RuleRemoved, "beta")}, got.Changes); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	again := RemoveAddedRules(routes.Route{Ref: r.Ref, Rules: got.Rules}, []string{"beta", "mirror"})
	if diff := cmp.Diff(got.Rules, again.Rules); diff != "" || len(again.Changes) > 0 {
		t.Errorf("second removal changed something: %v\n%s", again.Changes, diff)
	}
}

// A rule recorded as added by any Rollout is never a weighted rule, even if it
// holds both stable and canary: SetWeights leaves it alone.
func TestSetWeightsSkipsAddedRules(t *testing.T) {
	managed := routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 100), routestest.Backend("web-canary", 0))
	added := mrNamed("mirror", routestest.RuleWithUnmanaged("/m", routestest.Backend("web-stable", 50), routestest.Backend("web-canary", 50)))
	r := mrWithClaims(wtRoute(managed, added), map[string][]string{"ns/other": {"mirror"}})
	rules, _, err := SetWeights(r, Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 30, MaxWeight: 100}, mrInput(mrIn, r, nil).Targeting)
	if err != nil {
		t.Fatal(err)
	}
	want := []routes.Rule{routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 70), routestest.Backend("web-canary", 30)), added}
	if diff := cmp.Diff(want, rules); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestInSet(t *testing.T) {
	names := []string{"beta", "beta-2"}
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"beta", true}, {"beta-1", true}, {"beta-12", true},
		{"beta-2", false}, // a managed route of its own
		{"beta-01", false}, {"beta-", false}, {"beta-x", false}, {"betas", false}, {"alpha", false},
	} {
		if got := inEntry(tc.name, "beta", names); got != tc.want {
			t.Errorf("inEntry(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestCheckLimitsDuplicateNames(t *testing.T) {
	r := []routes.Rule{mrNamed("a", routestest.RuleWithUnmanaged("/a")), mrNamed("a", routestest.RuleWithUnmanaged("/b"))}
	if err := checkLimits(routes.HTTPRoute, r); err == nil || !strings.Contains(err.Error(), `rules 0 and 1 would both be named "a"`) {
		t.Errorf("error %v", err)
	}
}

// Header rules stand in the order of the Rollout's managedRoutes, after the
// user's rules, whatever order the steps come in; re-adding one puts it back
// in its place.
func TestAddedRulesFollowManagedRoutesOrder(t *testing.T) {
	in := RuleInput{RolloutServices: RolloutServices{Stable: wtStable, Canary: wtCanary, ManagedRoutes: []string{"a", "b", "c"}}}
	weighted := routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 100), routestest.Backend("web-canary", 0))
	static := routestest.RuleWithUnmanaged("/static", routestest.Backend("static", 1))
	r := wtRoute(weighted, static)
	var claimed []string
	add := func(set, header string) {
		t.Helper()
		claims := routes.Claims{"ns/demo": {Rules: claimed}}
		in.Claimed, in.Targeting.Added = claimed, claims.AddedRules()
		res, err := SetHeaderRules(r, in, set, mrMatch(exact(header, "yes")))
		if err != nil {
			t.Fatal(err)
		}
		r.Rules, claimed = res.Rules, res.Claimed
	}
	names := func() []string {
		var out []string
		for _, rule := range r.Rules {
			out = append(out, rule.Name())
		}
		return out
	}
	add("c", "X-C")
	add("a", "X-A")
	if diff := cmp.Diff([]string{"", "", "a", "c"}, names()); diff != "" {
		t.Errorf("after c then a (-want +got):\n%s", diff)
	}
	add("b", "X-B")
	if diff := cmp.Diff([]string{"", "", "a", "b", "c"}, names()); diff != "" {
		t.Errorf("after b (-want +got):\n%s", diff)
	}
	add("a", "X-A2") // a new match: a is replaced, in its place
	if diff := cmp.Diff([]string{"", "", "a", "b", "c"}, names()); diff != "" {
		t.Errorf("after re-adding a (-want +got):\n%s", diff)
	}
	if got := r.Rules[2]["matches"].([]any)[0].(map[string]any)["headers"].([]any)[0].(map[string]any)["name"]; got != "X-A2" {
		t.Errorf("rule a matches %v, want X-A2", got)
	}
	// A user rule someone appended after the plugin's rules stays where it is;
	// new rules go after it.
	user := mrNamed("late", routestest.RuleWithUnmanaged("/late", routestest.Backend("late", 1)))
	r.Rules = append(r.Rules, user)
	add("b", "X-B2")
	if diff := cmp.Diff([]string{"", "", "a", "c", "late", "b"}, names()); diff != "" {
		t.Errorf("after a user rule at the end (-want +got):\n%s", diff)
	}
}

// A new rule whose match ties with a rule that would come after it is
// refused: that rule would never be used again.
func TestAddedRuleTyingWithALaterRule(t *testing.T) {
	in := RuleInput{RolloutServices: RolloutServices{Stable: wtStable, Canary: wtCanary, ManagedRoutes: []string{"a", "b"}}, Claimed: []string{"b"}, Targeting: Targeting{Added: map[string]bool{"b": true}}}
	weighted := routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 100), routestest.Backend("web-canary", 0))
	b := mrHeaderRule("b", "/", mrHeader("X-Canary", "Exact", "yes"))
	_, err := SetHeaderRules(wtRoute(weighted, b), in, "a", mrMatch(exact("X-Canary", "yes")))
	if err == nil || !strings.Contains(err.Error(), `the same as a match of rule 2 ("b"), which would come after it`) {
		t.Errorf("error %v, want one naming the later rule b", err)
	}
}

func TestMirrorFilters(t *testing.T) {
	in := RuleInput{RolloutServices: RolloutServices{Stable: wtStable, Canary: wtCanary, ManagedRoutes: []string{"m", "n"}}}
	weighted := func(filters ...any) routes.Rule {
		r := routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 90), routestest.Backend("web-canary", 10))
		r["filters"] = append(r["filters"].([]any), filters...)
		return r
	}
	mirror := func(pct int64) map[string]any {
		return map[string]any{"type": "RequestMirror", "requestMirror": map[string]any{
			"backendRef": map[string]any{"group": "", "kind": "Service", "name": "web-canary", "port": int64(8080)}, "percent": pct}}
	}
	pct := func(p int32) *int32 { return &p }
	// A user's own mirror filter, equal to the one the plugin adds, stays.
	live := wtRoute(weighted(mirror(20)), routestest.RuleWithUnmanaged("/static", routestest.Backend("static", 1)))
	got, err := SetMirrorFilters(live, in, nil, "m", pct(20), true)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]routes.Rule{weighted(mirror(20), mirror(20)), live.Rules[1]}, got.Rules); diff != "" {
		t.Errorf("added (-want +got):\n%s", diff)
	}
	want := []routes.AddedFilter{{Entry: "m", Rule: 0, Filter: mirror(20), Others: 1}}
	if diff := cmp.Diff(want, got.Claimed); diff != "" {
		t.Errorf("claimed (-want +got):\n%s", diff)
	}
	// The claim as read back from the annotation (numbers as float64) finds it.
	var readBack routes.Claims
	if err := json.Unmarshal([]byte(routes.Claims{"ns/demo": {MirrorFilters: got.Claimed}}.Annotations()[routes.ClaimsAnnotation]), &readBack); err != nil {
		t.Fatal(err)
	}
	claimed := readBack["ns/demo"].MirrorFilters
	again, err := SetMirrorFilters(routes.Route{Ref: live.Ref, Rules: got.Rules}, in, claimed, "m", pct(20), true)
	if err != nil || len(again.Changes) != 0 {
		t.Errorf("the same step again: changes %v, err %v", again.Changes, err)
	}
	// Removal takes the plugin's one, not the user's.
	removed, err := SetMirrorFilters(routes.Route{Ref: live.Ref, Rules: got.Rules}, in, claimed, "m", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(live.Rules, removed.Rules); diff != "" || len(removed.Claimed) != 0 {
		t.Errorf("removal (-want +got):\n%s\nclaimed %v", diff, removed.Claimed)
	}
	// Another entry's filter stays when this one changes.
	other := []routes.AddedFilter{{Entry: "n", Rule: 0, Filter: mirror(5)}}
	withOther := wtRoute(weighted(mirror(5)))
	both, err := SetMirrorFilters(withOther, in, other, "m", pct(30), true)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]routes.Rule{weighted(mirror(5), mirror(30))}, both.Rules); diff != "" {
		t.Errorf("two entries (-want +got):\n%s", diff)
	}
	rules, changes := RemoveMirrorFilters(both.Rules, both.Claimed)
	if diff := cmp.Diff(wtRoute(weighted()).Rules, rules); diff != "" || len(changes) != 2 {
		t.Errorf("remove all (-want +got):\n%s\nchanges %v", diff, changes)
	}
	for name, tc := range map[string]struct {
		route routes.Route
		pct   *int32
		want  string
	}{
		"percentage over 100": {live, pct(101), "percentage 101 is outside 0..100"},
		"a TCPRoute":          {routes.Route{Ref: routes.Ref{Kind: routes.TCPRoute, Namespace: wtNS, Name: "db"}, Rules: live.Rules}, pct(10), "a TCPRoute has no filters"},
		"no weighted rule":    {wtRoute(routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 1))), pct(10), "has no rule whose backendRefs include both"},
	} {
		if _, err := SetMirrorFilters(tc.route, in, nil, "m", tc.pct, true); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", name, err, tc.want)
		}
	}
}

// A step value Gateway API validates only loosely is refused before any
// write, with an error naming the value and what is wrong with it.
func TestStepValuesAreChecked(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		wants []string
	}{
		{"unbalanced regex", CheckHeaderMatches([]HeaderMatch{{Name: "X-Canary", Value: &StringMatch{Regex: "(["}}}),
			[]string{"header X-Canary", `regex "(["`, "not a valid RE2"}},
		{"lookahead is not RE2", CheckHeaderMatches([]HeaderMatch{{Name: "X-Canary", Value: &StringMatch{Regex: "(?=yes)"}}}),
			[]string{`regex "(?=yes)"`, "RE2"}},
		{"backreference is not RE2", CheckRequestMatches([]RequestMatch{{Path: &StringMatch{Regex: `/(a)\1`}}}),
			[]string{"match 0", "path", "RE2"}},
		{"header name", CheckHeaderMatches([]HeaderMatch{{Name: "X Canary", Value: &StringMatch{Exact: "yes"}}}),
			[]string{`"X Canary" is not an HTTP header name`}},
		{"newline in value", CheckHeaderMatches([]HeaderMatch{exact("X-Canary", "yes\nX-Admin: true")}),
			[]string{"control character"}},
		{"white space around value", CheckHeaderMatches([]HeaderMatch{exact("X-Canary", " yes")}),
			[]string{"white space"}},
		{"value too long", CheckHeaderMatches([]HeaderMatch{exact("X-Canary", strings.Repeat("y", 4097))}),
			[]string{"4097 bytes", "4096"}},
		{"two values", CheckHeaderMatches([]HeaderMatch{{Name: "X-Canary", Value: &StringMatch{Exact: "a", Prefix: "b"}}}),
			[]string{"exactly one of exact, prefix and regex"}},
		{"mirror header regex", CheckRequestMatches([]RequestMatch{{Headers: map[string]StringMatch{"X-Mirror": {Regex: "*"}}}}),
			[]string{"header X-Mirror", `regex "*"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.wants {
				if !strings.Contains(tc.err.Error(), w) {
					t.Errorf("error %q does not say %q", tc.err, w)
				}
			}
		})
	}
	if err := CheckHeaderMatches([]HeaderMatch{{Name: "X-Canary", Value: &StringMatch{Regex: "^(yes|true)$"}}, {Name: "X-Beta", Value: &StringMatch{Prefix: "a.b"}}}); err != nil {
		t.Errorf("valid matches refused: %v", err)
	}
}

// The HTTPRoute paths and gRPC methods of a mirror step are checked as
// Gateway API checks them, on the route kind they go on.
func TestMirrorPathsAreChecked(t *testing.T) {
	for _, tc := range []struct {
		kind routes.Kind
		path StringMatch
		want string
	}{
		{routes.HTTPRoute, StringMatch{Exact: "api"}, "must start with /"},
		{routes.HTTPRoute, StringMatch{Prefix: "/api//v1"}, `must not contain "//"`},
		{routes.HTTPRoute, StringMatch{Exact: "/a/../b"}, `"/../"`},
		{routes.HTTPRoute, StringMatch{Prefix: "/a/."}, "must not end with"},
		{routes.HTTPRoute, StringMatch{Exact: "/a b"}, "percent-encode"},
		{routes.HTTPRoute, StringMatch{Regex: "/api/(v1"}, "RE2"},
		{routes.HTTPRoute, StringMatch{Exact: "/" + strings.Repeat("a", 1024)}, "1025 bytes"},
		{routes.GRPCRoute, StringMatch{Exact: "/my-service/Get"}, `gRPC service "my-service"`},
		{routes.GRPCRoute, StringMatch{Exact: "/pkg.Svc/Get-It"}, `gRPC method "Get-It"`},
		{routes.GRPCRoute, StringMatch{Regex: "/pkg.*"}, `or prefix /<service>/, not regex: "/pkg.*"`},
		{routes.GRPCRoute, StringMatch{Prefix: "/pkg.Svc/Get"}, `not prefix: "/pkg.Svc/Get"`},
	} {
		_, err := mirrorMatches(tc.kind, []RequestMatch{{Path: &tc.path}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s path %+v: error %v, want one saying %q", tc.kind, tc.path, err, tc.want)
		}
	}
	for _, ok := range []struct {
		kind routes.Kind
		path StringMatch
	}{{routes.HTTPRoute, StringMatch{Prefix: "/api/v1"}}, {routes.HTTPRoute, StringMatch{Regex: "^/api/v[0-9]+$"}}, {routes.GRPCRoute, StringMatch{Exact: "/pkg.v1.Svc/Get_It"}}, {routes.GRPCRoute, StringMatch{Prefix: "/pkg.Svc/"}}} {
		if _, err := mirrorMatches(ok.kind, []RequestMatch{{Path: &ok.path}}); err != nil {
			t.Errorf("%s path %+v refused: %v", ok.kind, ok.path, err)
		}
	}
}
