package cli

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
)

// The platform team's flags (-route-cluster, -route-namespaces) name the route clusters and the namespaces
// Rollouts may reach in each; anything else is refused at start-up.

func TestParseRouteClusters(t *testing.T) {
	got, err := parseRouteClusters(
		[]string{"fleet=/etc/route-clusters/fleet/kubeconfig", "lattice=/etc/route-clusters/lattice/kubeconfig"},
		[]string{"fleet=store,shop", "lattice=*", "fleet=shop,payments"})
	if err != nil {
		t.Fatal(err)
	}
	want := []rollout.RouteCluster{
		{Name: "fleet", Kubeconfig: "/etc/route-clusters/fleet/kubeconfig", Namespaces: []string{"store", "shop", "payments"}},
		{Name: "lattice", Kubeconfig: "/etc/route-clusters/lattice/kubeconfig", Namespaces: []string{"*"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("route clusters (-want +got):\n%s", diff)
	}
	if got, err := parseRouteClusters(nil, nil); err != nil || got != nil {
		t.Errorf("no flags: %v, %v; want none and no error", got, err)
	}

	for _, tc := range []struct {
		name                 string
		clusters, namespaces []string
		wantErr              string
	}{
		{name: "no kubeconfig", clusters: []string{"fleet"}, namespaces: []string{"fleet=store"},
			wantErr: `-route-cluster "fleet": give NAME=KUBECONFIG, the cluster's name for Rollouts (their config key "cluster") and the path of its kubeconfig file`},
		{name: "a name that is not a DNS label", clusters: []string{"Fleet=/k"}, namespaces: []string{"Fleet=store"},
			wantErr: `-route-cluster "Fleet=/k": "Fleet" is not a cluster name (a DNS label: lower case letters, digits and '-')`},
		{name: "a cluster twice", clusters: []string{"fleet=/a", "fleet=/b"}, namespaces: []string{"fleet=store"},
			wantErr: `-route-cluster "fleet=/b": cluster "fleet" is given twice`},
		{name: "no namespaces", clusters: []string{"fleet=/k"},
			wantErr: "-route-cluster fleet=/k: give the route namespaces Rollouts may reach there with -route-namespaces fleet=NAMESPACE[,NAMESPACE...] (or fleet=* for every namespace)"},
		{name: "namespaces of no cluster", clusters: []string{"fleet=/k"}, namespaces: []string{"fleet=store", "other=store"},
			wantErr: `-route-namespaces "other=store": no -route-cluster is named "other"`},
		{name: "an empty list", clusters: []string{"fleet=/k"}, namespaces: []string{"fleet="},
			wantErr: `-route-namespaces "fleet=": give NAME=NAMESPACE[,NAMESPACE...] (or NAME=* for every namespace)`},
		{name: "a bad namespace", clusters: []string{"fleet=/k"}, namespaces: []string{"fleet=store,Shop"},
			wantErr: `-route-namespaces "fleet=store,Shop": "Shop" is not a namespace name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRouteClusters(tc.clusters, tc.namespaces)
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Errorf("parseRouteClusters = %v, %v; want an error beginning %q", got, err, tc.wantErr)
			}
		})
	}
}

// A Rollout names a route cluster by name only; a cluster or a namespace
// there that the platform team did not configure is refused before any
// route is read.
