package rollout

import (
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
)

// A Rollout of namespace shop that names "../../other/httproutes/web" as its
// route, list entry or configMap is refused before any request, by the key
// that gives it: the name would otherwise be a path to another namespace.
func TestNamesThatAreNoNamesAreRefused(t *testing.T) {
	long := strings.Repeat("a", 254)
	for _, tc := range []struct {
		name, config, want string
	}{
		{"a route that climbs out", `{"httpRoute": "../../other/httproutes/web"}`,
			`key "httpRoute": "../../other/httproutes/web" is not a route name (a DNS-1123 subdomain): `},
		{"a list entry that climbs out", `{"httpRoutes": [{"name": "web"}, {"name": "../x"}]}`,
			`key "httpRoutes": entry 1 name "../x" is not a route name (a DNS-1123 subdomain): `},
		{"an escaped slash", `{"grpcRoute": "..%2F..%2Fother"}`, `key "grpcRoute": "..%2F..%2Fother" is not a route name`},
		{"a slash", `{"tcpRoutes": [{"name": "a/b"}]}`, `key "tcpRoutes": entry 0 name "a/b" is not a route name`},
		{"dot dot", `{"tlsRoute": ".."}`, `key "tlsRoute": ".." is not a route name`},
		{"a UDPRoute", `{"udpRoute": "."}`, `key "udpRoute": "." is not a route name`},
		{"254 characters", `{"httpRoute": "` + long + `"}`, `key "httpRoute": "` + long + `" is not a route name (a DNS-1123 subdomain): must be no more than 253 characters`},
		{"a configMap that climbs out", `{"httpRoute": "web", "configMap": "../../../../api/v1/namespaces/kube-system/secrets/db"}`,
			`key "configMap": "../../../../api/v1/namespaces/kube-system/secrets/db" is not a ConfigMap name (a DNS-1123 subdomain): `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig(cfgRollout(DefaultPluginName, tc.config), DefaultPluginName)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
		})
	}
	if _, err := ParseConfig(cfgRollout(DefaultPluginName, `{"httpRoute": "`+long[:253]+`", "configMap": "a.b-c"}`), DefaultPluginName); err != nil {
		t.Errorf("a name of 253 characters is a route name: %v", err)
	}
}

// Services are named by DNS-1123 labels; a stable, canary, ping, pong or
// experiment Service of another shape is refused by its key, for SetWeight as
// for the header and mirror steps.
func TestServiceNamesThatAreNoNamesAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name       string
		edit       func(*v1alpha1.Rollout)
		additional []v1alpha1.WeightDestination
		want       string
	}{
		{name: "stable", edit: func(ro *v1alpha1.Rollout) { ro.Spec.Strategy.Canary.StableService = "../web" },
			want: `spec.strategy.canary.stableService: "../web" is not a Service name (a DNS-1123 label): `},
		{name: "canary", edit: func(ro *v1alpha1.Rollout) { ro.Spec.Strategy.Canary.CanaryService = "web.canary" },
			want: `spec.strategy.canary.canaryService: "web.canary" is not a Service name (a DNS-1123 label): `},
		{name: "ping", edit: func(ro *v1alpha1.Rollout) {
			ro.Spec.Strategy.Canary.PingPong = &v1alpha1.PingPongSpec{PingService: "a%2Fb", PongService: "pong"}
		}, want: `spec.strategy.canary.pingPong.pingService: "a%2Fb" is not a Service name`},
		{name: "pong", edit: func(ro *v1alpha1.Rollout) {
			ro.Spec.Strategy.Canary.PingPong = &v1alpha1.PingPongSpec{PingService: "ping", PongService: ".."}
		}, want: `spec.strategy.canary.pingPong.pongService: ".." is not a Service name`},
		{name: "experiment", additional: []v1alpha1.WeightDestination{{ServiceName: "../../kube-system/services/dns", Weight: 5}},
			want: `additionalDestinations: experiment Service "../../kube-system/services/dns" is not a Service name (a DNS-1123 label): `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ro := cfgRollout(DefaultPluginName, `{"httpRoute": "web"}`)
			ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "h"}}
			if tc.edit != nil {
				tc.edit(ro)
			}
			if _, err := validateSplit(ro, 10, tc.additional); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("SetWeight: error %v, want one with %q", err, tc.want)
			}
			if tc.additional != nil {
				return
			}
			if _, err := ruleServices(ro, "setHeaderRoute", "h", true); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("setHeaderRoute: error %v, want one with %q", err, tc.want)
			}
		})
	}
}
