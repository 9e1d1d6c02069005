package test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/google/go-cmp/cmp"
)

// Issue 57: a Rollout of namespace mallory, with no namespace key, named
// "../../shop/httproutes/web" as its route, and the plugin's GET and forced
// apply went to shop's route, which grants mallory nothing. Now each way of
// giving such a name (httpRoute, an httpRoutes entry, configMap) fails every
// call naming the key, shop's route is the same byte for byte, and the
// plugin sends no request outside mallory (but the Leases of its peers).
func TestANameThatClimbsOutOfItsNamespaceReachesNothing(t *testing.T) {
	standard := parallel(t)
	shop := namespace(t, standard)
	mallory := namespace(t, standard)
	create(t, standard, shop, routeToServicesOf(mallory))
	create(t, standard, mallory, routeToServicesOf(mallory))
	p := startPlugin(t, standard)
	// mallory's own route walks: the plugin's start-up reads are done.
	own := rollout(mallory, `{"httpRoute": "route"}`)
	if err := p.SetWeight(own, 10, nil); err.HasError() {
		t.Fatal(err)
	}
	before := get(t, standard, "v1", "HTTPRoute", shop, "route")
	since := standard.Recorder.Count()

	climb := "../../" + shop + "/httproutes/route"
	for _, tc := range []struct{ config, want string }{
		{fmt.Sprintf(`{"httpRoute": %q}`, climb), fmt.Sprintf(`key "httpRoute": %q is not a route name (a DNS-1123 subdomain)`, climb)},
		{fmt.Sprintf(`{"httpRoutes": [{"name": %q}]}`, climb), fmt.Sprintf(`key "httpRoutes": entry 0 name %q is not a route name (a DNS-1123 subdomain)`, climb)},
		{fmt.Sprintf(`{"httpRoute": "route", "configMap": "../../%s/configmaps/argo-gatewayapi-configmap"}`, shop),
			fmt.Sprintf(`key "configMap": "../../%s/configmaps/argo-gatewayapi-configmap" is not a ConfigMap name (a DNS-1123 subdomain)`, shop)},
	} {
		ro := rollout(mallory, tc.config)
		ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "beta"}}
		for name, call := range map[string]func() rpcErr{
			"SetWeight":           func() rpcErr { return p.SetWeight(ro, 30, nil) },
			"SetHeaderRoute":      func() rpcErr { return p.SetHeaderRoute(ro, headerStep("beta", "X-Canary", "yes")) },
			"RemoveManagedRoutes": func() rpcErr { return p.RemoveManagedRoutes(ro) },
		} {
			if err := call(); !err.HasError() || !strings.Contains(err.ErrorString, tc.want) {
				t.Errorf("%s with %s: %q, want an error saying %q", name, tc.config, err.ErrorString, tc.want)
			}
		}
	}
	if diff := cmp.Diff(stored(t, before), stored(t, get(t, standard, "v1", "HTTPRoute", shop, "route"))); diff != "" {
		t.Errorf("shop's route changed (-before +after):\n%s", diff)
	}
	for _, r := range standard.Recorder.RequestsSince(since) {
		if !strings.HasPrefix(r.UserAgent, "rollouts-gatewayapi-ssa") || strings.Contains(r.Path, "/leases") {
			continue
		}
		if !strings.Contains(r.Path, "/namespaces/"+mallory+"/") && !strings.HasSuffix(r.Path, "/namespaces/"+mallory) {
			t.Errorf("the plugin sent a request outside %s: %s %s", mallory, r.Method, r.Path)
		}
	}
}
