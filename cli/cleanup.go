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
	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/orchestrator"
	"github.com/gatewayapi-ssa/rollouts-plugin/peers"
	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
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

Only what the plugin's calls could have written is undone. A claim records the
cluster whose Rollout made it: the command takes back the claims of the
kubeconfig's cluster (named as the plugin names it: its ClusterProperty
cluster.clusterset.k8s.io, else --cluster-name, else the UID of its namespace
kube-system) and claims that name no cluster; a route whose claim is another
cluster's (the same Rollout in another member of a fleet) is left alone and
said so. A route in another namespace than the Rollout's is cleaned only where
that namespace grants the Rollout's namespace its routes with a ReferenceGrant
(from argoproj.io Rollout), unless --require-reference-grants=false, as the
plugin's flag.

flags:
`

// cleanupOptions are the cleanup command's flags and its argument, the
// Rollout ("<namespace>/<name>") whose claims it undoes.
type cleanupOptions struct {
	*commandFlags
	rollout       string
	force, dryRun bool
	timeout       time.Duration
	clusterName   string
	requireGrants bool
	peersNS       string
}

// runCleanup runs the cleanup command: it finds the routes that carry the
// deleted Rollout's claims and undoes them, and says what it did on out.
func runCleanup(args []string, out, errOut io.Writer) int {
	o, ok := parseCleanup(args, errOut)
	if !ok {
		return 2
	}
	rc, err := o.routeCluster()
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 2
	}
	namespaces, err := routeNamespaces(rc, o.conn.namespace)
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	c, stop, err := newCleaner(o.routesConnection(rc), o.fieldManager, o.peersNS, errOut)
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 1
	}
	defer stop()
	cluster, ok := o.prepare(ctx, c, rc, errOut)
	if !ok {
		return 1
	}
	all, err := routesIn(ctx, c, namespaces)
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 1
	}
	claimed, elsewhere := c.Claimed(all, o.rollout), c.ClaimedElsewhere(all, o.rollout)
	outcomes := c.Undo(ctx, o.rollout, claimed, o.policy(), o.dryRun)
	o.report(out, outcomes, elsewhere, len(claimed), cluster)
	if cleanup.Failed(outcomes) != nil {
		return 1
	}
	return 0
}

// parseCleanup reads the cleanup command's flags and its one argument,
// NAMESPACE/ROLLOUT; not ok (bad usage, said on errOut) when they do not
// parse or the argument is not one Rollout.
func parseCleanup(args []string, errOut io.Writer) (o *cleanupOptions, ok bool) {
	fs := newFlags("cleanup", cleanupUsage, errOut)
	o = &cleanupOptions{commandFlags: fs}
	fs.BoolVar(&o.force, "force", false, "undo also values another manager changed since the plugin set them (default: report them and leave the route)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "say what would change, write nothing")
	fs.DurationVar(&o.timeout, "timeout", time.Minute, "deadline of the whole command")
	fs.StringVar(&o.clusterName, "cluster-name", "", "the plugin's -cluster-name: names the kubeconfig's cluster, whose claims are undone, where it has no ClusterProperty cluster.clusterset.k8s.io; default: the UID of its namespace kube-system")
	fs.BoolVar(&o.requireGrants, "require-reference-grants", true, "the plugin's -require-reference-grants: undo a claim on a route in another namespace than the Rollout's only where a ReferenceGrant there grants it")
	fs.StringVar(&o.peersNS, "peers-namespace", "argo-rollouts", "namespace of the plugin's Leases (the controller's): the command keeps one while it writes, so that the controller's plugin writes those routes guarded by their resourceVersion meanwhile; empty: keep none")
	fs.selectCluster()
	if err := fs.Parse(args); err != nil {
		return nil, false
	}
	if fs.NArg() != 1 || !strings.Contains(fs.Arg(0), "/") {
		fs.Usage()
		return nil, false
	}
	o.rollout = fs.Arg(0)
	return o, true
}

// prepare readies the cleaner for the Rollout: it reads the Rollout in the
// kubeconfig's cluster (whatever cluster rc holds the routes in), refuses
// one that still exists, and names the cluster whose claims it takes back,
// as the plugin names it. Not ok, it has said why on errOut.
func (o *cleanupOptions) prepare(ctx context.Context, c *cleanup.Cleaner, rc *rollout.RouteCluster, errOut io.Writer) (cluster kube.ClusterName, ok bool) {
	var err error
	if rc != nil {
		// The Rollout is in the kubeconfig's cluster, its routes in the route cluster.
		if c.Rollouts, _, err = o.conn.dynamic(); err != nil {
			fmt.Fprintln(errOut, err)
			return kube.ClusterName{}, false
		}
	}
	if exists, err := c.Exists(ctx, o.rollout); err != nil {
		fmt.Fprintln(errOut, err)
		return kube.ClusterName{}, false
	} else if exists {
		fmt.Fprintf(errOut, "Rollout %s exists: abort it (kubectl argo rollouts abort) or delete it first; its controller would undo the cleanup\n", o.rollout)
		return kube.ClusterName{}, false
	}
	// The claims on a route cluster's routes name the cluster of the
	// Rollouts: the kubeconfig's. Those on its own routes name none, but
	// claims made there before may carry its name.
	c.SharedRoutes, c.IgnoreReferenceGrants = rc != nil, !o.requireGrants
	if cluster, err = nameCluster(ctx, &o.conn, o.clusterName, errOut); err != nil {
		if rc != nil {
			fmt.Fprintln(errOut, err)
			return kube.ClusterName{}, false
		}
		fmt.Fprintf(errOut, "warning: %v; claims that an earlier version of the plugin made under this cluster's name are left\n", err)
	}
	c.Cluster, c.ClusterUID = cluster.Name, cluster.UID
	return cluster, true
}

// policy is what undoing does with values another manager changed since
// the plugin set them: reports them, or with --force takes them back too.
func (o *cleanupOptions) policy() desired.ConflictPolicy {
	if o.force {
		return desired.TakeOver
	}
	return desired.ReportConflicts
}

// routesIn are the routes of every namespace cleanup looks in.
func routesIn(ctx context.Context, c *cleanup.Cleaner, namespaces []string) ([]routes.Route, error) {
	var all []routes.Route
	for _, ns := range namespaces {
		found, err := c.Routes(ctx, ns)
		if err != nil {
			return nil, err
		}
		all = append(all, found...)
	}
	return all, nil
}

// report says what cleanup did (or, with --dry-run, would do) on each
// route of the Rollout's claims, which routes it left alone because
// another cluster's Rollout claims them, and when there was nothing to do.
func (o *cleanupOptions) report(out io.Writer, outcomes []cleanup.Outcome, elsewhere []cleanup.ForeignClaim, claimed int, cluster kube.ClusterName) {
	verb := "undone"
	if o.dryRun {
		verb = "would change"
	}
	for _, oc := range outcomes {
		switch {
		case oc.Err != nil:
			fmt.Fprintf(out, "error: %v\n", routes.RouteError(oc.Route, oc.Err))
		case oc.Unchanged:
			fmt.Fprintf(out, "%s: already clean\n", oc.Route)
		default:
			fmt.Fprintf(out, "%s: %s: %s\n", oc.Route, verb, strings.Join(oc.Changes, "; "))
		}
	}
	for _, e := range elsewhere {
		fmt.Fprintf(out, "%s: left alone: its claim of Rollout %s is cluster %s's, not this cluster's (%s, named by %s)\n",
			e.Route, o.rollout, e.Cluster, cluster.Name, cluster.Source)
	}
	switch {
	case claimed == 0 && len(elsewhere) == 0:
		fmt.Fprintf(out, "no route carries a claim of Rollout %s: nothing to do\n", o.rollout)
	case claimed == 0:
		fmt.Fprintf(out, "no route carries a claim of Rollout %s of this cluster: nothing to do\n", o.rollout)
	}
}

// nameCluster names the cluster conn reaches, as the plugin names its own
// (kube.NameCluster, flag its -cluster-name); a warning goes to errOut.
func nameCluster(ctx context.Context, conn *connection, flag string, errOut io.Writer) (kube.ClusterName, error) {
	cfg, err := conn.config()
	if err != nil {
		return kube.ClusterName{}, err
	}
	gw, err := gateway.NewForConfig(cfg)
	if err != nil {
		return kube.ClusterName{}, fmt.Errorf("building the Kubernetes clients: %w", err)
	}
	return kube.NameCluster(ctx, gw.GatewayV1().RESTClient(), flag, func(warning string) { fmt.Fprintln(errOut, "warning: "+warning) })
}

// routeNamespaces are the namespaces cleanup looks in: namespace (-n; ""
// for all), within those the route cluster lets Rollouts reach.
func routeNamespaces(rc *rollout.RouteCluster, namespace string) ([]string, error) {
	if rc == nil || slices.Contains(rc.Namespaces, rollout.AnyNamespace) {
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
