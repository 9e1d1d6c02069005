//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/cluster"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/traffic"
)

// runRouteCluster: the real controller runs a Rollout in its cluster whose
// HTTPRoute lives in the route cluster (docs/multicluster.md), where a
// Traefik of its own serves it, and Services of the same names have
// EndpointSlices to the test's backends, as a ClusterMesh global service's
// point at another cluster's pods. At every step the split is measured
// through that Traefik; the route of the same name is never created in the
// controller's cluster.
func runRouteCluster(t *testing.T, c *cluster.Cluster) {
	const ns, app, name = "route-cluster", "rc", "route-cluster"
	rc := c.RouteCluster
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	stable, canary := app+"-stable", app+"-canary"
	for _, create := range []func() error{
		func() error {
			_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := rc.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			return err
		},
	} {
		if err := create(); err != nil {
			t.Fatal(err)
		}
	}
	// The route cluster: the Services, their backends, the route.
	for _, s := range []string{stable, canary} {
		if _, err := rc.Backends.Serve(ctx, traffic.Backend{Namespace: ns, Service: s, PortName: "main"}); err != nil {
			t.Fatalf("backend of Service %s in the route cluster: %v", s, err)
		}
	}
	if err := cluster.CreateObjects(ctx, rc.Dynamic, ns, service(stable, app, 80)+service(canary, app, 80)+httpRoute(name, stable, canary), "e2e-create"); err != nil {
		t.Fatal(err)
	}
	// The controller's cluster: the Services (the controller needs them) and the Rollout.
	strategy := `stableService: ` + stable + `
canaryService: ` + canary + `
trafficRouting:
  plugins:
    ` + cluster.PluginName + `:
      cluster: ` + cluster.RouteClusterName + `
      httpRoute: ` + name + `
steps:
- setWeight: 30
- pause: {}
- setWeight: 70
- pause: {}`
	if err := c.CreateObjects(ctx, ns, service(stable, app, 80)+service(canary, app, 80)+rolloutYAML(app, strategy), "e2e-create"); err != nil {
		t.Fatal(err)
	}

	req := traffic.Request{Host: host(name)}
	var lines []string
	measure := func(step string, weights map[string]int64, since time.Time) {
		t.Helper()
		var seen time.Time
		err := c.Await(ctx, 2*time.Minute, func() (string, error) {
			u, err := rc.Dynamic.Resource(cluster.RouteGVR("HTTPRoute")).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err.Error(), nil
			}
			rules := cluster.Rules(u)
			if got := checkWeights(rules, weights); len(got) > 0 {
				return "route in the route cluster: " + strings.Join(got, "; "), nil
			}
			seen = time.Now()
			return "", nil
		})
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		conv, err := rc.Meter.Converge(ctx, req, weights, measureRequests, seen, convergeTimeout)
		if err != nil {
			t.Fatalf("%s: through the route cluster's Traefik: %v", step, err)
		}
		lines = append(lines, fmt.Sprintf("%s: route %v; %s; the route carried the weights %s after the step began, Traefik %s after that",
			step, weights, conv.Counts.Describe(weights), seen.Sub(since).Round(time.Millisecond), conv.Moved.Round(time.Millisecond)))
	}

	begin := time.Now()
	if _, err := c.AwaitRollout(ctx, ns, app, cluster.RolloutWant{Phase: "Healthy"}, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	measure("installed", map[string]int64{stable: 100, canary: 0}, begin)

	begin = time.Now()
	if err := c.SetImage(ctx, ns, app, "registry.example/"+app+":v2"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AwaitRollout(ctx, ns, app, cluster.RolloutWant{Phase: "Paused", StepIndex: index(1)}, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	measure("setWeight 30", map[string]int64{stable: 70, canary: 30}, begin)

	begin = time.Now()
	if err := c.Promote(ctx, ns, app); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AwaitRollout(ctx, ns, app, cluster.RolloutWant{Phase: "Paused", StepIndex: index(3)}, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	measure("setWeight 70", map[string]int64{stable: 30, canary: 70}, begin)

	begin = time.Now()
	if err := c.Promote(ctx, ns, app); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AwaitRollout(ctx, ns, app, cluster.RolloutWant{Phase: "Healthy", Promoted: true}, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	measure("promoted", map[string]int64{stable: 100, canary: 0}, begin)
	addToReport("route-cluster", lines...)
	for _, l := range lines {
		t.Log(l)
	}

	// Every write was in the route cluster: the controller's cluster has no
	// route of that name, and the plugin's log says where it wrote.
	if _, err := c.Dynamic.Resource(cluster.RouteGVR("HTTPRoute")).Namespace(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the controller's cluster has HTTPRoute %s/%s (or it cannot be read: %v)", ns, name, err)
	}
	if got := c.ControllerLog.Find(1, "applied route", "routeCluster="+cluster.RouteClusterName, "route=\"HTTPRoute "+ns+"/"+name+"\""); len(got) == 0 {
		t.Errorf("the plugin's log has no write of HTTPRoute %s/%s in route cluster %s", ns, name, cluster.RouteClusterName)
	}
	u, err := rc.Dynamic.Resource(cluster.RouteGVR("HTTPRoute")).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if left := pluginLeftovers(u); len(left) > 0 {
		t.Errorf("after the rollout the route in the route cluster still has: %v", left)
	}
}
