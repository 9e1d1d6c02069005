package desired

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/transform"
)

// What Traefik v3.6's GatewayClass publishes (measured in make e2e): no
// RequestMirror.
var traefikFeatures = []string{"Gateway", "GRPCRoute", "HTTPRoute", "HTTPRouteDestinationPortMatching", "HTTPRouteHostRewrite",
	"HTTPRouteMethodMatching", "HTTPRoutePathRedirect", "HTTPRoutePathRewrite", "HTTPRoutePortRedirect", "HTTPRouteQueryParamMatching",
	"HTTPRouteResponseHeaderModification", "HTTPRouteSchemeRedirect", "ReferenceGrant", "TCPRoute", "TLSRoute"}

func gateway(class string, features ...string) Gateway {
	return Gateway{Parent: routes.ParentRef{Group: routes.Group, Kind: "Gateway", Namespace: ns, Name: class + "-gw"},
		Class: class, Features: features, Publishes: len(features) > 0}
}

func behind(gws ...Gateway) func(*Env) {
	return func(e *Env) { e.Gateways = gws }
}

func TestAGatewayThatLacksMirroringGetsNoMirrorRule(t *testing.T) {
	traefik := behind(gateway("traefik", traefikFeatures...))
	unsupported := new(*UnsupportedError)
	weighted := func(stable, canary int64) []routes.Rule {
		return []routes.Rule{rule("/", backend("stable", stable), backend("canary", canary))}
	}
	runScenario(t, routes.HTTPRoute, []step{
		{create{kubectl, weighted(100, 0)}, expect{owners: []string{kubectl}}},
		{call{c: setWeight(20), env: traefik}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true, rules: weighted(80, 20)}},
		{call{c: mirror(50, "/api"), env: traefik}, expect{owners: plugins, labels: inProgress, claims: true, rules: weighted(80, 20), errAs: unsupported,
			err: []string{"HTTPRoute shop/route: rollout shop/demo: ", `rule "mirror" needs HTTPRouteRequestMirror (a RequestMirror filter), `,
				`HTTPRouteRequestPercentageMirror (a RequestMirror filter with a percentage)`,
				"GatewayClass traefik (of parent Gateway shop/traefik-gw) does not list HTTPRouteRequestMirror, HTTPRouteRequestPercentageMirror in status.supportedFeatures",
				"nothing was written", "assumeGatewayFeatures"}}},
		{call{c: mirror(50, "/api"), env: func(e *Env) { traefik(e); e.MirrorMode = MirrorFilter }}, expect{owners: plugins, labels: inProgress, claims: true,
			rules: weighted(80, 20), errAs: unsupported, err: []string{`rule 0 needs HTTPRouteRequestMirror (a RequestMirror filter)`}}},
		{call{c: header("X-Canary", "yes"), env: traefik}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: RemoveManaged{}, env: traefik}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: setWeight(0), env: traefik}, expect{wrote: true, rules: weighted(100, 0)}},
	})
}

func TestEveryParentMustCarryWhatTheCallAdds(t *testing.T) {
	unsupported := new(*UnsupportedError)
	full := gateway("envoy", "HTTPRoute", "HTTPRouteRequestMirror", "HTTPRouteRequestPercentageMirror")
	noPercent := gateway("nginx", "HTTPRoute", "HTTPRouteRequestMirror")
	base := []routes.Rule{rule("/", backend("stable", 100), backend("canary", 0))}
	runScenario(t, routes.HTTPRoute, []step{
		{create{kubectl, base}, expect{owners: []string{kubectl}}},
		{call{c: mirror(100, "/api"), env: behind(full, noPercent)}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true}},
		// The same rule again adds nothing: nothing to check, nothing written.
		{call{c: mirror(100, "/api"), env: behind(full, gateway("traefik", traefikFeatures...))}, expect{owners: plugins, labels: inProgress, claims: true}},
		{call{c: mirror(25, "/api"), env: behind(full, noPercent)}, expect{owners: plugins, labels: inProgress, claims: true, errAs: unsupported,
			err: []string{`rule "mirror" needs HTTPRouteRequestPercentageMirror (a RequestMirror filter with a percentage)`,
				"GatewayClass nginx (of parent Gateway shop/nginx-gw) does not list HTTPRouteRequestPercentageMirror"}}},
		{call{c: mirror(25, "/api"), env: func(e *Env) { behind(full, noPercent)(e); e.AssumedFeatures = []string{"HTTPRouteRequestPercentageMirror"} }},
			expect{wrote: true, owners: plugins, labels: inProgress, claims: true}},
	})
}

func TestAGatewayThatPublishesNothingIsWrittenAndSaidSo(t *testing.T) {
	s := newServer(t, routes.HTTPRoute, rule("/", backend("stable", 100), backend("canary", 0)))
	old := gateway("old")
	env := Env{Rollout: "shop/demo", FieldManager: plugin, Gateways: []Gateway{old, gateway("envoy", "HTTPRouteRequestMirror")}}
	res, err := mirror(100, "/api").Desired(s.live(), env)
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
	// Weights need nothing of the gateway: nothing to say.
	res, err = setWeight(10).Desired(s.live(), env)
	if err != nil || res.Unchecked != nil {
		t.Errorf("SetWeight: %v, unchecked %v", err, res.Unchecked)
	}
}
