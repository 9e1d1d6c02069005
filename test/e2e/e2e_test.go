//go:build e2e

// Package e2e runs the plugin under the real Argo Rollouts controller on a
// cluster made of local processes (see docs/e2e.md): `make e2e`.
package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/cluster"
)

// theCluster is shared by every scenario; each scenario has a namespace of its own.
var theCluster *cluster.Cluster

func TestMain(m *testing.M) {
	flag.Parse()
	// The plugin undoes the claims of deleted Rollouts (deleted-rollout
	// scenario), and serves its metrics (events-walk).
	c, err := cluster.Start(cluster.Options{Name: "e2e", Dir: os.Getenv("E2E_DIR"),
		PluginArgs: []string{"-cleanup-deleted-rollouts", "-cleanup-interval=2s"}, RouteCluster: true, PluginMetrics: true})
	// Stop everything on interrupt too: the processes run in process groups of
	// their own, so a ^C in the terminal does not reach them.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-signals
		fmt.Fprintf(os.Stderr, "e2e: %v: stopping the cluster\n", s)
		c.Stop()
		os.Exit(130)
	}()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: starting the cluster: %v\n", err)
		c.Stop()
		os.Exit(1)
	}
	theCluster = c
	// go test's -timeout panics without running deferred code: stop the
	// cluster shortly before it.
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, ok := f.Value.(flag.Getter).Get().(time.Duration); ok && d > time.Minute {
			time.AfterFunc(d-30*time.Second, func() {
				fmt.Fprintf(os.Stderr, "e2e: the test timeout (%s) is near: stopping the cluster\n", d)
				c.Stop()
			})
		}
	}
	code := m.Run()
	c.Stop()
	printReport(c)
	c.PrintTimings()
	os.Exit(code)
}

// TestScenarios walks every scenario (scenarios_test.go) on the shared
// cluster, in parallel: each in its own namespace, with a bounded wait per
// step; and times VerifyWeight against Traefik (verify_timing_test.go).
func TestScenarios(t *testing.T) {
	for _, sc := range append(scenarios(), append(kindScenarios(), stickyScenario())...) {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			runScenario(t, theCluster, sc)
		})
	}
	t.Run("verify-timing", func(t *testing.T) {
		t.Parallel()
		runVerifyTiming(t, theCluster)
	})
	for name, run := range map[string]func(*testing.T, *cluster.Cluster){
		"deleted-rollout":     runDeletedRollout,
		"no-available-canary": runNoAvailableCanary,
		"plan-matches":        runPlanMatchesController,
		"route-cluster":       runRouteCluster,
		"longlived-pingpong-tcp": func(t *testing.T, c *cluster.Cluster) {
			runLongLived(t, c, pingPongTCP())
		},
		"longlived-pingpong-grpc": func(t *testing.T, c *cluster.Cluster) {
			runLongLived(t, c, pingPongGRPC())
		},
		"longlived-canary-tcp": func(t *testing.T, c *cluster.Cluster) {
			runLongLived(t, c, canaryTCP())
		},
		"events-refused": runRefusedConfigEvents,
		"events-walk":    runWalkEvents,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			run(t, theCluster)
		})
	}
}

// TestControllerRestartMidExperiment walks restartScenario alone, after
// TestScenarios: it kills the controller they all share.
func TestControllerRestartMidExperiment(t *testing.T) {
	runScenario(t, theCluster, restartScenario())
}
