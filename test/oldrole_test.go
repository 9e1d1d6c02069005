package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// argoprojLabsRole is the ClusterRole the argoproj-labs/gatewayAPI plugin's
// documentation asks for (its rules only): users who switch binaries come
// with it.
const argoprojLabsRole = `
- apiGroups: ["gateway.networking.k8s.io"]
  resources: ["httproutes", "tcproutes", "grpcroutes", "tlsroutes", "udproutes"]
  verbs: ["get", "list", "watch", "update", "patch"]
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get"]
`

// argoRolloutsRole is the ClusterRole of Argo Rollouts v1.10.1 itself, as
// its manifests in the module cache have it.
func argoRolloutsRole(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	dir, err := harness.ModuleDir("github.com/argoproj/argo-rollouts")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "manifests", "role", "argo-rollouts-clusterrole.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(data, &role); err != nil {
		t.Fatal(err)
	}
	return role.Rules
}

// A user switching from the argoproj-labs plugin keeps the RBAC that plugin
// documents, beside Argo Rollouts' own ClusterRole: with exactly that, a
// walk on the controller's own routes works (weights, an experiment, a
// header and a mirror rule, VerifyWeight, RemoveManagedRoutes, the end),
// as a single cluster needs no name for its claims. What it lacks for
// other features is named in a clear error: a route of another namespace
// needs the ReferenceGrants read.
func TestTheArgoprojLabsPluginsRoleWalks(t *testing.T) {
	standard := parallel(t)
	var rules []rbacv1.PolicyRule
	if err := yaml.Unmarshal([]byte(argoprojLabsRole), &rules); err != nil {
		t.Fatal(err)
	}
	rules = append(rules, argoRolloutsRole(t)...)
	ns := namespace(t, standard)
	service(t, standard, ns, "exp-baseline", "http:80")
	service(t, standard, ns, "exp-canary", "http:80")
	create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route"))
	kubeconfig, _ := asServiceAccountWithoutLeases(t, standard, ns, "argo-rollouts", rules)
	p, log := startPluginWith(t, pluginBin, kubeconfig)
	ro := rollout(ns, `{"httpRoute": "route", "verifyWeight": true}`)
	ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "canary-header"}, {Name: "mirror"}}
	for _, step := range rbacWalk {
		if err := step.do(p, ro); err.HasError() {
			t.Fatalf("%s with the argoproj-labs plugin's role: %s", step.name, err.ErrorString)
		}
		if step.name == "SetHeaderRoute" {
			claim := claimsOn(t, get(t, standard, "v1", "HTTPRoute", ns, "route"))[ns+"/demo"]
			if claim.Cluster != "" || claim.ClusterUID != "" {
				t.Errorf("a claim on the cluster's own route names a cluster: %q (UID %q)", claim.Cluster, claim.ClusterUID)
			}
		}
	}
	u := get(t, standard, "v1", "HTTPRoute", ns, "route")
	if w := weights(u); w["0/stable"] != 100 || w["0/canary"] != 0 || len(w) != 2 {
		t.Errorf("after the walk: weights %v", w)
	}
	for _, e := range u.GetManagedFields() {
		if e.Manager == fieldManager {
			t.Errorf("after the walk the plugin still owns fields: %+v", e)
		}
	}
	if n := log.Count("naming this cluster"); n > 0 {
		t.Errorf("%d log lines name the cluster on a single cluster", n)
	}

	// A route of another namespace: the grants there cannot be read, and
	// the error says what to grant; nothing is written.
	other := namespace(t, standard)
	create(t, standard, other, routeYAML("v1", "HTTPRoute", "route"))
	before := get(t, standard, "v1", "HTTPRoute", other, "route").GetResourceVersion()
	err := p.SetWeight(rollout(ns, `{"httpRoute": "route", "namespace": "`+other+`"}`), 10, nil)
	t.Logf("another namespace: %s", err.ErrorString)
	for _, want := range []string{"referencegrants", "forbidden"} {
		if !strings.Contains(err.ErrorString, want) {
			t.Errorf("a route of another namespace without the grants' read: %q does not say %q", err.ErrorString, want)
		}
	}
	if after := get(t, standard, "v1", "HTTPRoute", other, "route").GetResourceVersion(); after != before {
		t.Error("the route of another namespace changed")
	}
}
