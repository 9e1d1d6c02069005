package desired

import (
	"testing"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes/routestest"
)

// oldHeaderRule is the header rule the argoproj-labs/gatewayAPI plugin adds
// for the weighted rule of gitRules: its match with the header added, and
// the canary alone (the CRD defaults its weight to 1); named from its
// v0.13 on, unnamed before.
func oldHeaderRule(name string) routes.Rule {
	r := routestest.Rule("/", routestest.BackendOn("canary", 80, 1))
	r["matches"] = []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/"},
		"headers": []any{map[string]any{"type": "Exact", "name": "X-Canary", "value": "yes"}}}}
	if name != "" {
		r["name"] = name
	}
	return r
}

// fromPredecessor is a call's env with what the old plugin recorded.
func fromPredecessor(p Predecessor) func(*Env) {
	return func(e *Env) {
		p.Canary, p.Manager = svc("canary"), "gatewayAPI"
		e.Predecessor = &p
	}
}

// The binary is swapped mid-rollout: the argoproj-labs plugin has set 70/30
// and added a header rule for entry beta. This plugin adopts the rule at the
// Rollout's first call, so RemoveManagedRoutes takes it away and the route
// ends as it began.
func TestTheOldPluginsHeaderRulesAreAdoptedAndRemoved(t *testing.T) {
	midRollout := func(header ...routes.Rule) []routes.Rule { return append(gitRules(70, 30), header...) }
	for name, tc := range map[string]struct {
		header []routes.Rule
		p      Predecessor
	}{
		"up to v0.12: unnamed, listed in its ConfigMap": {[]routes.Rule{oldHeaderRule("")},
			Predecessor{Entries: []string{"beta"}, Indexes: map[string]int{"beta": 2}, ConfigMap: "argo-gatewayapi-configmap"}},
		"from v0.13: named after the entry": {[]routes.Rule{oldHeaderRule("beta")}, Predecessor{Entries: []string{"beta"}}},
		"from v0.13, a rule per weighted rule: <entry> and <entry>-1": {[]routes.Rule{oldHeaderRule("beta"), oldHeaderRule("beta-1")},
			Predecessor{Entries: []string{"beta", "alpha"}}},
	} {
		t.Run(name, func(t *testing.T) {
			adopted := fromPredecessor(tc.p)
			runScenario(t, routes.HTTPRoute, []step{
				{create{"gatewayAPI", midRollout(tc.header...)}, expect{owners: []string{"gatewayAPI"}}},
				{call{c: setWeight(60), env: adopted}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true,
					rules: append(gitRules(40, 60), tc.header...)}},
				// Adopted once: the next calls find the claim.
				{call{c: RemoveManaged{}, env: adopted}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true, rules: gitRules(40, 60)}},
				{call{c: setWeight(0), env: adopted}, expect{wrote: true, rules: gitRules(100, 0)}},
			})
		})
	}
}

// Only what the old plugin recorded as its own is adopted: a rule that
// sends elsewhere than the canary alone, one named after no entry of the
// Rollout, an index its ConfigMap gives for another entry, or anything at
// all once the Rollout has a claim on the route stays where it is.
func TestOnlyTheOldPluginsOwnRulesAreAdopted(t *testing.T) {
	toBoth := routestest.Rule("/both", routestest.BackendOn("canary", 80, 1), routestest.BackendOn("static", 80, 1))
	toBoth["name"] = "beta"
	others := []routes.Rule{toBoth, oldHeaderRule("gamma"), oldHeaderRule("")}
	start := append(gitRules(70, 30), others...)
	p := fromPredecessor(Predecessor{Entries: []string{"beta"}, Indexes: map[string]int{"alpha": 4, "beta": 0}, ConfigMap: "argo-gatewayapi-configmap"})
	runScenario(t, routes.HTTPRoute, []step{
		{create{"gatewayAPI", start}, expect{owners: []string{"gatewayAPI"}}},
		{call{c: setWeight(60), env: p}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true, rules: append(gitRules(40, 60), others...)}},
		{call{c: RemoveManaged{}, env: p}, expect{owners: plugins, labels: inProgress, claims: true, rules: append(gitRules(40, 60), others...)}},
	})

	// A rule named after the entry that the old plugin did not write last:
	// someone's own, or changed by someone else since.
	for _, writer := range []op{create{kubectl, append(gitRules(75, 25), oldHeaderRule("beta"))},
		forceApply{argocd, append(gitRules(75, 25), oldHeaderRule("beta"))}} {
		runScenario(t, routes.HTTPRoute, []step{
			{create{"gatewayAPI", append(gitRules(70, 30), oldHeaderRule("beta"))}, expect{owners: []string{"gatewayAPI"}}},
			{writer, expect{owners: []string{managerOf(writer)}}},
			{call{c: setWeight(60), env: fromPredecessor(Predecessor{Entries: []string{"beta"}})},
				expect{wrote: true, owners: plugins, labels: inProgress, claims: true, rules: append(gitRules(40, 60), oldHeaderRule("beta"))}},
			{call{c: RemoveManaged{}, env: fromPredecessor(Predecessor{Entries: []string{"beta"}})},
				expect{owners: plugins, labels: inProgress, claims: true, rules: append(gitRules(40, 60), oldHeaderRule("beta"))}},
		})
	}

	// A Rollout that already has a claim on the route adopts nothing.
	runScenario(t, routes.HTTPRoute, []step{
		{create{kubectl, gitRules(100, 0)}, expect{owners: []string{kubectl}}},
		{call{c: setWeight(30)}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{update{"gatewayAPI", func(r []routes.Rule) {}}, expect{owners: plugins, labels: inProgress, claims: true}},
		{forceApply{"old-plugin-by-hand", append(gitRules(70, 30), oldHeaderRule("beta"))}, expect{owners: []string{"old-plugin-by-hand"}, labels: inProgress, claims: true}},
		{call{c: RemoveManaged{}, env: fromPredecessor(Predecessor{Entries: []string{"beta"}})},
			expect{owners: []string{"old-plugin-by-hand"}, labels: inProgress, claims: true, rules: append(gitRules(70, 30), oldHeaderRule("beta"))}},
	})
}

// managerOf is the manager of a create or forceApply.
func managerOf(o op) string {
	switch o := o.(type) {
	case create:
		return o.manager
	case forceApply:
		return o.manager
	}
	return ""
}
