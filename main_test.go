package main

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// The plugin collects garbage at 50 % unless GOGC says otherwise.
func TestGCPercentIsFiftyUnlessGOGCIsSet(t *testing.T) {
	if p, ok := gcPercent(env(nil)); !ok || p != 50 {
		t.Errorf("without GOGC: %d, %v; want 50, true", p, ok)
	}
	for _, v := range []string{"100", "off", "200"} {
		if p, ok := gcPercent(env(map[string]string{"GOGC": v})); ok {
			t.Errorf("with GOGC=%s: set to %d; want GOGC left as it is", v, p)
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
