package test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// TestStressForeignWritersDuringARollout is serial: it loads the apiserver
// with foreign writers and reports the rates it held.

// Stress: while a rollout walks a route with an experiment and a header
// route, four other field managers keep changing the route's labels,
// annotations and hostnames (server-side apply, merge patch, and a
// read-modify-Update as kubectl edit does). Bounded: stressRounds walks of
// eight steps, each writer at most stressWrites writes, all within
// stressTime. Asserted: no foreign change is ever lost, the plugin answers
// every call without error, and the weights are exact after every step. It
// prints its counts.
const (
	stressRounds = 15
	stressWrites = 400
	stressTime   = 2 * time.Minute
)

// foreignWriter keeps setting a value it counts up (1, 2, …) on the route.
type foreignWriter struct {
	manager string
	// write sets value n; read finds the writer's value on a route.
	write func(ctx context.Context, n int) error
	read  func(u *unstructured.Unstructured) string
	acked atomic.Int64 // the last n the apiserver confirmed
	tries atomic.Int64 // writes sent, conflicts included
}

func TestStressForeignWritersDuringARollout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), stressTime)
	defer cancel()
	ns := namespace(t, standard)
	service(t, standard, ns, "exp-baseline", "http:80")
	service(t, standard, ns, "exp-canary", "http:80")
	create(t, standard, ns, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: web
  labels: {team: web}
  annotations: {owner: web-team@example.com}
spec:
  parentRefs: [{name: gw}]
  hostnames: [h0.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    backendRefs:
    - {name: stable, port: 80, weight: 100}
    - {name: canary, port: 80, weight: 0}
`)
	res := standard.Dynamic.Resource(httpRoutes).Namespace(ns)
	apply := func(manager string, body map[string]any) error {
		body["apiVersion"], body["kind"] = "gateway.networking.k8s.io/v1", "HTTPRoute"
		meta, _ := body["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
			body["metadata"] = meta
		}
		meta["name"] = "web"
		data, _ := json.Marshal(body)
		force := true
		_, err := res.Patch(ctx, "web", types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: manager, Force: &force})
		return err
	}
	label := func(key string) func(u *unstructured.Unstructured) string {
		return func(u *unstructured.Unstructured) string { return u.GetLabels()[key] }
	}
	writers := []*foreignWriter{
		{manager: "team-labels", read: label("stress.example.com/labels"), write: func(ctx context.Context, n int) error {
			return apply("team-labels", map[string]any{"metadata": map[string]any{"labels": map[string]any{"stress.example.com/labels": strconv.Itoa(n)}}})
		}},
		{manager: "team-annotations", read: func(u *unstructured.Unstructured) string { return u.GetAnnotations()["stress.example.com/annotations"] },
			write: func(ctx context.Context, n int) error {
				patch := fmt.Sprintf(`{"metadata":{"annotations":{"stress.example.com/annotations":"%d"}}}`, n)
				_, err := res.Patch(ctx, "web", types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "team-annotations"})
				return err
			}},
		{manager: "team-hostnames", read: func(u *unstructured.Unstructured) string {
			h, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "hostnames")
			if len(h) != 1 {
				return fmt.Sprint(h)
			}
			return strings.TrimSuffix(strings.TrimPrefix(h[0], "h"), ".example.com")
		}, write: func(ctx context.Context, n int) error {
			return apply("team-hostnames", map[string]any{"spec": map[string]any{"hostnames": []any{fmt.Sprintf("h%d.example.com", n)}}})
		}},
		{manager: "kubectl-edit", read: label("stress.example.com/edit"), write: func(ctx context.Context, n int) error {
			u, err := res.Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			labels := u.GetLabels()
			labels["stress.example.com/edit"] = strconv.Itoa(n)
			u.SetLabels(labels)
			_, err = res.Update(ctx, u, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
			return err
		}},
	}
	stop := make(chan struct{})
	var writing sync.WaitGroup
	var writeErrs atomic.Int64
	for _, w := range writers {
		writing.Add(1)
		go func() {
			defer writing.Done()
			for n := 1; n <= stressWrites; {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				case <-time.After(time.Duration(100+rand.IntN(200)) * time.Millisecond):
				}
				w.tries.Add(1)
				err := w.write(ctx, n)
				switch {
				case err == nil:
					w.acked.Store(int64(n))
					n++
				case apierrors.IsConflict(err):
					// kubectl edit read a version the plugin or another writer
					// has changed since: it reads again, as kubectl would.
				case ctx.Err() == nil:
					writeErrs.Add(1)
					t.Errorf("%s: %v", w.manager, err)
					return
				}
			}
		}()
	}

	p, log := startPluginWith(t, pluginBin, standard.Kubeconfig, "-loglevel=debug")
	ro := rollout(ns, `{"httpRoute": "web"}`)
	ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "canary-header"}}
	header := func(on bool) *v1alpha1.SetHeaderRoute {
		h := &v1alpha1.SetHeaderRoute{Name: "canary-header"}
		if on {
			h.Match = []v1alpha1.HeaderRoutingMatch{{HeaderName: "X-Canary", HeaderValue: &v1alpha1.StringMatch{Exact: "yes"}}}
		}
		return h
	}
	type step struct {
		name                string
		do                  func() rpcErr
		canary, exp, header int64
	}
	walk := []step{
		{"SetWeight(10)", func() rpcErr { return p.SetWeight(ro, 10, nil) }, 10, 0, 0},
		{"SetWeight(20) with experiment 5/5", func() rpcErr { return p.SetWeight(ro, 20, experimentDestinations(5, 5)) }, 20, 5, 0},
		{"SetHeaderRoute", func() rpcErr { return p.SetHeaderRoute(ro, header(true)) }, 20, 5, 1},
		{"SetWeight(40) with experiment 10/10", func() rpcErr { return p.SetWeight(ro, 40, experimentDestinations(10, 10)) }, 40, 10, 1},
		{"SetWeight(60), experiment over", func() rpcErr { return p.SetWeight(ro, 60, nil) }, 60, 0, 1},
		{"SetHeaderRoute without match", func() rpcErr { return p.SetHeaderRoute(ro, header(false)) }, 60, 0, 0},
		{"SetWeight(100)", func() rpcErr { return p.SetWeight(ro, 100, nil) }, 100, 0, 0},
		{"SetWeight(0)", func() rpcErr { return p.SetWeight(ro, 0, nil) }, 0, 0, 0},
	}
	var steps, pluginErrs, lost, wrongWeights, checks int
	start := time.Now()
	// check compares the route with the step that just ran and with what the
	// writers had confirmed before it was read.
	check := func(s step, final bool) {
		acked := make([]int64, len(writers))
		for i, w := range writers {
			acked[i] = w.acked.Load()
		}
		u, err := res.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checks++
		for i, w := range writers {
			got, _ := strconv.ParseInt(w.read(u), 10, 64)
			if acked[i] > 0 && (got < acked[i] || final && got != acked[i]) {
				lost++
				t.Errorf("after %s: %s's change %d is lost: the route has %q", s.name, w.manager, acked[i], w.read(u))
			}
		}
		want := map[string]int64{"0/stable": 100 - s.canary - 2*s.exp, "0/canary": s.canary}
		if s.exp > 0 {
			want["0/exp-baseline"], want["0/exp-canary"] = s.exp, s.exp
		}
		if s.header > 0 {
			want["1/canary"] = 1
		}
		if got := weights(u); fmt.Sprint(got) != fmt.Sprint(want) {
			wrongWeights++
			t.Errorf("after %s: weights %v, want %v", s.name, got, want)
		}
	}
	for round := 1; round <= stressRounds && ctx.Err() == nil; round++ {
		for _, s := range walk {
			steps++
			if err := s.do(); err.HasError() {
				pluginErrs++
				t.Errorf("round %d %s: %s", round, s.name, err.ErrorString)
				continue
			}
			check(s, false)
		}
	}
	close(stop)
	writing.Wait()
	check(walk[len(walk)-1], true)
	elapsed := time.Since(start)
	var counts []string
	var foreign int64
	for _, w := range writers {
		counts = append(counts, fmt.Sprintf("%s %d (%d sent)", w.manager, w.acked.Load(), w.tries.Load()))
		foreign += w.acked.Load()
	}
	t.Logf("stress: %s; %d plugin steps in %d rounds, %d plugin errors, %d writes by the plugin, %d optimistic-lock conflicts it retried; "+
		"%d foreign writes (%s), %d writer errors; %d checks, %d lost foreign changes, %d steps with wrong weights",
		elapsed.Round(time.Millisecond), steps, stressRounds, pluginErrs, log.Count("applied route")+log.Count("released route"),
		log.Count("route changed since it was read"), foreign, strings.Join(counts, ", "), writeErrs.Load(), checks, lost, wrongWeights)
	if steps != stressRounds*len(walk) {
		t.Errorf("ran %d steps of %d within %s", steps, stressRounds*len(walk), stressTime)
	}
	if foreign == 0 {
		t.Error("the foreign writers wrote nothing: the test proved nothing")
	}
}
