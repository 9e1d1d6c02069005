// Command devcluster keeps the cluster of `make e2e` running for a person:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and the
// Argo Rollouts controller v1.10.1 loading this repository's plugin from a
// file:// location (test/e2e/cluster). It prints how to reach it and how to
// attach a debugger to the plugin, then waits for ^C and stops everything.
// `make dev-cluster` runs it; docs/development.md says how to use it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/cluster"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	c, err := cluster.Start(cluster.Options{Name: "dev-cluster", Dir: os.Getenv("DEV_CLUSTER_DIR")})
	if c != nil {
		defer c.Stop()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dev-cluster:", err)
		c.Stop()
		os.Exit(1)
	}
	fmt.Printf(`
dev-cluster: up. In another shell:

  export KUBECONFIG=%s
  kubectl get configmap -n %s argo-rollouts-config -o yaml   # the file:// plugin entry

The controller copied the plugin to %s
and runs it from there; the controller's log (with the plugin's lines) is %s.
To debug the plugin, attach Delve to that process:

  dlv attach $(pgrep -f -n %s) --headless --listen 127.0.0.1:2345 --api-version 2

^C stops everything (the logs stay).
`, c.Kubeconfig, cluster.RolloutsNamespace,
		filepath.Join(c.Dir, "rollouts-controller", "plugin-bin", "argoproj-labs", "gatewayAPI"),
		filepath.Join(c.LogDir, "rollouts-controller.log"),
		"plugin-bin/argoproj-labs/gatewayAPI")
	<-ctx.Done()
}
