package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// The plugin sets its GC percent itself unless GOGC says otherwise.
func TestGCIsTunedUnlessGOGCIsSet(t *testing.T) {
	if !tunesGC(env(nil)) {
		t.Error("without GOGC the plugin does not tune its GC")
	}
	for _, v := range []string{"100", "off", "200", "50"} {
		if tunesGC(env(map[string]string{"GOGC": v})) {
			t.Errorf("with GOGC=%s the plugin tunes its GC; want GOGC left as it is", v)
		}
	}
}

// The heap may grow to the budget: Go's default while little is live, 50 %
// once two thirds of the budget are live, in between what reaches it.
func TestGCPercentSpendsTheHeapBudget(t *testing.T) {
	const mib = 1 << 20
	for live, want := range map[uint64]int{
		0:        100,
		4 * mib:  100, // a plugin over a few hundred routes
		5 * mib:  100, // half the budget: twice that is the budget
		6 * mib:  66,
		7 * mib:  50, // over two thirds: 1.5 times that is over the budget
		10 * mib: 50, // 10,000 routes cached: as at 50
		60 * mib: 50,
	} {
		if got := gcPercentFor(live); got != want {
			t.Errorf("%d MiB live: GC percent %d; want %d", live/mib, got, want)
		}
	}
}

// After every collection the tuner runs again.
func TestAfterEachGCRunsAfterEveryCollection(t *testing.T) {
	runs := make(chan struct{}, 10)
	afterEachGC(func() { runs <- struct{}{} })
	for i := range 3 {
		runtime.GC()
		select {
		case <-runs:
		case <-time.After(5 * time.Second):
			t.Fatalf("collection %d: the function did not run", i+1)
		}
	}
}

// The Leases go to POD_NAMESPACE, else the pod's own namespace, else
// nowhere.
func TestPeersNamespaceIsTheControllers(t *testing.T) {
	file := func(ns string) func(string) ([]byte, error) {
		return func(path string) ([]byte, error) {
			if ns == "" || path != "/var/run/secrets/kubernetes.io/serviceaccount/namespace" {
				return nil, errors.New("no such file")
			}
			return []byte(ns + "\n"), nil
		}
	}
	for _, c := range []struct{ podNamespace, file, want string }{
		{"argo-rollouts", "other", "argo-rollouts"},
		{"", "rollouts-a", "rollouts-a"},
		{"", "", ""},
	} {
		if got := defaultPeersNamespace(env(map[string]string{"POD_NAMESPACE": c.podNamespace}), file(c.file)); got != c.want {
			t.Errorf("POD_NAMESPACE %q, pod namespace %q: %q, want %q", c.podNamespace, c.file, got, c.want)
		}
	}
}

// The plugin exits once the controller that started it is gone (it has
// another parent then), and not before.
func TestThePluginExitsWhenOrphaned(t *testing.T) {
	var parent atomic.Int32
	parent.Store(4242)
	exited := make(chan struct{})
	go exitWhenOrphaned(func() int { return int(parent.Load()) }, 10*time.Millisecond, func() { close(exited) })
	select {
	case <-exited:
		t.Fatal("exited while its parent was there")
	case <-time.After(100 * time.Millisecond):
	}
	parent.Store(1)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatal("did not exit once its parent was gone")
	}
}

// connect, what InitPlugin calls, builds the clients of the controller's
// cluster and of a route cluster and sends no request: the first calls do.
func TestConnectSendsNoRequest(t *testing.T) {
	url, requests := kubetest.Answering(t, kubetest.Canned{Code: 404})
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+url+`"}}]
users: [{name: u}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	f := registerFlags(flag.NewFlagSet("plugin", flag.ContinueOnError))
	w := f.wiring([]rollout.RouteCluster{{Name: "config", Kubeconfig: kubeconfig, Namespaces: []string{"shop"}}})
	log := logrus.New()
	log.SetOutput(io.Discard)
	b, err := connect(w, logrus.NewEntry(log))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	if o := b.Orchestrators(); o.RouteClusters["config"] == nil || o.Unusable["config"] != nil {
		t.Errorf("route cluster config: %v", o.Unusable["config"])
	}
	if got := requests(); len(got) != 0 {
		t.Errorf("connect sent %v; it builds clients, it does not call the apiserver", got)
	}
}
