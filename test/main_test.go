// Package test holds the integration tests: the real plugin binary, started
// over go-plugin RPC as Argo Rollouts starts it, against a real kube-apiserver
// (envtest) with the Gateway API CRDs installed.
package test

import (
	"fmt"
	"os"
	"testing"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

var (
	// pluginBin is the plugin binary built once for all tests.
	pluginBin string
	// standard is a cluster with Gateway API v1.6.3's standard channel, shared by
	// the tests; each test works in its own namespace.
	standard *harness.Cluster
)

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
