package test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// rolloutGrant is a ReferenceGrant in namespace ns that lets Rollouts of
// namespace from reach its HTTPRoutes (named only name, if set).
func rolloutGrant(from, name string) string {
	to := "{group: gateway.networking.k8s.io, kind: HTTPRoute}"
	if name != "" {
		to = fmt.Sprintf("{group: gateway.networking.k8s.io, kind: HTTPRoute, name: %s}", name)
	}
	return fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: rollouts-of-%[1]s}
spec:
  from: [{group: argoproj.io, kind: Rollout, namespace: %[1]s}]
  to: [%[2]s]
`, from, to)
}

// servicesGrant is Gateway API's ReferenceGrant that lets the HTTPRoutes of
// namespace routes refer to the Services of the namespace it is created in.
func servicesGrant(routes string) string {
	return fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: routes-of-%[1]s}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: %[1]s}]
  to: [{group: "", kind: Service}]
`, routes)
}

// routeToServicesOf is HTTPRoute "route" whose one rule splits between the
// Services stable and canary of namespace ns, wherever the route is.
func routeToServicesOf(ns string) string {
	return fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: route}
spec:
  rules:
  - backendRefs:
    - {name: stable, namespace: %[1]s, port: 80, weight: 100}
    - {name: canary, namespace: %[1]s, port: 80, weight: 0}
`, ns)
}

// stored is the whole route as the apiserver keeps it, bookkeeping included:
// what must not move by a byte when a call leaves the route untouched.
func stored(t *testing.T, u *unstructured.Unstructured) any {
	t.Helper()
	return normalizeJSON(t, u.Object)
}

// pluginEventsIn are the Events the plugin recorded in namespace ns.
func pluginEventsIn(t *testing.T, standard *harness.Cluster, ns string) []string {
	t.Helper()
	list, err := standard.Kube.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.ReportingController == fieldManager {
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	return out
}

// A Rollout of namespace shop names a route of namespace team-b, which team
// b's own Rollout walks. Without a ReferenceGrant in team-b every call of
// the shop Rollout fails naming the grant, and team-b's route is the same
// byte for byte (labels, annotations and managedFields included), no Event
// is recorded in team-b, and nothing of team-b but its ReferenceGrants is
// read. With the grant, a shared-routes namespace whose route reaches the
// shop's Services (with Gateway API's own ReferenceGrant for the
// backendRefs) walks exactly, and ends as it began.
func TestARolloutReachesAnotherNamespaceOnlyWhereGranted(t *testing.T) {
	standard := parallel(t)
	shop := namespace(t, standard)
	teamB := namespace(t, standard)
	create(t, standard, teamB, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: store, labels: {team: b}}
spec:
  rules:
  - backendRefs:
    - {name: stable, port: 80, weight: 100}
    - {name: canary, port: 80, weight: 0}
`)
	p := startPlugin(t, standard)
	// team b's own Rollout walks its route.
	if err := p.SetWeight(rollout(teamB, `{"httpRoute": "store"}`), 20, nil); err.HasError() {
		t.Fatal(err)
	}
	before := get(t, standard, "v1", "HTTPRoute", teamB, "store")
	readsBefore := standard.Recorder.Count()

	intruder := rollout(shop, fmt.Sprintf(`{"httpRoute": "store", "namespace": %q, "inProgressLabelKey": "shop/rollout", "verifyWeight": true}`, teamB))
	intruder.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "beta"}}
	grant := fmt.Sprintf("its owners grant it with a ReferenceGrant in namespace %s: from [{group: argoproj.io, kind: Rollout, namespace: %s}] "+
		"to [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: store}]", teamB, shop)
	for name, call := range map[string]func() rpcErr{
		"SetWeight":      func() rpcErr { return p.SetWeight(intruder, 30, nil) },
		"SetHeaderRoute": func() rpcErr { return p.SetHeaderRoute(intruder, headerStep("beta", "X-Canary", "yes")) },
		"RemoveManagedRoutes": func() rpcErr {
			return p.RemoveManagedRoutes(intruder)
		},
	} {
		err := call()
		if !err.HasError() || !strings.Contains(err.ErrorString, grant) || !strings.Contains(err.ErrorString, "nothing was written") {
			t.Errorf("%s of a Rollout of %s on %s's route: %q, want an error saying %q", name, shop, teamB, err.ErrorString, grant)
		}
	}
	if _, err := p.VerifyWeight(intruder, 30, nil); !err.HasError() || !strings.Contains(err.ErrorString, grant) {
		t.Errorf("VerifyWeight: %q, want the grant named", err.ErrorString)
	}
	after := get(t, standard, "v1", "HTTPRoute", teamB, "store")
	if diff := cmp.Diff(stored(t, before), stored(t, after)); diff != "" {
		t.Errorf("team b's route changed (-before +after):\n%s", diff)
	}
	for _, r := range standard.Recorder.RequestsSince(readsBefore) {
		// Events are looked at below: team b's own walk records some there.
		if strings.Contains(r.Path, "/namespaces/"+teamB+"/") && !strings.HasSuffix(r.Path, "/referencegrants") && !r.IsEvent() &&
			strings.HasPrefix(r.UserAgent, "rollouts-gatewayapi-ssa") {
			t.Errorf("the plugin read or wrote in %s for the shop Rollout: %s %s", teamB, r.Method, r.Path)
		}
	}
	for _, e := range pluginEventsIn(t, standard, teamB) {
		if strings.Contains(e, shop) {
			t.Errorf("an Event about the shop Rollout was recorded in %s: %s", teamB, e)
		}
	}

	// A namespace of shared routes grants shop's Rollouts its HTTPRoutes; the
	// route's backendRefs reach shop's Services, which shop grants it.
	shared := namespace(t, standard)
	create(t, standard, shared, rolloutGrant(shop, ""))
	create(t, standard, shop, servicesGrant(shared))
	create(t, standard, shared, fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: front, labels: {team: platform}, annotations: {owner: platform}}
spec:
  hostnames: [shop.example.com]
  rules:
  - backendRefs:
    - {name: stable, namespace: %[1]s, port: 80, weight: 100}
    - {name: canary, namespace: %[1]s, port: 80, weight: 0}
  - matches: [{path: {type: PathPrefix, value: /static}}]
    backendRefs: [{name: static, port: 80}]
`, shop))
	begin := get(t, standard, "v1", "HTTPRoute", shared, "front")
	tenant := rollout(shop, fmt.Sprintf(`{"httpRoute": "front", "namespace": %q}`, shared))
	tenant.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "beta"}}
	walk := []struct {
		name string
		do   func() rpcErr
		want map[string]int64
	}{
		{"SetWeight(30)", func() rpcErr { return p.SetWeight(tenant, 30, nil) }, map[string]int64{"0/stable": 70, "0/canary": 30, "1/static": 1}},
		{"SetHeaderRoute(beta)", func() rpcErr { return p.SetHeaderRoute(tenant, headerStep("beta", "X-Canary", "yes")) },
			map[string]int64{"0/stable": 70, "0/canary": 30, "1/static": 1, "2/canary": 1}},
		{"RemoveManagedRoutes", func() rpcErr { return p.RemoveManagedRoutes(tenant) }, map[string]int64{"0/stable": 70, "0/canary": 30, "1/static": 1}},
		{"SetWeight(0)", func() rpcErr { return p.SetWeight(tenant, 0, nil) }, map[string]int64{"0/stable": 100, "0/canary": 0, "1/static": 1}},
	}
	for _, step := range walk {
		if err := step.do(); err.HasError() {
			t.Fatalf("%s on the granted route: %s", step.name, err.ErrorString)
		}
		if diff := cmp.Diff(step.want, weights(get(t, standard, "v1", "HTTPRoute", shared, "front"))); diff != "" {
			t.Errorf("after %s (-want +got):\n%s", step.name, diff)
		}
	}
	end := get(t, standard, "v1", "HTTPRoute", shared, "front")
	if diff := cmp.Diff(userView(t, begin), userView(t, end)); diff != "" {
		t.Errorf("the shared route does not end as it began (-begin +end):\n%s", diff)
	}
	pluginOwnsNothing(t, end)
}

// A namespace of shared routes grants shop's Rollouts its HTTPRoutes, and
// revokes the grant mid-rollout. Every call that would set something there
// is refused from then on, naming the grant; the abort (RemoveManagedRoutes,
// then SetWeight(0)) still takes back the Rollout's own rule and weights,
// and the route ends as it began, owned by nobody but its creator. After
// that, or on a route the plugin process never saw the Rollout's claim on
// (a plugin started after the revocation), the undo is refused too, and
// nothing of the namespace but its ReferenceGrants is read.
func TestARevokedGrantLetsTheRolloutUndoOnlyItsOwnClaim(t *testing.T) {
	standard := parallel(t)
	shop := namespace(t, standard)
	shared := namespace(t, standard)
	grant := create(t, standard, shared, rolloutGrant(shop, ""))
	create(t, standard, shop, servicesGrant(shared))
	for _, name := range []string{"front", "back"} {
		create(t, standard, shared, strings.Replace(routeToServicesOf(shop), "name: route", "name: "+name, 1))
	}
	begin := get(t, standard, "v1", "HTTPRoute", shared, "front")
	p := startPlugin(t, standard)
	tenant := rollout(shop, fmt.Sprintf(`{"httpRoutes": [{"name": "front", "useHeaderRoutes": true}, {"name": "back"}], "namespace": %q}`, shared))
	tenant.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "beta"}}
	if err := p.SetWeight(tenant, 30, nil); err.HasError() {
		t.Fatal(err.ErrorString)
	}
	if err := p.SetHeaderRoute(tenant, headerStep("beta", "X-Canary", "yes")); err.HasError() {
		t.Fatal(err.ErrorString)
	}
	// The platform team hands route back to Git by hand: the plugin's claim
	// on back is gone, so the revoked grant lets nothing be done there.
	if err := p.SetWeight(rollout(shop, fmt.Sprintf(`{"httpRoute": "back", "namespace": %q}`, shared)), 0, nil); err.HasError() {
		t.Fatal(err.ErrorString)
	}
	if err := standard.Dynamic.Resource(gvrOf(grant)).Namespace(shared).Delete(context.Background(), grant.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	refusal := fmt.Sprintf("its owners grant it with a ReferenceGrant in namespace %s: from [{group: argoproj.io, kind: Rollout, namespace: %s}]", shared, shop)
	// Another Rollout of shop with nothing on front: its RemoveManagedRoutes
	// writes nothing while granted, and is refused once the grant's cache
	// has the delete.
	probe := rollout(shop, fmt.Sprintf(`{"httpRoute": "front", "namespace": %q}`, shared))
	probe.Name = "probe"
	eventually(t, "the plugin sees the grant gone", func() bool {
		err := p.RemoveManagedRoutes(probe)
		return err.HasError() && strings.Contains(err.ErrorString, refusal)
	})
	if err := p.SetWeight(tenant, 50, nil); !err.HasError() || !strings.Contains(err.ErrorString, refusal) {
		t.Errorf("SetWeight(50) after the grant went: %q, want it refused naming the grant", err.ErrorString)
	}
	midway := get(t, standard, "v1", "HTTPRoute", shared, "front")
	if diff := cmp.Diff(map[string]int64{"0/stable": 70, "0/canary": 30, "1/canary": 1}, weights(midway)); diff != "" {
		t.Fatalf("the route mid-rollout (-want +got):\n%s", diff)
	}
	if err := p.SetHeaderRoute(tenant, headerStep("beta", "X-Canary", "no")); !err.HasError() || !strings.Contains(err.ErrorString, refusal) {
		t.Errorf("a header step after the grant went: %q, want it refused naming the grant", err.ErrorString)
	}
	if diff := cmp.Diff(stored(t, midway), stored(t, get(t, standard, "v1", "HTTPRoute", shared, "front"))); diff != "" {
		t.Errorf("refused calls changed the route (-before +after):\n%s", diff)
	}

	// The abort takes back what the Rollout added; back, where it has nothing, is still refused by name.
	if err := p.RemoveManagedRoutes(tenant); !err.HasError() || !strings.Contains(err.ErrorString, "name: back") {
		t.Errorf("RemoveManagedRoutes: %q, want the refusal of back alone", err.ErrorString)
	}
	if diff := cmp.Diff(map[string]int64{"0/stable": 70, "0/canary": 30}, weights(get(t, standard, "v1", "HTTPRoute", shared, "front"))); diff != "" {
		t.Errorf("after RemoveManagedRoutes (-want +got):\n%s", diff)
	}
	_ = p.SetWeight(tenant, 0, nil)
	end := get(t, standard, "v1", "HTTPRoute", shared, "front")
	if diff := cmp.Diff(userView(t, begin), userView(t, end)); diff != "" {
		t.Errorf("the route does not end as it began (-begin +end):\n%s", diff)
	}
	pluginOwnsNothing(t, end)

	// Nothing of the Rollout's is left there: every call is refused, and reads nothing of the namespace.
	since := standard.Recorder.Count()
	for name, call := range map[string]func() rpcErr{
		"SetWeight(0)":        func() rpcErr { return p.SetWeight(tenant, 0, nil) },
		"RemoveManagedRoutes": func() rpcErr { return p.RemoveManagedRoutes(tenant) },
	} {
		if err := call(); !err.HasError() || !strings.Contains(err.ErrorString, refusal) || !strings.Contains(err.ErrorString, "nothing was written") {
			t.Errorf("%s after the undo: %q, want it refused naming the grant", name, err.ErrorString)
		}
	}
	for _, r := range standard.Recorder.RequestsSince(since) {
		if strings.Contains(r.Path, "/namespaces/"+shared+"/") && !strings.HasSuffix(r.Path, "/referencegrants") && !r.IsEvent() &&
			strings.HasPrefix(r.UserAgent, "rollouts-gatewayapi-ssa") {
			t.Errorf("the plugin read or wrote in %s once nothing of the Rollout's was there: %s %s", shared, r.Method, r.Path)
		}
	}
	if diff := cmp.Diff(stored(t, end), stored(t, get(t, standard, "v1", "HTTPRoute", shared, "front"))); diff != "" {
		t.Errorf("the refused calls changed the route (-before +after):\n%s", diff)
	}
}

// Tenants a and c share route front of namespace shared, which grants both
// their Rollouts its HTTPRoutes: /a goes to a's Services, /c to c's, and c's
// Rollout is walking. a's mirror step naming /c/login is refused, saying
// which of a's rules it leaves and what to match instead, and nothing is
// written: the route is the same byte for byte. a's mirror step naming
// /a/login and a's header step add rules that match only under /a, and c's
// rule never changes. The end of a's rollout leaves c's walk as it was.
func TestATenantsAddedRulesStayWithinItsOwnRule(t *testing.T) {
	standard := parallel(t)
	a, c, shared := namespace(t, standard), namespace(t, standard), namespace(t, standard)
	for _, tenant := range []string{a, c} {
		create(t, standard, shared, rolloutGrant(tenant, ""))
		create(t, standard, tenant, servicesGrant(shared))
	}
	create(t, standard, shared, fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: front}
spec:
  rules:
  - matches: [{path: {type: PathPrefix, value: /a}}]
    backendRefs:
    - {name: stable, namespace: %[1]s, port: 80, weight: 100}
    - {name: canary, namespace: %[1]s, port: 80, weight: 0}
  - matches: [{path: {type: PathPrefix, value: /c}}]
    backendRefs:
    - {name: stable, namespace: %[2]s, port: 80, weight: 100}
    - {name: canary, namespace: %[2]s, port: 80, weight: 0}
`, a, c))
	config := fmt.Sprintf(`{"httpRoute": "front", "namespace": %q}`, shared)
	p := startPlugin(t, standard)
	tenantC := rollout(c, config)
	must(t, "c's SetWeight(30)", p.SetWeight(tenantC, 30, nil))
	tenantA := managedRollout(a, "demo", config, "beta", "mirror")
	must(t, "a's SetWeight(10)", p.SetWeight(tenantA, 10, nil))
	begin := get(t, standard, "v1", "HTTPRoute", shared, "front")
	cRule := func(u *unstructured.Unstructured) any {
		rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
		return normalizeJSON(t, rules[1])
	}
	mirrorOf := func(path string) *v1alpha1.SetMirrorRoute {
		return &v1alpha1.SetMirrorRoute{Name: "mirror", Match: []v1alpha1.RouteMatch{{Path: &v1alpha1.StringMatch{Exact: path}}}}
	}

	standard.Recorder.Reset()
	err := p.SetMirrorRoute(tenantA, mirrorOf("/c/login"))
	want := fmt.Sprintf(`mirror route "mirror": match 0 (path Exact /c/login) matches no request that the Rollout's rule 0 of HTTPRoute %s/front matches (path PathPrefix /a), `+
		"so it would take other rules' traffic; match a path within /a", shared)
	if !err.HasError() || !strings.Contains(err.ErrorString, want) || !strings.Contains(err.ErrorString, "nothing was written") {
		t.Errorf("a's mirror step on /c/login: %q, want an error saying %q", err.ErrorString, want)
	}
	if w := pluginWrites(standard); len(w) != 0 {
		t.Errorf("the refused step wrote %v", w)
	}
	if diff := cmp.Diff(stored(t, begin), stored(t, get(t, standard, "v1", "HTTPRoute", shared, "front"))); diff != "" {
		t.Errorf("the refused step changed the route (-before +after):\n%s", diff)
	}

	must(t, "a's SetMirrorRoute(/a/login)", p.SetMirrorRoute(tenantA, mirrorOf("/a/login")))
	must(t, "a's SetHeaderRoute", p.SetHeaderRoute(tenantA, headerStep("beta", "X-Canary", "yes")))
	u := get(t, standard, "v1", "HTTPRoute", shared, "front")
	for name, want := range map[string]string{
		"mirror": `[{path: {type: Exact, value: /a/login}}]`,
		"beta":   `[{path: {type: PathPrefix, value: /a}, headers: [{name: X-Canary, type: Exact, value: "yes"}]}]`,
	} {
		var matches []any
		if err := yaml.Unmarshal([]byte(want), &matches); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(normalizeJSON(t, matches), normalizeJSON(t, ruleNamed(u, name)["matches"])); diff != "" {
			t.Errorf("a's rule %q matches (-want +got):\n%s", name, diff)
		}
	}
	if diff := cmp.Diff(cRule(begin), cRule(u)); diff != "" {
		t.Errorf("c's rule changed (-before +after):\n%s", diff)
	}

	must(t, "a's RemoveManagedRoutes", p.RemoveManagedRoutes(tenantA))
	must(t, "a's SetWeight(0)", p.SetWeight(tenantA, 0, nil))
	end := get(t, standard, "v1", "HTTPRoute", shared, "front")
	if diff := cmp.Diff(map[string]int64{"0/stable": 100, "0/canary": 0, "1/stable": 70, "1/canary": 30}, weights(end)); diff != "" {
		t.Errorf("at the end of a's rollout (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(cRule(begin), cRule(end)); diff != "" {
		t.Errorf("c's rule changed (-before +after):\n%s", diff)
	}
}
