package rollout

import (
	"flag"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
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

// RouteClusterFlags are the flags that name the route clusters and the
// namespaces Rollouts may reach there: the plugin's, and its commands' (so a
// person reaches a route cluster as the plugin does, with the same values).
type RouteClusterFlags struct{ clusters, namespaces repeated }

// Register adds -route-cluster and -route-namespaces to fs.
func (f *RouteClusterFlags) Register(fs *flag.FlagSet) {
	fs.Var(&f.clusters, "route-cluster", "NAME=KUBECONFIG: a cluster besides the controller's own whose routes Rollouts may have the plugin write "+
		"(a config cluster: GKE fleets, AWS Lattice), reached with that kubeconfig file (mount it from a Secret); a Rollout picks it with its "+
		"config key \"cluster\". Repeat for more clusters")
	fs.Var(&f.namespaces, "route-namespaces", "NAME=NS[,NS...]: the route namespaces Rollouts may reach in route cluster NAME (NAME=* for every one); "+
		"required for every -route-cluster, may repeat")
}

// RouteClusters are the route clusters the flags name.
func (f *RouteClusterFlags) RouteClusters() ([]RouteCluster, error) {
	return parseRouteClusters(f.clusters, f.namespaces)
}

// repeated is a flag that may be given more than once.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, " ") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

// parseRouteClusters reads the values of the -route-cluster flags
// (NAME=KUBECONFIG) and the -route-namespaces flags (NAME=NS[,NS...], or
// NAME=* for every namespace). Every route cluster needs its namespaces, and
// every namespaces flag its cluster: the platform team, not the Rollout,
// decides what a Rollout may reach.
func parseRouteClusters(clusterFlags, namespaceFlags []string) ([]RouteCluster, error) {
	var out []RouteCluster
	index := map[string]int{}
	for _, f := range clusterFlags {
		name, file, ok := strings.Cut(f, "=")
		if !ok || file == "" {
			return nil, fmt.Errorf("-route-cluster %q: give NAME=KUBECONFIG, the cluster's name for Rollouts (their config key \"cluster\") and the path of its kubeconfig file", f)
		}
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			return nil, fmt.Errorf("-route-cluster %q: %q is not a cluster name (a DNS label: lower case letters, digits and '-'): %s", f, name, strings.Join(errs, "; "))
		}
		if _, dup := index[name]; dup {
			return nil, fmt.Errorf("-route-cluster %q: cluster %q is given twice", f, name)
		}
		index[name] = len(out)
		out = append(out, RouteCluster{Name: name, Kubeconfig: file})
	}
	for _, f := range namespaceFlags {
		name, list, ok := strings.Cut(f, "=")
		i, known := index[name]
		switch {
		case !ok || list == "":
			return nil, fmt.Errorf("-route-namespaces %q: give NAME=NAMESPACE[,NAMESPACE...] (or NAME=%s for every namespace)", f, AnyNamespace)
		case !known:
			return nil, fmt.Errorf("-route-namespaces %q: no -route-cluster is named %q", f, name)
		}
		for _, ns := range strings.Split(list, ",") {
			if errs := validation.IsDNS1123Label(ns); ns != AnyNamespace && len(errs) > 0 {
				return nil, fmt.Errorf("-route-namespaces %q: %q is not a namespace name: %s", f, ns, strings.Join(errs, "; "))
			}
			if !slices.Contains(out[i].Namespaces, ns) {
				out[i].Namespaces = append(out[i].Namespaces, ns)
			}
		}
	}
	for _, c := range out {
		if len(c.Namespaces) == 0 {
			return nil, fmt.Errorf("-route-cluster %s=%s: give the route namespaces Rollouts may reach there with -route-namespaces %s=NAMESPACE[,NAMESPACE...] (or %s=%s for every namespace)",
				c.Name, c.Kubeconfig, c.Name, c.Name, AnyNamespace)
		}
	}
	return out, nil
}

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
