//go:build envoy

package envoy

import (
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/argoproj/argo-rollouts/utils/plugin/types"
)

var httpRoute = ref{"HTTPRoute", "route"}

// do runs a call of the plugin and returns Envoy Gateway's translation
// after it, having checked that Envoy Gateway accepts the route.
func (s *scenario) do(step string, call func() types.RpcError) *translation {
	s.t.Helper()
	must(s.t, step, call())
	tr := s.translate()
	s.check(step, "Accepted, ResolvedRefs", checkAccepted(tr, httpRoute))
	return tr
}

func header(name, value string) map[string]string { return map[string]string{name: value} }

// Header steps: in Envoy's route table the added rule comes before the
// weighted one for requests with the header, and requests without it keep
// the split; an exact match and a prefix (a RegularExpression on the
// route, a safe_regex in Envoy). RemoveManagedRoutes takes them out.
func TestHeaderRoutes(t *testing.T) {
	s := newScenario(t, "header routes, HTTPRoute", "", "stable", "canary")
	s.create(routeYAML("HTTPRoute", 100))
	ro := s.rollout(`{"httpRoute": "route"}`)
	ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "beta"}, {Name: "beta-v2"}}
	split := taken{Rule: "0", Served: map[string]uint32{"stable": 70, "canary": 30}}
	toCanary := func(rule string) taken { return taken{Rule: rule, Served: map[string]uint32{"canary": 1}} }

	tr := s.do("SetWeight(30)", func() types.RpcError { return s.plugin.SetWeight(ro, 30, nil) })
	s.check("SetWeight(30)", "weights", checkWeights(tr.envoy, s.ns, httpRoute, 0, canary(70, 30)))

	step := "SetHeaderRoute(beta, X-Canary exact yes)"
	tr = s.do(step, func() types.RpcError {
		return s.plugin.SetHeaderRoute(ro, &v1alpha1.SetHeaderRoute{Name: "beta", Match: []v1alpha1.HeaderRoutingMatch{
			{HeaderName: "X-Canary", HeaderValue: &v1alpha1.StringMatch{Exact: "yes"}}}})
	})
	s.check(step, "X-Canary: yes takes the header rule", checkTaken(tr.envoy, s.ns, httpRoute, request{Method: "GET", Path: "/", Headers: header("x-canary", "yes")}, toCanary("beta")))
	s.check(step, "no header keeps the split", checkTaken(tr.envoy, s.ns, httpRoute, request{Method: "GET", Path: "/"}, split))
	s.check(step, "X-Canary: no keeps the split", checkTaken(tr.envoy, s.ns, httpRoute, request{Method: "GET", Path: "/", Headers: header("x-canary", "no")}, split))
	s.check(step, "weights", checkWeights(tr.envoy, s.ns, httpRoute, 0, canary(70, 30)))

	step = "SetHeaderRoute(beta-v2, X-Version prefix v2)"
	tr = s.do(step, func() types.RpcError {
		return s.plugin.SetHeaderRoute(ro, &v1alpha1.SetHeaderRoute{Name: "beta-v2", Match: []v1alpha1.HeaderRoutingMatch{
			{HeaderName: "X-Version", HeaderValue: &v1alpha1.StringMatch{Prefix: "v2"}}}})
	})
	s.check(step, "X-Version: v2.1 takes the prefix rule", checkTaken(tr.envoy, s.ns, httpRoute, request{Method: "GET", Path: "/a", Headers: header("x-version", "v2.1")}, toCanary("beta-v2")))
	s.check(step, "X-Version: v1 keeps the split", checkTaken(tr.envoy, s.ns, httpRoute, request{Method: "GET", Path: "/a", Headers: header("x-version", "v1")}, split))
	s.check(step, "X-Canary: yes takes the header rule", checkTaken(tr.envoy, s.ns, httpRoute, request{Method: "GET", Path: "/", Headers: header("x-canary", "yes")}, toCanary("beta")))

	step = "RemoveManagedRoutes"
	tr = s.do(step, func() types.RpcError { return s.plugin.RemoveManagedRoutes(ro) })
	s.check(step, "no xDS route of rule beta", checkNoRule(tr.envoy, "beta"))
	s.check(step, "no xDS route of rule beta-v2", checkNoRule(tr.envoy, "beta-v2"))
	s.check(step, "X-Canary: yes keeps the split", checkTaken(tr.envoy, s.ns, httpRoute, request{Method: "GET", Path: "/", Headers: header("x-canary", "yes")}, split))
}

func mirrorStep(pct *int32) *v1alpha1.SetMirrorRoute {
	return &v1alpha1.SetMirrorRoute{Name: "mirror", Percentage: pct, Match: []v1alpha1.RouteMatch{
		{Method: &v1alpha1.StringMatch{Exact: "GET"}, Path: &v1alpha1.StringMatch{Prefix: "/api"}}}}
}

func percent(p int32) *int32 { return &p }

// Mirror steps, mirrorMode rule (the default): a rule of its own for the
// step's matches, served by stable and mirrored to the canary at the
// step's percentage as Envoy's fraction; other requests keep the split
// and are not mirrored. RemoveManagedRoutes leaves no mirror in Envoy.
func TestMirrorRuleMode(t *testing.T) {
	s := newScenario(t, "mirror, mirrorMode rule, HTTPRoute", "", "stable", "canary")
	s.create(routeYAML("HTTPRoute", 100))
	ro := s.rollout(`{"httpRoute": "route"}`)
	ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "mirror"}}
	split := taken{Rule: "0", Served: map[string]uint32{"stable": 80, "canary": 20}}
	mirrored := func(pct float64) taken {
		return taken{Rule: "mirror", Served: map[string]uint32{"stable": 1}, Mirrors: []mirrorShare{{"canary", pct}}}
	}
	s.do("SetWeight(20)", func() types.RpcError { return s.plugin.SetWeight(ro, 20, nil) })

	for _, st := range []struct {
		name string
		pct  *int32
		want float64
	}{{"SetMirrorRoute(35 %, GET /api)", percent(35), 35}, {"SetMirrorRoute(no percentage, GET /api)", nil, 100}} {
		tr := s.do(st.name, func() types.RpcError { return s.plugin.SetMirrorRoute(ro, mirrorStep(st.pct)) })
		s.check(st.name, "GET /api/items is mirrored, stable answers", checkTaken(tr.envoy, s.ns, httpRoute, request{Method: "GET", Path: "/api/items"}, mirrored(st.want)))
		s.check(st.name, "POST /api/items keeps the split, unmirrored", checkTaken(tr.envoy, s.ns, httpRoute, request{Method: "POST", Path: "/api/items"}, split))
		s.check(st.name, "GET /apiary keeps the split, unmirrored", checkTaken(tr.envoy, s.ns, httpRoute, request{Method: "GET", Path: "/apiary"}, split))
		s.check(st.name, "weights", checkWeights(tr.envoy, s.ns, httpRoute, 0, canary(80, 20)))
	}

	tr := s.do("RemoveManagedRoutes", func() types.RpcError { return s.plugin.RemoveManagedRoutes(ro) })
	s.check("RemoveManagedRoutes", "no mirror policy", checkNoMirror(tr.envoy))
	s.check("RemoveManagedRoutes", "no xDS route of rule mirror", checkNoRule(tr.envoy, "mirror"))
	s.check("RemoveManagedRoutes", "GET /api/items keeps the split", checkTaken(tr.envoy, s.ns, httpRoute, request{Method: "GET", Path: "/api/items"}, split))
}

// Mirror steps, mirrorMode filter: the weighted rule itself mirrors every
// request to the canary at the step's percentage, its split unchanged, also
// when the weight moves; RemoveManagedRoutes takes the mirror away.
func TestMirrorFilterMode(t *testing.T) {
	s := newScenario(t, "mirror, mirrorMode filter, HTTPRoute", "", "stable", "canary")
	s.create(routeYAML("HTTPRoute", 100))
	ro := s.rollout(`{"httpRoute": "route", "mirrorMode": "filter"}`)
	ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "mirror"}}
	s.do("SetWeight(20)", func() types.RpcError { return s.plugin.SetWeight(ro, 20, nil) })

	step := "SetMirrorRoute(35 %)"
	tr := s.do(step, func() types.RpcError { return s.plugin.SetMirrorRoute(ro, mirrorStep(percent(35))) })
	want := taken{Rule: "0", Served: map[string]uint32{"stable": 80, "canary": 20}, Mirrors: []mirrorShare{{"canary", 35}}}
	s.check(step, "GET / keeps the split, mirrored", checkTaken(tr.envoy, s.ns, httpRoute, request{Method: "GET", Path: "/"}, want))
	s.check(step, "POST /api keeps the split, mirrored", checkTaken(tr.envoy, s.ns, httpRoute, request{Method: "POST", Path: "/api"}, want))

	step = "SetWeight(40)"
	tr = s.do(step, func() types.RpcError { return s.plugin.SetWeight(ro, 40, nil) })
	want.Served = map[string]uint32{"stable": 60, "canary": 40}
	s.check(step, "GET / has the new split, mirrored", checkTaken(tr.envoy, s.ns, httpRoute, request{Method: "GET", Path: "/"}, want))

	tr = s.do("RemoveManagedRoutes", func() types.RpcError { return s.plugin.RemoveManagedRoutes(ro) })
	s.check("RemoveManagedRoutes", "no mirror policy", checkNoMirror(tr.envoy))
	s.check("RemoveManagedRoutes", "weights", checkWeights(tr.envoy, s.ns, httpRoute, 0, canary(60, 40)))
}

// A GRPCRoute takes header and mirror steps too (rule mode): Envoy sends a
// gRPC call with the header to the canary, mirrors the step's service's
// calls to the canary while stable answers them, and keeps the split for
// the rest; RemoveManagedRoutes leaves neither.
func TestGRPCRouteHeaderAndMirror(t *testing.T) {
	s := newScenario(t, "header and mirror routes, GRPCRoute", "", "stable", "canary")
	s.create(routeYAML("GRPCRoute", 100))
	ro := s.rollout(`{"grpcRoute": "route"}`)
	ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "beta"}, {Name: "mirror"}}
	r := ref{"GRPCRoute", "route"}
	call := func(path string, headers map[string]string) request {
		h := map[string]string{"content-type": "application/grpc"}
		for k, v := range headers {
			h[k] = v
		}
		return request{Method: "POST", Path: path, Headers: h}
	}
	split := taken{Rule: "0", Served: map[string]uint32{"stable": 80, "canary": 20}}
	do := func(step string, c func() types.RpcError) *translation {
		t.Helper()
		must(t, step, c())
		tr := s.translate()
		s.check(step, "Accepted, ResolvedRefs", checkAccepted(tr, r))
		return tr
	}
	tr := do("SetWeight(20)", func() types.RpcError { return s.plugin.SetWeight(ro, 20, nil) })
	s.check("SetWeight(20)", "weights", checkWeights(tr.envoy, s.ns, r, 0, canary(80, 20)))

	step := "SetHeaderRoute(beta, X-Canary exact yes)"
	tr = do(step, func() types.RpcError {
		return s.plugin.SetHeaderRoute(ro, &v1alpha1.SetHeaderRoute{Name: "beta", Match: []v1alpha1.HeaderRoutingMatch{
			{HeaderName: "X-Canary", HeaderValue: &v1alpha1.StringMatch{Exact: "yes"}}}})
	})
	s.check(step, "a call with X-Canary: yes takes the header rule", checkTaken(tr.envoy, s.ns, r, call("/shop.Cart/Add", header("x-canary", "yes")),
		taken{Rule: "beta", Served: map[string]uint32{"canary": 1}}))
	s.check(step, "a call without it keeps the split", checkTaken(tr.envoy, s.ns, r, call("/shop.Cart/Add", nil), split))

	step = "SetMirrorRoute(35 %, /shop.Cart/)"
	tr = do(step, func() types.RpcError {
		return s.plugin.SetMirrorRoute(ro, &v1alpha1.SetMirrorRoute{Name: "mirror", Percentage: percent(35),
			Match: []v1alpha1.RouteMatch{{Path: &v1alpha1.StringMatch{Prefix: "/shop.Cart/"}}}})
	})
	s.check(step, "a Cart call is mirrored, stable answers", checkTaken(tr.envoy, s.ns, r, call("/shop.Cart/Add", nil),
		taken{Rule: "mirror", Served: map[string]uint32{"stable": 1}, Mirrors: []mirrorShare{{"canary", 35}}}))
	s.check(step, "another service's call keeps the split", checkTaken(tr.envoy, s.ns, r, call("/shop.Orders/List", nil), split))

	step = "RemoveManagedRoutes"
	tr = do(step, func() types.RpcError { return s.plugin.RemoveManagedRoutes(ro) })
	s.check(step, "no mirror policy", checkNoMirror(tr.envoy))
	s.check(step, "no xDS route of rule beta", checkNoRule(tr.envoy, "beta"))
	s.check(step, "a call with X-Canary: yes keeps the split", checkTaken(tr.envoy, s.ns, r, call("/shop.Cart/Add", header("x-canary", "yes")), split))
}
