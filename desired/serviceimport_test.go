package desired

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes/routestest"
)

// imported is a backendRef to the ServiceImport of a GKE fleet (multi-cluster
// Gateways) for a Service, as served.
func imported(name string, weight int64) map[string]any {
	return map[string]any{"group": "net.gke.io", "kind": "ServiceImport", "name": name, "port": int64(80), "weight": weight}
}

// A whole rollout on a route that reaches its Services through ServiceImports,
// as GKE's multi-cluster Gateways do: the weights move on the imports, the
// experiment's Services come as imports of the same group, the header rule
// sends to the canary's import, the mirror rule sends to stable's import and
// mirrors to the canary's, and the end leaves the route as Git had it.
func TestRolloutOnServiceImports(t *testing.T) {
	git := func(stable, canary int64) []routes.Rule {
		return []routes.Rule{routestest.Rule("/", imported("stable", stable), imported("canary", canary)), routestest.Rule("/static", routestest.BackendOn("static", 80, 1))}
	}
	withRules := func(first routes.Rule, more ...routes.Rule) []routes.Rule {
		return append([]routes.Rule{first, routestest.Rule("/static", routestest.BackendOn("static", 80, 1))}, more...)
	}
	headerRule := routes.Rule{"name": "beta", "backendRefs": []any{imported("canary", 1)},
		"matches": []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/"},
			"headers": []any{map[string]any{"name": "X-Canary", "type": "Exact", "value": "yes"}}}}}
	mirrorRule := routes.Rule{"name": "mirror", "backendRefs": []any{imported("stable", 1)},
		"matches": []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/api"}}},
		"filters": []any{map[string]any{"type": "RequestMirror", "requestMirror": map[string]any{
			"backendRef": map[string]any{"group": "net.gke.io", "kind": "ServiceImport", "name": "canary", "port": int64(80)},
			"percent":    int64(20)}}}}
	runScenario(t, routes.HTTPRoute, []step{
		{create{kubectl, git(100, 0)}, expect{owners: []string{kubectl}}},
		{call{c: setWeight(30)}, expect{rules: git(70, 30), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: withExperiment(30, "baseline", 10)}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true,
			rules: withRules(routestest.Rule("/", imported("stable", 60), imported("canary", 30), imported("baseline", 10)))}},
		{call{c: setWeight(30)}, expect{rules: git(70, 30), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: header("X-Canary", "yes")}, expect{rules: append(git(70, 30), headerRule), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: RemoveManaged{}}, expect{rules: git(70, 30), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: mirror(20, "/api")}, expect{rules: append(git(70, 30), mirrorRule), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: RemoveManaged{}}, expect{rules: git(70, 30), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: setWeight(100)}, expect{rules: git(0, 100), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		// A rollout ends with the plugin owning nothing: the route is Git's again.
		{call{c: setWeight(0)}, expect{rules: git(100, 0), wrote: true}},
	})
}

// A rule that names a Service both as itself and as its ServiceImport cannot
// be split: the plugin refuses, naming both backendRefs, and writes nothing.
func TestAServiceAndItsImportInOneRule(t *testing.T) {
	runScenario(t, routes.HTTPRoute, []step{
		{create{kubectl, []routes.Rule{routestest.Rule("/", routestest.BackendOn("stable", 80, 100), imported("stable", 0), imported("canary", 0))}}, expect{owners: []string{kubectl}}},
		{call{c: setWeight(30)}, expect{owners: []string{kubectl}, errAs: new(*InvalidError), err: []string{
			"rule 0 sends to Service shop/stable through 2 backendRefs (Service shop/stable, ServiceImport.net.gke.io shop/stable)",
			"keep one backendRef per Service: the Service or its ServiceImport, not both"}}},
	})
}

// withImports is a call checked against the ServiceImports in have: asked
// records every ServiceImport the check asked about.
type withImports struct {
	c     Intent
	have  map[string]bool // ServiceImport names
	fail  error
	asked *[]string
}

func (o withImports) do(s *server) (bool, error) {
	return call{c: checked{c: o.c, imported: func(ref routes.ObjectRef) (bool, error) {
		*o.asked = append(*o.asked, ref.String())
		return o.have[ref.Name], o.fail
	}}}.do(s)
}

// An experiment step on a route of ServiceImports adds each experiment
// Service as a ServiceImport only once the route's cluster has it: until
// then the step fails naming the missing import and what to export, and
// writes nothing; an import the claim already records is not asked again.
func TestExperimentNeedsItsServiceImports(t *testing.T) {
	var asked []string
	experimentStep := withExperiment(30, "baseline", 10, "candidate", 10)
	withExp := []routes.Rule{routestest.Rule("/", imported("stable", 50), imported("canary", 30), imported("baseline", 10), imported("candidate", 10))}
	runScenario(t, routes.HTTPRoute, []step{
		{create{kubectl, []routes.Rule{routestest.Rule("/", imported("stable", 100), imported("canary", 0))}}, expect{owners: []string{kubectl}}},
		{withImports{c: experimentStep, have: map[string]bool{"candidate": true}, asked: &asked}, expect{owners: []string{kubectl}, errAs: new(*MissingImportError), err: []string{
			"HTTPRoute shop/route: rollout shop/demo: the experiment's Service shop/baseline would be added as ServiceImport.net.gke.io shop/baseline",
			"the route's cluster has no such ServiceImport; nothing was written",
			"a ServiceExport named baseline in namespace shop"}}},
		{withImports{c: experimentStep, fail: errors.New("forbidden"), asked: &asked}, expect{owners: []string{kubectl}, err: []string{
			"HTTPRoute shop/route: rollout shop/demo: checking that the experiment's ServiceImport.net.gke.io shop/baseline exists: forbidden"}}},
		{withImports{c: experimentStep, have: map[string]bool{"candidate": true, "baseline": true}, asked: &asked},
			expect{rules: withExp, wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{withImports{c: withExperiment(20, "baseline", 10, "candidate", 10), asked: &asked},
			expect{wrote: true, owners: plugins, labels: inProgress, claims: true,
				rules: []routes.Rule{routestest.Rule("/", imported("stable", 60), imported("canary", 20), imported("baseline", 10), imported("candidate", 10))}}},
		{withImports{c: setWeight(0), asked: &asked}, expect{rules: []routes.Rule{routestest.Rule("/", imported("stable", 100), imported("canary", 0))}, wrote: true}},
	})
	b, c := "ServiceImport.net.gke.io shop/baseline", "ServiceImport.net.gke.io shop/candidate"
	if diff := cmp.Diff([]string{b, b, b, c}, asked); diff != "" {
		t.Errorf("ServiceImports asked about (-want +got):\n%s", diff)
	}
}
