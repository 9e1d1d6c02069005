package cleanup

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
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
		"a Rollout that exists": {objects: []*unstructured.Unstructured{rollout("demo")}, rollout: "shop/demo", want: true},
		"a deleted Rollout":     {rollout: "shop/demo", want: false},
		"another namespace's":   {objects: []*unstructured.Unstructured{rollout("demo")}, rollout: "prod/demo", want: false},
		"the apiserver fails": {objects: []*unstructured.Unstructured{rollout("demo")}, rollout: "shop/demo",
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
	claimed := Claimed(all, "shop/demo")
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
	got := c.Undo(ctx, "shop/demo", Claimed(all, "shop/demo"), desired.ReportConflicts, false)
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
	if diff := cmp.Diff(rulesOf(before), rulesOf(f.Route(ns, "web"))); diff != "" {
		t.Errorf("the rules are not as before the rollout (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"owner": "shop-team@example.com"}, after.Annotations); diff != "" {
		t.Errorf("the annotations (-want +got):\n%s", diff)
	}
	if len(after.Labels) > 0 || routes.OwnsAnything(after.ManagedFields, fieldManager) {
		t.Errorf("the plugin's label %v or ownership %+v is left", after.Labels, after.ManagedFields)
	}
}

// Someone set the weights by hand after the plugin (kubectl now owns
// spec.rules): without --force the cleanup reports the conflict and leaves
// the route; with it, it takes the route back.
func TestUndoOfARouteSomeoneElseChanged(t *testing.T) {
	changed := route(t, "web", split{"/", "demo", 30})
	rules := rulesOf(changed)
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
	got := c.Undo(ctx, "shop/demo", Claimed(all, "shop/demo"), desired.ReportConflicts, false)
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

	got = c.Undo(ctx, "shop/demo", Claimed(all, "shop/demo"), desired.TakeOver, false)
	if err := Failed(got); err != nil {
		t.Fatalf("with force: %v", err)
	}
	if diff := cmp.Diff(rulesOf(route(t, "web", split{"/", "demo", 0})), rulesOf(f.Route(ns, "web"))); diff != "" {
		t.Errorf("with force, the rules are not as before the rollout (-before +after):\n%s", diff)
	}
}

// The Rollouts with a claim on any route, and the routes a Rollout has a
// claim on: what the sweep and the command start from.
func TestClaimingRolloutsAndClaimed(t *testing.T) {
	f := newFakeCluster(t, sweepRoutes(t)...)
	all, err := newCleaner(t, f).Routes(testContext(t), "")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"shop/gone", "shop/kept"}, claimingRollouts(all)); diff != "" {
		t.Errorf("claimingRollouts (-want +got):\n%s", diff)
	}
	for rollout, want := range map[string][]string{
		"shop/gone": {"HTTPRoute shop/gone", "HTTPRoute shop/shared"},
		"shop/kept": {"HTTPRoute shop/kept", "HTTPRoute shop/shared"},
		"shop/none": nil,
	} {
		var got []string
		for _, r := range Claimed(all, rollout) {
			got = append(got, r.Ref.String())
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Claimed(%s) (-want +got):\n%s", rollout, diff)
		}
	}
}

func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Error() == b.Error()
}
