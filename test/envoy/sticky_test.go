//go:build envoy

package envoy

import (
	"errors"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/argoproj/argo-rollouts/utils/plugin/types"
)

// stickyRoute has a hostname, a weighted rule and a rule for static content.
const stickyRoute = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: route}
spec:
  parentRefs: [{name: gw}]
  hostnames: [shop.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    backendRefs:
    - {name: stable, port: 80, weight: 100}
    - {name: canary, port: 80, weight: 0}
  - matches: [{path: {type: PathPrefix, value: /static}}]
    backendRefs: [{name: static, port: 80}]
`

func cookie(value string) map[string]string { return map[string]string{"cookie": value} }

// stickyCanary at 20 %: in Envoy the weighted rule keeps its split and each
// backend's answer sets its cookie; a request with a cookie takes the
// cookie's rule, served by that backend alone; a header rule still comes
// before the cookie rules. At 100 % the cookie rules are gone.
func TestStickyCanary(t *testing.T) {
	s := newScenario(t, "stickyCanary, HTTPRoute", "", "stable", "canary", "static")
	s.create(stickyRoute)
	ro := s.rollout(`{"httpRoute": "route", "stickyCanary": {"cookieName": "shop", "maxAgeSeconds": 600}}`)
	ro.Status.StableRS, ro.Status.CurrentPodHash = "aaa111", "bbb222"
	ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "beta"}}
	host := "shop.example.com"
	split := taken{Rule: "0", Served: map[string]uint32{"stable": 80, "canary": 20}}

	step := "SetWeight(20)"
	tr := s.do(step, func() types.RpcError { return s.plugin.SetWeight(ro, 20, nil) })
	s.check(step, "weights", checkWeights(tr.envoy, s.ns, httpRoute, 0, canary(80, 20)))
	s.check(step, "each backend sets its cookie", checkCookies(tr.envoy, s.ns, httpRoute, 0, map[string]string{
		"stable": "shop=stable-aaa111; Path=/; Max-Age=600; HttpOnly; SameSite=Lax",
		"canary": "shop=canary-bbb222; Path=/; Max-Age=600; HttpOnly; SameSite=Lax",
	}))
	s.check(step, "no cookie keeps the split", checkTaken(tr.envoy, s.ns, httpRoute, request{Host: host, Method: "GET", Path: "/cart"}, split))
	s.check(step, "the canary cookie takes the canary's rule", checkTaken(tr.envoy, s.ns, httpRoute,
		request{Host: host, Method: "GET", Path: "/cart", Headers: cookie("theme=dark; shop=canary-bbb222")},
		taken{Rule: "demo-sticky-canary", Served: map[string]uint32{"canary": 1}}))
	s.check(step, "the stable cookie takes the stable's rule", checkTaken(tr.envoy, s.ns, httpRoute,
		request{Host: host, Method: "GET", Path: "/cart", Headers: cookie("shop=stable-aaa111")},
		taken{Rule: "demo-sticky-stable", Served: map[string]uint32{"stable": 1}}))
	s.check(step, "an old canary's cookie keeps the split", checkTaken(tr.envoy, s.ns, httpRoute,
		request{Host: host, Method: "GET", Path: "/cart", Headers: cookie("shop=canary-0ld000")}, split))
	s.check(step, "/static stays the static rule's", checkTaken(tr.envoy, s.ns, httpRoute,
		request{Host: host, Method: "GET", Path: "/static/a.css", Headers: cookie("shop=canary-bbb222")},
		taken{Rule: "1", Served: map[string]uint32{"static": 1}}))

	step = "SetHeaderRoute(beta, X-Canary exact yes)"
	tr = s.do(step, func() types.RpcError {
		return s.plugin.SetHeaderRoute(ro, &v1alpha1.SetHeaderRoute{Name: "beta", Match: []v1alpha1.HeaderRoutingMatch{
			{HeaderName: "X-Canary", HeaderValue: &v1alpha1.StringMatch{Exact: "yes"}}}})
	})
	s.check(step, "the header rule wins over the stable cookie", checkTaken(tr.envoy, s.ns, httpRoute,
		request{Host: host, Method: "GET", Path: "/", Headers: map[string]string{"cookie": "shop=stable-aaa111", "x-canary": "yes"}},
		taken{Rule: "beta", Served: map[string]uint32{"canary": 1}}))

	step = "SetWeight(100)"
	tr = s.do(step, func() types.RpcError { return s.plugin.SetWeight(ro, 100, nil) })
	s.check(step, "weights", checkWeights(tr.envoy, s.ns, httpRoute, 0, canary(0, 100)))
	s.check(step, "no cookie rule", errors.Join(checkNoRule(tr.envoy, "demo-sticky-canary"), checkNoRule(tr.envoy, "demo-sticky-stable")))
	s.check(step, "no backend sets a cookie", checkCookies(tr.envoy, s.ns, httpRoute, 0, map[string]string{"canary": ""}))
}
