package cleanup

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Whether a Rollout exists is what the apiserver answers for it: there (200),
// not found (404: the one answer that lets a cleanup go on), or an error
// (500), which says which Rollout could not be read.
func TestExists(t *testing.T) {
	for name, tc := range map[string]struct {
		objects []*unstructured.Unstructured
		answer  int // the status of every GET of a Rollout instead of what the store holds
		rollout string
		want    bool
		wantErr string
	}{
		"a Rollout that exists": {objects: []*unstructured.Unstructured{rolloutObject("demo")}, rollout: "shop/demo", want: true},
		"a deleted Rollout":     {rollout: "shop/demo", want: false},
		"another namespace's":   {objects: []*unstructured.Unstructured{rolloutObject("demo")}, rollout: "prod/demo", want: false},
		"the apiserver fails": {objects: []*unstructured.Unstructured{rolloutObject("demo")}, rollout: "shop/demo",
			answer:  http.StatusInternalServerError,
			wantErr: `reading Rollout shop/demo: an error on the server ("the fake apiserver answers so") has prevented the request from succeeding (get rollouts.argoproj.io demo)`},
		"not namespace/name": {rollout: "demo", wantErr: `"demo" is not <namespace>/<name>`},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeCluster(t, tc.objects...)
			f.AnswerRollouts(tc.answer)
			got, err := newCleaner(t, f).Exists(testContext(t), tc.rollout)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if got != tc.want || gotErr != tc.wantErr {
				t.Errorf("Exists(%s) = %v, %q; want %v, %q", tc.rollout, got, gotErr, tc.want, tc.wantErr)
			}
			if tc.answer != 0 && !apierrors.IsInternalError(errors.Unwrap(err)) {
				t.Errorf("the error does not carry the apiserver's: %#v", err)
			}
		})
	}
}

// undoneWeb is what undoing Rollout shop/demo's claim changes on route web
// at 30 % canary.
var undoneWeb = []string{"rule 0 Service shop/demo-stable 70→100", "rule 0 Service shop/demo-canary 30→0",
	"label " + canaryLabel + " no longer applied", "annotation " + routes.ClaimsAnnotation + " no longer applied"}

// A dry run of the cleanup of deleted Rollout shop/demo, on the routes it
// claims: route web would get its weights back and lose the plugin's label
// and claims; nothing is written.
func TestUndoDryRunReportsAndWritesNothing(t *testing.T) {
	f := newFakeCluster(t, route(t, "web", split{"/", "demo", 30}), route(t, "other", split{"/", "other", 0}))
	c := newCleaner(t, f)
	ctx := testContext(t)
	all, err := c.Routes(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	claimed := c.Claimed(all, "shop/demo")
	got := c.Undo(ctx, "shop/demo", claimed, desired.ReportConflicts, true)
	want := []Outcome{{Route: routes.Ref{Kind: routes.HTTPRoute, Namespace: ns, Name: "web"}, Changes: undoneWeb}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the dry run's outcomes (-want +got):\n%s", diff)
	}
	if w := f.Written(); len(w) > 0 {
		t.Errorf("the dry run wrote: %v", w)
	}
	if diff := cmp.Diff(route(t, "web", split{"/", "demo", 30}).Object, f.Route(ns, "web").Object); diff != "" {
		t.Errorf("the dry run changed the route (-before +after):\n%s", diff)
	}
}

// The cleanup itself: one server-side apply puts route web back as before
// the rollout, then one JSON patch of its managedFields gives up the
// plugin's ownership and keeps every value.
func TestUndoPutsTheRouteBack(t *testing.T) {
	f := newFakeCluster(t, route(t, "web", split{"/", "demo", 30}))
	c := newCleaner(t, f)
	ctx := testContext(t)
	all, err := c.Routes(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	got := c.Undo(ctx, "shop/demo", c.Claimed(all, "shop/demo"), desired.ReportConflicts, false)
	want := []Outcome{{Route: routes.Ref{Kind: routes.HTTPRoute, Namespace: ns, Name: "web"}, Changes: undoneWeb}}
	if diff := cmp.Diff(want, got, cmp.Comparer(sameError)); diff != "" {
		t.Errorf("the outcomes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"apply shop/web", "patch shop/web"}, f.Written()); diff != "" {
		t.Errorf("the writes (-want +got):\n%s", diff)
	}
	after, err := routes.FromUnstructured(f.Route(ns, "web"))
	if err != nil {
		t.Fatal(err)
	}
	before := route(t, "web", split{"/", "demo", 0})
	if diff := cmp.Diff(kubetest.Rules(before), kubetest.Rules(f.Route(ns, "web"))); diff != "" {
		t.Errorf("the rules are not as before the rollout (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"owner": "shop-team@example.com"}, after.Annotations); diff != "" {
		t.Errorf("the annotations (-want +got):\n%s", diff)
	}
	if len(after.Labels) > 0 || after.ManagedFields.OwnsAnything(fieldManager) {
		t.Errorf("the plugin's label %v or ownership %+v is left", after.Labels, after.ManagedFields.Entries())
	}
}

// Someone set the weights by hand after the plugin (kubectl now owns
// spec.rules): without --force the cleanup reports the conflict and leaves
// the route; with it, it takes the route back.
func TestUndoOfARouteSomeoneElseChanged(t *testing.T) {
	changed := route(t, "web", split{"/", "demo", 30})
	rules := kubetest.Rules(changed)
	refs := rules[0].(map[string]any)["backendRefs"].([]any)
	refs[0].(map[string]any)["weight"], refs[1].(map[string]any)["weight"] = int64(50), int64(50)
	if err := unstructured.SetNestedSlice(changed.Object, rules, "spec", "rules"); err != nil {
		t.Fatal(err)
	}
	mf := changed.GetManagedFields()
	mf[0].FieldsV1 = fields(t, map[string]any{"f:spec": map[string]any{"f:parentRefs": map[string]any{}, "f:rules": map[string]any{}}})
	mf[1].FieldsV1 = fields(t, map[string]any{"f:metadata": map[string]any{"f:annotations": map[string]any{"f:" + routes.ClaimsAnnotation: map[string]any{}}}})
	changed.SetManagedFields(mf)

	f := newFakeCluster(t, changed)
	c := newCleaner(t, f)
	ctx := testContext(t)
	all, err := c.Routes(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	got := c.Undo(ctx, "shop/demo", c.Claimed(all, "shop/demo"), desired.ReportConflicts, false)
	var conflict *desired.ConflictError
	if len(got) != 1 || !errors.As(got[0].Err, &conflict) || !strings.Contains(got[0].Err.Error(), "the plugin set 70, now 50") {
		t.Fatalf("without force: %+v; want a conflict naming the changed weight", got)
	}
	if w := f.Written(); len(w) > 0 {
		t.Errorf("the conflict wrote: %v", w)
	}
	if Failed(got) == nil {
		t.Error("Failed says nothing failed")
	}

	got = c.Undo(ctx, "shop/demo", c.Claimed(all, "shop/demo"), desired.TakeOver, false)
	if err := Failed(got); err != nil {
		t.Fatalf("with force: %v", err)
	}
	if diff := cmp.Diff(kubetest.Rules(route(t, "web", split{"/", "demo", 0})), kubetest.Rules(f.Route(ns, "web"))); diff != "" {
		t.Errorf("with force, the rules are not as before the rollout (-before +after):\n%s", diff)
	}
}

// The Rollouts with a claim on any route, and the routes a Rollout has a
// claim on, as each member cluster of a fleet sees them: what the sweep and
// the command start from. Rollout shop/gone's claim on route gone names no
// cluster (written before claims did): every cluster takes it for its own.
// On route shared, shop/gone's claim is member-b's and shop/kept's
// member-a's; route odd carries a claim whose key names no Rollout.
func TestClaimingRolloutsAndClaimed(t *testing.T) {
	odd := route(t, "odd", split{"/", "odd", 30})
	annotations := odd.GetAnnotations()
	annotations[routes.ClaimsAnnotation] = strings.Replace(annotations[routes.ClaimsAnnotation], `"shop/odd"`, `"odd"`, 1)
	odd.SetAnnotations(annotations)
	f := newFakeCluster(t,
		route(t, "gone", split{"/", "gone", 30}),
		madeBy(t, route(t, "kept", split{"/", "kept", 40}), "member-a", "shop/kept"),
		madeBy(t, madeBy(t, sweepRoutes(t)[2], "member-b", "shop/gone"), "member-a", "shop/kept"),
		odd)
	c := newCleaner(t, f)
	all, err := c.Routes(testContext(t), "")
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		Claiming, Malformed []string
		Claimed             map[string][]string
		Elsewhere           map[string][]ForeignClaim
	}
	ref := func(name string) routes.Ref { return routes.Ref{Kind: routes.HTTPRoute, Namespace: ns, Name: name} }
	for cluster, want := range map[string]seen{
		"member-a": {Claiming: []string{"shop/gone", "shop/kept"}, Malformed: []string{"odd"},
			Claimed:   map[string][]string{"shop/gone": {"HTTPRoute shop/gone"}, "shop/kept": {"HTTPRoute shop/kept", "HTTPRoute shop/shared"}},
			Elsewhere: map[string][]ForeignClaim{"shop/gone": {{Route: ref("shared"), Cluster: "member-b"}}}},
		"member-b": {Claiming: []string{"shop/gone"}, Malformed: []string{"odd"},
			Claimed:   map[string][]string{"shop/gone": {"HTTPRoute shop/gone", "HTTPRoute shop/shared"}},
			Elsewhere: map[string][]ForeignClaim{"shop/kept": {{Route: ref("kept"), Cluster: "member-a"}, {Route: ref("shared"), Cluster: "member-a"}}}},
	} {
		c.Cluster = cluster
		got := seen{Claimed: map[string][]string{}, Elsewhere: map[string][]ForeignClaim{}}
		idx := c.indexClaims(all)
		got.Claiming, got.Malformed = idx.rollouts, idx.malformed
		for _, rollout := range []string{"shop/gone", "shop/kept", "shop/none"} {
			for _, r := range c.Claimed(all, rollout) {
				got.Claimed[rollout] = append(got.Claimed[rollout], r.Ref.String())
			}
			if e := c.ClaimedElsewhere(all, rollout); e != nil {
				got.Elsewhere[rollout] = e
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("as cluster %s sees them (-want +got):\n%s", cluster, diff)
		}
	}
}

// Another cluster's claim is not undone even when a caller hands Undo the
// route: the claim on it is not the Cleaner's cluster's (desired.Undo
// leaves it), and a legacy claim, which names no cluster, is.
func TestUndoTakesOnlyItsClustersClaim(t *testing.T) {
	f := newFakeCluster(t, madeBy(t, route(t, "web", split{"/", "demo", 30}), "member-b", "shop/demo"), route(t, "legacy", split{"/", "demo", 30}))
	c := newCleaner(t, f)
	c.Cluster = "member-a"
	ctx := testContext(t)
	all, err := c.Routes(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	got := c.Undo(ctx, "shop/demo", c.Claimed(all, "shop/demo"), desired.ReportConflicts, false)
	want := []Outcome{{Route: routes.Ref{Kind: routes.HTTPRoute, Namespace: ns, Name: "legacy"}, Changes: undoneWeb}}
	if diff := cmp.Diff(want, got, cmp.Comparer(sameError)); diff != "" {
		t.Errorf("the outcomes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"apply shop/legacy", "patch shop/legacy"}, f.Written()); diff != "" {
		t.Errorf("the writes (-want +got):\n%s", diff)
	}
}

// Rollout shop/demo's claims on routes in namespace edge: the cleanup
// undoes them only where edge grants Rollouts of shop its HTTPRoutes (a
// ReferenceGrant), as the plugin's calls reach them. An ungranted route is
// reported with the grant to create, and neither written nor read: no GET
// of it, no write.
func TestUndoOnlyWhereTheRoutesNamespaceGrantsIt(t *testing.T) {
	web := func() *unstructured.Unstructured { return routeIn(t, "edge", "web", split{"/", "demo", 30}) }
	edgeWeb := routes.Ref{Kind: routes.HTTPRoute, Namespace: "edge", Name: "web"}
	undone := []string{"rule 0 Service shop/demo-stable 70→100", "rule 0 Service shop/demo-canary 30→0",
		"label " + canaryLabel + " no longer applied", "annotation " + routes.ClaimsAnnotation + " no longer applied"}
	notGranted := &routes.NotGrantedError{Rollouts: ns, Namespace: "edge", Kind: routes.HTTPRoute, Name: "web"}
	for name, tc := range map[string]struct {
		grants []*unstructured.Unstructured
		ignore bool
		want   Outcome
		writes []string
	}{
		"no grant":                     {want: Outcome{Route: edgeWeb, Err: notGranted}},
		"a grant of another namespace": {grants: []*unstructured.Unstructured{grant("other")}, want: Outcome{Route: edgeWeb, Err: notGranted}},
		"granted":                      {grants: []*unstructured.Unstructured{grant("edge")}, want: Outcome{Route: edgeWeb, Changes: undone}, writes: []string{"apply edge/web", "patch edge/web"}},
		"grants not required":          {ignore: true, want: Outcome{Route: edgeWeb, Changes: undone}, writes: []string{"apply edge/web", "patch edge/web"}},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeCluster(t, append(tc.grants, web())...)
			c := newCleaner(t, f)
			c.IgnoreReferenceGrants = tc.ignore
			ctx := testContext(t)
			all, err := c.Routes(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			got := c.Undo(ctx, "shop/demo", c.Claimed(all, "shop/demo"), desired.ReportConflicts, false)
			if diff := cmp.Diff([]Outcome{tc.want}, got, cmp.Comparer(sameError)); diff != "" {
				t.Errorf("the outcomes (-want +got):\n%s", diff)
			}
			var ungranted *routes.NotGrantedError
			if tc.want.Err != nil && !errors.As(got[0].Err, &ungranted) {
				t.Errorf("the error is not a *routes.NotGrantedError: %#v", got[0].Err)
			}
			if diff := cmp.Diff(tc.writes, f.Written()); diff != "" {
				t.Errorf("the writes (-want +got):\n%s", diff)
			}
			if tc.writes == nil {
				for _, r := range f.Requests() {
					if strings.HasSuffix(r.Path, "/namespaces/edge/httproutes/web") {
						t.Errorf("the ungranted route was read: %s", r)
					}
				}
			}
		})
	}
}

func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Error() == b.Error()
}

// Which claims a Cleaner takes back: on shared routes (a route cluster's)
// the claims of its kube-system UID, whatever their name, and without a UID
// those of its name; on its own routes those that name no cluster, and
// without a UID those of its name when it knows it. Another member's claim
// of the same name, told apart by its UID, never.
func TestOursByUIDAndName(t *testing.T) {
	claims := map[string]routes.Claim{
		"none":              {},
		"east, no UID":      {Cluster: "east"},
		"east, its UID":     {Cluster: "east", ClusterUID: "uid-east"},
		"renamed, its UID":  {Cluster: "old-east", ClusterUID: "uid-east"},
		"east, another UID": {Cluster: "east", ClusterUID: "uid-other"},
		"west, west's UID":  {Cluster: "west", ClusterUID: "uid-west"},
		"west, no UID":      {Cluster: "west"},
	}
	for _, tc := range []struct {
		name string
		c    Cleaner
		want []string
	}{
		{"shared routes", Cleaner{SharedRoutes: true, Cluster: "east", ClusterUID: "uid-east"},
			[]string{"east, its UID", "east, no UID", "renamed, its UID"}},
		{"own routes, unnamed", Cleaner{}, []string{"none"}},
		{"own routes, named", Cleaner{Cluster: "east", ClusterUID: "uid-east"}, []string{"east, no UID", "none"}},
	} {
		var got []string
		for _, k := range slices.Sorted(maps.Keys(claims)) {
			if tc.c.ours(claims[k]) {
				got = append(got, k)
			}
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}
