package cleanup

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// sweepRoutes are the routes of two Rollouts mid-canary: gone (30 %, on
// routes gone and shared) and kept (40 %, on routes kept and shared).
func sweepRoutes(t *testing.T) []*unstructured.Unstructured {
	return []*unstructured.Unstructured{
		route(t, "gone", split{"/", "gone", 30}),
		route(t, "kept", split{"/", "kept", 40}),
		route(t, "shared", split{"/gone", "gone", 30}, split{"/kept", "kept", 40}),
	}
}

// sweepInterval is the plugin's -cleanup-interval in these tests; the
// sweeps are given their time, nothing waits for it.
const sweepInterval = time.Minute

var start = time.Date(2025, 3, 4, 5, 6, 0, 0, time.UTC)

// Rollout shop/gone was deleted mid-canary; shop/kept still runs. The first
// sweep that finds gone missing writes nothing (a Rollout deleted and
// created again must not lose its routes); the next one, an interval later,
// undoes gone's claim on its routes, gone and shared, and on nothing else:
// route kept is not written, and on route shared, kept's weights and claim
// stay. Route gone, claimed by nobody now, is given up (an Update); shared,
// still kept's, is not. A third sweep has nothing left to do.
func TestSweepUndoesOnlyTheDeletedRollout(t *testing.T) {
	f := newFakeCluster(t, append(sweepRoutes(t), rollout("kept"))...)
	s := &Sweeper{Cleaner: newCleaner(t, f), Interval: sweepInterval}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	s.Sweep(ctx, start)
	if w := f.Written(); len(w) > 0 {
		t.Fatalf("the first sweep that saw Rollout gone missing wrote: %v", w)
	}

	s.Sweep(ctx, start.Add(sweepInterval))
	if diff := cmp.Diff([]string{"apply shop/gone", "apply shop/shared", "patch shop/gone"}, f.Written()); diff != "" {
		t.Fatalf("the second sweep's writes (-want +got):\n%s", diff)
	}
	// Route shared as applied: gone's rule back to 100/0, kept's at 60/40,
	// and only kept's claim.
	var applied map[string]any
	for _, w := range f.Writes() {
		if w.Verb == "apply" && w.Route == "shop/shared" {
			applied = w.Object
		}
	}
	sharedNow := route(t, "shared", split{"/gone", "gone", 0}, split{"/kept", "kept", 40})
	if diff := cmp.Diff(rulesOf(sharedNow), rulesOf(&unstructured.Unstructured{Object: applied})); diff != "" {
		t.Errorf("the rules applied to route shared (-want +got):\n%s", diff)
	}
	keptClaim := routes.Claims{"shop/kept": split{"/kept", "kept", 40}.claim(1)}.Annotations()
	appliedMeta := &unstructured.Unstructured{Object: applied}
	if diff := cmp.Diff(keptClaim, appliedMeta.GetAnnotations()); diff != "" {
		t.Errorf("the annotations applied to route shared (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{canaryLabel: "in-progress"}, appliedMeta.GetLabels()); diff != "" {
		t.Errorf("the labels applied to route shared (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(sweepRoutes(t)[1].Object, f.Route(ns, "kept").Object); diff != "" {
		t.Errorf("route kept changed (-before +after):\n%s", diff)
	}
	gone, err := routes.FromUnstructured(f.Route(ns, "gone"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rulesOf(route(t, "gone", split{"/", "gone", 0})), rulesOf(f.Route(ns, "gone"))); diff != "" {
		t.Errorf("route gone is not as before the rollout (-before +after):\n%s", diff)
	}
	if _, claimed := gone.Annotations[routes.ClaimsAnnotation]; claimed || routes.OwnsAnything(gone.ManagedFields, fieldManager) {
		t.Errorf("route gone still carries claims %v or the plugin's ownership %+v", gone.Annotations, gone.ManagedFields)
	}

	s.Sweep(ctx, start.Add(2*sweepInterval))
	if n := len(f.Written()); n != 3 {
		t.Errorf("the third sweep wrote again: %v", f.Written()[3:])
	}
}

// A Rollout deleted and created again between two sweeps (an Argo CD
// replace, a kubectl delete and apply) keeps its routes: the new Rollout's
// calls carry on from its claims.
func TestSweepLeavesARolloutCreatedAgain(t *testing.T) {
	f := newFakeCluster(t, route(t, "gone", split{"/", "gone", 30}))
	s := &Sweeper{Cleaner: newCleaner(t, f), Interval: sweepInterval}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	s.Sweep(ctx, start) // gone is missing
	f.Add(rollout("gone"))
	s.Sweep(ctx, start.Add(sweepInterval))   // and is back
	s.Sweep(ctx, start.Add(2*sweepInterval)) // and stays
	if w := f.Written(); len(w) > 0 {
		t.Errorf("the sweeps wrote the routes of a Rollout that exists again: %v", w)
	}
}

// A sweep sooner than half an interval after the one that first saw the
// Rollout missing does not count as the second look.
func TestSweepWaitsHalfAnIntervalBeforeUndoing(t *testing.T) {
	f := newFakeCluster(t, route(t, "gone", split{"/", "gone", 30}))
	s := &Sweeper{Cleaner: newCleaner(t, f), Interval: sweepInterval}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	s.Sweep(ctx, start)
	s.Sweep(ctx, start.Add(sweepInterval/4))
	if w := f.Written(); len(w) > 0 {
		t.Fatalf("a sweep a quarter interval later wrote: %v", w)
	}
	s.Sweep(ctx, start.Add(sweepInterval/2))
	if diff := cmp.Diff([]string{"apply shop/gone", "patch shop/gone"}, f.Written()); diff != "" {
		t.Errorf("the sweep half an interval later (-want +got):\n%s", diff)
	}
}
