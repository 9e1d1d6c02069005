package cleanup

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
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

// gatewayV1 is the path of the Gateway API's v1 on the apiserver.
const gatewayV1 = "/apis/" + routes.Group + "/v1"

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
	f := newFakeCluster(t, append(sweepRoutes(t), rolloutObject("kept"))...)
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
	if diff := cmp.Diff(kubetest.Rules(sharedNow), kubetest.Rules(&unstructured.Unstructured{Object: applied})); diff != "" {
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
	if diff := cmp.Diff(kubetest.Rules(route(t, "gone", split{"/", "gone", 0})), kubetest.Rules(f.Route(ns, "gone"))); diff != "" {
		t.Errorf("route gone is not as before the rollout (-before +after):\n%s", diff)
	}
	if _, claimed := gone.Annotations[routes.ClaimsAnnotation]; claimed || gone.ManagedFields.OwnsAnything(fieldManager) {
		t.Errorf("route gone still carries claims %v or the plugin's ownership %+v", gone.Annotations, gone.ManagedFields.Entries())
	}

	s.Sweep(ctx, start.Add(2*sweepInterval))
	if n := len(f.Written()); n != 3 {
		t.Errorf("the third sweep wrote again: %v", f.Written()[3:])
	}
}

// A Rollout deleted and created again between two sweeps (an Argo CD
// replace, a kubectl delete and apply) keeps its routes: the new Rollout's
// calls carry on from its claims. Deleted again, it counts as gone only
// after two more sweeps that find it missing.
func TestSweepLeavesARolloutCreatedAgain(t *testing.T) {
	f := newFakeCluster(t, route(t, "gone", split{"/", "gone", 30}))
	s := &Sweeper{Cleaner: newCleaner(t, f), Interval: sweepInterval}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	s.Sweep(ctx, start) // gone is missing
	f.Add(rolloutObject("gone"))
	s.Sweep(ctx, start.Add(sweepInterval))   // and is back
	s.Sweep(ctx, start.Add(2*sweepInterval)) // and stays
	f.Delete(rolloutObject("gone"))
	s.Sweep(ctx, start.Add(3*sweepInterval)) // and is missing again: a first look
	if w := f.Written(); len(w) > 0 {
		t.Fatalf("the sweeps wrote the routes of a Rollout that exists again: %v", w)
	}
	s.Sweep(ctx, start.Add(4*sweepInterval))
	if diff := cmp.Diff([]string{"apply shop/gone", "patch shop/gone"}, f.Written()); diff != "" {
		t.Errorf("the second sweep that found it missing again (-want +got):\n%s", diff)
	}
}

// A sweep's cost is bounded by the routes, whatever their claims say: it
// lists the routes a page at a time and the Rollouts with one LIST (a page
// at a time too), never a GET per Rollout a claim names. Here the page
// holds 5: seven routes take two pages, eleven Rollouts three, and route
// many names ten Rollouts. Rollout gone's claims are on routes of both
// pages (shared is on the second): every one of them is undone.
func TestSweepPagesAndReadsTheRolloutsOncePerSweep(t *testing.T) {
	objects := append(sweepRoutes(t),
		route(t, "gone-2", split{"/", "gone", 30}), route(t, "gone-3", split{"/", "gone", 30}),
		route(t, "plain", split{"/", "plain", 0}), rolloutObject("kept"))
	var many []split
	for i := range 10 {
		name := fmt.Sprintf("r%d", i)
		many = append(many, split{"/" + name, name, 10})
		objects = append(objects, rolloutObject(name))
	}
	objects = append(objects, route(t, "many", many...))
	f := newFakeCluster(t, objects...)
	c := newCleaner(t, f)
	c.PageSize = 5
	s := &Sweeper{Cleaner: c, Interval: sweepInterval}
	ctx := testContext(t)

	// reads are the reads of routes and Rollouts a sweep sends.
	reads := func(sweep func()) (routeLists, rolloutLists, rolloutGets []string) {
		before := len(f.Requests())
		sweep()
		for _, r := range f.Requests()[before:] {
			switch {
			case r.Method != http.MethodGet:
			case r.Path == gatewayV1+"/httproutes":
				routeLists = append(routeLists, r.String())
			case r.Path == "/apis/argoproj.io/v1alpha1/rollouts":
				rolloutLists = append(rolloutLists, r.String())
			case strings.Contains(r.Path, "/rollouts/"):
				rolloutGets = append(rolloutGets, r.String())
			}
		}
		return
	}
	for i, when := range []time.Time{start, start.Add(sweepInterval), start.Add(2 * sweepInterval)} {
		routeLists, rolloutLists, rolloutGets := reads(func() { s.Sweep(ctx, when) })
		wantRoutes := []string{"GET " + gatewayV1 + "/httproutes?limit=5", "GET " + gatewayV1 + "/httproutes?continue=shop%2Fmany&limit=5"}
		if diff := cmp.Diff(wantRoutes, routeLists); diff != "" {
			t.Errorf("sweep %d: the LISTs of routes (-want +got):\n%s", i+1, diff)
		}
		wantRollouts := []string{"GET /apis/argoproj.io/v1alpha1/rollouts?limit=5",
			"GET /apis/argoproj.io/v1alpha1/rollouts?continue=shop%2Fr3&limit=5",
			"GET /apis/argoproj.io/v1alpha1/rollouts?continue=shop%2Fr8&limit=5"}
		if diff := cmp.Diff(wantRollouts, rolloutLists); diff != "" {
			t.Errorf("sweep %d: the reads of Rollouts (-want +got):\n%s", i+1, diff)
		}
		if len(rolloutGets) > 0 {
			t.Errorf("sweep %d read Rollouts one by one: %v", i+1, rolloutGets)
		}
	}
	want := []string{"apply shop/gone", "apply shop/gone-2", "apply shop/gone-3", "apply shop/shared",
		"patch shop/gone", "patch shop/gone-2", "patch shop/gone-3"}
	if diff := cmp.Diff(want, f.Written()); diff != "" {
		t.Errorf("the writes (-want +got):\n%s", diff)
	}
}

// In a fleet, member clusters run the same Rollout against one route; each
// cluster's sweep takes back only its own claims. Rollout shop/gone is
// missing in cluster member-a: its claim on route legacy (written before
// claims named a cluster) and on route ours (member-a's) are undone; its
// claim on route theirs, member-b's, is neither counted nor written. A
// cluster whose routes carry only other clusters' claims does not even
// read its Rollouts.
func TestSweepTakesBackOnlyItsClustersClaims(t *testing.T) {
	theirs := func() *unstructured.Unstructured {
		return madeBy(t, route(t, "theirs", split{"/", "gone", 30}), "member-b", "shop/gone")
	}
	f := newFakeCluster(t, theirs(), route(t, "legacy", split{"/", "gone", 30}),
		madeBy(t, route(t, "ours", split{"/", "gone", 30}), "member-a", "shop/gone"))
	c := newCleaner(t, f)
	c.Cluster = "member-a"
	s := &Sweeper{Cleaner: c, Interval: sweepInterval}
	ctx := testContext(t)
	s.Sweep(ctx, start)
	s.Sweep(ctx, start.Add(sweepInterval))
	want := []string{"apply shop/legacy", "apply shop/ours", "patch shop/legacy", "patch shop/ours"}
	if diff := cmp.Diff(want, f.Written()); diff != "" {
		t.Errorf("the writes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(theirs().Object, f.Route(ns, "theirs").Object); diff != "" {
		t.Errorf("member-b's route changed (-before +after):\n%s", diff)
	}

	// In a route cluster, which the Rollouts of several clusters share, a
	// claim that names no cluster may be any member's: left alone.
	shared := newFakeCluster(t, route(t, "legacy", split{"/", "gone", 30}),
		madeBy(t, route(t, "ours", split{"/", "gone", 30}), "member-a", "shop/gone"))
	c = newCleaner(t, shared)
	c.Cluster, c.SharedRoutes = "member-a", true
	s = &Sweeper{Cleaner: c, Interval: sweepInterval}
	s.Sweep(ctx, start)
	s.Sweep(ctx, start.Add(sweepInterval))
	if diff := cmp.Diff([]string{"apply shop/ours", "patch shop/ours"}, shared.Written()); diff != "" {
		t.Errorf("the writes in a route cluster (-want +got):\n%s", diff)
	}

	only := newFakeCluster(t, theirs())
	c = newCleaner(t, only)
	c.Cluster = "member-a"
	s = &Sweeper{Cleaner: c, Interval: sweepInterval}
	s.Sweep(ctx, start)
	s.Sweep(ctx, start.Add(sweepInterval))
	for _, r := range only.Requests() {
		if strings.Contains(r.Path, "/rollouts") || r.Method != http.MethodGet {
			t.Errorf("a sweep of member-b's claims only sent %s", r)
		}
	}
}

// Rollout shop/gone left claims on routes in namespaces edge and granted;
// granted grants Rollouts of shop its HTTPRoutes, edge does not. The sweep
// undoes the claim on granted only, and says once, while it lasts, why it
// leaves edge's: edge's route is never written.
func TestSweepUndoesOnlyWhereTheNamespaceGrantsIt(t *testing.T) {
	edge := func() *unstructured.Unstructured { return routeIn(t, "edge", "web", split{"/", "gone", 30}) }
	f := newFakeCluster(t, edge(), routeIn(t, "granted", "web", split{"/", "gone", 30}), grant("granted"))
	c := newCleaner(t, f)
	logged := logtest.NewLocal(c.Log.Logger)
	s := &Sweeper{Cleaner: c, Interval: sweepInterval}
	ctx := testContext(t)
	for i := range 4 {
		s.Sweep(ctx, start.Add(time.Duration(i)*sweepInterval))
	}
	if diff := cmp.Diff([]string{"apply granted/web", "patch granted/web"}, f.Written()); diff != "" {
		t.Errorf("the writes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(edge().Object, f.Route("edge", "web").Object); diff != "" {
		t.Errorf("the ungranted route changed (-before +after):\n%s", diff)
	}
	var said []string
	for _, e := range logged.AllEntries() {
		if e.Level <= logrus.WarnLevel {
			said = append(said, fmt.Sprintf("%s %v: %v", e.Message, e.Data["route"], e.Data[logrus.ErrorKey]))
		}
	}
	want := []string{"cleanup sweep: the route's namespace does not grant the deleted Rollout's namespace; its claim there is left as it is HTTPRoute edge/web: " +
		(&routes.NotGrantedError{Rollouts: ns, Namespace: "edge", Kind: routes.HTTPRoute, Name: "web"}).Error()}
	if diff := cmp.Diff(want, said); diff != "" {
		t.Errorf("what the sweeps logged (-want +got):\n%s", diff)
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

// A Sweeper bounded to namespaces (a route cluster's -route-namespaces)
// lists and writes routes there only; the Rollouts it reads are those of
// every namespace, as a Rollout of any reaches a granted route.
func TestSweepOfSomeNamespaces(t *testing.T) {
	f := newFakeCluster(t, route(t, "gone", split{"/", "gone", 30}), routeIn(t, "granted", "web", split{"/", "gone", 30}), grant("granted"))
	s := &Sweeper{Cleaner: newCleaner(t, f), Interval: sweepInterval, Namespaces: []string{"granted"}}
	ctx := testContext(t)
	s.Sweep(ctx, start)
	s.Sweep(ctx, start.Add(sweepInterval))
	if diff := cmp.Diff([]string{"apply granted/web", "patch granted/web"}, f.Written()); diff != "" {
		t.Errorf("the writes (-want +got):\n%s", diff)
	}
	for _, r := range f.Requests() {
		if strings.HasSuffix(r.Path, "/httproutes") && r.Path != gatewayV1+"/namespaces/granted/httproutes" {
			t.Errorf("a LIST of routes outside namespace granted: %s", r)
		}
	}
}
