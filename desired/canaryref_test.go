package desired

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes/routestest"
)

// Routes whose rule lists only the stable Service (addCanaryBackendRef).

// stableOnlyRules is a route as Git keeps it: the stable Service alone, at
// the default weight, and a static rule.
func stableOnlyRules() []routes.Rule {
	return []routes.Rule{
		routestest.Rule("/", routestest.BackendOn("stable", 80, 1)),
		routestest.Rule("/static", routestest.BackendOn("static", 80, 1)),
	}
}

// withCanary is stableOnlyRules with the canary's backendRef as the plugin
// adds it, and the weights given.
func withCanary(stable, canary int64) []routes.Rule {
	return []routes.Rule{
		routestest.Rule("/", routestest.BackendOn("stable", 80, stable), routestest.BackendOn("canary", 80, canary)),
		routestest.Rule("/static", routestest.BackendOn("static", 80, 1)),
	}
}

func addCanary(e *Env) { e.AddCanaryBackendRef = true }

func TestAddCanaryBackendRefWalk(t *testing.T) {
	withHeader := func(stable, canary int64) map[string]int64 {
		return map[string]int64{"0/stable": stable, "0/canary": canary, "1/static": 1, "2:beta/canary": 1}
	}
	on := inProgress
	runScenario(t, routes.HTTPRoute, []step{
		{create{kubectl, stableOnlyRules()}, expect{owners: []string{kubectl}}},
		// The rollout starts at 0: nothing to add, nothing written.
		{call{c: setWeight(0), env: addCanary}, expect{owners: []string{kubectl}, rules: stableOnlyRules()}},
		{call{c: setWeight(30), env: addCanary}, expect{wrote: true, owners: plugins, labels: on, claims: true, rules: withCanary(70, 30)}},
		// Header steps find the rule weighted while the canary's backendRef is there.
		{call{c: header("X-Canary", "yes"), env: addCanary}, expect{wrote: true, owners: plugins, labels: on, claims: true}},
		{call{c: setWeight(30), env: addCanary}, expect{weights: withHeader(70, 30), owners: plugins, labels: on, claims: true}},
		{call{c: RemoveManaged{}, env: addCanary}, expect{wrote: true, owners: plugins, labels: on, claims: true, rules: withCanary(70, 30)}},
		{call{c: setWeight(100), env: addCanary}, expect{wrote: true, owners: plugins, labels: on, claims: true, rules: withCanary(0, 100)}},
		// The end: the route is as Git wrote it, and nobody owns its rules.
		{call{c: setWeight(0), env: addCanary}, expect{wrote: true, rules: stableOnlyRules()}},
		{call{c: setWeight(0), env: addCanary}, expect{rules: stableOnlyRules()}},
	})
}

func TestAddCanaryBackendRefWithAnExperiment(t *testing.T) {
	exp := []routes.Rule{
		routestest.Rule("/", routestest.BackendOn("stable", 80, 70), routestest.BackendOn("canary", 80, 0),
			routestest.BackendOn("baseline", 80, 5), routestest.BackendOn("exp-canary", 80, 25)),
		routestest.Rule("/static", routestest.BackendOn("static", 80, 1)),
	}
	runScenario(t, routes.HTTPRoute, []step{
		{create{kubectl, stableOnlyRules()}, expect{owners: []string{kubectl}}},
		{call{c: withExperiment(0, "baseline", 5, "exp-canary", 25), env: addCanary}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true, rules: exp}},
		{call{c: setWeight(20), env: addCanary}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true, rules: withCanary(80, 20)}},
		{call{c: setWeight(0), env: addCanary}, expect{wrote: true, rules: stableOnlyRules()}},
	})
	// An experiment that ends the rollout: its backends and the canary's go at once.
	runScenario(t, routes.HTTPRoute, []step{
		{create{kubectl, stableOnlyRules()}, expect{owners: []string{kubectl}}},
		{call{c: withExperiment(0, "baseline", 5, "exp-canary", 25), env: addCanary}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true, rules: exp}},
		{call{c: setWeight(0), env: addCanary}, expect{wrote: true, rules: stableOnlyRules()}},
	})
}

func TestAddCanaryBackendRefConflicts(t *testing.T) {
	removeCanary := func(r []routes.Rule) { r[0]["backendRefs"] = r[0]["backendRefs"].([]any)[:1] }
	runScenario(t, routes.HTTPRoute, []step{
		{create{kubectl, stableOnlyRules()}, expect{owners: []string{kubectl}}},
		{call{c: setWeight(30), env: addCanary}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true, rules: withCanary(70, 30)}},
		// Someone takes the canary's backendRef out mid-rollout: a conflict, as for any value the plugin set.
		{update{argocd, removeCanary}, expect{owners: []string{argocd}, labels: inProgress, claims: true}},
		{call{c: setWeight(50), env: addCanary}, expect{owners: []string{argocd}, labels: inProgress, claims: true, errAs: new(*ConflictError),
			err: []string{"spec.rules was changed by " + argocd, "Service shop/canary weight: the plugin set 30, now removed, the plugin would set 50"}}},
		// conflictPolicy: Force adds it again; the end still restores the weight stable had first.
		{call{c: setWeight(50), env: func(e *Env) { addCanary(e); force(e) }}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true, rules: withCanary(50, 50)}},
		{call{c: setWeight(0), env: addCanary}, expect{wrote: true, rules: stableOnlyRules()}},
	})
}

func TestAddCanaryBackendRefTargeting(t *testing.T) {
	named := func(r routes.Rule, name string) routes.Rule { r["name"] = name; return r }
	begin := []routes.Rule{
		named(routestest.Rule("/", routestest.BackendOn("stable", 80, 1)), "main"),
		named(routestest.Rule("/other", routestest.BackendOn("stable", 80, 1)), "other"),
	}
	during := routes.CopyRules(begin)
	during[0] = named(routestest.Rule("/", routestest.BackendOn("stable", 80, 90), routestest.BackendOn("canary", 80, 10)), "main")
	main := func(e *Env) { addCanary(e); e.RuleName = "main" }
	runScenario(t, routes.HTTPRoute, []step{
		{create{kubectl, begin}, expect{owners: []string{kubectl}}},
		{call{c: setWeight(10), env: main}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true, rules: during}},
		{call{c: setWeight(0), env: main}, expect{wrote: true, rules: begin}},
	})
}

func TestAddCanaryBackendRefUndoAndOff(t *testing.T) {
	runScenario(t, routes.HTTPRoute, []step{
		{create{kubectl, stableOnlyRules()}, expect{owners: []string{kubectl}}},
		// Without the key, a route with only stable is refused, naming it.
		{call{c: setWeight(30)}, expect{owners: []string{kubectl}, errAs: new(*InvalidError), err: []string{"or set addCanaryBackendRef: true"}}},
		{call{c: withExperiment(30, "baseline", 5), env: addCanary}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true}},
		// The Rollout is deleted: cleanup takes the canary's backendRef back too.
		{call{c: Undo{}}, expect{wrote: true, rules: stableOnlyRules()}},
	})
}

// A claim written before canaryRefs existed reads and writes back the same.
func TestOldClaimsDecodeUnchanged(t *testing.T) {
	old := `{"shop/demo":{"canaryWeight":30,"weights":[{"rule":0,"service":"shop/stable","weight":70},{"rule":0,"service":"shop/canary","weight":30}]}}`
	claims, err := routes.ReadClaims(routes.Route{Annotations: map[string]string{routes.ClaimsAnnotation: old}})
	if err != nil {
		t.Fatal(err)
	}
	want := routes.Claims{"shop/demo": {CanaryWeight: 30, Weights: []routes.RecordedWeight{
		{Rule: 0, Service: "shop/stable", Weight: 70}, {Rule: 0, Service: "shop/canary", Weight: 30}}}}
	if diff := cmp.Diff(want, claims); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{routes.ClaimsAnnotation: old}, claims.Annotations()); diff != "" {
		t.Errorf("annotation (-want +got):\n%s", diff)
	}
}
