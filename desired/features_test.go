package desired

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes/routestest"
	"github.com/gatewayapi-ssa/rollouts-plugin/transform"
)

// What Traefik v3.6.12's GatewayClass publishes (make e2e prints it): no
// RequestMirror.
var traefikFeatures = []string{"BackendTLSPolicy", "GRPCRoute", "Gateway", "GatewayPort8080", "HTTPRoute", "HTTPRouteBackendProtocolH2C",
	"HTTPRouteBackendProtocolWebSocket", "HTTPRouteDestinationPortMatching", "HTTPRouteHostRewrite",
	"HTTPRouteMethodMatching", "HTTPRoutePathRedirect", "HTTPRoutePathRewrite", "HTTPRoutePortRedirect",
	"HTTPRouteQueryParamMatching", "HTTPRouteResponseHeaderModification", "HTTPRouteSchemeRedirect",
	"ReferenceGrant", "TLSRoute"}

func gateway(class string, features ...string) routes.Gateway {
	return routes.Gateway{Parent: routes.ParentRef{Group: routes.Group, Kind: "Gateway", Namespace: ns, Name: class + "-gw"},
		Class: class, Features: features, Publishes: len(features) > 0}
}

// behind is c on a route whose parents are gws.
func behind(c Intent, gws ...routes.Gateway) Intent {
	return checked{c: c, parents: func() []routes.Gateway { return gws }}
}

func TestAGatewayThatLacksMirroringGetsNoMirrorRule(t *testing.T) {
	traefik := func(c Intent) Intent { return behind(c, gateway("traefik", traefikFeatures...)) }
	filterMode := func(e *Env) { e.MirrorMode = MirrorFilter }
	unsupported := new(*UnsupportedError)
	weighted := func(stable, canary int64) []routes.Rule {
		return []routes.Rule{routestest.Rule("/", routestest.BackendOn("stable", 80, stable), routestest.BackendOn("canary", 80, canary))}
	}
	runScenario(t, routes.HTTPRoute, []step{
		{create{kubectl, weighted(100, 0)}, expect{owners: []string{kubectl}}},
		{call{c: traefik(setWeight(20))}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true, rules: weighted(80, 20)}},
		{call{c: traefik(mirror(50, "/api"))}, expect{owners: plugins, labels: inProgress, claims: true, rules: weighted(80, 20), errAs: unsupported,
			err: []string{"HTTPRoute shop/route: rollout shop/demo: ", `rule "mirror" needs HTTPRouteRequestMirror (a RequestMirror filter) and `,
				`HTTPRouteRequestPercentageMirror (a RequestMirror filter with a percentage)`,
				"GatewayClass traefik (of parent Gateway shop/traefik-gw) does not list HTTPRouteRequestMirror, HTTPRouteRequestPercentageMirror in status.supportedFeatures",
				"nothing was written", "assumeGatewayFeatures"}}},
		{call{c: traefik(mirror(50, "/api")), env: filterMode}, expect{owners: plugins, labels: inProgress, claims: true,
			rules: weighted(80, 20), errAs: unsupported, err: []string{`rule 0 needs HTTPRouteRequestMirror (a RequestMirror filter)`}}},
		{call{c: traefik(header("X-Canary", "yes"))}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: traefik(RemoveManaged{})}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: traefik(setWeight(0))}, expect{wrote: true, rules: weighted(100, 0)}},
	})
}

func TestEveryParentMustCarryWhatTheCallAdds(t *testing.T) {
	unsupported := new(*UnsupportedError)
	full := gateway("envoy", "HTTPRoute", "HTTPRouteRequestMirror", "HTTPRouteRequestPercentageMirror")
	noPercent := gateway("nginx", "HTTPRoute", "HTTPRouteRequestMirror")
	base := []routes.Rule{routestest.Rule("/", routestest.BackendOn("stable", 80, 100), routestest.BackendOn("canary", 80, 0))}
	runScenario(t, routes.HTTPRoute, []step{
		{create{kubectl, base}, expect{owners: []string{kubectl}}},
		{call{c: behind(mirror(100, "/api"), full, noPercent)}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true}},
		// The same rule again adds nothing: nothing to check, nothing written.
		{call{c: behind(mirror(100, "/api"), full, gateway("traefik", traefikFeatures...))}, expect{owners: plugins, labels: inProgress, claims: true}},
		{call{c: behind(mirror(25, "/api"), full, noPercent)}, expect{owners: plugins, labels: inProgress, claims: true, errAs: unsupported,
			err: []string{`rule "mirror" needs HTTPRouteRequestPercentageMirror (a RequestMirror filter with a percentage);`,
				"GatewayClass nginx (of parent Gateway shop/nginx-gw) does not list HTTPRouteRequestPercentageMirror"}}},
		{call{c: behind(mirror(25, "/api"), full, noPercent), env: func(e *Env) { e.AssumedFeatures = []string{"HTTPRouteRequestPercentageMirror"} }},
			expect{wrote: true, owners: plugins, labels: inProgress, claims: true}},
	})
}

func TestAGatewayThatPublishesNothingIsWrittenAndSaidSo(t *testing.T) {
	s := newServer(t, routes.HTTPRoute, routestest.Rule("/", routestest.BackendOn("stable", 80, 100), routestest.BackendOn("canary", 80, 0)))
	old := gateway("old")
	env := Env{Rollout: "shop/demo", FieldManager: plugin}
	reads := 0
	parents := func(c Intent) Intent {
		return checked{c: c, parents: func() []routes.Gateway {
			reads++
			return []routes.Gateway{old, gateway("envoy", "HTTPRouteRequestMirror")}
		}}
	}
	res, err := parents(mirror(100, "/api")).Desired(s.live(), env)
	if err != nil {
		t.Fatal(err)
	}
	want := []Unchecked{{Gateway: old, Needs: []RuleNeed{{Rule: `rule "mirror"`, Need: transform.Need{Feature: "HTTPRouteRequestMirror", Why: "a RequestMirror filter"}}}}}
	if diff := cmp.Diff(want, res.Unchecked); diff != "" {
		t.Errorf("Unchecked (-want +got):\n%s", diff)
	}
	if got, want := res.Unchecked[0].String(), `GatewayClass old (of parent Gateway shop/old-gw): its status.supportedFeatures lists nothing; `+
		`written without checking that it carries rule "mirror" needs HTTPRouteRequestMirror (a RequestMirror filter)`; got != want {
		t.Errorf("Unchecked says\n%s\nwant\n%s", got, want)
	}
	// Weights need nothing of the gateway: no parent is read, nothing to say.
	res, err = parents(setWeight(10)).Desired(s.live(), env)
	if err != nil || res.Unchecked != nil || reads != 1 {
		t.Errorf("SetWeight: %v, unchecked %v, parents read %d times, want 1 (by the mirror step)", err, res.Unchecked, reads)
	}
}
