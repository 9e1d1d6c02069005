package desired

import (
	"fmt"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// Whose claim it is. A claim a cluster's Rollouts make on the cluster's own
// routes names no cluster: only that cluster's Rollouts write there. A call
// on the routes of a route cluster, where the members of a fleet run the
// same Rollout against one route, names its member: the name the fleet
// knows it by and the UID of its kube-system namespace, which no other
// cluster has. The UID tells a renamed member from another member, and two
// members given one name apart.

// whose says whether the Rollout's claim c on the route is the calling
// cluster's (env), or the same Rollout's of another member of a fleet; a
// claim the calling cluster made under another name, or another member
// made under the calling cluster's name, is an error. undo takes a claim
// of the calling cluster under its old name as its own.
func whose(ref routes.Ref, c routes.Claim, env Env, undo bool) (mine bool, err error) {
	switch {
	case env.Cluster == "":
		// A call on the cluster's own routes: a claim with a UID was made
		// through a route cluster, by another cluster's plugin.
		return c.ClusterUID == "", nil
	case c.Cluster == "" && c.ClusterUID == "":
		return true, nil // written before claims named their cluster
	case c.ClusterUID == "" || env.ClusterUID == "":
		return c.Cluster == env.Cluster, nil
	case c.ClusterUID == env.ClusterUID && c.Cluster != env.Cluster && !undo:
		return false, &ClusterRenamedError{Route: ref, Rollout: env.Rollout, Was: c.Cluster, Now: env.Cluster, Source: env.ClusterSource}
	case c.ClusterUID != env.ClusterUID && c.Cluster == env.Cluster:
		return false, &SharedClusterNameError{Route: ref, Rollout: env.Rollout, Cluster: env.Cluster, UIDs: [2]string{c.ClusterUID, env.ClusterUID}}
	}
	return c.ClusterUID == env.ClusterUID, nil
}

// ClusterRenamedError says the calling cluster made the Rollout's claim on
// the route under another name (Was) than the one it has now (Now, read
// from Source): the other members of the fleet know the claim by the old
// name, so the call leaves the route as it is.
type ClusterRenamedError struct {
	Route    routes.Ref
	Rollout  string
	Was, Now string
	Source   string
}

// Reason is the Event reason of the error (package events).
func (e *ClusterRenamedError) Reason() string { return "ClusterRenamed" }

func (e *ClusterRenamedError) Error() string {
	return fmt.Sprintf("%s: the name of this cluster changed from %s to %s (%s) since rollout %s made its claim on this route (the UID of kube-system is the same): "+
		"the claims name a member of a fleet, so the plugin left the route as it is; set -cluster-name back to %s "+
		"(a ClusterProperty cluster.clusterset.k8s.io wins over it: remove one that was installed since), "+
		"or take the claims of the old name back with rollouts-gatewayapi-ssa cleanup (docs/cleanup.md) and let the rollout start again",
		e.Route, e.Was, e.Now, e.Source, e.Rollout, e.Was)
}

// SharedClusterNameError says another member of a fleet, with another
// kube-system UID, made the Rollout's claim on the route under the calling
// cluster's name: two members share the name, so neither could tell its
// claims from the other's.
type SharedClusterNameError struct {
	Route   routes.Ref
	Rollout string
	Cluster string
	// UIDs are the claim's kube-system UID, then the calling cluster's.
	UIDs [2]string
}

// Reason is the Event reason of the error (package events).
func (e *SharedClusterNameError) Reason() string { return "ClusterNameShared" }

func (e *SharedClusterNameError) Error() string {
	return fmt.Sprintf("%s: two members of the fleet share the name %s (kube-system UIDs %s and %s): rollout %s of the other one has a claim on this route, "+
		"so this one left the route as it is; give each member its own name (its ClusterProperty cluster.clusterset.k8s.io, or -cluster-name)",
		e.Route, e.Cluster, e.UIDs[0], e.UIDs[1], e.Rollout)
}
