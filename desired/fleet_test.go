package desired

import (
	"testing"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes/routestest"
)

// inCluster is a call made by the plugin of a member cluster of a fleet.
func inCluster(name string) func(*Env) { return func(e *Env) { e.Cluster = name } }

// claimedBy checks which cluster the claim of rollout records on the route;
// it changes nothing.
type claimedBy struct{ rollout, cluster string }

func (o claimedBy) do(s *server) (bool, error) {
	s.t.Helper()
	claims, err := routes.ReadClaims(s.route)
	if err != nil {
		s.t.Fatal(err)
	}
	if got := claims[o.rollout].Cluster; got != o.cluster {
		s.t.Errorf("the claim of %s records cluster %q, want %q", o.rollout, got, o.cluster)
	}
	return false, nil
}

// A fleet runs the same Rollout (namespace and name) in several member
// clusters against one route: a member never takes the route while another
// member's rollout walks it, and walks once that one has ended.
func TestMembersOfAFleetDoNotTakeEachOthersRoute(t *testing.T) {
	fleetErr := new(*FleetConflictError)
	east, west := inCluster("east"), inCluster("west")
	runScenario(t, routes.HTTPRoute, []step{
		{create{kubectl, gitRules(100, 0)}, expect{owners: []string{kubectl}}},
		{call{c: setWeight(30), env: east}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true, weights: gitWeights(70, 30)}},
		{claimedBy{"shop/demo", "east"}, expect{owners: plugins, labels: inProgress, claims: true}},
		// west's Rollout starts its own walk: refused, naming east.
		{call{c: setWeight(10), env: west}, expect{owners: plugins, labels: inProgress, claims: true, weights: gitWeights(70, 30), errAs: fleetErr,
			err: []string{"rollout shop/demo of cluster east is in progress on this route", "this cluster (west)"}}},
		// The same weight is no way in either: the claim would be west's.
		{call{c: setWeight(30), env: west}, expect{owners: plugins, labels: inProgress, claims: true, errAs: fleetErr, err: []string{"cluster east"}}},
		{call{c: header("X-Canary", "yes"), env: west}, expect{owners: plugins, labels: inProgress, claims: true, errAs: fleetErr, err: []string{"cluster east"}}},
		// west has nothing to remove there: nothing is written, nothing refused.
		{call{c: RemoveManaged{}, env: west}, expect{owners: plugins, labels: inProgress, claims: true, weights: gitWeights(70, 30)}},
		// east ends; then west walks, and the claim is west's.
		{call{c: setWeight(0), env: east}, expect{wrote: true, weights: gitWeights(100, 0)}},
		{call{c: setWeight(10), env: west}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true, weights: gitWeights(90, 10)}},
		{claimedBy{"shop/demo", "west"}, expect{owners: plugins, labels: inProgress, claims: true}},
	})
}

// A claim written before claims named their cluster belongs to the next
// cluster that calls, so a rollout in progress across the plugin's upgrade
// goes on.
func TestAClaimWithoutAClusterIsTakenByTheNextCall(t *testing.T) {
	runScenario(t, routes.HTTPRoute, []step{
		{create{kubectl, gitRules(100, 0)}, expect{owners: []string{kubectl}}},
		{call{c: setWeight(30)}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{claimedBy{"shop/demo", ""}, expect{owners: plugins, labels: inProgress, claims: true}},
		{call{c: setWeight(60), env: inCluster("east")}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true, weights: gitWeights(40, 60)}},
		{claimedBy{"shop/demo", "east"}, expect{owners: plugins, labels: inProgress, claims: true}},
	})
}

// A Rollout with nothing on a route and nothing to set there leaves it
// untouched: on a route shared by Rollouts of several namespaces, its
// RemoveManagedRoutes must not put its own in-progress label on a route
// another Rollout walks.
func TestARolloutWithNothingOnARouteLeavesItUntouched(t *testing.T) {
	b := setWeight(20)
	b.Split.Stable, b.Split.Canary = svc("stable-b"), svc("canary-b")
	b.Experiment.Stable, b.Experiment.Canary = b.Split.Stable, b.Split.Canary
	rules := []routes.Rule{
		routestest.Rule("/a", routestest.BackendOn("stable", 80, 100), routestest.BackendOn("canary", 80, 0)),
		routestest.Rule("/b", routestest.BackendOn("stable-b", 80, 100), routestest.BackendOn("canary-b", 80, 0)),
	}
	teamB := map[string]string{"team-b/rollout": "on"}
	withTeamB := func(e *Env) { e.InProgressLabel = teamB }
	walked := map[string]int64{"0/stable": 100, "0/canary": 0, "1/stable-b": 80, "1/canary-b": 20}
	runScenario(t, routes.HTTPRoute, []step{
		{create{kubectl, rules}, expect{owners: []string{kubectl}}},
		{call{rollout: "team-b/demo", c: b, env: withTeamB}, expect{wrote: true, owners: plugins, labels: teamB, claims: true, weights: walked}},
		// shop/demo has nothing here: its calls that set nothing write nothing.
		{call{c: RemoveManaged{}}, expect{owners: plugins, labels: teamB, claims: true, weights: walked}},
		{call{c: header("", "")}, expect{owners: plugins, labels: teamB, claims: true, weights: walked}},
		{call{c: setWeight(0)}, expect{owners: plugins, labels: teamB, claims: true, weights: walked}},
		// Setting something is a write, as before, and keeps team-b's label.
		{call{c: setWeight(10)}, expect{wrote: true, owners: plugins, labels: map[string]string{"team-b/rollout": "on", "rollouts.argoproj.io/gatewayapi-canary": "in-progress"}, claims: true}},
	})
}
