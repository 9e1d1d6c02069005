package cluster

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// RouteWatch records, from a watch, when a route took each generation and
// when Traefik reported that generation in status.parents: the times a
// traffic measurement counts from.
type RouteWatch struct {
	stop chan struct{}
	mu   sync.Mutex
	// gens holds, per generation, when it was first seen and when Traefik's
	// status for it was first seen current.
	gens map[int64]*generation
	last int64
}

type generation struct {
	seen, statusCurrent time.Time
	rules               []Rule
}

// WatchRoute starts watching one route. Stop it when done.
func (c *Cluster) WatchRoute(ctx context.Context, ns, kind, name string) (*RouteWatch, error) {
	w := &RouteWatch{stop: make(chan struct{}), gens: map[int64]*generation{}}
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.Dynamic, 0, ns, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	})
	informer := factory.ForResource(RouteGVR(kind)).Informer()
	record := func(obj any) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			w.record(time.Now(), u)
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
	}); err != nil {
		return nil, err
	}
	factory.Start(w.stop)
	syncCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), informer.HasSynced) {
		w.Stop()
		return nil, fmt.Errorf("watching %s %s/%s: the watch did not sync", kind, ns, name)
	}
	return w, nil
}

func (w *RouteWatch) record(at time.Time, u *unstructured.Unstructured) {
	w.mu.Lock()
	defer w.mu.Unlock()
	g := w.gens[u.GetGeneration()]
	if g == nil {
		g = &generation{seen: at, rules: Rules(u)}
		w.gens[u.GetGeneration()] = g
	}
	w.last = max(w.last, u.GetGeneration())
	if g.statusCurrent.IsZero() && TraefikStatusCurrent(u) {
		g.statusCurrent = at
	}
}

// Stop ends the watch.
func (w *RouteWatch) Stop() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
}

// Generation says when the route was first seen at generation gen, and when
// Traefik's status for it (zero if not yet).
func (w *RouteWatch) Generation(gen int64) (seen, statusCurrent time.Time, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	g := w.gens[gen]
	if g == nil {
		return time.Time{}, time.Time{}, false
	}
	return g.seen, g.statusCurrent, true
}

// FirstAfter is the first generation seen at or after t: the route's first
// change since then.
func (w *RouteWatch) FirstAfter(t time.Time) (gen int64, seen, statusCurrent time.Time, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for g, v := range w.gens {
		if !v.seen.Before(t) && (!ok || v.seen.Before(seen)) {
			gen, seen, statusCurrent, ok = g, v.seen, v.statusCurrent, true
		}
	}
	return gen, seen, statusCurrent, ok
}

// FirstWhere is the first generation seen at or after t whose rules
// satisfy ok, and when it was seen.
func (w *RouteWatch) FirstWhere(t time.Time, ok func([]Rule) bool) (gen int64, seen time.Time, found bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for g, v := range w.gens {
		if !v.seen.Before(t) && ok(v.rules) && (!found || v.seen.Before(seen)) {
			gen, seen, found = g, v.seen, true
		}
	}
	return gen, seen, found
}

// Latest is the newest generation seen.
func (w *RouteWatch) Latest() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// Since lists the generations first seen at or after t, oldest first, with
// their rules and times after t: what the route went through. A zero t
// lists them all, with times after the first.
func (w *RouteWatch) Since(t time.Time) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var gens []int64
	for g, v := range w.gens {
		if !v.seen.Before(t) {
			gens = append(gens, g)
		}
	}
	sort.Slice(gens, func(i, j int) bool { return gens[i] < gens[j] })
	if t.IsZero() && len(gens) > 0 {
		t = w.gens[gens[0]].seen
	}
	var out []string
	for _, g := range gens {
		v := w.gens[g]
		s := fmt.Sprintf("generation %d at +%dms: %v", g, v.seen.Sub(t).Milliseconds(), v.rules)
		if !v.statusCurrent.IsZero() {
			s += fmt.Sprintf(", Traefik status current at +%dms", v.statusCurrent.Sub(t).Milliseconds())
		}
		out = append(out, s)
	}
	return out
}

// TraefikStatusCurrent says whether Traefik reported Accepted and
// ResolvedRefs True for the route's current generation in status.parents.
func TraefikStatusCurrent(u *unstructured.Unstructured) bool {
	parents, _, _ := unstructured.NestedSlice(u.Object, "status", "parents")
	for _, p := range parents {
		m, _ := p.(map[string]any)
		if m["controllerName"] != TraefikController {
			continue
		}
		ok := map[string]bool{}
		conds, _ := m["conditions"].([]any)
		for _, c := range conds {
			cm, _ := c.(map[string]any)
			gen, _, _ := unstructured.NestedInt64(cm, "observedGeneration")
			if cm["status"] == "True" && gen == u.GetGeneration() {
				ok[fmt.Sprint(cm["type"])] = true
			}
		}
		return ok["Accepted"] && ok["ResolvedRefs"]
	}
	return false
}

// ServiceVersion is the version of the pods a Service selects: the image
// tag of the ReplicaSets whose pod template its selector matches (Argo
// Rollouts adds rollouts-pod-template-hash to the stable and canary
// Services' selectors, the Experiment controller makes its Services from its
// ReplicaSets' labels). Several versions are joined with "+"; "?" when no
// ReplicaSet matches.
func (c *Cluster) ServiceVersion(ctx context.Context, ns, service string) (string, error) {
	svc, err := c.Kube.CoreV1().Services(ns).Get(ctx, service, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if len(svc.Spec.Selector) == 0 {
		return "?", nil
	}
	rss, err := c.Kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	seen := map[string]bool{}
	var versions []string
	for _, rs := range rss.Items {
		if !sel.Matches(labels.Set(rs.Spec.Template.Labels)) || len(rs.Spec.Template.Spec.Containers) == 0 {
			continue
		}
		v := imageTag(rs.Spec.Template.Spec.Containers[0].Image)
		if !seen[v] {
			seen[v] = true
			versions = append(versions, v)
		}
	}
	if len(versions) == 0 {
		return "?", nil
	}
	sort.Strings(versions)
	return strings.Join(versions, "+"), nil
}

// imageTag is what follows the last ':' of an image reference's last path
// element ("registry.example/app:v2" → "v2"); the whole reference without a tag.
func imageTag(image string) string {
	last := image[strings.LastIndex(image, "/")+1:]
	if i := strings.LastIndex(last, ":"); i >= 0 {
		return last[i+1:]
	}
	return image
}
