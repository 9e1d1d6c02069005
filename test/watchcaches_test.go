package test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Fifty namespaces, each with its own Rollout and HTTPRoute: one SetWeight
// per Rollout opens a watch of each namespace's HTTPRoutes. Once no call has
// used them for -watch-cache-idle, the plugin closes every one of them; a
// later call on one of the Rollouts starts its namespace's cache again and
// sets its weights.
func TestWatchCachesOfNamespacesNoCallUsesAreStopped(t *testing.T) {
	standard := parallel(t)
	const rollouts = 50
	var namespaces []string
	for range rollouts {
		ns := namespace(t, standard)
		create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route"))
		namespaces = append(namespaces, ns)
	}
	// The token bucket would hold fifty first calls for seconds; this test
	// is about the caches. 5 s: a cache just used is still open when looked
	// at, on a loaded machine too.
	p := startPlugin(t, standard, "-watch-cache-idle=5s", "-kubeClientQPS=1000", "-kubeClientBurst=2000")
	watchesOf := func(ns string) int { return standard.Recorder.OpenWatches("/namespaces/" + ns + "/httproutes") }
	openWithin := func(ns string, d time.Duration) bool {
		for deadline := time.Now().Add(d); watchesOf(ns) == 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				return false
			}
		}
		return true
	}

	errs := make([]string, rollouts)
	var wg sync.WaitGroup
	calls := make(chan struct{}, 10) // ten at a time, as the controller's workers call
	for i, ns := range namespaces {
		wg.Go(func() {
			calls <- struct{}{}
			defer func() { <-calls }()
			if err := p.SetWeight(rollout(ns, `{"httpRoute": "route"}`), 30, nil); err.HasError() {
				errs[i] = fmt.Sprintf("%s: SetWeight(30): %s", ns, err)
				return
			}
			// The watch opens as the cache lists (streamed through it), or
			// right after its LIST.
			if !openWithin(ns, 10*time.Second) {
				errs[i] = fmt.Sprintf("%s: no watch of its HTTPRoutes open right after SetWeight(30)", ns)
			}
		})
	}
	wg.Wait()
	if failed := strings.TrimSpace(strings.Join(errs, "\n")); failed != "" {
		t.Fatal(failed)
	}

	called := time.Now()
	deadline := called.Add(60 * time.Second)
	for {
		open := 0
		for _, ns := range namespaces {
			open += watchesOf(ns)
		}
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("60 s after the last call, %d of the %d namespaces' watches are still open", open, rollouts)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("every watch of the %d namespaces closed %s after the last call", rollouts, time.Since(called).Round(100*time.Millisecond))

	ns := namespaces[0]
	if err := p.SetWeight(rollout(ns, `{"httpRoute": "route"}`), 50, nil); err.HasError() {
		t.Fatalf("SetWeight(50) after the cache was stopped: %s", err)
	}
	if diff := cmp.Diff(map[string]int64{"0/stable": 50, "0/canary": 50}, weights(get(t, standard, "v1", "HTTPRoute", ns, "route"))); diff != "" {
		t.Errorf("weights after SetWeight(50) (-want +got):\n%s", diff)
	}
	if !openWithin(ns, 10*time.Second) {
		t.Errorf("SetWeight(50) started no new watch of %s's HTTPRoutes", ns)
	}
}
