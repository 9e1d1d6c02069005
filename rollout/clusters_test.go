package rollout

import (
	"errors"
	"strings"
	"testing"
)

// The platform team's flags name the route clusters and the namespaces
// Rollouts may reach in each; anything else is refused at start-up.
func TestRouteClusterOf(t *testing.T) {
	clusters := []RouteCluster{
		{Name: "fleet", Kubeconfig: "/k/fleet", Namespaces: []string{"store"}},
		{Name: "open", Kubeconfig: "/k/open", Namespaces: []string{"*"}},
	}
	for _, tc := range []struct {
		name     string
		raw      string
		clusters []RouteCluster
		want     string // the route cluster's name; "" for the controller's own
		wantErr  string
	}{
		{name: "no cluster key: the controller's own cluster", raw: `{"httpRoute": "store"}`, clusters: clusters},
		{name: "an allowed namespace", raw: `{"httpRoute": "store", "cluster": "fleet", "namespace": "store"}`, clusters: clusters, want: "fleet"},
		{name: "the Rollout's namespace by default", raw: `{"httpRouteSelector": {"matchLabels": {"app": "store"}}, "cluster": "open"}`, clusters: clusters, want: "open"},
		{name: "a namespace not allowed", raw: `{"httpRoute": "store", "cluster": "fleet", "namespace": "kube-system"}`, clusters: clusters,
			wantErr: `key "namespace": Rollouts may not reach namespace kube-system in route cluster "fleet" (they may reach store): ` +
				"the platform team allows namespaces with -route-namespaces in the plugin's args; use one of those, or ask them to add it"},
		{name: "a cluster not configured", raw: `{"httpRoute": "store", "cluster": "elsewhere"}`, clusters: clusters,
			wantErr: `key "cluster": the plugin has no route cluster "elsewhere" (it knows fleet, open): the platform team names the clusters ` +
				"the plugin may write routes in with -route-cluster in the plugin's args in argo-rollouts-config; fix the name, or ask them to add the cluster"},
		{name: "no route cluster at all", raw: `{"httpRoute": "store", "cluster": "fleet"}`,
			wantErr: `key "cluster": the plugin has no route cluster "fleet" (the plugin is started with none)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseConfig(cfgRollout(DefaultPluginName, tc.raw), DefaultPluginName)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.RouteClusterOf(tc.clusters)
			switch {
			case tc.wantErr != "":
				var ce *ClusterError
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) || !errors.As(err, &ce) {
					t.Errorf("RouteClusterOf = %v, %v; want a *ClusterError beginning %q", got, err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case tc.want == "" && got != nil, tc.want != "" && (got == nil || got.Name != tc.want):
				t.Errorf("RouteClusterOf = %+v, want %q", got, tc.want)
			}
		})
	}
	if _, err := ParseConfig(cfgRollout(DefaultPluginName, `{"httpRoute": "store", "cluster": "Fleet!"}`), DefaultPluginName); err == nil ||
		!strings.Contains(err.Error(), `key "cluster": "Fleet!" is not a cluster name (a DNS label)`) {
		t.Errorf("a cluster key that is no cluster name: %v", err)
	}
}
