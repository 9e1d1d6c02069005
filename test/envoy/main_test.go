//go:build envoy

package envoy

import (
	"fmt"
	"os"
	"testing"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

var (
	// egctl is Envoy Gateway's command line (hack/egctl-assets.sh).
	egctl string
	// pluginBin is the plugin binary built once for all tests.
	pluginBin string
	// cluster is envtest with Gateway API v1.6.3's standard channel; each
	// test works in its own namespace, behind its own GatewayClass.
	cluster *harness.Cluster
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// Built with the tag, the suite never skips: without egctl it fails.
	if egctl = os.Getenv("EGCTL"); egctl == "" {
		fmt.Fprintln(os.Stderr, "EGCTL is not set: run make envoy, or EGCTL=$(bash hack/egctl-assets.sh)")
		return 1
	}
	if _, err := os.Stat(egctl); err != nil {
		fmt.Fprintf(os.Stderr, "EGCTL: %v\n", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "gatewayapi-ssa-envoy-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if pluginBin, err = harness.BuildPlugin(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if cluster, err = harness.Start(harness.Standard); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cluster.Stop()
	code := m.Run()
	fmt.Print(checks.table())
	if path := os.Getenv("ENVOY_CHECKS"); path != "" {
		if err := os.WriteFile(path, []byte(checks.table()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return code
}
