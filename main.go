// Command rollouts-gatewayapi-ssa is an Argo Rollouts traffic router plugin
// for Gateway API routes that writes every change as a server-side apply
// under one field manager. Argo Rollouts starts it and talks to it over
// hashicorp/go-plugin net/rpc.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	rolloutsrpc "github.com/argoproj/argo-rollouts/rollout/trafficrouting/plugin/rpc"
	goplugin "github.com/hashicorp/go-plugin"
	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gatewayapi-ssa/rollouts-plugin/cli"
	"github.com/gatewayapi-ssa/rollouts-plugin/metrics"
	"github.com/gatewayapi-ssa/rollouts-plugin/orchestrator"
	"github.com/gatewayapi-ssa/rollouts-plugin/plugin"
	"github.com/gatewayapi-ssa/rollouts-plugin/retry"
	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
	"github.com/gatewayapi-ssa/rollouts-plugin/ssa"
)

// version is stamped into release builds (make release: -ldflags "-X main.version=...").
var version = "dev"

// handshake is the one Argo Rollouts uses for traffic router plugins.
var handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "ARGO_ROLLOUTS_RPC_PLUGIN",
	MagicCookieValue: "trafficrouter",
}

// tunesGC says whether the plugin sets its GC percent itself (gc.go): not
// when GOGC is set in the environment (the Go runtime has read it then, and
// it stays).
func tunesGC(getenv func(string) string) bool {
	return getenv("GOGC") == ""
}

func main() {
	// A person runs the binary with a command; Argo Rollouts with flags only.
	if len(os.Args) > 1 && cli.Is(os.Args[1]) {
		os.Exit(cli.Run(os.Args[1:], os.Stdout, os.Stderr))
	}
	f := registerFlags(flag.CommandLine)
	flag.Parse()
	routeClusters, err := f.routeClusters.RouteClusters()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if f.showVersion {
		fmt.Println(version)
		return
	}
	if tunesGC(os.Getenv) {
		tuneGC()
	}

	log, err := newLogger(f.logFormat, f.logLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := f.check(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	w := f.wiring(routeClusters)
	if err := f.serveDiagnostics(&w, log); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}

	entry := logrus.NewEntry(log).WithFields(logrus.Fields{"plugin": "gatewayapi-ssa", "version": version})
	impl := plugin.New(f.options(w), entry, func() (plugin.Backend, error) { return connect(w, entry) })
	go exitWhenOrphaned(os.Getppid, time.Second, func() {
		log.Info("the Argo Rollouts controller that started the plugin is gone; exiting")
		closeAndExit(impl)
	})
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: handshake,
		Plugins: map[string]goplugin.Plugin{
			"RpcTrafficRouterPlugin": &rolloutsrpc.RpcTrafficRouterPlugin{Impl: impl},
		},
	})
	closeAndExit(impl)
}

// serveDiagnostics serves pprof and the metrics (into w) where the flags
// ask for them. It listens before the handshake: an address the plugin
// cannot serve on stops it here, with the flag's name, not at a scrape.
func (f *flags) serveDiagnostics(w *wiring, log *logrus.Logger) error {
	if f.pprofAddr != "" {
		if err := servePprof(f.pprofAddr, log); err != nil {
			return fmt.Errorf("-pprof-addr: %w", err)
		}
	}
	if f.metricsAddr != "" {
		w.Metrics = metrics.New(version)
		addr, err := w.Metrics.Serve(f.metricsAddr)
		if err != nil {
			return fmt.Errorf("-metrics-address: %w", err)
		}
		log.WithField("address", addr.String()).Info("serving Prometheus metrics at /metrics")
	}
	return nil
}

// flags are the plugin's flags (docs/install.md lists them; a test checks
// the list against the binary's).
type flags struct {
	qps                                 float64
	burst, maxRoutes                    int
	logFormat, logLevel, fieldManager   string
	pluginName, pprofAddr, peersNS      string
	metricsAddr                         string
	callTimeout, reqTimeout             time.Duration
	cleanupOn, showVersion, routeEvents bool
	cleanupEvery, watchCacheIdle        time.Duration
	routeClusters                       cli.RouteClusterFlags
	clusterName                         string
	requireGrants                       bool
}

// registerFlags defines the plugin's flags on fs.
func registerFlags(fs *flag.FlagSet) *flags {
	f := &flags{}
	fs.Float64Var(&f.qps, "kubeClientQPS", 40, "maximum queries per second to each cluster's apiserver, one token bucket per cluster: the controller's own and each route cluster's (the Argo Rollouts controller's own default); steps closer together than the burst takes to refill run at this rate")
	fs.IntVar(&f.burst, "kubeClientBurst", 120, "maximum burst of queries to the Kubernetes apiserver: a step costs one apply per changed route, the last step one more request per route to release ownership, so 120 lets any step of a Rollout with up to 50 routes go out at once (2 per route plus access reviews and the first list and watch)")
	fs.StringVar(&f.logFormat, "logformat", "hclog", "log format: hclog (JSON entries the controller's go-plugin client logs at their own level), text or json (logged by the controller at DEBUG)")
	fs.StringVar(&f.logLevel, "loglevel", "info", "log level: debug, info, warn or error")
	fs.StringVar(&f.fieldManager, "field-manager", ssa.DefaultFieldManager, "server-side apply field manager of every write")
	fs.StringVar(&f.pluginName, "plugin-name", rollout.DefaultPluginName, "name the plugin is registered with in argo-rollouts-config; its config is read under trafficRouting.plugins.<name>")
	fs.DurationVar(&f.callTimeout, "call-timeout", plugin.DefaultCallTimeout, "deadline of each call from Argo Rollouts, all its requests and retries included")
	fs.DurationVar(&f.reqTimeout, "request-timeout", retry.DefaultRequests.Timeout, "timeout of each attempt of a request to the apiserver; a request that gets no answer in time is abandoned and retried within the call's deadline")
	fs.IntVar(&f.maxRoutes, "max-concurrent-routes", 16, "how many routes all calls together work on at once (one call: at most 8)")
	fs.BoolVar(&f.cleanupOn, "cleanup-deleted-rollouts", false, "undo, on every route, the claims of Rollouts that no longer exist (canary weight, experiment backends, header and mirror rules); needs list on rollouts.argoproj.io and on the route kinds cluster-wide; sweeps the route clusters too, each process only the claims its own cluster made")
	fs.DurationVar(&f.cleanupEvery, "cleanup-interval", time.Minute, "how often -cleanup-deleted-rollouts looks; a Rollout must be missing in two looks in a row")
	fs.BoolVar(&f.showVersion, "version", false, "print the version and exit")
	fs.StringVar(&f.pprofAddr, "pprof-addr", "", "serve Go's pprof profiles on this loopback address (e.g. 127.0.0.1:6060) for measuring the plugin; off when empty, and refused on any address but 127.0.0.1 or ::1")
	fs.StringVar(&f.metricsAddr, "metrics-address", "", "serve Prometheus metrics at /metrics on this address: :PORT for every interface of the pod (what a PodMonitor scrapes), or 127.0.0.1:PORT; off when empty (docs/metrics.md)")
	fs.BoolVar(&f.routeEvents, "route-events", true, "record Kubernetes Events on the routes the plugin writes (what each write changed, for which Rollout, and what it refused there); Events on the Rollout, for every error a call returns, are recorded whatever this says")
	fs.StringVar(&f.peersNS, "peers-namespace", "", "namespace of the Leases through which the plugin's processes of one field manager (sharded or restarting controllers) know of each other, the same for all of them; empty: POD_NAMESPACE (the controller's), else the pod's namespace")
	fs.StringVar(&f.clusterName, "cluster-name", "", "the name the claims on the routes of route clusters give this cluster (the one the controller runs in) where no ClusterProperty cluster.clusterset.k8s.io names it, recorded with kube-system's UID; empty: that UID. Members of a fleet whose Rollouts share routes in a config cluster must each have their own")
	fs.BoolVar(&f.requireGrants, "require-reference-grants", true, "a Rollout reaches routes in another namespace than its own only where that namespace holds a ReferenceGrant from its Rollouts (argoproj.io/Rollout) to the route's kind; false lets every Rollout reach every namespace, as before 2026-12 (for a migration)")
	fs.DurationVar(&f.watchCacheIdle, "watch-cache-idle", 10*time.Minute, "stop a watch cache (the routes of a kind in a namespace, Gateways, ReferenceGrants) that no call used for this long; the next call that needs it starts it again. 0: never stop one")
	f.routeClusters.Register(fs)
	return f
}

// wiring is what the backend is built from, by the flags.
func (f *flags) wiring(routeClusters []rollout.RouteCluster) wiring {
	requests := retry.DefaultRequests
	requests.Timeout = f.reqTimeout
	var cleanupInterval time.Duration
	if f.cleanupOn {
		cleanupInterval = f.cleanupEvery
	}
	host, _ := os.Hostname()
	return wiring{
		PeersNamespace:  cmp.Or(f.peersNS, defaultPeersNamespace(os.Getenv, os.ReadFile)),
		Identity:        fmt.Sprintf("%s/%d", host, os.Getpid()),
		FieldManager:    f.fieldManager,
		QPS:             float32(f.qps),
		Burst:           f.burst,
		CallTimeout:     f.callTimeout,
		Retry:           requests,
		WritesPerCall:   min(8, f.maxRoutes),
		Routes:          orchestrator.NewSlots(f.maxRoutes),
		CleanupInterval: cleanupInterval,
		RouteClusters:   routeClusters,
		RouteEvents:     f.routeEvents,
		ClusterName:     f.clusterName,
		AnyNamespace:    !f.requireGrants,
		WatchCacheIdle:  f.watchCacheIdle,
	}
}

// options are the adapter's options: what every call is decoded with, and
// its deadline.
func (f *flags) options(w wiring) plugin.Options {
	return plugin.Options{
		Process: rollout.Process{PluginName: f.pluginName, FieldManager: f.fieldManager,
			RouteClusters: w.RouteClusters, AnyNamespace: w.AnyNamespace, Configs: &rollout.Configs{}},
		CallTimeout: f.callTimeout,
		Metrics:     w.Metrics,
	}
}

// newLogger is the plugin's logger on stderr, in format (hclog, text or
// json) at level. hclog entries reach the controller's log at their own
// level (hclog.go); text and json lines at DEBUG.
func newLogger(format, level string) (*logrus.Logger, error) {
	log := logrus.New()
	log.SetOutput(os.Stderr)
	switch format {
	case "hclog":
		log.SetFormatter(hclogFormatter{})
	case "text":
		log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	case "json":
		log.SetFormatter(&logrus.JSONFormatter{})
	default:
		return nil, fmt.Errorf("-logformat must be hclog, text or json, not %q", format)
	}
	l, err := logrus.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("-loglevel: %v", err)
	}
	log.SetLevel(l)
	return log, nil
}

// check refuses the flag values the plugin cannot run with.
func (f *flags) check() error {
	switch {
	case f.callTimeout <= 0 || f.reqTimeout <= 0 || f.maxRoutes <= 0:
		return errors.New("-call-timeout, -request-timeout and -max-concurrent-routes must be positive")
	case f.fieldManager == "":
		return errors.New("-field-manager must not be empty")
	case f.cleanupOn && f.cleanupEvery <= 0:
		return errors.New("-cleanup-interval must be positive")
	case f.watchCacheIdle < 0:
		return errors.New("-watch-cache-idle must not be negative (0: never stop a watch cache)")
	}
	if errs := validation.IsDNS1123Subdomain(f.clusterName); f.clusterName != "" && len(errs) > 0 {
		return fmt.Errorf("-cluster-name %q is not a cluster name (lower case letters, digits, '-' and '.'): %s", f.clusterName, strings.Join(errs, "; "))
	}
	return nil
}

// closeAndExit lets go of what the plugin holds in the cluster (its Lease)
// within the second go-plugin gives a plugin to quit, and exits.
func closeAndExit(impl *plugin.Plugin) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	impl.Close(ctx)
	cancel()
	os.Exit(0)
}

// exitWhenOrphaned calls exit once the process's parent, the controller
// that started it, is gone (the process was handed to another parent): no
// call can reach the plugin any more, and its Lease would keep the
// controller's next plugin process from writing routes alone.
func exitWhenOrphaned(ppid func() int, every time.Duration, exit func()) {
	parent := ppid()
	for range time.Tick(every) {
		if ppid() != parent {
			exit()
			return
		}
	}
}

// defaultPeersNamespace is the namespace the controller runs in:
// POD_NAMESPACE (Argo Rollouts' manifests set it), else the pod's service
// account namespace, else none (every write then carries its
// resourceVersion).
func defaultPeersNamespace(getenv func(string) string, read func(string) ([]byte, error)) string {
	if ns := getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := read("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		return strings.TrimSpace(string(b))
	}
	return ""
}
