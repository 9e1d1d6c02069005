package cli

import (
	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// writeFiles writes each name → content into a new temporary directory and
// returns the paths, by name.
func writeFiles(t *testing.T, files map[string]string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	out := map[string]string{}
	for name, content := range files {
		out[name] = filepath.Join(dir, name)
		if err := os.WriteFile(out[name], []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// plainRouteFile is route web as its author keeps it in Git, with the
// Rollout's Services: what `plan --routes` reads instead of a cluster.
const plainRouteFile = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: shop}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    backendRefs:
    - {name: stable, port: 80, weight: 100}
    - {name: canary, port: 80, weight: 0}
---
apiVersion: v1
kind: Service
metadata: {name: stable, namespace: shop}
spec: {ports: [{name: http, port: 80, targetPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: canary, namespace: shop}
spec: {ports: [{name: http, port: 80, targetPort: 8080}]}
`

// demoPlanSteps is the plan of demoRollout on plainRoute, step by step:
// what every plan of it prints before its checks.
const demoPlanSteps = `Rollout shop/demo: 1 route(s): HTTPRoute shop/web

step 1: setWeight 30
  calls: SetWeight(30)
  HTTPRoute shop/web:
    rule 0 Service shop/stable 100→70
    rule 0 Service shop/canary 0→30
    label rollouts.argoproj.io/gatewayapi-canary set
    annotation gatewayapi-ssa.dev/claims set

step 2: pause
  calls: SetWeight(30)
  HTTPRoute shop/web: no change

promotion: every step done
  calls: SetWeight(100)
  HTTPRoute shop/web:
    rule 0 Service shop/stable 70→0
    rule 0 Service shop/canary 30→100
    annotation gatewayapi-ssa.dev/claims set

promotion: the new version is stable
  calls: RemoveManagedRoutes, SetWeight(0)
  HTTPRoute shop/web:
    rule 0 Service shop/stable 0→100
    rule 0 Service shop/canary 100→0
    label rollouts.argoproj.io/gatewayapi-canary no longer applied
    annotation gatewayapi-ssa.dev/claims no longer applied

abort (from the last step)
  calls: RemoveManagedRoutes, SetWeight(0)
  HTTPRoute shop/web:
    rule 0 Service shop/stable 70→100
    rule 0 Service shop/canary 30→0
    label rollouts.argoproj.io/gatewayapi-canary no longer applied
    annotation gatewayapi-ssa.dev/claims no longer applied

`

// Before the first rollout, with no cluster at hand: `plan -f rollout.yaml
// --routes routes.yaml` shows each step's calls and what they change on the
// route, the weight going 100/0 → 70/30 at setWeight 30, then the
// promotion and an abort; it checks nothing against a cluster, finds no
// problem, and exits 0.
func TestPlanFromFiles(t *testing.T) {
	api := kubetest.New(t) // the kubeconfig's cluster, which the plan must not need
	files := writeFiles(t, map[string]string{"rollout.yaml": demoRollout, "routes.yaml": plainRouteFile})
	code, out, errOut := runCLI(t, "plan", "-f", files["rollout.yaml"], "--routes", files["routes.yaml"])
	if got := api.Requests(); len(got) > 0 {
		t.Errorf("a plan from files asked the cluster: %v", got)
	}
	if code != 0 || errOut != "" {
		t.Errorf("plan: exit %d, stderr %q; want 0 and nothing", code, errOut)
	}
	want := demoPlanSteps + `checks: none against a cluster: routes from ROUTES
problems: none
`
	if diff := cmp.Diff(want, strings.ReplaceAll(out, files["routes.yaml"], "ROUTES")); diff != "" {
		t.Errorf("the plan (-want +got):\n%s", diff)
	}
}

// A Rollout whose plugin config names a route that is not in the files:
// exit status 1, and the plan's problem names the route it did not find.
func TestPlanOfARolloutWhoseRouteIsMissing(t *testing.T) {
	rollout := strings.Replace(demoRollout, "{httpRoute: web}", "{httpRoute: webb}", 1)
	files := writeFiles(t, map[string]string{"rollout.yaml": rollout, "routes.yaml": plainRouteFile})
	code, out, errOut := runCLI(t, "plan", "-f", files["rollout.yaml"], "--routes", files["routes.yaml"])
	if code != 1 || errOut != "" {
		t.Errorf("plan: exit %d, stderr %q; want 1 and nothing", code, errOut)
	}
	want := "Rollout shop/demo: 0 route(s): \n" + `
step 1: setWeight 30
  calls: SetWeight(30)

step 2: pause
  calls: SetWeight(30)

promotion: every step done
  calls: SetWeight(100)

promotion: the new version is stable
  calls: RemoveManagedRoutes, SetWeight(0)

abort (from the last step)
  calls: RemoveManagedRoutes, SetWeight(0)

checks: none against a cluster: routes from ROUTES
problems: 1
  - routes: HTTPRoute shop/webb not found: create it, or fix the route's name or namespace in the rollout's plugin config
`
	if diff := cmp.Diff(want, strings.ReplaceAll(out, files["routes.yaml"], "ROUTES")); diff != "" {
		t.Errorf("the plan (-want +got):\n%s", diff)
	}
}

// Against a cluster, plan reads the route from it, sends the route each
// step leaves as a server-side dry run, checks the Rollout's Services and
// the permissions the plugin needs: all pass here, so it exits 0. Every
// write it sent was a dry run of the plugin's field manager: the route is as
// it was.
func TestPlanAgainstACluster(t *testing.T) {
	api := kubetest.New(t, plainRoute, serviceObject("stable"), serviceObject("canary"))
	files := writeFiles(t, map[string]string{"rollout.yaml": demoRollout})
	code, out, errOut := runCLI(t, "plan", "--kubeconfig", api.Kubeconfig, "-f", files["rollout.yaml"], "--timeout", "30s")
	if code != 0 || errOut != "" {
		t.Errorf("plan: exit %d, stderr %q; want 0 and nothing", code, errOut)
	}
	want := demoPlanSteps + "checks: every computed route sent as a server-side dry-run apply; the Rollout's Services exist; " +
		"ReferenceGrants of cross-namespace backends; permissions of you (the kubeconfig's user; give --as for the controller's ServiceAccount)\n" +
		"problems: none\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("the plan (-want +got):\n%s", diff)
	}
	// One dry run per step that changes the route: step 1, the promotion's
	// two steps and the abort.
	var writes []string
	for _, w := range api.Writes() {
		writes = append(writes, w.String())
	}
	dryRun := "PATCH " + gatewayV1 + "/namespaces/shop/httproutes/web?dryRun=All&fieldManager=argo-rollouts-gatewayapi&force=true"
	if diff := cmp.Diff([]string{dryRun, dryRun, dryRun, dryRun}, writes); diff != "" {
		t.Errorf("the writes (-want +got):\n%s", diff)
	}
	if rv := api.Route("shop", "web").GetResourceVersion(); rv != "5" {
		t.Errorf("the route was written: resourceVersion 5 → %s", rv)
	}
}

// Against a cluster without the canary Service: exit status 1, and the
// problem names the Service that is missing.
func TestPlanAgainstAClusterWithoutTheCanaryService(t *testing.T) {
	api := kubetest.New(t, plainRoute, serviceObject("stable"))
	files := writeFiles(t, map[string]string{"rollout.yaml": demoRollout})
	code, out, _ := runCLI(t, "plan", "--kubeconfig", api.Kubeconfig, "-f", files["rollout.yaml"], "--timeout", "30s")
	if code != 1 {
		t.Errorf("plan: exit %d, want 1", code)
	}
	_, problems, _ := strings.Cut(out, "\nproblems: ")
	want := "1\n  - Services: Service shop/canary does not exist: the routes' backendRefs to it would fail\n"
	if diff := cmp.Diff(want, problems); diff != "" {
		t.Errorf("the plan's problems (-want +got):\n%s", diff)
	}
}
