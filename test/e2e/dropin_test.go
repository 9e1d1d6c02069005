//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/plan"
	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/cluster"
)

// Scenarios of the drop-in and preflight features with the real controller:
// a Rollout deleted mid-canary (the plugin runs with
// -cleanup-deleted-rollouts), the loop the controller runs while the canary
// has no available pods, and a plan that must equal what the controller
// then writes.

// runDeletedRollout: the Rollout is deleted while its canary has 30 %; the
// plugin's sweep puts the route back as it was.
func runDeletedRollout(t *testing.T, c *cluster.Cluster) {
	sc := scenario{
		name: "deleted-rollout",
		objects: service("gone-stable", "gone", 80) + service("gone-canary", "gone", 80) + httpRoute("gone", "gone-stable", "gone-canary") +
			rolloutYAML("gone", `
stableService: gone-stable
canaryService: gone-canary
trafficRouting:
  plugins:
    argoproj-labs/gatewayAPI:
      httpRoute: gone
steps:
- setWeight: 30
- pause: {}`),
		rollout: "gone",
		route:   routeRef{"HTTPRoute", "gone"},
		steps: []step{
			installed(map[string]int64{"gone-stable": 100, "gone-canary": 0}),
			{name: "image v2: canary 30, paused", do: img("gone", "v2"),
				want: want{phase: "Paused", stepIndex: index(1), weights: map[string]int64{"gone-stable": 70, "gone-canary": 30}}},
		},
	}
	runScenario(t, c, sc)
	ns := "e2e-" + sc.name
	ctx := context.Background()
	deleted := time.Now()
	background := metav1.DeletePropagationBackground
	if err := c.Dynamic.Resource(cluster.RolloutsGVR).Namespace(ns).Delete(ctx, "gone", metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
		t.Fatal(err)
	}
	var last *unstructured.Unstructured
	err := c.Await(ctx, time.Minute, func() (string, error) {
		u, err := c.Route(ctx, ns, "HTTPRoute", "gone")
		if err != nil {
			return "", err
		}
		last = u
		if problems := checkWeights(cluster.Rules(u), map[string]int64{"gone-stable": 100, "gone-canary": 0}); len(problems) > 0 {
			return strings.Join(problems, "; "), nil
		}
		if _, claimed := u.GetAnnotations()[routes.ClaimsAnnotation]; claimed {
			return "the claims annotation is still there", nil
		}
		for _, e := range u.GetManagedFields() {
			if e.Manager == "argo-rollouts-gatewayapi" {
				return "the plugin still has a managedFields entry", nil
			}
		}
		return "", nil
	})
	if err != nil {
		t.Fatalf("the deleted Rollout's route did not go back to stable: %v\nroute: %v", err, cluster.Rules(last))
	}
	line := fmt.Sprintf("deleted-rollout: route back to stable 100 / canary 0, claims gone, the plugin owning nothing, %.1fs after the Rollout was deleted (-cleanup-interval=2s)",
		time.Since(deleted).Seconds())
	(&run{sc: sc}).record(t, line)
}

// runNoAvailableCanary: the new ReplicaSet's pods can never be scheduled
// while a setHeaderRoute step is due. On every reconcile in that state the
// controller calls RemoveManagedRoutes, then SetHeaderRoute while that step
// is the current one, then SetWeight (rollout/trafficrouting.go); the test
// counts what that costs: for a Rollout that moves on to its pause (the step
// completes at once), and for one paused by a user on that step, where the
// step stays current and the rule is removed and put back every time.
func runNoAvailableCanary(t *testing.T, c *cluster.Cluster) {
	for _, tc := range []struct {
		name, app string
		// pausedByUser sets spec.paused with the update: the step stays current.
		pausedByUser bool
	}{
		{"no-available-canary", "nac", false},
		{"no-available-canary-paused", "nacp", true},
	} {
		sc := scenario{
			name: tc.name,
			objects: service(tc.app+"-stable", tc.app, 80) + service(tc.app+"-canary", tc.app, 80) + httpRoute(tc.app, tc.app+"-stable", tc.app+"-canary") +
				rolloutYAML(tc.app, `
stableService: `+tc.app+`-stable
canaryService: `+tc.app+`-canary
trafficRouting:
  managedRoutes:
  - name: beta
  plugins:
    argoproj-labs/gatewayAPI:
      httpRoute: `+tc.app+`
steps:
- setHeaderRoute:
    name: beta
    match:
    - headerName: X-Canary
      headerValue:
        exact: "yes"
- pause: {}`),
			rollout: tc.app,
			route:   routeRef{"HTTPRoute", tc.app},
			steps:   []step{installed(map[string]int64{tc.app + "-stable": 100, tc.app + "-canary": 0})},
		}
		runScenario(t, c, sc)
		ns := "e2e-" + sc.name
		ctx := context.Background()
		// v2 asks for a node label no node has: its pods stay Pending.
		patch := `[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"registry.example/` + tc.app + `:v2"},
			{"op":"add","path":"/spec/template/spec/nodeSelector","value":{"e2e.example/none":"none"}}`
		if tc.pausedByUser {
			patch += `,{"op":"add","path":"/spec/paused","value":true}`
		}
		patch += `]`
		changed := time.Now()
		if _, err := c.Dynamic.Resource(cluster.RolloutsGVR).Namespace(ns).Patch(ctx, tc.app, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		// The transition first (the update's own reconciles), then the loop.
		time.Sleep(5 * time.Second)
		settled := time.Now()
		const window = 40 * time.Second
		time.Sleep(window)
		count := func(from, to time.Time, words ...string) int {
			n := 0
			for _, l := range c.ControllerLog.FindLines(100000, words...) {
				if l.At.After(from) && !l.At.After(to) {
					n++
				}
			}
			return n
		}
		end := time.Now()
		figures := func(from, to time.Time) (reconciles, applies, releases int) {
			return count(from, to, "Reconciling TrafficRouting", "namespace="+ns),
				count(from, to, "applied route", "rollout="+ns+"/"+tc.app),
				count(from, to, "released route", "rollout="+ns+"/"+tc.app)
		}
		tr, ta, trel := figures(changed, settled)
		lr, la, lrel := figures(settled, end)
		line := fmt.Sprintf("%s: update with the canary's pods Pending: %d reconciles, %d applies, %d releases; then in %s: %d reconciles, %d applies, %d releases",
			tc.name, tr, ta, trel, window, lr, la, lrel)
		if lr > 0 {
			line += fmt.Sprintf(" (%.1f applies a reconcile)", float64(la)/float64(lr))
		}
		(&run{sc: sc}).record(t, line)
		if lrel > 0 {
			t.Errorf("%s: the plugin gave the route away %d times in the loop; only the end of the rollout gives it back", tc.name, lrel)
		}
		if la > 2*lr+1 { // +1: a reconcile straddling the window's start
			t.Errorf("%s: %d applies for %d reconciles: more than the two a reconcile (remove, re-add) the loop needs", tc.name, la, lr)
		}
	}
}

// runPlanMatchesController: plan the Rollout's steps against the cluster
// before the update, then let the controller walk them; every state of the
// route's rules the controller's writes produce must be the plan's, in the
// plan's order.
func runPlanMatchesController(t *testing.T, c *cluster.Cluster) {
	sc := scenario{
		name: "plan-matches",
		objects: service("pm-stable", "pm", 80) + service("pm-canary", "pm", 80) + httpRoute("pm", "pm-stable", "pm-canary") +
			rolloutYAML("pm", `
stableService: pm-stable
canaryService: pm-canary
trafficRouting:
  managedRoutes:
  - name: beta
  plugins:
    argoproj-labs/gatewayAPI:
      httpRoute: pm
steps:
- setWeight: 20
- setHeaderRoute:
    name: beta
    match:
    - headerName: X-Canary
      headerValue:
        exact: "yes"
- pause: {}
- setWeight: 50
- pause: {}`),
		rollout: "pm",
		route:   routeRef{"HTTPRoute", "pm"},
		steps:   []step{installed(map[string]int64{"pm-stable": 100, "pm-canary": 0})},
	}
	runScenario(t, c, sc)
	ns := "e2e-" + sc.name
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	ro, err := c.Rollout(ctx, ns, "pm")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	p := plan.Compute(ctx, plan.Input{Rollout: ro, Process: rollout.Process{PluginName: rollout.DefaultPluginName, FieldManager: "argo-rollouts-gatewayapi"},
		Reader: kube.NewCluster(gw.GatewayV1().RESTClient(), logrus.NewEntry(log)), Services: kube.DynamicServices{Dynamic: c.Dynamic}})
	if len(p.Problems) > 0 {
		t.Fatalf("the plan has problems: %+v", p.Problems)
	}
	start, err := c.Route(ctx, ns, "HTTPRoute", "pm")
	if err != nil {
		t.Fatal(err)
	}
	planned := []string{rulesJSON(t, start.Object["spec"].(map[string]any)["rules"])}
	for _, w := range p.Writes {
		if strings.HasPrefix(w.Step, "abort") {
			continue // the abort is planned from the last step, not walked here
		}
		planned = appendNew(planned, rulesJSON(t, w.Route.Rules))
		t.Logf("plan %-40s %-22s %s", w.Step, w.Call, planned[len(planned)-1])
	}

	w, err := c.Dynamic.Resource(cluster.RouteGVR("HTTPRoute")).Namespace(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=pm", ResourceVersion: start.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	seen := make(chan []string, 1)
	go func() {
		states := []string{planned[0]}
		for ev := range w.ResultChan() {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok && ev.Type == watch.Modified {
				states = appendNew(states, rulesJSON(t, u.Object["spec"].(map[string]any)["rules"]))
			}
		}
		seen <- states
	}()

	r := &run{c: c, sc: sc, ns: ns}
	for _, st := range []step{
		{name: "image v2: canary 20, header rule, paused", do: img("pm", "v2"), want: want{phase: "Paused", stepIndex: index(2), rules: 2,
			weights: map[string]int64{"pm-stable": 80, "pm-canary": 20}}},
		{name: "promote: canary 50, paused", do: action{kind: promote}, want: want{phase: "Paused", stepIndex: index(4), rules: 2,
			weights: map[string]int64{"pm-stable": 50, "pm-canary": 50}}},
		{name: "promote: Healthy, route back to stable", do: action{kind: promote}, want: want{phase: "Healthy", promoted: true, rules: 1,
			weights: map[string]int64{"pm-stable": 100, "pm-canary": 0}}},
	} {
		r.do(t, st.do)
		r.await(t, st)
	}
	time.Sleep(2 * time.Second) // the last events reach the watch
	w.Stop()
	observed := <-seen
	if strings.Join(observed, "\n") != strings.Join(planned, "\n") {
		t.Errorf("the controller's writes differ from the plan:\nplanned:\n  %s\nobserved:\n  %s", strings.Join(planned, "\n  "), strings.Join(observed, "\n  "))
	}
	line := fmt.Sprintf("plan-matches: the %d states of the route's rules the real controller's writes produced are the plan's %d, in order", len(observed), len(planned))
	(&run{sc: sc}).record(t, line)
}

// rulesJSON is rules as canonical JSON.
func rulesJSON(t *testing.T, rules any) string {
	t.Helper()
	data, err := json.Marshal(rules)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	data, _ = json.Marshal(v)
	return string(data)
}

// appendNew appends s unless it is the last state already.
func appendNew(states []string, s string) []string {
	if len(states) > 0 && states[len(states)-1] == s {
		return states
	}
	return append(states, s)
}
