package test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/argoproj/argo-rollouts/utils/plugin/types"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// The calls that have nothing to do yet answer as the controller expects.
func TestOtherCallsAnswerHonestly(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route"))
	p := startPlugin(t, standard)
	ro := rollout(ns, `{"httpRoute": "route"}`)
	if got := p.Type(); got != "GatewayAPI" {
		t.Errorf("Type() = %q", got)
	}
	if err := p.UpdateHash(ro, "abc", "def", nil); err.HasError() {
		t.Errorf("UpdateHash: %s", err)
	}
	if v, err := p.VerifyWeight(ro, 30, nil); v != types.NotImplemented || err.HasError() {
		t.Errorf("VerifyWeight = %v, %q; want NotImplemented and no error", v, err.ErrorString)
	}
	if err := p.RemoveManagedRoutes(ro); err.HasError() {
		t.Errorf("RemoveManagedRoutes: %s", err)
	}
	// Without a match, a header or mirror step removes its rule: here there is none.
	standard.Recorder.Reset()
	if err := p.SetHeaderRoute(ro, &v1alpha1.SetHeaderRoute{Name: "h"}); err.HasError() {
		t.Errorf("SetHeaderRoute without match: %s", err)
	}
	if err := p.SetMirrorRoute(ro, &v1alpha1.SetMirrorRoute{Name: "m"}); err.HasError() {
		t.Errorf("SetMirrorRoute without match: %s", err)
	}
	if w := pluginWrites(standard); len(w) != 0 {
		t.Errorf("removing header and mirror rules that are not there wrote %v", w)
	}
	// Adding one that the Rollout does not list in managedRoutes is an error, not a silent success.
	header := &v1alpha1.SetHeaderRoute{Name: "h", Match: []v1alpha1.HeaderRoutingMatch{{HeaderName: "X-Canary", HeaderValue: &v1alpha1.StringMatch{Exact: "yes"}}}}
	if err := p.SetHeaderRoute(ro, header); !strings.Contains(err.ErrorString, "managedRoutes") {
		t.Errorf("SetHeaderRoute of an unlisted managed route = %q, want an error naming managedRoutes", err.ErrorString)
	}
}

// Without in-cluster config and without a usable KUBECONFIG, InitPlugin says so.
func TestInitPluginWithoutKubeconfig(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	_, err := harness.StartPlugin(pluginBin, filepath.Join(home, "missing-kubeconfig"), kubetest.Log(t))
	if err == nil {
		t.Fatal("InitPlugin succeeded without any Kubernetes config")
	}
	if !strings.Contains(err.Error(), "no Kubernetes client config") || !strings.Contains(err.Error(), "KUBECONFIG") {
		t.Errorf("InitPlugin error does not explain: %v", err)
	}
	if _, statErr := os.Stat(filepath.Join(home, ".kube")); statErr == nil {
		t.Error("the plugin created ~/.kube")
	}
}

// An apiserver refusal is an RpcError naming the route and what to grant.
func TestForbiddenWriteNamesRouteAndPermission(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route"))
	ctx := context.Background()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "routes-read-only"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"gateway.networking.k8s.io"}, Resources: []string{"httproutes"}, Verbs: []string{"get", "list", "watch"}}},
	}
	if _, err := standard.Kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "routes-read-only"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "routes-read-only"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "read-only-plugin"}},
	}
	if _, err := standard.Kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfig, rec, err := standard.KubeconfigAs("read-only-plugin")
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	// Named by the flag: a user that may not read kube-system's UID either
	// would be refused that first.
	proc, err := harness.StartPlugin(pluginBin, kubeconfig, kubetest.Log(t), "-cluster-name", "read-only")
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Stop()
	before := get(t, standard, "v1", "HTTPRoute", ns, "route").GetResourceVersion()
	e := proc.Plugin.SetWeight(rollout(ns, `{"httpRoute": "route"}`), 30, nil)
	t.Logf("error: %s", e.ErrorString)
	for _, want := range []string{"HTTPRoute " + ns + "/route", "forbidden", "patch on httproutes.gateway.networking.k8s.io", "nothing was written"} {
		if !strings.Contains(e.ErrorString, want) {
			t.Errorf("error %q does not mention %q", e.ErrorString, want)
		}
	}
	if after := get(t, standard, "v1", "HTTPRoute", ns, "route").GetResourceVersion(); after != before {
		t.Error("the route changed")
	}
}

// RemoveManagedRoutes on a route that does not exist has nothing to remove and
// succeeds, so the controller goes on to SetWeight, whose error names the
// missing route and reaches the Rollout's status (the controller does not
// surface RemoveManagedRoutes errors; it calls it first on every reconcile
// before the canary is up).
func TestMissingRouteIsSetWeightsError(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route"))
	p := startPlugin(t, standard)
	ro := rollout(ns, `{"httpRoutes": [{"name": "route"}, {"name": "does-not-exist"}]}`)
	if err := p.RemoveManagedRoutes(ro); err.HasError() {
		t.Errorf("RemoveManagedRoutes: %s", err)
	}
	if err := p.SetWeight(ro, 10, nil); !strings.Contains(err.ErrorString, "HTTPRoute "+ns+"/does-not-exist not found") {
		t.Errorf("SetWeight = %q, want the missing route named", err.ErrorString)
	}
}

// InitPlugin called again builds nothing: one discovery of the route kind's
// version and one watch cache for the routes, however often it is called.
func TestInitPluginTwiceBuildsOnce(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route"))
	standard.Recorder.Reset()
	p := startPlugin(t, standard)
	for range 3 {
		if err := p.InitPlugin(); err.HasError() {
			t.Fatalf("InitPlugin again: %s", err)
		}
	}
	ro := rollout(ns, `{"httpRoute": "route"}`)
	for _, w := range []int32{10, 20} {
		if err := p.SetWeight(ro, w, nil); err.HasError() {
			t.Fatal(err)
		}
		if err := p.InitPlugin(); err.HasError() {
			t.Fatal(err)
		}
	}
	discovery, caches := 0, 0
	for _, r := range standard.Recorder.Requests() {
		switch r.Path {
		case "/apis/gateway.networking.k8s.io/v1":
			discovery++
		case "/apis/gateway.networking.k8s.io/v1/namespaces/" + ns + "/httproutes":
			caches++
		}
	}
	t.Logf("InitPlugin 6 times, 2 SetWeights: %d discoveries, %d list/watch requests", discovery, caches)
	if discovery != 1 || caches == 0 || caches > 2 {
		t.Errorf("%d discoveries and %d list/watch requests; want one discovery and one watch cache (a list and a watch at most)", discovery, caches)
	}
}
