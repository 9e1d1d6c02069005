package test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// The plugin's watch cache while its watch is cut: a call answers from the
// routes as they are, never from the state before the cut, and reads come
// from the cache again once it has listed them anew.

// argocdSets changes the weights of the route's first rule as another
// field manager does with an Update (Argo CD's client-side sync, kubectl
// edit), straight to the apiserver.
func argocdSets(t *testing.T, c *harness.Cluster, ns string, stable, canary int64) {
	t.Helper()
	u := get(t, c, "v1", "HTTPRoute", ns, "route")
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	backends := rules[0].(map[string]any)["backendRefs"].([]any)
	backends[0].(map[string]any)["weight"] = stable
	backends[1].(map[string]any)["weight"] = canary
	if err := unstructured.SetNestedSlice(u.Object, rules, "spec", "rules"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Dynamic.Resource(httpRoutesGVR).Namespace(ns).Update(context.Background(), u, metav1.UpdateOptions{FieldManager: "argocd"}); err != nil {
		t.Fatal(err)
	}
}

// routeReads counts the plugin's reads of the route and of the namespace's
// routes since the recorder's n-th request: GETs, LISTs and watches.
func routeReads(rec *harness.Recorder, n int, ns string) (gets, lists int) {
	for _, r := range rec.RequestsSince(n) {
		if r.Method != http.MethodGet || !strings.Contains(r.Path, "/namespaces/"+ns+"/httproutes") {
			continue
		}
		if strings.HasSuffix(r.Path, "/httproutes") {
			lists++
		} else {
			gets++
		}
	}
	return gets, lists
}

// refuseRouteWatches makes the recorder refuse every list and watch of the
// namespace's routes, and cuts the watches in flight.
func refuseRouteWatches(t *testing.T, rec *harness.Recorder, ns string) {
	t.Helper()
	rec.Inject(harness.Fault{PathEnd: "/namespaces/" + ns + "/httproutes", Watches: true, Do: harness.Answer, Status: http.StatusServiceUnavailable})
	if n := rec.CutWatches("/namespaces/" + ns + "/httproutes"); n == 0 {
		t.Fatal("the plugin had no watch of the routes to cut")
	}
}

// untilReadFromCache repeats call until one sends no GET of the route (its
// watch cache has listed again), up to 30 s, and returns the last answer.
func untilReadFromCache(t *testing.T, rec *harness.Recorder, ns string, call func() rpcErr) rpcErr {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		from := rec.Count()
		err := call()
		if gets, _ := routeReads(rec, from, ns); gets == 0 {
			return err
		}
		if time.Now().After(deadline) {
			t.Fatal("the plugin still read the route with GETs 30 s after its watch was let through again")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// The plugin's watch of a namespace's routes is cut and no new one is let
// through (a network failure between the plugin and the apiserver); Argo CD
// meanwhile sets the weights the plugin set to 50/50. The next SetWeight(30)
// reads the route from the apiserver and answers the conflict, naming
// argocd, instead of taking the route for unchanged from its cache; the
// route is left as Argo CD set it. Once watches are let through again, the
// cache lists the routes anew and the same call answers the same from it,
// with no GET.
func TestACutWatchIsNotReadUntilTheCacheListedAgain(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route"))
	p := startPlugin(t, standard)
	ro := rollout(ns, `{"httpRoute": "route"}`)
	if err := p.SetWeight(ro, 30, nil); err.HasError() {
		t.Fatal(err.ErrorString)
	}
	t.Cleanup(standard.Recorder.ClearFaults)
	refuseRouteWatches(t, standard.Recorder, ns)
	argocdSets(t, standard, ns, 50, 50)

	from := standard.Recorder.Count()
	err := p.SetWeight(ro, 30, nil)
	gets, _ := routeReads(standard.Recorder, from, ns)
	t.Logf("SetWeight(30) with the watch cut: %d GETs of the route; %s", gets, err.ErrorString)
	if !err.HasError() || !strings.Contains(err.ErrorString, "conflict") || !strings.Contains(err.ErrorString, "argocd") {
		t.Fatalf("SetWeight(30) after Argo CD's change, the watch cut: %q; want the conflict naming argocd", err.ErrorString)
	}
	if w := weights(get(t, standard, "v1", "HTTPRoute", ns, "route")); w["0/stable"] != 50 || w["0/canary"] != 50 {
		t.Errorf("the route is %v, want Argo CD's 50/50", w)
	}

	standard.Recorder.ClearFaults()
	err = untilReadFromCache(t, standard.Recorder, ns, func() rpcErr { return p.SetWeight(ro, 30, nil) })
	if !strings.Contains(err.ErrorString, "argocd") {
		t.Errorf("SetWeight(30) from the cache listed anew: %q; want the same conflict", err.ErrorString)
	}
}

// The apiserver restarts in the middle of a rollout (killed; etcd kept), and Argo
// CD changes the weights before the plugin's watch is back. The new
// apiserver's watch cache no longer holds the resourceVersion the plugin's
// watch would resume from (a watch from it answers 410 Gone: checked
// here). The next call answers from the routes as they are (the conflict),
// and, once the watch is let through, from a cache that has listed them
// anew.
//
// Serial: it restarts an apiserver; CPU taken by tests beside it would
// stretch how long the apiserver is away.
func TestAnApiserverRestartInTheMiddleOfARollout(t *testing.T) {
	c, err := harness.Start(harness.Standard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	ns := namespace(t, c)
	create(t, c, ns, routeYAML("v1", "HTTPRoute", "route"))
	p := startPlugin(t, c)
	ro := rollout(ns, `{"httpRoute": "route"}`)
	if err := p.SetWeight(ro, 30, nil); err.HasError() {
		t.Fatal(err.ErrorString)
	}
	before := get(t, c, "v1", "HTTPRoute", ns, "route").GetResourceVersion()

	t.Cleanup(c.Recorder.ClearFaults)
	c.Recorder.Inject(harness.Fault{PathEnd: "/namespaces/" + ns + "/httproutes", Watches: true, Do: harness.Answer, Status: http.StatusServiceUnavailable})
	away, err := c.RestartAPIServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver killed and serving again after %s", away.Round(time.Millisecond))
	argocdSets(t, c, ns, 50, 50)

	// A watch from where the plugin's left off is gone: 410.
	w, err := c.Dynamic.Resource(httpRoutesGVR).Namespace(ns).Watch(context.Background(), metav1.ListOptions{ResourceVersion: before})
	if err != nil {
		t.Fatalf("a watch from resourceVersion %s after the restart: %v", before, err)
	}
	select {
	case ev := <-w.ResultChan():
		status, _ := ev.Object.(*metav1.Status)
		if ev.Type != watch.Error || status == nil || status.Code != http.StatusGone {
			t.Errorf("a watch from resourceVersion %s after the restart: %s %v; want 410 Gone", before, ev.Type, ev.Object)
		} else {
			t.Logf("a watch from resourceVersion %s after the restart: %d %s", before, status.Code, status.Message)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("a watch from resourceVersion %s after the restart: no event in 5 s; want 410 Gone", before)
	}
	w.Stop()

	from := c.Recorder.Count()
	answer := p.SetWeight(ro, 30, nil)
	gets, _ := routeReads(c.Recorder, from, ns)
	t.Logf("SetWeight(30) after the restart: %d GETs of the route; %s", gets, answer.ErrorString)
	if !strings.Contains(answer.ErrorString, "argocd") {
		t.Fatalf("SetWeight(30) after the restart and Argo CD's change: %q; want the conflict naming argocd", answer.ErrorString)
	}
	c.Recorder.ClearFaults()
	answer = untilReadFromCache(t, c.Recorder, ns, func() rpcErr { return p.SetWeight(ro, 30, nil) })
	if !strings.Contains(answer.ErrorString, "argocd") {
		t.Errorf("SetWeight(30) from the cache listed anew: %q; want the same conflict", answer.ErrorString)
	}
	// Argo CD gives the weights back; the rollout goes on to its end (the
	// first call may still see Argo CD's 50/50 in a watch cache a moment
	// behind, and answer the conflict: the controller calls again).
	argocdSets(t, c, ns, 70, 30)
	eventually(t, "SetWeight(30) to pass once Argo CD set the weights back", func() bool { return !p.SetWeight(ro, 30, nil).HasError() })
	for _, w := range []int32{60, 0} {
		if err := p.SetWeight(ro, w, nil); err.HasError() {
			t.Fatalf("SetWeight(%d) after Argo CD set the weights back: %s", w, err.ErrorString)
		}
	}
	u := get(t, c, "v1", "HTTPRoute", ns, "route")
	if w := weights(u); w["0/stable"] != 100 || w["0/canary"] != 0 {
		t.Errorf("after the rollout: %v", w)
	}
	pluginOwnsNothing(t, u)
}
