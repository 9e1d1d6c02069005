package routes

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func canaryOnly(header string) Rule {
	return Rule{
		"matches":     []any{map[string]any{"headers": []any{map[string]any{"name": "X-Canary", "type": "Exact", "value": header}}}},
		"backendRefs": []any{map[string]any{"group": "", "kind": "Service", "name": "canary", "port": int64(80), "weight": int64(1)}},
	}
}

// The view names exactly the rules whose digest a claim records: the last
// equal one when the route holds two (the plugin puts its rules last), not a
// lookalike with another value, not one someone changed; the route itself
// is left as it was.
func TestNamedFindsUnnamedRulesByDigest(t *testing.T) {
	weighted := Rule{"backendRefs": []any{map[string]any{"name": "stable"}, map[string]any{"name": "canary"}}}
	mine, other := canaryOnly("yes"), canaryOnly("beta")
	r := Route{Ref: Ref{Kind: HTTPRoute, Namespace: "shop", Name: "web"},
		Rules: []Rule{weighted, canaryOnly("yes"), canaryOnly("preview"), mine, other}}
	before := r.DeepCopy()
	claims := Claims{
		"shop/a": {Rules: []string{"beta"}, Unnamed: []string{"beta"}, RuleDigests: map[string]string{"beta": RuleDigest(mine)}},
		"shop/b": {Rules: []string{"gamma", "gone"}, Unnamed: []string{"gamma", "gone"},
			RuleDigests: map[string]string{"gamma": RuleDigest(other), "gone": RuleDigest(canaryOnly("gone"))}},
	}
	view, located, err := claims.Named(r)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]bool{"beta": true, "gamma": true}, located); diff != "" {
		t.Errorf("located (-want +got):\n%s", diff)
	}
	var names []string
	for _, rule := range view.Rules {
		names = append(names, rule.Name())
	}
	if diff := cmp.Diff([]string{"", "", "", "beta", "gamma"}, names); diff != "" {
		t.Errorf("names in the view (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, r); diff != "" {
		t.Errorf("Named changed the route (-before +after):\n%s", diff)
	}
	// A claim with no unnamed rules gives the route back as it is.
	if v, located, err := (Claims{"shop/a": {Rules: []string{"beta"}}}).Named(r); err != nil || located != nil || !cmp.Equal(v, r) {
		t.Errorf("no unnamed rules: located %v, err %v, view changed: %v", located, err, !cmp.Equal(v, r))
	}
}

// After the CRDs gain rule names, a rule named like one the plugin added
// without a name is someone else's: refused, never taken for the plugin's.
func TestNamedRefusesARuleThatTookTheName(t *testing.T) {
	taken := canaryOnly("yes")
	taken["name"] = "beta"
	r := Route{Ref: Ref{Kind: HTTPRoute, Namespace: "shop", Name: "web"}, Rules: []Rule{canaryOnly("no"), taken}}
	claims := Claims{"shop/a": {Rules: []string{"beta"}, Unnamed: []string{"beta"}, RuleDigests: map[string]string{"beta": RuleDigest(canaryOnly("yes"))}}}
	_, _, err := claims.Named(r)
	if err == nil || !strings.Contains(err.Error(), `HTTPRoute shop/web: rule 1 is named "beta", the name the plugin gave a rule it added without a name for rollout shop/a; rename rule 1`) {
		t.Errorf("error %v", err)
	}
}
