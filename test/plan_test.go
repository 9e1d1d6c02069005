package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// The plan and inspect commands of the binary, against a real apiserver.

// planRollout is a Rollout walking a canary with an experiment and a header route.
func planRollout(ns, route string) string {
	return `apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: demo, namespace: ` + ns + `}
spec:
  selector: {matchLabels: {app: demo}}
  template:
    metadata: {labels: {app: demo}}
    spec:
      containers: [{name: app, image: "app:v2", ports: [{name: http, containerPort: 80}]}]
  strategy:
    canary:
      stableService: stable
      canaryService: canary
      trafficRouting:
        managedRoutes: [{name: beta}]
        plugins:
          argoproj-labs/gatewayAPI: {httpRoute: ` + route + `}
      steps:
      - setWeight: 20
      - experiment:
          templates:
          - {name: baseline, specRef: stable, weight: 5}
      - setHeaderRoute:
          name: beta
          match: [{headerName: X-Canary, headerValue: {exact: "yes"}}]
      - pause: {}
      - setWeight: 60
`
}

// runBinary runs a command of the plugin's binary and returns its output and exit status.
func runBinary(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(pluginBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: exit %d\n%s", args, code, out.String())
	return out.String(), code
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// plan runs `plan -f` for the Rollout against the test cluster.
func planCmd(t *testing.T, standard *harness.Cluster, rollout string, extra ...string) (string, int) {
	t.Helper()
	return runBinary(t, nil, append([]string{"plan", "--kubeconfig", standard.Kubeconfig, "-f", writeFile(t, "rollout.yaml", rollout)}, extra...)...)
}

func TestPlanAGoodRollout(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	create(t, standard, ns, headerRoute)
	rv := get(t, standard, "v1", "HTTPRoute", ns, "route").GetResourceVersion()
	out, code := planCmd(t, standard, planRollout(ns, "route"), "-o", "json")
	if code != 0 {
		t.Fatalf("plan of a good Rollout: exit %d", code)
	}
	var report struct {
		OK       bool
		Steps    []struct{ Step string }
		Problems []any
		Checks   []string
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("the JSON output does not parse: %v", err)
	}
	var steps []string
	for _, s := range report.Steps {
		steps = append(steps, s.Step)
	}
	want := []string{"setWeight 20", "experiment baseline 5", "setHeaderRoute beta", "pause", "setWeight 60",
		"promotion: every step done", "promotion: the new version is stable", "abort (from the last step)"}
	if diff := cmp.Diff(want, steps); diff != "" || !report.OK || len(report.Problems) != 0 {
		t.Errorf("steps (-want +got):\n%s\nok %v, problems %v", diff, report.OK, report.Problems)
	}
	if len(report.Checks) != 4 {
		t.Errorf("checks %v, want the dry run, Services, ReferenceGrants and permissions", report.Checks)
	}
	if got := get(t, standard, "v1", "HTTPRoute", ns, "route").GetResourceVersion(); got != rv {
		t.Errorf("plan wrote the route (resourceVersion %s → %s)", rv, got)
	}
	text, _ := planCmd(t, standard, planRollout(ns, "route"))
	for _, w := range []string{"step 1: setWeight 20", "Service " + ns + "/stable 100→80", "+ rule beta", "problems: none"} {
		if !strings.Contains(text, w) {
			t.Errorf("the text output does not show %q", w)
		}
	}
}

func TestPlanNamesTheStepThatWouldFail(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	create(t, standard, ns, headerRoute)
	var refs, matchesA, matchesB strings.Builder
	for i := range 14 {
		fmt.Fprintf(&refs, "    - {name: other-%d, port: 80, weight: 0}\n", i)
	}
	for i := range 64 {
		fmt.Fprintf(&matchesA, "    - {path: {type: PathPrefix, value: /a%d}}\n", i)
		fmt.Fprintf(&matchesB, "    - {path: {type: PathPrefix, value: /b%d}}\n", i)
	}
	crowded := `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: crowded}
spec:
  rules:
  - backendRefs:
    - {name: stable, port: 80, weight: 100}
    - {name: canary, port: 80, weight: 0}
` + refs.String()
	create(t, standard, ns, crowded)
	// Two weighted rules of 64 matches each: the route is at Gateway API's
	// 128-match limit, and a header rule per weighted rule would double it.
	create(t, standard, ns, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: matches}
spec:
  rules:
  - matches:
`+matchesA.String()+`    backendRefs:
    - {name: stable, port: 80, weight: 100}
    - {name: canary, port: 80, weight: 0}
  - matches:
`+matchesB.String()+`    backendRefs:
    - {name: stable, port: 80, weight: 100}
    - {name: canary, port: 80, weight: 0}
`)
	create(t, standard, ns, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: stable-only}
spec:
  rules:
  - backendRefs: [{name: stable, port: 80}]
`)
	for _, tc := range []struct {
		name, rollout string
		want          []string
	}{
		{"an experiment over 16 backendRefs", planRollout(ns, "crowded"), []string{"step 2 (experiment baseline 5)", "17 backendRefs"}},
		{"a header route over the 128-match limit", planRollout(ns, "matches"), []string{"step 3 (setHeaderRoute beta)", "256 matches in all", "at most 128"}},
		{"a missing route", planRollout(ns, "missing"), []string{"HTTPRoute " + ns + "/missing not found"}},
		{"a rule without the canary Service", planRollout(ns, "stable-only"), []string{"step 1 (setWeight 20)", "has no rule whose backendRefs include both"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := planCmd(t, standard, tc.rollout)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("the plan does not say %q", w)
				}
			}
		})
	}
}

// With --as, the plan checks the identity's permissions: a ServiceAccount
// that may read routes but not patch them is a problem naming the verbs.
func TestPlanChecksThePluginsPermissions(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	create(t, standard, ns, headerRoute)
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "read-routes", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"gateway.networking.k8s.io"}, Resources: []string{"httproutes"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get"}}}}
	if _, err := standard.Kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "read-routes", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "read-routes"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "controller", Namespace: ns}}}
	if _, err := standard.Kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rv := get(t, standard, "v1", "HTTPRoute", ns, "route").GetResourceVersion()
	out, code := planCmd(t, standard, planRollout(ns, "route"), "--as", "system:serviceaccount:"+ns+":controller")
	if code != 1 || !strings.Contains(out, "may not patch httproutes.gateway.networking.k8s.io in namespace "+ns+"; grant it (docs/install.md): every write to the routes needs it") {
		t.Errorf("exit %d; want 1 and a problem naming patch on httproutes and what for", code)
	}
	// What the plugin goes on without is a note, with what it is for.
	if !strings.Contains(out, "may not create, patch events.events.k8s.io in namespace "+ns+", which Events on the Rollout needs; the plugin goes on without it") {
		t.Errorf("plan does not note the Events:\n%s", out)
	}
	if strings.Contains(out, "kube-system") {
		t.Errorf("plan asks for kube-system for a Rollout whose routes are in its own cluster:\n%s", out)
	}
	if got := get(t, standard, "v1", "HTTPRoute", ns, "route").GetResourceVersion(); got != rv {
		t.Errorf("plan wrote the route (resourceVersion %s → %s)", rv, got)
	}
}

// plan --routes needs no cluster at all.
func TestPlanFromFilesWithoutACluster(t *testing.T) {
	t.Parallel()
	routesFile := writeFile(t, "routes.yaml", strings.Replace(headerRoute, "metadata: {name: route}", "metadata: {name: route, namespace: shop}", 1)+`---
apiVersion: v1
kind: Service
metadata: {name: stable, namespace: shop}
spec:
  ports: [{name: http, port: 80}]
`)
	out, code := runBinary(t, []string{"KUBECONFIG=/nonexistent"}, "plan", "-f", writeFile(t, "rollout.yaml", planRollout("shop", "route")), "--routes", routesFile)
	if code != 0 || !strings.Contains(out, "problems: none") || !strings.Contains(out, "none against a cluster") {
		t.Errorf("exit %d; want 0, no problems, and no cluster checks", code)
	}
}

// inspect says what the apiserver's managedFields and the claims say: mid-rollout,
// after another manager's forced apply, after the plugin let go.
func TestInspect(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	create(t, standard, ns, gitRoute)
	p := startPlugin(t, standard)
	ro := rollout(ns, `{"httpRoute": "route"}`)
	inspect := func() desired.Inspection {
		t.Helper()
		out, code := runBinary(t, nil, "inspect", "httproute/route", "-n", ns, "--kubeconfig", standard.Kubeconfig, "-o", "json")
		if code != 0 {
			t.Fatalf("inspect: exit %d", code)
		}
		var in desired.Inspection
		if err := json.Unmarshal([]byte(out), &in); err != nil {
			t.Fatal(err)
		}
		u := get(t, standard, "v1", "HTTPRoute", ns, "route")
		if diff := cmp.Diff(rulesOwners(u), in.RulesOwners); diff != "" {
			t.Errorf("spec.rules owners vs managedFields (-apiserver +inspect):\n%s", diff)
		}
		if len(in.Owners) != len(u.GetManagedFields()) {
			t.Errorf("%d owners shown, the route has %d managedFields entries", len(in.Owners), len(u.GetManagedFields()))
		}
		return in
	}

	must(t, "SetWeight(30)", p.SetWeight(ro, 30, nil))
	in := inspect()
	if !in.PluginOwnsRules || len(in.Claims) != 1 || !in.Claims[0].Active || len(in.Claims[0].Changed) != 0 || in.Release {
		t.Errorf("mid-rollout: %+v", in)
	}
	(forceApply{"argocd-controller", 100, 0}).run(t, &scenario{c: standard, ns: ns})
	in = inspect()
	if in.PluginOwnsRules || len(in.Claims) != 1 || len(in.Claims[0].Changed) != 2 {
		t.Errorf("after Argo CD's forced apply: want a claim whose two weights changed, the plugin not owning spec.rules: %+v", in)
	}
	text, _ := runBinary(t, nil, "inspect", "httproute/route", "-n", ns, "--kubeconfig", standard.Kubeconfig)
	if !strings.Contains(text, "conflict: yes") || !strings.Contains(text, "argocd-controller") {
		t.Error("the text output does not say there would be a conflict, and who owns spec.rules")
	}
	must(t, "SetWeight(0)", p.SetWeight(rollout(ns, `{"httpRoute": "route", "conflictPolicy": "Force"}`), 0, nil))
	in = inspect()
	if len(in.Claims) != 0 || in.Release {
		t.Errorf("after the rollout: want no claim and nothing left to release: %+v", in)
	}
	for _, o := range in.Owners {
		if o.Manager == fieldManager {
			t.Errorf("inspect shows the plugin as an owner after it let go: %+v", o)
		}
	}
}
