package plugin

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/argoproj/argo-rollouts/utils/plugin/types"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gatewayapi-ssa/rollouts-plugin/cleanup"
	"github.com/gatewayapi-ssa/rollouts-plugin/decode"
	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/events"
	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/kubeclient"
	"github.com/gatewayapi-ssa/rollouts-plugin/metrics"
	"github.com/gatewayapi-ssa/rollouts-plugin/orchestrator"
	"github.com/gatewayapi-ssa/rollouts-plugin/peers"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/ssa"
)

// pluginType is what the plugin answers to Type().
const pluginType = "GatewayAPI"

// Options configure the plugin; main sets them from flags.
type Options struct {
	// FieldManager is the server-side apply field manager of every write.
	FieldManager string
	// PluginName is the key of the plugin's config under trafficRouting.plugins.
	PluginName string
	// QPS and Burst limit the plugin's requests to the apiserver.
	QPS   float32
	Burst int
	// CallTimeout bounds each RPC call, all its requests included: the call
	// answers within it even if the apiserver never does.
	CallTimeout time.Duration
	// Retry says how each request is timed out and retried.
	Retry kubeclient.RetryPolicy
	// MaxConcurrentWrites bounds how many routes one call works on at once;
	// MaxConcurrentRoutes how many all the calls of the process do, together.
	MaxConcurrentWrites int
	MaxConcurrentRoutes int
	// CleanupInterval, when set, makes the plugin undo, that often, the
	// claims of Rollouts that no longer exist (package cleanup).
	CleanupInterval time.Duration
	// PeersNamespace holds the Leases through which the plugin's processes
	// of one field manager know of each other (package peers); empty: every
	// write carries its resourceVersion.
	PeersNamespace string
	// Identity names the process in its Lease and in its Events
	// (reportingInstance), for people.
	Identity string
	// RouteClusters are the clusters besides the controller's own whose
	// routes Rollouts may have the plugin write (-route-cluster).
	RouteClusters []decode.RouteCluster
	// RouteEvents makes the plugin record Events on the routes it writes
	// (what each write changed, and what it refused); Events on the
	// Rollout are recorded whatever it says.
	RouteEvents bool
	// ClusterName names the controller's cluster in the claims where no
	// ClusterProperty cluster.clusterset.k8s.io does (-cluster-name; empty:
	// the UID of namespace kube-system): kube.NameCluster.
	ClusterName string
	// IgnoreReferenceGrants lets every Rollout reach routes in every
	// namespace (-require-reference-grants=false), as before grants were
	// checked; by default a Rollout reaches another namespace's routes only
	// where that namespace grants it (orchestrator.Reach).
	IgnoreReferenceGrants bool
	// WatchCacheIdle stops a watch cache no call used for that long (the
	// next call that needs it starts it again); 0: every cache runs on.
	WatchCacheIdle time.Duration
	// Metrics shows the calls and what each cluster's clients, watch
	// caches, writes, Events and peers count (-metrics-address); nil:
	// nothing is shown.
	Metrics *metrics.Metrics
}

// DefaultCallTimeout is the deadline of a call: a stuck call holds one of the
// controller's workers, so it must end well before anyone would notice.
const DefaultCallTimeout = 30 * time.Second

// userAgent identifies the plugin's requests to the apiserver.
const userAgent = "rollouts-gatewayapi-ssa"

// Plugin implements Argo Rollouts' traffic router plugin interface.
type Plugin struct {
	opts Options
	log  *logrus.Entry

	// routeSlots bound the routes worked on by all calls at once.
	routeSlots orchestrator.Slots

	// initMu makes InitPlugin build the clients once, however often it is called.
	initMu sync.Mutex
	mu     sync.Mutex
	dyn    dynamic.Interface
	reader kube.Reader
	peers  *peers.Peers
	orch   *orchestrator.Orchestrator
	// routeClusters are the route clusters, by name, once InitPlugin has
	// built their clients.
	routeClusters map[string]*routeCluster
	// rollouts records Events on the Rollouts, in the controller's cluster.
	rollouts *events.Rollouts
	// sweeping is set once the cleanup sweep runs.
	sweeping bool
	// naming reaches the controller's cluster to name it (clusterName),
	// once: cluster holds the name from then on.
	naming  rest.Interface
	cluster string
}

// routeCluster is what the plugin reads and writes one route cluster's
// routes with: its own watch caches, writer and Leases, as for the
// controller's cluster. err says why it cannot be used (its kubeconfig):
// every call that names it fails with it, and no other call.
type routeCluster struct {
	reader kube.Reader
	dyn    dynamic.Interface
	peers  *peers.Peers
	orch   *orchestrator.Orchestrator
	// namespaces are the namespaces Rollouts may reach there
	// (-route-namespaces).
	namespaces []string
	err        error
}

// New returns a plugin that builds its clients in InitPlugin.
func New(opts Options, log *logrus.Entry) *Plugin {
	if opts.FieldManager == "" {
		opts.FieldManager = ssa.DefaultFieldManager
	}
	if opts.PluginName == "" {
		opts.PluginName = decode.DefaultPluginName
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.Retry == (kubeclient.RetryPolicy{}) {
		opts.Retry = kubeclient.DefaultRetryPolicy
	}
	if opts.MaxConcurrentWrites <= 0 {
		opts.MaxConcurrentWrites = 8
	}
	if opts.MaxConcurrentRoutes <= 0 {
		opts.MaxConcurrentRoutes = 16
	}
	return &Plugin{opts: opts, log: log, routeSlots: orchestrator.NewSlots(opts.MaxConcurrentRoutes)}
}

// InitPlugin builds the clients: in-cluster config, else KUBECONFIG (or
// ~/.kube/config), else an error saying neither is there. Once it has
// succeeded, calling it again does nothing.
func (p *Plugin) InitPlugin() (resp types.RpcError) {
	defer p.recoverInto(nil, "InitPlugin", nil, &resp)
	p.initMu.Lock()
	defer p.initMu.Unlock()
	p.mu.Lock()
	ready := p.orch != nil
	p.mu.Unlock()
	if ready {
		p.log.Debug("InitPlugin called again; the clients are built already")
		return types.RpcError{}
	}
	cfg, err := kubeclient.Config()
	if err != nil {
		return types.RpcError{ErrorString: err.Error()}
	}
	cfg.QPS, cfg.Burst = p.opts.QPS, p.opts.Burst
	cfg.UserAgent = userAgent
	if err := p.Connect(cfg); err != nil {
		return types.RpcError{ErrorString: err.Error()}
	}
	p.connectRouteClusters()
	p.startSweeps()
	p.log.WithFields(logrus.Fields{"host": cfg.Host, "fieldManager": p.opts.FieldManager, "pluginName": p.opts.PluginName}).Info("plugin initialized")
	return types.RpcError{}
}

// clusterName names the controller's cluster for the claims
// (kube.NameCluster), at the first call that writes (InitPlugin sends no
// request), once: until a name is found, every such call asks again. ""
// when the plugin has no client to ask with.
func (p *Plugin) clusterName(ctx context.Context) (string, error) {
	p.mu.Lock()
	name, client := p.cluster, p.naming
	p.mu.Unlock()
	if name != "" || client == nil {
		return name, nil
	}
	n, err := kube.NameCluster(ctx, client, p.opts.ClusterName, func(msg string) { p.log.Warn(msg) })
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	p.cluster = n.Name
	p.mu.Unlock()
	p.log.WithFields(logrus.Fields{"cluster": n.Name, "from": n.Source}).Info("claims name this cluster")
	return n.Name, nil
}

// connectRouteClusters builds the clients of every route cluster. One whose
// kubeconfig cannot be read is logged and kept with its error: the
// Rollouts that name it fail with that error, all the others go on.
func (p *Plugin) connectRouteClusters() {
	clusters := map[string]*routeCluster{}
	for _, rc := range p.opts.RouteClusters {
		log := p.log.WithFields(logrus.Fields{"routeCluster": rc.Name, "kubeconfig": rc.Kubeconfig})
		c, err := p.connectRouteCluster(rc, log)
		if err != nil {
			c = &routeCluster{err: fmt.Errorf("route cluster %q cannot be used: %w; fix -route-cluster %s=%s in the plugin's args and restart the controller",
				rc.Name, err, rc.Name, rc.Kubeconfig)}
			log.Error(c.err.Error())
		} else {
			log.WithField("namespaces", strings.Join(rc.Namespaces, ",")).Info("route cluster ready")
		}
		clusters[rc.Name] = c
	}
	p.mu.Lock()
	p.routeClusters = clusters
	p.mu.Unlock()
}

// connectRouteCluster builds the clients of one route cluster, as Connect
// does for the controller's own.
func (p *Plugin) connectRouteCluster(rc decode.RouteCluster, log *logrus.Entry) (*routeCluster, error) {
	cfg, err := kubeclient.ConfigFromFile(rc.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = p.opts.QPS, p.opts.Burst
	cfg.UserAgent = userAgent
	c, err := kubeclient.NewClients(cfg, p.opts.Retry, log)
	if err != nil {
		return nil, err
	}
	reader := kube.NewCluster(c.Gateway.GatewayV1().RESTClient(), log)
	reader.StopIdleCaches(p.opts.WatchCacheIdle)
	pp := peers.Start(c.Leases, peers.Options{Namespace: p.opts.PeersNamespace, FieldManager: p.opts.FieldManager, Identity: p.opts.Identity}, log)
	rec, err := p.eventRecorder(cfg, log) // the routes' Events, in their cluster
	if err != nil {
		return nil, err
	}
	orch := p.orchestrator(c.Reviews, c.Gateway, c.Dynamic, reader, pp, p.routeEvents(rec), log)
	p.opts.Metrics.Watch(rc.Name, metrics.Cluster{Requests: c.Requests, Reader: reader, Writes: orch, Events: rec, Peers: pp})
	return &routeCluster{reader: reader, dyn: c.Dynamic, peers: pp, namespaces: rc.Namespaces, orch: orch}, nil
}

// Connect builds the plugin's clients for a cluster.
func (p *Plugin) Connect(cfg *rest.Config) error {
	c, err := kubeclient.NewClients(cfg, p.opts.Retry, p.log)
	if err != nil {
		return err
	}
	reader := kube.NewCluster(c.Gateway.GatewayV1().RESTClient(), p.log)
	reader.StopIdleCaches(p.opts.WatchCacheIdle)
	pp := peers.Start(c.Leases, peers.Options{Namespace: p.opts.PeersNamespace, FieldManager: p.opts.FieldManager, Identity: p.opts.Identity}, p.log)
	rec, err := p.eventRecorder(cfg, p.log)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.rollouts = events.NewRollouts(rec) // the Rollouts are in the controller's cluster
	p.mu.Unlock()
	p.Use(c.Reviews, c.Gateway, c.Dynamic, reader, pp, p.routeEvents(rec))
	p.mu.Lock()
	orch := p.orch
	p.mu.Unlock()
	p.opts.Metrics.Watch("", metrics.Cluster{Requests: c.Requests, Reader: reader, Writes: orch, Events: rec, Peers: pp})
	return nil
}

// eventRecorder records Events in the cluster of cfg, as the plugin's
// field manager (reportingController) and process (reportingInstance).
func (p *Plugin) eventRecorder(cfg *rest.Config, log *logrus.Entry) (*events.Recorder, error) {
	return events.NewRecorder(cfg, events.Options{Controller: p.opts.FieldManager, Instance: p.opts.Identity}, log)
}

// routeEvents records Events on the routes with rec, the recorder of the
// routes' cluster; nil when -route-events is off.
func (p *Plugin) routeEvents(rec *events.Recorder) orchestrator.RouteEvents {
	if !p.opts.RouteEvents {
		return nil
	}
	return events.NewRoutes(rec)
}

// Close stops what the plugin keeps running: it deletes its Lease (package
// peers), so that the plugin's other processes need not wait for it to go
// stale, and stops the watch caches.
func (p *Plugin) Close(ctx context.Context) {
	p.mu.Lock()
	clusters := []*routeCluster{{reader: p.reader, peers: p.peers}}
	for _, c := range p.routeClusters {
		clusters = append(clusters, c)
	}
	p.mu.Unlock()
	for _, c := range clusters {
		if c.peers != nil {
			c.peers.Stop(ctx)
		}
		if r, ok := c.reader.(interface{ Close() }); ok {
			r.Close()
		}
	}
}

// startSweeps starts, once, if the plugin was asked to, the cleanup of
// deleted Rollouts' claims: on the routes of the controller's cluster and of
// each route cluster (there within -route-namespaces), each taking back
// only this cluster's claims, so it starts once the cluster has a name.
func (p *Plugin) startSweeps() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.opts.CleanupInterval <= 0 || p.sweeping || p.orch == nil {
		return
	}
	p.sweeping = true
	own := &cleanup.Cleaner{Dynamic: p.dyn, Versions: p.reader, Orchestrator: p.orch, FieldManager: p.opts.FieldManager,
		IgnoreReferenceGrants: p.opts.IgnoreReferenceGrants, Log: p.log}
	sweepers := []*cleanup.Sweeper{{Cleaner: own, Interval: p.opts.CleanupInterval}}
	for name, rc := range p.routeClusters {
		if rc.err != nil {
			continue
		}
		c := *own
		c.Dynamic, c.Rollouts, c.Versions, c.Orchestrator, c.SharedRoutes = rc.dyn, p.dyn, rc.reader, rc.orch, true
		c.Log = p.log.WithField("routeCluster", name)
		var namespaces []string
		if !slices.Contains(rc.namespaces, decode.AnyNamespace) {
			namespaces = rc.namespaces
		}
		sweepers = append(sweepers, &cleanup.Sweeper{Cleaner: &c, Interval: p.opts.CleanupInterval, Namespaces: namespaces})
	}
	go p.sweep(sweepers)
	p.log.WithFields(logrus.Fields{"interval": p.opts.CleanupInterval.String(), "routeClusters": len(sweepers) - 1}).Info("undoing the claims of deleted Rollouts")
}

// sweep runs the sweepers once the cluster has a name, asking again every
// interval until it has.
func (p *Plugin) sweep(sweepers []*cleanup.Sweeper) {
	for {
		ctx, cancel := p.callContext()
		name, err := p.clusterName(ctx)
		cancel()
		if err == nil {
			for _, s := range sweepers {
				s.Cleaner.Cluster = name
				go s.Run(context.Background())
			}
			return
		}
		p.log.WithError(err).Warn("cleanup sweep: waiting for a name of this cluster, which its claims carry")
		time.Sleep(p.opts.CleanupInterval)
	}
}

// Use sets the clients the plugin reads and writes with (reviews may be nil:
// no access reviews), its peers (nil: every write carries its
// resourceVersion) and what tells the routes' owners of its writes (nil:
// nothing); a reader or peers it replaces are stopped.
func (p *Plugin) Use(reviews authorizationv1.SelfSubjectAccessReviewInterface, gw gateway.Interface, dyn dynamic.Interface, reader kube.Reader, pp *peers.Peers, routeEvents orchestrator.RouteEvents) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.reader.(interface{ Close() }); ok && p.reader != reader {
		old.Close()
	}
	if p.peers != nil && p.peers != pp {
		go p.peers.Stop(context.Background())
	}
	p.dyn = dyn
	p.reader = reader
	p.peers = pp
	p.naming = gw.GatewayV1().RESTClient()
	p.orch = p.orchestrator(reviews, gw, dyn, reader, pp, routeEvents, p.log)
}

// orchestrator carries out calls on one cluster's routes. The orchestrators
// of all clusters share the process's bound on the routes worked on at once.
func (p *Plugin) orchestrator(reviews authorizationv1.SelfSubjectAccessReviewInterface, gw gateway.Interface, dyn dynamic.Interface,
	reader kube.Reader, pp *peers.Peers, routeEvents orchestrator.RouteEvents, log *logrus.Entry) *orchestrator.Orchestrator {
	var exclusion orchestrator.Exclusion
	if pp != nil {
		exclusion = pp
	}
	writer := ssa.NewWriter(gw, dyn, p.opts.FieldManager, log).ReviewingAccess(reviews)
	return orchestrator.New(reader, writer, exclusion, routeEvents, log, orchestrator.Bounds{
		WritesPerCall: p.opts.MaxConcurrentWrites, Routes: p.routeSlots, CallTimeout: p.opts.CallTimeout,
	})
}

// callContext is the context of one call. Its work ends a little before the
// call's deadline, so that the answer, error included, reaches the
// controller within CallTimeout.
func (p *Plugin) callContext() (context.Context, context.CancelFunc) {
	reserve := min(p.opts.CallTimeout/20, 500*time.Millisecond)
	return context.WithTimeout(context.Background(), p.opts.CallTimeout-reserve)
}

// UpdateHash has nothing to route: Gateway API routes select Services, not
// pod hashes.
func (p *Plugin) UpdateHash(*v1alpha1.Rollout, string, string, []v1alpha1.WeightDestination) types.RpcError {
	return types.RpcError{}
}

// Type returns the plugin's type.
func (p *Plugin) Type() string { return pluginType }

// SetWeight gives the canary desiredWeight, each experiment Service in
// additional its weight, and stable the rest of maxTrafficWeight, in every
// weighted rule of every route of the Rollout. Experiment backendRefs the
// plugin added before and that are no longer asked for leave the route.
func (p *Plugin) SetWeight(ro *v1alpha1.Rollout, desiredWeight int32, additional []v1alpha1.WeightDestination) types.RpcError {
	return p.run(ro, decode.Request{Method: decode.SetWeight, Weight: desiredWeight, Additional: additional})
}

// SetHeaderRoute adds, on every HTTPRoute and GRPCRoute that takes header
// routes, one rule per weighted rule that sends the requests with the step's
// headers to the canary; with no match it removes them.
func (p *Plugin) SetHeaderRoute(ro *v1alpha1.Rollout, h *v1alpha1.SetHeaderRoute) types.RpcError {
	return p.run(ro, decode.Request{Method: decode.SetHeaderRoute, Header: h})
}

// SetMirrorRoute adds, on every HTTPRoute and GRPCRoute, a rule that sends the
// matching requests to stable and mirrors a percentage of them to the canary;
// with no match or percentage 0 it removes it.
func (p *Plugin) SetMirrorRoute(ro *v1alpha1.Rollout, m *v1alpha1.SetMirrorRoute) types.RpcError {
	return p.run(ro, decode.Request{Method: decode.SetMirrorRoute, Mirror: m})
}

// RemoveManagedRoutes removes every header and mirror rule the plugin added
// for the Rollout, on every one of its routes.
func (p *Plugin) RemoveManagedRoutes(ro *v1alpha1.Rollout) types.RpcError {
	return p.run(ro, decode.Request{Method: decode.RemoveManagedRoutes})
}

// VerifyWeight says whether the gateways took the weights: with the Rollout's
// verifyWeight option, from the routes' spec and status.parents
// (orchestrator.Verify); without it NotImplemented, never a blind Verified:
// the plugin cannot know whether the gateway reports observedGeneration, and
// a blind Verified would let a rollout promote on weights no gateway has
// taken. Every error comes with NotVerified, never NotImplemented: Argo
// Rollouts keeps the Verified value it gets alongside an error, and
// NotVerified keeps a setWeight step from completing.
func (p *Plugin) VerifyWeight(ro *v1alpha1.Rollout, desiredWeight int32, additional []v1alpha1.WeightDestination) (verified types.RpcVerified, resp types.RpcError) {
	req := decode.Request{Method: decode.VerifyWeight, Weight: desiredWeight, Additional: additional}
	name := req.Name()
	verified = types.NotVerified
	m := p.meter(ro, req.Method)
	defer p.recoverInto(ro, name, m, &resp)
	ctx, cancel := p.callContext()
	defer cancel()
	where, call, err := p.decode(ctx, ro, req)
	m.in(where)
	switch {
	case err != nil:
		return types.NotVerified, p.fail(ro, req, m, err)
	case !call.Settings.VerifyWeight:
		p.succeeded(ro, req, m)
		return types.NotImplemented, types.RpcError{}
	case where.orch == nil:
		return types.NotVerified, p.fail(ro, req, m, errNoClient)
	}
	s := call.Settings
	ok, err := where.orch.Verify(ctx, orchestrator.Check{
		Rollout: ro.Namespace + "/" + ro.Name, Name: name, Targets: s.Targets, Reach: p.reach(ro),
		Split: call.Split, Extra: call.Extra, RuleNames: s.RuleNames, Settle: s.VerifyWeightSettle,
	})
	if err != nil {
		return types.NotVerified, p.fail(ro, req, m, where.about(err))
	}
	p.succeeded(ro, req, m) // NotVerified without an error is an answer too
	if !ok {
		return types.NotVerified, types.RpcError{}
	}
	return types.Verified, types.RpcError{}
}

// run carries out one call on every route of the Rollout (package
// orchestrator) and answers as the controller expects.
func (p *Plugin) run(ro *v1alpha1.Rollout, req decode.Request) (resp types.RpcError) {
	name := req.Name()
	m := p.meter(ro, req.Method)
	defer p.recoverInto(ro, name, m, &resp)
	ctx, cancel := p.callContext()
	defer cancel()
	where, call, err := p.decode(ctx, ro, req)
	m.in(where)
	if err != nil {
		return p.fail(ro, req, m, err)
	}
	rollout := ro.Namespace + "/" + ro.Name
	if call.Skip != "" {
		p.log.WithFields(logrus.Fields{"rollout": rollout, "call": name}).Info("nothing to do: " + call.Skip)
		p.succeeded(ro, req, m)
		return types.RpcError{}
	}
	cluster, err := p.clusterName(ctx)
	if err != nil {
		return p.fail(ro, req, m, err)
	}
	err = where.orch.Run(ctx, orchestrator.Job{
		Rollout: rollout, Name: name, Intent: call.Intent, Targets: call.Settings.Targets, Reach: p.reach(ro),
		Env: func(ref routes.Ref) desired.Env {
			env := call.Settings.Env(rollout, p.opts.FieldManager, ref)
			env.Cluster = cluster
			return env
		},
	})
	if err != nil {
		return p.fail(ro, req, m, where.about(err))
	}
	p.succeeded(ro, req, m)
	return types.RpcError{}
}

// reach is where the Rollout may reach routes: its own namespace, others
// only where they grant it (unless the platform team turned that off).
func (p *Plugin) reach(ro *v1alpha1.Rollout) orchestrator.Reach {
	return orchestrator.Reach{From: ro.Namespace, AnyNamespace: p.opts.IgnoreReferenceGrants}
}

// decode decodes the call (package decode), reading the experiment
// Services with the plugin's client, and returns where to carry it out:
// the orchestrator of the cluster that holds the Rollout's routes, nil with
// errNoClient when InitPlugin has not built the clients. The call's own
// errors come first, then a route cluster the platform team has not
// configured (or one that cannot be used).
func (p *Plugin) decode(ctx context.Context, ro *v1alpha1.Rollout, req decode.Request) (routesIn, decode.Decoded, error) {
	p.mu.Lock()
	orch, dyn, clusters := p.orch, p.dyn, p.routeClusters
	p.mu.Unlock()
	ports := func(context.Context, string) ([]corev1.ServicePort, error) { return nil, errNoClient }
	if dyn != nil {
		ports = decode.DynamicServicePorts(dyn, ro.Namespace)
	}
	call, err := decode.Decode(ctx, ro, p.opts.PluginName, req, ports)
	if err != nil {
		return routesIn{}, call, err
	}
	rc, err := call.Settings.RouteClusterOf(p.opts.RouteClusters)
	if err != nil {
		return routesIn{}, call, err
	}
	where := routesIn{orch: orch}
	if rc != nil {
		where = routesIn{cluster: rc.Name}
		if c := clusters[rc.Name]; c != nil && c.err != nil {
			return routesIn{}, call, c.err
		} else if c != nil {
			where.orch = c.orch
		}
	}
	if where.orch == nil && req.Method != decode.VerifyWeight {
		err = errNoClient
	}
	return where, call, err
}

// routesIn is where a call's routes are: the orchestrator of their cluster,
// and the route cluster's name ("" for the controller's own cluster).
type routesIn struct {
	orch    *orchestrator.Orchestrator
	cluster string
}

// about names the route cluster in err, if the routes are in one.
func (w routesIn) about(err error) error {
	if err == nil || w.cluster == "" {
		return err
	}
	return fmt.Errorf("in route cluster %q: %w", w.cluster, err)
}

var errNoClient = errors.New("the plugin has no Kubernetes client: InitPlugin failed or was not called")

// fail logs and returns an RpcError that names the Rollout and the call,
// records it on the Rollout as a Warning Event, and ends the call's meter.
func (p *Plugin) fail(ro *v1alpha1.Rollout, req decode.Request, m *callMeter, err error) types.RpcError {
	m.end(err)
	call := req.Name()
	msg := fmt.Sprintf("rollout %s/%s: %s: %s", ro.Namespace, ro.Name, call, strings.ReplaceAll(err.Error(), "\n", "; "))
	p.log.WithFields(logrus.Fields{"rollout": ro.Namespace + "/" + ro.Name, "call": call}).Error(err.Error())
	p.rolloutEvents().Failed(rolloutRef(ro), string(req.Method), msg, err)
	return types.RpcError{ErrorString: msg}
}

// succeeded records that the call answered without an error: on the
// Rollout, once, if the last such call failed; and ends the call's meter.
func (p *Plugin) succeeded(ro *v1alpha1.Rollout, req decode.Request, m *callMeter) {
	m.end(nil)
	p.rolloutEvents().Succeeded(rolloutRef(ro), string(req.Method), req.Name())
}

// rolloutEvents is what records Events on the Rollouts (nil before
// InitPlugin: nothing).
func (p *Plugin) rolloutEvents() *events.Rollouts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rollouts
}

// rolloutRef is the Rollout as Events name it.
func rolloutRef(ro *v1alpha1.Rollout) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Rollout", Namespace: ro.Namespace, Name: ro.Name, UID: ro.UID}
}

// recoverInto turns a panic into an RpcError naming the Rollout (nil for
// InitPlugin) and the call: a panic crossing the RPC boundary would kill the
// plugin process under the controller. It ends the call's meter (nil for
// InitPlugin) with the panic.
func (p *Plugin) recoverInto(ro *v1alpha1.Rollout, call string, m *callMeter, resp *types.RpcError) {
	r := recover()
	if r == nil {
		return
	}
	m.end(events.Panic{Value: r})
	where := call
	if ro != nil {
		where = fmt.Sprintf("rollout %s/%s: %s", ro.Namespace, ro.Name, call)
	}
	p.log.WithField("call", where).Errorf("panic: %v\n%s", r, debug.Stack())
	*resp = types.RpcError{ErrorString: fmt.Sprintf("%s: internal error in the plugin: %v (please report it); the call is safe to repeat", where, r)}
	if ro != nil {
		method, _, _ := strings.Cut(call, "(")
		p.rolloutEvents().Failed(rolloutRef(ro), method, resp.ErrorString, events.Panic{Value: r})
	}
}
