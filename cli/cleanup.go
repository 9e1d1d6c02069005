package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gatewayapi-ssa/rollouts-plugin/cleanup"
	"github.com/gatewayapi-ssa/rollouts-plugin/decode"
	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/orchestrator"
	"github.com/gatewayapi-ssa/rollouts-plugin/peers"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/ssa"
)

const cleanupUsage = `usage: rollouts-gatewayapi-ssa cleanup [flags] NAMESPACE/ROLLOUT

Undoes what a deleted Rollout left on its routes: on every route whose claims
annotation (gatewayapi-ssa.dev/claims) names it, the canary weight goes to 0
and stable gets the split's share back, the experiment backendRefs and the
header and mirror rules and filters it added go, and its claim goes; when no
Rollout is left on a route, the plugin gives up its ownership. Nothing else on
the route changes. A Rollout that still exists is refused: its controller
would put everything back. With --cluster, the routes are those of that route
cluster (reached with the kubeconfig --route-cluster gives it, in the
namespaces --route-namespaces allows) and the Rollout is looked for in the
kubeconfig's cluster.

flags:
`

func runCleanup(args []string, out, errOut io.Writer) int {
	fs := newFlags("cleanup", cleanupUsage, errOut)
	conn, fieldManager := &fs.conn, &fs.fieldManager
	force := fs.Bool("force", false, "undo also values another manager changed since the plugin set them (default: report them and leave the route)")
	dryRun := fs.Bool("dry-run", false, "say what would change, write nothing")
	timeout := fs.Duration("timeout", time.Minute, "deadline of the whole command")
	peersNS := fs.String("peers-namespace", "argo-rollouts", "namespace of the plugin's Leases (the controller's): the command keeps one while it writes, so that the controller's plugin writes those routes guarded by their resourceVersion meanwhile; empty: keep none")
	fs.selectCluster()
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 || !strings.Contains(fs.Arg(0), "/") {
		fs.Usage()
		return 2
	}
	rollout := fs.Arg(0)
	rc, err := fs.routeCluster()
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 2
	}
	namespaces, err := routeNamespaces(rc, conn.namespace)
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	c, stop, err := newCleaner(fs.routesConnection(rc), *fieldManager, *peersNS, errOut)
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 1
	}
	defer stop()
	if rc != nil {
		// The Rollout is in the kubeconfig's cluster, its routes in the route cluster.
		if c.Rollouts, _, err = conn.dynamic(); err != nil {
			fmt.Fprintln(errOut, err)
			return 1
		}
	}
	if exists, err := c.Exists(ctx, rollout); err != nil {
		fmt.Fprintln(errOut, err)
		return 1
	} else if exists {
		fmt.Fprintf(errOut, "Rollout %s exists: abort it (kubectl argo rollouts abort) or delete it first; its controller would undo the cleanup\n", rollout)
		return 1
	}
	var all []routes.Route
	for _, ns := range namespaces {
		found, err := c.Routes(ctx, ns)
		if err != nil {
			fmt.Fprintln(errOut, err)
			return 1
		}
		all = append(all, found...)
	}
	claimed := cleanup.Claimed(all, rollout)
	if len(claimed) == 0 {
		fmt.Fprintf(out, "no route carries a claim of Rollout %s: nothing to do\n", rollout)
		return 0
	}
	policy := desired.ReportConflicts
	if *force {
		policy = desired.TakeOver
	}
	outcomes := c.Undo(ctx, rollout, claimed, policy, *dryRun)
	verb := "undone"
	if *dryRun {
		verb = "would change"
	}
	for _, o := range outcomes {
		switch {
		case o.Err != nil:
			fmt.Fprintf(out, "error: %v\n", routes.RouteError(o.Route, o.Err))
		case o.Unchanged:
			fmt.Fprintf(out, "%s: already clean\n", o.Route)
		default:
			fmt.Fprintf(out, "%s: %s: %s\n", o.Route, verb, strings.Join(o.Changes, "; "))
		}
	}
	if cleanup.Failed(outcomes) != nil {
		return 1
	}
	return 0
}

// routeNamespaces are the namespaces cleanup looks in: namespace (-n; ""
// for all), within those the route cluster lets Rollouts reach.
func routeNamespaces(rc *decode.RouteCluster, namespace string) ([]string, error) {
	if rc == nil || slices.Contains(rc.Namespaces, decode.AnyNamespace) {
		return []string{namespace}, nil
	}
	if namespace == "" {
		return rc.Namespaces, nil
	}
	if !slices.Contains(rc.Namespaces, namespace) {
		return nil, fmt.Errorf("-n %s: Rollouts may not reach namespace %s in route cluster %s (--route-namespaces allows %s)",
			namespace, namespace, rc.Name, strings.Join(rc.Namespaces, ", "))
	}
	return []string{namespace}, nil
}

// newCleaner builds the cleaner; with peersNS, it keeps a Lease among the
// plugin's processes there (package peers) until stop, and says on errOut
// why when it cannot.
func newCleaner(conn *connection, fieldManager, peersNS string, errOut io.Writer) (c *cleanup.Cleaner, stop func(), err error) {
	dyn, cfg, err := conn.dynamic()
	if err != nil {
		return nil, nil, err
	}
	gw, gwErr := gateway.NewForConfig(cfg)
	coordination, leasesErr := coordinationv1.NewForConfig(cfg)
	if err := errors.Join(gwErr, leasesErr); err != nil {
		return nil, nil, fmt.Errorf("building the Kubernetes clients: %w", err)
	}
	log := quietLog()
	reader := kube.NewCluster(gw.GatewayV1().RESTClient(), log)
	stop = func() {}
	var exclusion orchestrator.Exclusion
	if peersNS != "" {
		warn := logrus.New()
		warn.SetOutput(errOut)
		warn.SetLevel(logrus.WarnLevel)
		warn.SetFormatter(&logrus.TextFormatter{DisableTimestamp: true})
		host, _ := os.Hostname()
		pp := peers.Start(coordination, peers.Options{Namespace: peersNS, FieldManager: fieldManager, Identity: fmt.Sprintf("cleanup %s/%d", host, os.Getpid())}, logrus.NewEntry(warn))
		exclusion = pp
		stop = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			pp.Stop(ctx)
		}
	}
	orch := orchestrator.New(reader, ssa.NewWriter(gw, dyn, fieldManager, log), exclusion, nil, log, orchestrator.Bounds{WritesPerCall: 1})
	return &cleanup.Cleaner{Dynamic: dyn, Versions: reader, Orchestrator: orch, FieldManager: fieldManager, Log: log}, stop, nil
}
