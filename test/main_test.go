// Package test holds the integration tests: the real plugin binary, started
// over go-plugin RPC as Argo Rollouts starts it, against a real kube-apiserver
// (envtest) with the Gateway API CRDs installed.
package test

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

var (
	// pluginBin is the plugin binary built once for all tests.
	pluginBin string
	// binDir holds the binaries the tests build.
	binDir string
	// standard is a cluster with Gateway API v1.6.3's standard channel, shared by
	// the tests; each test works in its own namespace. A test that runs in
	// parallel shadows it with a view of its own (standard := parallel(t)).
	standard *harness.Cluster
)

// parallel runs t in parallel with the other tests that call it, and returns
// its own view of the standard cluster (harness.Cluster.Own): the requests
// it records, its hooks and faults, and its plugins' Leases are its alone.
// A test stays serial (no call) when it must have the apiserver to itself:
// it restarts it, measures durations or load, sets the environment
// (t.Setenv, which Go forbids in parallel tests), or changes what is
// cluster-wide (CRDs, the install's ClusterRoles, ControllerNamespace's
// Leases). Serial tests run first, alone; the parallel ones after them.
func parallel(t *testing.T) *harness.Cluster {
	t.Helper()
	t.Parallel()
	view, closeView, err := standard.Own()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeView)
	return view
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "gatewayapi-ssa-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	// PLUGIN_BIN runs the tests against another build (hack/compare-writes.sh).
	if pluginBin = os.Getenv("PLUGIN_BIN"); pluginBin == "" {
		pluginBin, err = harness.BuildPlugin(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if standard, err = harness.Start(harness.Standard); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer standard.Stop()
	return m.Run()
}

var (
	instrumented     string
	instrumentedErr  error
	instrumentedOnce sync.Once
)

// instrumentedPlugin is the plugin built with -race and the faultinject tag,
// once, for the tests that need it. Its races halt it (GORACE halt_on_error),
// so a race fails the test that runs into it.
func instrumentedPlugin(t *testing.T) string {
	t.Helper()
	instrumentedOnce.Do(func() {
		start := time.Now()
		instrumented, instrumentedErr = harness.BuildInstrumentedPlugin(binDir)
		fmt.Fprintf(os.Stderr, "built the plugin with -race -tags faultinject in %s\n", time.Since(start).Round(time.Second))
	})
	if instrumentedErr != nil {
		t.Fatal(instrumentedErr)
	}
	t.Setenv("GORACE", "halt_on_error=1")
	return instrumented
}
