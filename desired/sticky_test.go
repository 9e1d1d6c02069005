package desired

import (
	"fmt"
	"testing"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/transform"
)

// sticky is SetWeight(w) with stickyCanary, the canary at revision canaryHash.
func sticky(w int64, canaryHash string) SetWeight {
	c := setWeight(w)
	c.Sticky = &transform.Sticky{Cookie: "shop", MaxAge: 600, StableHash: "aaa", CanaryHash: canaryHash, RuleBase: "demo-sticky"}
	return c
}

// withCookieRules is the weights with the cookie rules after the others,
// the first at index at, and the named rules before them (weight 1).
func withCookieRules(stable, canary int64, at int, before ...string) map[string]int64 {
	m := gitWeights(stable, canary)
	for _, n := range before {
		m[n] = 1
	}
	m[fmt.Sprintf("%d:demo-sticky-canary/canary", at)] = 1
	m[fmt.Sprintf("%d:demo-sticky-stable/stable", at+1)] = 1
	return m
}

// A Rollout with stickyCanary, as the controller drives it: the cookies come
// with the weight (one write), stay through repeated calls and
// RemoveManagedRoutes (no write), a header rule goes before the cookie
// rules, a new canary revision changes the canary cookie, someone removing a
// cookie filter is a conflict, and at weight 0 everything the plugin added
// is gone and the route is as in Git.
func TestStickyScenario(t *testing.T) {
	runScenario(t, routes.HTTPRoute, []step{
		{create{kubectl, gitRules(100, 0)}, expect{owners: []string{kubectl}}},
		{call{c: sticky(20, "bbb")}, expect{weights: withCookieRules(80, 20, 2), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: sticky(20, "bbb")}, expect{weights: withCookieRules(80, 20, 2), owners: plugins, labels: inProgress, claims: true}},
		{call{c: RemoveManaged{}}, expect{weights: withCookieRules(80, 20, 2), owners: plugins, labels: inProgress, claims: true}},
		{call{c: header("X-Canary", "yes")}, expect{weights: withCookieRules(80, 20, 3, "2:beta/canary"), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: sticky(20, "ccc")}, expect{weights: withCookieRules(80, 20, 3, "2:beta/canary"), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{update{"kubectl-edit", func(r []routes.Rule) { delete(r[0]["backendRefs"].([]any)[1].(map[string]any), "filters") }},
			expect{owners: []string{"kubectl-edit"}, labels: inProgress, claims: true}},
		{call{c: sticky(30, "ccc")}, expect{owners: []string{"kubectl-edit"}, labels: inProgress, claims: true, errAs: new(*ConflictError),
			err: []string{"sticky cookie filter on Service shop/canary in rule 0: removed or changed since the plugin added it"}}},
		{call{c: sticky(30, "ccc"), env: force}, expect{weights: withCookieRules(70, 30, 3, "2:beta/canary"), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: RemoveManaged{}}, expect{weights: withCookieRules(70, 30, 2), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: sticky(0, "ccc")}, expect{rules: gitRules(100, 0), wrote: true}},
	})
}

// At 100 % the cookies go as at 0; Undo (cleanup of a deleted Rollout) takes
// them back too.
func TestStickyLeavesAtTheWholeAndByUndo(t *testing.T) {
	runScenario(t, routes.HTTPRoute, []step{
		{create{kubectl, gitRules(100, 0)}, expect{owners: []string{kubectl}}},
		{call{c: sticky(20, "bbb")}, expect{weights: withCookieRules(80, 20, 2), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: sticky(100, "bbb")}, expect{rules: gitRules(0, 100), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: sticky(20, "bbb")}, expect{weights: withCookieRules(80, 20, 2), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: Undo{}}, expect{rules: gitRules(100, 0), wrote: true}},
	})
}
