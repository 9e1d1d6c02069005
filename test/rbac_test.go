package test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	rolloutsrpc "github.com/argoproj/argo-rollouts/rollout/trafficrouting/plugin/rpc"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// documentedRole is the ClusterRole docs/install.md documents.
func documentedRole(t *testing.T) rbacv1.ClusterRole {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range yamlBlocks(string(data)) {
		docs, err := splitYAML(block)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range docs {
			if doc.GetKind() != "ClusterRole" {
				continue
			}
			raw, _ := doc.MarshalJSON()
			var role rbacv1.ClusterRole
			if err := yaml.Unmarshal(raw, &role); err != nil {
				t.Fatal(err)
			}
			return role
		}
	}
	t.Fatal("docs/install.md documents no ClusterRole")
	return rbacv1.ClusterRole{}
}

// peersRole is install/base's Role: the plugin's Leases in the
// controller's namespace.
func peersRole(t *testing.T) rbacv1.Role {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "install", "base", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.Role
	if err := yaml.Unmarshal(data, &role); err != nil {
		t.Fatal(err)
	}
	return role
}

// asServiceAccount binds rules to a new ServiceAccount of namespace ns
// (through a ClusterRole, as docs/install.md does), and install/base's Role for
// the plugin's Leases in the controller's namespace, and returns a
// kubeconfig that authenticates with its token.
func asServiceAccount(t *testing.T, standard *harness.Cluster, ns, name string, rules []rbacv1.PolicyRule) (string, *harness.Recorder) {
	t.Helper()
	kubeconfig, rec := asServiceAccountWithoutLeases(t, standard, ns, name, rules)
	ctx := context.Background()
	role := peersRole(t)
	role.Name = ns + "-" + name + "-peers"
	role.Namespace = harness.ControllerNamespace
	if _, err := standard.Kube.RbacV1().Roles(role.Namespace).Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: role.Namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
	}
	if _, err := standard.Kube.RbacV1().RoleBindings(role.Namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = standard.Kube.RbacV1().RoleBindings(role.Namespace).Delete(ctx, role.Name, metav1.DeleteOptions{})
		_ = standard.Kube.RbacV1().Roles(role.Namespace).Delete(ctx, role.Name, metav1.DeleteOptions{})
	})
	return kubeconfig, rec
}

// asServiceAccountWithoutLeases is asServiceAccount without the Role for
// the plugin's Leases.
func asServiceAccountWithoutLeases(t *testing.T, standard *harness.Cluster, ns, name string, rules []rbacv1.PolicyRule) (string, *harness.Recorder) {
	t.Helper()
	ctx := context.Background()
	kube := standard.Kube
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	roleName := ns + "-" + name
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: roleName}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: roleName},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: roleName},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(ctx, roleName, metav1.DeleteOptions{})
		_ = kube.RbacV1().ClusterRoles().Delete(ctx, roleName, metav1.DeleteOptions{})
	})
	kubeconfig, rec, err := standard.KubeconfigForServiceAccount(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rec.Close)
	return kubeconfig, rec
}

// without returns the rules with verb taken away from the rule for resource.
func without(rules []rbacv1.PolicyRule, resource, verb string) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, r := range rules {
		r = *r.DeepCopy()
		if slices.Contains(r.Resources, resource) {
			r.Verbs = slices.DeleteFunc(r.Verbs, func(v string) bool { return v == verb })
		}
		if len(r.Verbs) > 0 {
			out = append(out, r)
		}
	}
	return out
}

// rbacStep is one call of a whole rollout with every feature.
type rbacStep struct {
	name string
	do   func(p rolloutsrpc.TrafficRouterPlugin, ro *v1alpha1.Rollout) rpcErr
}

// rbacWalk: weights, an experiment, a header and a mirror rule, VerifyWeight,
// their removal, the end.
var rbacWalk = []rbacStep{
	{"SetWeight(10)", func(p rolloutsrpc.TrafficRouterPlugin, ro *v1alpha1.Rollout) rpcErr { return p.SetWeight(ro, 10, nil) }},
	{"SetWeight(20) with an experiment", func(p rolloutsrpc.TrafficRouterPlugin, ro *v1alpha1.Rollout) rpcErr {
		return p.SetWeight(ro, 20, experimentDestinations(5, 5))
	}},
	{"SetHeaderRoute", func(p rolloutsrpc.TrafficRouterPlugin, ro *v1alpha1.Rollout) rpcErr {
		return p.SetHeaderRoute(ro, &v1alpha1.SetHeaderRoute{Name: "canary-header", Match: []v1alpha1.HeaderRoutingMatch{{HeaderName: "X-Canary", HeaderValue: &v1alpha1.StringMatch{Exact: "yes"}}}})
	}},
	{"SetMirrorRoute", func(p rolloutsrpc.TrafficRouterPlugin, ro *v1alpha1.Rollout) rpcErr {
		pct := int32(50)
		return p.SetMirrorRoute(ro, &v1alpha1.SetMirrorRoute{Name: "mirror", Percentage: &pct, Match: []v1alpha1.RouteMatch{{Path: &v1alpha1.StringMatch{Prefix: "/api"}}}})
	}},
	{"VerifyWeight", func(p rolloutsrpc.TrafficRouterPlugin, ro *v1alpha1.Rollout) rpcErr {
		_, err := p.VerifyWeight(ro, 20, experimentDestinations(5, 5))
		return err
	}},
	{"RemoveManagedRoutes", func(p rolloutsrpc.TrafficRouterPlugin, ro *v1alpha1.Rollout) rpcErr { return p.RemoveManagedRoutes(ro) }},
	{"SetWeight(0) without the experiment", func(p rolloutsrpc.TrafficRouterPlugin, ro *v1alpha1.Rollout) rpcErr { return p.SetWeight(ro, 0, nil) }},
}

// The plugin runs as a ServiceAccount bound to exactly the documented
// ClusterRole: a whole rollout works and gives ownership back. With a verb
// taken away, the error names the verb and the resource to grant, and
// nothing is written; list and watch are the exception docs/install.md states:
// without them the plugin reads with GETs and says what to grant (without
// list alone, the watch cache still fills from a streaming watch); so are
// Events: without them the calls work and the log says what to grant.
//
// Serial: its ServiceAccounts have the Role for Leases in ControllerNamespace,
// where their plugins would be peers of other tests' (parallel).
func TestTheDocumentedRoleIsEnoughAndEveryVerbIsNeeded(t *testing.T) {
	role := documentedRole(t)
	for _, tc := range []struct {
		name     string
		resource string // "" keeps the role whole
		verb     string
		// failing is the step that fails and want what its error says; ""
		// for a walk that works.
		failing string
		want    []string
		// warned is what the plugin's log must say when it works without.
		warned []string
	}{
		{name: "the documented role"},
		{"without get on routes", "httproutes", "get", "SetWeight(10)", []string{"grant the plugin's ServiceAccount get on httproutes.gateway.networking.k8s.io"}, nil},
		{"without patch on routes", "httproutes", "patch", "SetWeight(10)", []string{"grant the plugin's ServiceAccount patch on httproutes.gateway.networking.k8s.io", "gives its ownership of spec.rules back"}, nil},
		{"without get on services", "services", "get", "SetWeight(20) with an experiment", []string{"grant the plugin's ServiceAccount get on services"}, nil},
		// The watch cache fills itself with a streaming watch where the
		// apiserver serves one (Kubernetes 1.34 does), so list is not missed.
		{"without list on routes", "httproutes", "list", "", nil, nil},
		{"without watch on routes", "httproutes", "watch", "", nil, []string{"watch cache refused", "list and watch on httproutes.gateway.networking.k8s.io"}},
		// Events are for people: without them every call works, and the log says so.
		{"without create on events", "events", "create", "", nil, []string{"the plugin may not record Events", "create and patch on events.events.k8s.io"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := namespace(t, standard)
			service(t, standard, ns, "exp-baseline", "http:80")
			service(t, standard, ns, "exp-canary", "http:80")
			create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route"))
			rules := role.Rules
			if tc.resource != "" {
				rules = without(rules, tc.resource, tc.verb)
			}
			kubeconfig, _ := asServiceAccount(t, standard, ns, "rollouts", rules)
			p, log := startPluginWith(t, pluginBin, kubeconfig)
			ro := rollout(ns, `{"httpRoute": "route", "verifyWeight": true}`)
			ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "canary-header"}, {Name: "mirror"}}
			failedAt, written := "", true
			var err rpcErr
			for _, step := range rbacWalk {
				before := get(t, standard, "v1", "HTTPRoute", ns, "route").GetResourceVersion()
				if err = step.do(p, ro); err.HasError() {
					failedAt = step.name
					written = get(t, standard, "v1", "HTTPRoute", ns, "route").GetResourceVersion() != before
					break
				}
			}
			t.Logf("%s: the walk stopped at %q: %s", tc.name, failedAt, err.ErrorString)
			if failedAt != tc.failing {
				t.Fatalf("the walk failed at %q (%s), want %q", failedAt, err.ErrorString, tc.failing)
			}
			if failedAt != "" && written {
				t.Errorf("%s failed and wrote the route", failedAt)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.ErrorString, w) {
					t.Errorf("error does not say %q", w)
				}
			}
			u := get(t, standard, "v1", "HTTPRoute", ns, "route")
			switch tc.failing {
			case "SetWeight(10)":
				if len(u.GetManagedFields()) != 1 {
					t.Errorf("the route has managers besides its creator: %v", u.GetManagedFields())
				}
			case "":
				for _, e := range u.GetManagedFields() {
					if e.Manager == fieldManager {
						t.Errorf("after the walk the plugin still owns fields: %+v", e)
					}
				}
				if w := weights(u); w["0/stable"] != 100 || w["0/canary"] != 0 || len(w) != 2 {
					t.Errorf("after the walk: weights %v", w)
				}
			}
			if len(tc.warned) > 0 { // Events are sent after the calls: wait for their answer
				eventually(t, "the plugin's log to say "+strings.Join(tc.warned, " … "), func() bool { return log.Count(tc.warned...) > 0 })
			}
			// The CRD's schema comes from the OpenAPI document, which every
			// authenticated user may read (system:discovery): the role needs nothing for it.
			if log.Count("cannot read the Gateway API schema") > 0 {
				t.Error("the plugin could not read the Gateway API schema with the documented role")
			}
		})
	}
}

// A watch cache refused for want of list and watch heals once they are
// granted, without a restart: reads come from it again.
//
// Serial: its ServiceAccount has the Role for Leases in ControllerNamespace
// (see TestTheDocumentedRoleIsEnoughAndEveryVerbIsNeeded).
func TestWatchCacheHealsWhenGranted(t *testing.T) {
	ns := namespace(t, standard)
	create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route"))
	rules := without(without(documentedRole(t).Rules, "httproutes", "list"), "httproutes", "watch")
	kubeconfig, rec := asServiceAccount(t, standard, ns, "rollouts", rules)
	p, log := startPluginWith(t, pluginBin, kubeconfig)
	ro := rollout(ns, `{"httpRoute": "route"}`)
	if err := p.SetWeight(ro, 10, nil); err.HasError() {
		t.Fatalf("without list and watch: %s", err)
	}
	if log.Count("watch cache refused") == 0 {
		t.Error("the plugin did not say its watch cache was refused")
	}
	if n := routeGETs(rec); n == 0 {
		t.Error("without a watch cache the plugin read the route without a GET")
	}
	ctx := context.Background()
	roleName := ns + "-rollouts"
	cr, err := standard.Kube.RbacV1().ClusterRoles().Get(ctx, roleName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cr.Rules = documentedRole(t).Rules
	if _, err := standard.Kube.RbacV1().ClusterRoles().Update(ctx, cr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	granted := time.Now()
	deadline := granted.Add(90 * time.Second)
	for log.Count("watch cache synced after failing") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the watch cache did not heal within 90 s of list and watch being granted")
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("watch cache synced %s after list and watch were granted", time.Since(granted).Round(time.Millisecond))
	rec.Reset()
	if err := p.SetWeight(ro, 20, nil); err.HasError() {
		t.Fatal(err)
	}
	if n := routeGETs(rec); n != 0 {
		t.Errorf("with the watch cache healed, the call still read the route with %d GETs", n)
	}
}

// routeGETs counts the GETs of the route named route.
func routeGETs(rec *harness.Recorder) int {
	n := 0
	for _, r := range rec.Requests() {
		if r.Method == "GET" && strings.HasSuffix(r.Path, "/httproutes/route") {
			n++
		}
	}
	return n
}

// The role is written down twice for two readers: the install guide and
// the kustomize base. They must say the same.
func TestDocumentedRolesAgree(t *testing.T) {
	t.Parallel()
	root := harness.RepoRoot()
	roleIn := func(path string) []rbacv1.PolicyRule {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		if strings.HasSuffix(path, ".md") {
			text = strings.Join(yamlBlocks(text), "\n---\n")
		}
		docs, err := splitYAML(text)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range docs {
			if doc.GetKind() == "ClusterRole" {
				raw, _ := doc.MarshalJSON()
				var role rbacv1.ClusterRole
				if err := yaml.Unmarshal(raw, &role); err != nil {
					t.Fatal(err)
				}
				return role.Rules
			}
		}
		t.Fatalf("%s has no ClusterRole", path)
		return nil
	}
	base := roleIn("install/base/clusterrole.yaml")
	for _, doc := range []string{"docs/install.md"} {
		if diff := cmp.Diff(base, roleIn(doc)); diff != "" {
			t.Errorf("%s's ClusterRole is not install/base's (-base +%s):\n%s", doc, doc, diff)
		}
	}
}

// The documented role covers UDPRoutes: as a ServiceAccount bound to exactly
// that role, a whole rollout on a UDPRoute works (weights, an experiment with
// UDP Services, VerifyWeight, the end and the release); without get or patch
// on udproutes the first step fails naming the verb on udproutes, and
// nothing is written.
//
// Serial: its ServiceAccounts have the Role for Leases in ControllerNamespace
// (see TestTheDocumentedRoleIsEnoughAndEveryVerbIsNeeded).
func TestTheDocumentedRoleCoversUDPRoutes(t *testing.T) {
	role := documentedRole(t)
	walk := []rbacStep{rbacWalk[0], rbacWalk[1], rbacWalk[4], rbacWalk[6]}
	for _, tc := range []struct {
		name    string
		verb    string // "" keeps the role whole
		failing string
	}{
		{name: "the documented role"},
		{"without get on udproutes", "get", "SetWeight(10)"},
		{"without patch on udproutes", "patch", "SetWeight(10)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := namespace(t, standard)
			service(t, standard, ns, "exp-baseline", "dns:53/UDP")
			service(t, standard, ns, "exp-canary", "dns:53/UDP")
			create(t, standard, ns, routeYAML("v1", "UDPRoute", "route"))
			rules := role.Rules
			if tc.verb != "" {
				rules = without(rules, "udproutes", tc.verb)
			}
			kubeconfig, _ := asServiceAccount(t, standard, ns, "rollouts", rules)
			p, _ := startPluginWith(t, pluginBin, kubeconfig)
			ro := rollout(ns, `{"udpRoute": "route", "verifyWeight": true}`)
			failedAt := ""
			var err rpcErr
			for _, step := range walk {
				if err = step.do(p, ro); err.HasError() {
					failedAt = step.name
					break
				}
			}
			if failedAt != tc.failing {
				t.Fatalf("the walk failed at %q (%s), want %q", failedAt, err.ErrorString, tc.failing)
			}
			u := get(t, standard, "v1", "UDPRoute", ns, "route")
			if tc.failing == "" {
				pluginOwnsNothing(t, u)
				if diff := cmp.Diff(map[string]int64{"0/stable": 100, "0/canary": 0}, weights(u)); diff != "" {
					t.Errorf("after the walk (-want +got):\n%s", diff)
				}
				return
			}
			if want := "grant the plugin's ServiceAccount " + tc.verb + " on udproutes.gateway.networking.k8s.io"; !strings.Contains(err.ErrorString, want) {
				t.Errorf("error %q does not say %q", err.ErrorString, want)
			}
			if len(u.GetManagedFields()) != 1 {
				t.Errorf("%s failed and the route has managers besides its creator: %v", failedAt, u.GetManagedFields())
			}
		})
	}
}
