package rollout

import (
	"fmt"
	"slices"
	"strings"
)

// RouteCluster is a cluster, besides the one the controller runs in, whose
// routes the platform team lets Rollouts have the plugin write: a config
// cluster (GKE fleets, AWS Lattice, Cilium ClusterMesh), reached with a
// kubeconfig file the platform team mounts (from a Secret). A Rollout names
// it with the config key "cluster"; it can name no credentials itself.
type RouteCluster struct {
	Name       string
	Kubeconfig string
	// Namespaces are the route namespaces Rollouts may reach there; "*"
	// lets them reach every one.
	Namespaces []string
}

// AnyNamespace in a route cluster's namespaces lets Rollouts reach every
// namespace there.
const AnyNamespace = "*"

// ClusterError says a Rollout names a route cluster, or a namespace in one,
// that the platform team has not configured. Nothing is read or written.
type ClusterError struct {
	Cluster   string
	Namespace string
	// Known are the configured route clusters; Allowed the namespaces of
	// Cluster, when it is one of them.
	Known   []string
	Allowed []string
}

// Reason is the Event reason of the error (package events).
func (e *ClusterError) Reason() string { return "InvalidConfig" }

func (e *ClusterError) Error() string {
	if e.Allowed == nil {
		known := "the plugin is started with none"
		if len(e.Known) > 0 {
			known = "it knows " + strings.Join(e.Known, ", ")
		}
		return fmt.Sprintf("key \"cluster\": the plugin has no route cluster %q (%s): the platform team names the clusters the plugin may write routes in "+
			"with -route-cluster in the plugin's args in argo-rollouts-config; fix the name, or ask them to add the cluster", e.Cluster, known)
	}
	return fmt.Sprintf("key \"namespace\": Rollouts may not reach namespace %s in route cluster %q (they may reach %s): "+
		"the platform team allows namespaces with -route-namespaces in the plugin's args; use one of those, or ask them to add it",
		e.Namespace, e.Cluster, strings.Join(e.Allowed, ", "))
}

// RouteClusterOf is the route cluster the settings name, nil for the
// controller's own cluster, or a *ClusterError when the settings name a
// cluster or a namespace there that clusters do not allow.
func (s Settings) RouteClusterOf(clusters []RouteCluster) (*RouteCluster, error) {
	if s.Cluster == "" {
		return nil, nil
	}
	i := slices.IndexFunc(clusters, func(c RouteCluster) bool { return c.Name == s.Cluster })
	if i < 0 {
		e := &ClusterError{Cluster: s.Cluster}
		for _, c := range clusters {
			e.Known = append(e.Known, c.Name)
		}
		return nil, e
	}
	c := &clusters[i]
	if ns := s.namespace(); !slices.Contains(c.Namespaces, AnyNamespace) && !slices.Contains(c.Namespaces, ns) {
		return nil, &ClusterError{Cluster: c.Name, Namespace: ns, Allowed: c.Namespaces}
	}
	return c, nil
}

// namespace is the namespace of the routes (the config's "namespace", which
// every target has).
func (s Settings) namespace() string {
	if len(s.Targets.Named) > 0 {
		return s.Targets.Named[0].Namespace
	}
	return s.Targets.Selectors[0].Namespace
}
