package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gatewayapi-ssa/rollouts-plugin/cleanup"
	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/orchestrator"
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
would put everything back.

flags:
`

func runCleanup(args []string, out, errOut io.Writer) int {
	fs := newFlags("cleanup", cleanupUsage, errOut)
	conn, fieldManager := &fs.conn, &fs.fieldManager
	force := fs.Bool("force", false, "undo also values another manager changed since the plugin set them (default: report them and leave the route)")
	dryRun := fs.Bool("dry-run", false, "say what would change, write nothing")
	timeout := fs.Duration("timeout", time.Minute, "deadline of the whole command")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 || !strings.Contains(fs.Arg(0), "/") {
		fs.Usage()
		return 2
	}
	rollout := fs.Arg(0)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	c, err := newCleaner(conn, *fieldManager)
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 1
	}
	if exists, err := c.Exists(ctx, rollout); err != nil {
		fmt.Fprintln(errOut, err)
		return 1
	} else if exists {
		fmt.Fprintf(errOut, "Rollout %s exists: abort it (kubectl argo rollouts abort) or delete it first; its controller would undo the cleanup\n", rollout)
		return 1
	}
	all, err := c.Routes(ctx, conn.namespace)
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 1
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
			fmt.Fprintf(out, "error: %v\n", routes.About(o.Route, o.Err))
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

func newCleaner(conn *connection, fieldManager string) (*cleanup.Cleaner, error) {
	dyn, cfg, err := conn.dynamic()
	if err != nil {
		return nil, err
	}
	gw, gwErr := gateway.NewForConfig(cfg)
	if gwErr != nil {
		return nil, fmt.Errorf("building the Kubernetes clients: %w", gwErr)
	}
	log := quietLog()
	reader := kube.NewCluster(gw.GatewayV1().RESTClient(), log)
	orch := orchestrator.New(reader, ssa.NewWriter(gw, dyn, fieldManager, log), nil, log, orchestrator.Bounds{WritesPerCall: 1})
	return &cleanup.Cleaner{Dynamic: dyn, Versions: reader, Orchestrator: orch, FieldManager: fieldManager, Log: log}, nil
}
