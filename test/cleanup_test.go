package test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// A Rollout deleted while its canary held traffic: nothing calls the plugin
// for it again. The cleanup command, and the plugin's opt-in sweep, undo
// what it left, and leave everything else as it was before the rollout.

var rolloutsGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}

func rolloutObject(name, route string) string {
	return `apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: ` + name + `}
spec:
  replicas: 1
  selector: {matchLabels: {app: ` + name + `}}
  template:
    metadata: {labels: {app: ` + name + `}}
    spec: {containers: [{name: app, image: "app:v1"}]}
  strategy:
    canary:
      stableService: stable
      canaryService: canary
      trafficRouting:
        plugins:
          argoproj-labs/gatewayAPI: {httpRoute: ` + route + `}
        managedRoutes: [{name: beta}]
`
}

func deleteRollout(t *testing.T, standard *harness.Cluster, ns, name string) {
	t.Helper()
	if err := standard.Dynamic.Resource(rolloutsGVR).Namespace(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// cleanupCommand runs the binary's cleanup command against the test cluster.
func cleanupCommand(t *testing.T, standard *harness.Cluster, args ...string) (string, int) {
	t.Helper()
	return runBinary(t, nil, append([]string{"cleanup", "--kubeconfig", standard.Kubeconfig}, args...)...)
}

// walkMidCanary puts a Rollout mid-canary on route: weight 30 with an
// experiment, and a header rule.
func walkMidCanary(t *testing.T, standard *harness.Cluster, ns, name, route string) {
	t.Helper()
	p := startPlugin(t, standard)
	ro := managedRollout(ns, name, `{"httpRoute": "`+route+`"}`, "beta")
	must(t, name+" SetWeight", p.SetWeight(ro, 30, experimentDestinations(5, 10)))
	must(t, name+" SetHeaderRoute", p.SetHeaderRoute(ro, headerStep("beta", "X-Canary", "yes")))
}

func TestCleanupCommand(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	for _, svc := range []string{"exp-baseline", "exp-canary"} {
		service(t, standard, ns, svc, "http:80")
	}
	created := create(t, standard, ns, headerRoute)
	create(t, standard, ns, rolloutObject("demo", "route"))
	walkMidCanary(t, standard, ns, "demo", "route")
	before := get(t, standard, "v1", "HTTPRoute", ns, "route").GetResourceVersion()

	if out, code := cleanupCommand(t, standard, ns+"/demo"); code != 1 || !strings.Contains(out, "Rollout "+ns+"/demo exists") {
		t.Errorf("cleanup of an existing Rollout: exit %d, %q; want 1 and a refusal", code, out)
	}
	deleteRollout(t, standard, ns, "demo")
	if out, code := cleanupCommand(t, standard, "--dry-run", ns+"/demo"); code != 0 || !strings.Contains(out, "HTTPRoute "+ns+"/route: would change") || !strings.Contains(out, "− rule beta") {
		t.Errorf("dry run: exit %d, %q", code, out)
	}
	if after := get(t, standard, "v1", "HTTPRoute", ns, "route").GetResourceVersion(); after != before {
		t.Errorf("the dry run wrote (resourceVersion %s → %s)", before, after)
	}
	if out, code := cleanupCommand(t, standard, "-n", ns, ns+"/demo"); code != 0 || !strings.Contains(out, "undone") {
		t.Errorf("cleanup: exit %d, %q", code, out)
	}
	u := get(t, standard, "v1", "HTTPRoute", ns, "route")
	if diff := cmp.Diff(normalizeJSON(t, created.Object["spec"]), normalizeJSON(t, u.Object["spec"])); diff != "" {
		t.Errorf("after cleanup the spec is not as before the rollout (-before +after):\n%s", diff)
	}
	pluginOwnsNothing(t, u)
	if out, code := cleanupCommand(t, standard, ns+"/demo"); code != 0 || !strings.Contains(out, "nothing to do") {
		t.Errorf("cleanup again: exit %d, %q", code, out)
	}
}

// With -cleanup-deleted-rollouts the plugin does it by itself; a Rollout
// deleted and created again under the same name is left alone.
//
// Serial: the sweep lists Rollouts and routes cluster-wide every second.
// Beside the tests in parallel (-parallel 4) its client's rate limiter left
// no sweep time to write, and the route was not cleaned in 20 s.
func TestCleanupSweep(t *testing.T) {
	ns := namespace(t, standard)
	for _, svc := range []string{"exp-baseline", "exp-canary"} {
		service(t, standard, ns, svc, "http:80")
	}
	gone := create(t, standard, ns, strings.Replace(headerRoute, "name: route", "name: gone", 1))
	create(t, standard, ns, strings.Replace(headerRoute, "name: route", "name: back", 1))
	create(t, standard, ns, rolloutObject("gone", "gone"))
	create(t, standard, ns, rolloutObject("back", "back"))
	walkMidCanary(t, standard, ns, "gone", "gone")
	walkMidCanary(t, standard, ns, "back", "back")
	backBefore := get(t, standard, "v1", "HTTPRoute", ns, "back")

	startPlugin(t, standard, "-cleanup-deleted-rollouts", "-cleanup-interval=1s")
	deleteRollout(t, standard, ns, "gone")
	deleteRollout(t, standard, ns, "back")
	create(t, standard, ns, rolloutObject("back", "back"))

	start := time.Now()
	// The sweep applies the route without the claim, then gives its
	// ownership back with an Update: wait for both.
	eventuallyWithin(t, 20*time.Second, "the deleted Rollout's route back to stable and released", func() bool {
		u := get(t, standard, "v1", "HTTPRoute", ns, "gone")
		_, claimed := u.GetAnnotations()["gatewayapi-ssa.dev/claims"]
		return !claimed && !slices.ContainsFunc(u.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool { return e.Manager == fieldManager })
	})
	t.Logf("the sweep cleaned the route %s after the Rollout was deleted", time.Since(start).Round(100*time.Millisecond))
	u := get(t, standard, "v1", "HTTPRoute", ns, "gone")
	if diff := cmp.Diff(normalizeJSON(t, gone.Object["spec"]), normalizeJSON(t, u.Object["spec"])); diff != "" {
		t.Errorf("after the sweep the spec is not as before the rollout (-before +after):\n%s", diff)
	}
	pluginOwnsNothing(t, u)

	// Three more sweeps: the recreated Rollout's route is as it was.
	time.Sleep(3 * time.Second)
	back := get(t, standard, "v1", "HTTPRoute", ns, "back")
	if back.GetResourceVersion() != backBefore.GetResourceVersion() {
		t.Errorf("the route of a Rollout deleted and created again was written (resourceVersion %s → %s)",
			backBefore.GetResourceVersion(), back.GetResourceVersion())
	}
}
