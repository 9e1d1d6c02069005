package test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	rolloutsrpc "github.com/argoproj/argo-rollouts/rollout/trafficrouting/plugin/rpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The tests of this file are serial: instrumentedPlugin sets GORACE
// (t.Setenv), and TestTenRolloutsAtOnce measures the plugin under load.

// Both tests run the plugin built with -race and the faultinject tag
// (instrumentedPlugin): a data race halts it, and a route annotation makes it
// panic where the test asks.

// A transform that panics, in the decision on the RPC goroutine or in the
// write on a route's goroutine, is an RpcError naming the call; the plugin
// process lives on and the next call works. The panic never reaches the RPC
// boundary, where it would kill the plugin under the controller.
func TestNoPanicCrossesTheRPCBoundary(t *testing.T) {
	bin := instrumentedPlugin(t)
	ns := namespace(t, standard)
	panicking := func(name, where string) string {
		return strings.Replace(routeYAML("v1", "HTTPRoute", name), "metadata:\n",
			"metadata:\n  annotations: {faultinject.gatewayapi-ssa.dev/panic: "+where+"}\n", 1)
	}
	create(t, standard, ns, panicking("decide", "decide"))
	create(t, standard, ns, panicking("write", "write"))
	create(t, standard, ns, routeYAML("v1", "HTTPRoute", "plain"))
	p, log := startPluginWith(t, bin, standard.Kubeconfig)

	err := p.SetWeight(rollout(ns, `{"httpRoute": "decide"}`), 30, nil)
	t.Logf("a transform panics deciding: %s", err.ErrorString)
	if !strings.Contains(err.ErrorString, "rollout "+ns+"/demo: SetWeight(30): internal error in the plugin: faultinject: a transform panicked deciding HTTPRoute "+ns+"/decide") {
		t.Errorf("SetWeight = %q, want the panic as an internal error", err.ErrorString)
	}
	err = p.SetWeight(rollout(ns, `{"httpRoutes": [{"name": "plain"}, {"name": "write"}]}`), 30, nil)
	t.Logf("a write panics: %s", err.ErrorString)
	if !strings.Contains(err.ErrorString, "1 of 2 routes failed") || !strings.Contains(err.ErrorString, "HTTPRoute "+ns+"/write: internal error: faultinject: a write panicked") {
		t.Errorf("SetWeight = %q, want the write's panic as that route's error", err.ErrorString)
	}
	if got := p.Type(); got != "GatewayAPI" {
		t.Fatalf("after the panics the plugin answers Type() = %q", got)
	}
	if err := p.SetWeight(rollout(ns, `{"httpRoute": "plain"}`), 60, nil); err.HasError() {
		t.Fatalf("the call after the panics: %s", err)
	}
	if w := weights(get(t, standard, "v1", "HTTPRoute", ns, "plain")); w["0/canary"] != 60 {
		t.Errorf("after the panics, canary %d, want 60", w["0/canary"])
	}
	if n := log.Count("panic: faultinject"); n != 1 {
		t.Errorf("%d log lines with the decision's panic and its stack, want 1", n)
	}
}

// Ten Rollouts call one plugin process at once, as the controller's ten
// workers do: eight on routes of their own, two sharing one route (a rule
// each). Each walks weights, a header route, an experiment and the end; every
// call succeeds, every step leaves its Rollout's weights exact, and the race
// detector finds nothing.
func TestTenRolloutsAtOnce(t *testing.T) {
	bin := instrumentedPlugin(t)
	ns := namespace(t, standard)
	const rollouts = 10
	service(t, standard, ns, "exp-baseline", "http:80")
	service(t, standard, ns, "exp-canary", "http:80")
	for i := range rollouts {
		service(t, standard, ns, fmt.Sprintf("stable-%d", i), "http:80")
		service(t, standard, ns, fmt.Sprintf("canary-%d", i), "http:80")
	}
	rule := func(path string, i int) string {
		return fmt.Sprintf("  - matches: [{path: {type: PathPrefix, value: %s}}]\n    backendRefs:\n    - {name: stable-%d, port: 80, weight: 100}\n    - {name: canary-%d, port: 80, weight: 0}\n", path, i, i)
	}
	routeOf := func(i int) string {
		if i >= 8 {
			return "shared"
		}
		return fmt.Sprintf("route-%d", i)
	}
	for i := range 8 {
		create(t, standard, ns, fmt.Sprintf("apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: %s}\nspec:\n  rules:\n%s", routeOf(i), rule("/", i)))
	}
	create(t, standard, ns, "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: shared}\nspec:\n  rules:\n"+rule("/a", 8)+rule("/b", 9))
	p, log := startPluginWith(t, bin, standard.Kubeconfig, "-loglevel=debug")

	type step struct {
		name        string
		do          func(p rolloutsrpc.TrafficRouterPlugin, ro *v1alpha1.Rollout) rpcErr
		canary, exp int64
	}
	header := func(ro *v1alpha1.Rollout, on bool) *v1alpha1.SetHeaderRoute {
		h := &v1alpha1.SetHeaderRoute{Name: ro.Name + "-header"}
		if on {
			h.Match = []v1alpha1.HeaderRoutingMatch{{HeaderName: "X-" + ro.Name, HeaderValue: &v1alpha1.StringMatch{Exact: "yes"}}}
		}
		return h
	}
	walk := []step{}
	for _, w := range []int32{10, 30} {
		walk = append(walk, step{fmt.Sprintf("SetWeight(%d)", w), func(p rolloutsrpc.TrafficRouterPlugin, ro *v1alpha1.Rollout) rpcErr { return p.SetWeight(ro, w, nil) }, int64(w), 0})
	}
	walk = append(walk,
		step{"SetHeaderRoute", func(p rolloutsrpc.TrafficRouterPlugin, ro *v1alpha1.Rollout) rpcErr {
			return p.SetHeaderRoute(ro, header(ro, true))
		}, 30, 0},
		step{"SetWeight(40) with experiment 5/5", func(p rolloutsrpc.TrafficRouterPlugin, ro *v1alpha1.Rollout) rpcErr {
			return p.SetWeight(ro, 40, experimentDestinations(5, 5))
		}, 40, 10},
		step{"SetWeight(60)", func(p rolloutsrpc.TrafficRouterPlugin, ro *v1alpha1.Rollout) rpcErr { return p.SetWeight(ro, 60, nil) }, 60, 0},
		step{"RemoveManagedRoutes", func(p rolloutsrpc.TrafficRouterPlugin, ro *v1alpha1.Rollout) rpcErr { return p.RemoveManagedRoutes(ro) }, 60, 0},
		step{"SetWeight(100)", func(p rolloutsrpc.TrafficRouterPlugin, ro *v1alpha1.Rollout) rpcErr { return p.SetWeight(ro, 100, nil) }, 100, 0},
		step{"SetWeight(0)", func(p rolloutsrpc.TrafficRouterPlugin, ro *v1alpha1.Rollout) rpcErr { return p.SetWeight(ro, 0, nil) }, 0, 0},
	)
	var wg sync.WaitGroup
	errs := make([][]string, rollouts)
	start := time.Now()
	for i := range rollouts {
		ro := rollout(ns, fmt.Sprintf(`{"httpRoute": %q}`, routeOf(i)))
		ro.Name = fmt.Sprintf("ro-%d", i)
		ro.Spec.Strategy.Canary.StableService, ro.Spec.Strategy.Canary.CanaryService = fmt.Sprintf("stable-%d", i), fmt.Sprintf("canary-%d", i)
		ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: ro.Name + "-header"}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, s := range walk {
				if err := s.do(p, ro); err.HasError() {
					errs[i] = append(errs[i], fmt.Sprintf("%s %s: %s", ro.Name, s.name, err.ErrorString))
					return
				}
				// The Rollout's rule is exact after every one of its steps,
				// whatever the others are doing.
				u, err := standard.Dynamic.Resource(httpRoutes).Namespace(ns).Get(context.Background(), routeOf(i), metav1.GetOptions{})
				if err != nil {
					errs[i] = append(errs[i], err.Error())
					return
				}
				got := map[string]int64{}
				for k, v := range weights(u) {
					if strings.HasSuffix(k, fmt.Sprintf("/stable-%d", i)) || strings.HasSuffix(k, fmt.Sprintf("/canary-%d", i)) {
						got[k] = v
					}
				}
				rule := 0
				if i == 9 {
					rule = 1
				}
				want := map[string]int64{fmt.Sprintf("%d/stable-%d", rule, i): 100 - s.canary - s.exp, fmt.Sprintf("%d/canary-%d", rule, i): s.canary}
				for k, v := range want {
					if got[k] != v {
						errs[i] = append(errs[i], fmt.Sprintf("%s after %s: %s = %d, want %d (rule weights %v)", ro.Name, s.name, k, got[k], v, got))
					}
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	failed := 0
	for _, e := range errs {
		for _, msg := range e {
			failed++
			t.Error(msg)
		}
	}
	t.Logf("%d Rollouts × %d steps at once on one plugin process (-race): %s, %d failures, %d writes logged, %d conflicts retried",
		rollouts, len(walk), elapsed.Round(time.Millisecond), failed, log.Count("applied route")+log.Count("released route"), log.Count("route changed since it was read"))
	if n := log.Count("DATA RACE"); n != 0 {
		t.Errorf("the race detector reported %d races", n)
	}
	if got := p.Type(); got != "GatewayAPI" {
		t.Fatalf("after the walks the plugin answers Type() = %q", got)
	}
	for i := range 8 {
		u := get(t, standard, "v1", "HTTPRoute", ns, routeOf(i))
		for _, e := range u.GetManagedFields() {
			if e.Manager == fieldManager {
				t.Errorf("%s: the plugin did not give its ownership back", routeOf(i))
			}
		}
	}
	shared := get(t, standard, "v1", "HTTPRoute", ns, "shared")
	if _, ok := shared.GetAnnotations()["gatewayapi-ssa.dev/claims"]; ok {
		t.Errorf("the shared route keeps claims after both rollouts ended: %v", shared.GetAnnotations())
	}
}
