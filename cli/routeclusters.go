package cli

import (
	"flag"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
)

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
func (f *RouteClusterFlags) RouteClusters() ([]rollout.RouteCluster, error) {
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
func parseRouteClusters(clusterFlags, namespaceFlags []string) ([]rollout.RouteCluster, error) {
	var out []rollout.RouteCluster
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
		out = append(out, rollout.RouteCluster{Name: name, Kubeconfig: file})
	}
	for _, f := range namespaceFlags {
		name, list, ok := strings.Cut(f, "=")
		i, known := index[name]
		switch {
		case !ok || list == "":
			return nil, fmt.Errorf("-route-namespaces %q: give NAME=NAMESPACE[,NAMESPACE...] (or NAME=%s for every namespace)", f, rollout.AnyNamespace)
		case !known:
			return nil, fmt.Errorf("-route-namespaces %q: no -route-cluster is named %q", f, name)
		}
		for _, ns := range strings.Split(list, ",") {
			if errs := validation.IsDNS1123Label(ns); ns != rollout.AnyNamespace && len(errs) > 0 {
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
				c.Name, c.Kubeconfig, c.Name, c.Name, rollout.AnyNamespace)
		}
	}
	return out, nil
}
