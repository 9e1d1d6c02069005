package desired

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// Whose claim a call finds on a route: the claim shop/demo recorded at 30%,
// then SetWeight(60) from a cluster named as env says, and the whole Result
// or the whole error.
func TestWhoseClaimItIs(t *testing.T) {
	recorded := func(cluster, uid string) routes.Claim {
		return routes.Claim{Cluster: cluster, ClusterUID: uid, CanaryWeight: 30,
			Weights: []routes.RecordedWeight{{Rule: 0, Service: "shop/stable", Weight: 70}, {Rule: 0, Service: "shop/canary", Weight: 30}}}
	}
	member := func(name, uid string) Env {
		return Env{Cluster: name, ClusterUID: uid, ClusterSource: "-cluster-name"}
	}
	ref := routes.Ref{Kind: routes.HTTPRoute, Namespace: ns, Name: "route"}
	walked := func(cluster, uid string) *Result {
		claim := routes.Claim{Cluster: cluster, ClusterUID: uid, CanaryWeight: 60,
			Weights: []routes.RecordedWeight{{Rule: 0, Service: "shop/stable", Weight: 40}, {Rule: 0, Service: "shop/canary", Weight: 60}}}
		return &Result{
			Rules:       gitRules(40, 60),
			Labels:      inProgress,
			Annotations: routes.Claims{"shop/demo": claim}.Annotations(),
			Claim:       claim,
			Changes: []routes.Change{
				routes.Changef(routes.WeightChanged, "rule 0 Service shop/stable 70→40"), routes.Changef(routes.WeightChanged, "rule 0 Service shop/canary 30→60"),
				routes.Changef(routes.Bookkeeping, "label rollouts.argoproj.io/gatewayapi-canary set"),
				routes.Changef(routes.Bookkeeping, "annotation gatewayapi-ssa.dev/claims set")},
		}
	}
	for _, tc := range []struct {
		name  string
		claim routes.Claim
		env   Env
		want  *Result
		err   error
	}{
		{name: "a call on the cluster's own route names no cluster",
			claim: recorded("", ""), env: Env{}, want: walked("", "")},
		{name: "a call on the cluster's own route adopts a claim that named it before, without the name",
			claim: recorded("1b4f0e9c", ""), env: Env{}, want: walked("", "")},
		{name: "a call on the cluster's own route leaves a fleet member's claim there",
			claim: recorded("east", "uid-east"), env: Env{},
			err: &FleetConflictError{Route: ref, Rollout: "shop/demo", Walking: "east"}},
		{name: "a member adopts a claim that names no cluster (written before claims did)",
			claim: recorded("", ""), env: member("east", "uid-east"), want: walked("east", "uid-east")},
		{name: "a member adopts a claim of its name without a UID (written before claims had one)",
			claim: recorded("east", ""), env: member("east", "uid-east"), want: walked("east", "uid-east")},
		{name: "a member walks on with its own claim",
			claim: recorded("east", "uid-east"), env: member("east", "uid-east"), want: walked("east", "uid-east")},
		{name: "a claim of another name without a UID is another member's",
			claim: recorded("west", ""), env: member("east", "uid-east"),
			err: &FleetConflictError{Route: ref, Rollout: "shop/demo", Cluster: "east", Walking: "west"}},
		{name: "a claim of another name and UID is another member's",
			claim: recorded("west", "uid-west"), env: member("east", "uid-east"),
			err: &FleetConflictError{Route: ref, Rollout: "shop/demo", Cluster: "east", Walking: "west"}},
		{name: "a renamed member is refused",
			claim: recorded("east", "uid-east"), env: Env{Cluster: "eu-east", ClusterUID: "uid-east", ClusterSource: "ClusterProperty cluster.clusterset.k8s.io"},
			err: &ClusterRenamedError{Route: ref, Rollout: "shop/demo", Was: "east", Now: "eu-east", Source: "ClusterProperty cluster.clusterset.k8s.io"}},
		{name: "two members of one name are refused",
			claim: recorded("east", "uid-west"), env: member("east", "uid-east"),
			err: &SharedClusterNameError{Route: ref, Rollout: "shop/demo", Cluster: "east", UIDs: [2]string{"uid-west", "uid-east"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := routes.Route{Ref: ref, Version: "v1", Rules: gitRules(70, 30),
				Annotations: routes.Claims{"shop/demo": tc.claim}.Annotations()}
			env := tc.env
			env.Rollout, env.FieldManager, env.InProgressLabel = "shop/demo", plugin, inProgress
			got, err := setWeight(60).Desired(live, env)
			if diff := cmp.Diff(tc.err, err); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if tc.want != nil {
				if diff := cmp.Diff(*tc.want, got); diff != "" {
					t.Errorf("Result (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// cleanup takes back a claim its cluster made under an earlier name (the
// UID is the same), which the plugin's calls refuse: that is how a renamed
// member gets its Rollouts going again.
func TestUndoTakesBackTheClaimOfARenamedMember(t *testing.T) {
	claim := routes.Claim{Cluster: "east", ClusterUID: "uid-east", CanaryWeight: 30,
		Weights: []routes.RecordedWeight{{Rule: 0, Service: "shop/stable", Weight: 70}, {Rule: 0, Service: "shop/canary", Weight: 30}}}
	live := routes.Route{Ref: routes.Ref{Kind: routes.HTTPRoute, Namespace: ns, Name: "route"}, Version: "v1", Rules: gitRules(70, 30),
		Annotations: routes.Claims{"shop/demo": claim}.Annotations()}
	env := Env{Rollout: "shop/demo", FieldManager: plugin, Cluster: "eu-east", ClusterUID: "uid-east"}
	got, err := Undo{}.Desired(live, env)
	if err != nil {
		t.Fatal(err)
	}
	want := Result{Rules: gitRules(100, 0), Release: true, Changes: []routes.Change{
		routes.Changef(routes.WeightChanged, "rule 0 Service shop/stable 70→100"), routes.Changef(routes.WeightChanged, "rule 0 Service shop/canary 30→0")}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Result (-want +got):\n%s", diff)
	}
	// Another member's claim of the same name stays refused.
	env.Cluster, env.ClusterUID = "east", "uid-west"
	if _, err := (Undo{}).Desired(live, env); err == nil {
		t.Error("cleanup of another member of the same name took the claim back")
	}
}
