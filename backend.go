package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/gatewayapi-ssa/rollouts-plugin/cleanup"
	"github.com/gatewayapi-ssa/rollouts-plugin/events"
	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/kubeclient"
	"github.com/gatewayapi-ssa/rollouts-plugin/metrics"
	"github.com/gatewayapi-ssa/rollouts-plugin/orchestrator"
	"github.com/gatewayapi-ssa/rollouts-plugin/peers"
	"github.com/gatewayapi-ssa/rollouts-plugin/plugin"
	"github.com/gatewayapi-ssa/rollouts-plugin/retry"
	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
	"github.com/gatewayapi-ssa/rollouts-plugin/ssa"
)

// The plugin's backend, built when the controller calls InitPlugin: the
// clients, watch caches, Leases and orchestrator of the controller's
// cluster and of each route cluster, the Events recorders, the cleanup
// sweeps and what the metrics watch. Package plugin adapts the calls; this
// is where they are carried out.

// userAgent identifies the plugin's requests to the apiserver.
const userAgent = "rollouts-gatewayapi-ssa"

// wiring is what the backend is built from (the flags).
type wiring struct {
	FieldManager string
	QPS          float32
	Burst        int
	Retry        retry.Requests
	// WritesPerCall bounds the routes one call works on at once; Routes
	// (shared by every cluster's orchestrator) all calls of the process.
	WritesPerCall int
	Routes        orchestrator.Slots
	CallTimeout   time.Duration
	// CleanupInterval, when set, sweeps the claims of deleted Rollouts.
	CleanupInterval time.Duration
	// PeersNamespace holds the plugin's Leases; Identity names the process.
	PeersNamespace, Identity string
	RouteClusters            []rollout.RouteCluster
	RouteEvents              bool
	ClusterName              string
	AnyNamespace             bool
	WatchCacheIdle           time.Duration
	Metrics                  *metrics.Metrics
}

// backend is plugin.Backend.
type backend struct {
	w   wiring
	log *logrus.Entry
	// own is the controller's cluster; routeClusters the others, by name.
	own           *cluster
	routeClusters map[string]*cluster
	rollouts      *events.Rollouts
	// naming reaches the controller's cluster to name it, once: member
	// holds it from then on.
	naming rest.Interface
	// services reads the Services of the controller's cluster, which hold
	// the experiments' ports whatever cluster holds the routes.
	services kube.Services
	mu       sync.Mutex
	member   rollout.Member
}

// cluster is what the plugin reads and writes one cluster's routes with:
// its own watch caches, writer and Leases. err says why a route cluster
// cannot be used (its kubeconfig): every call that names it fails with it,
// and no other call.
type cluster struct {
	reader *kube.Cluster
	dyn    dynamic.Interface
	peers  *peers.Peers
	orch   *orchestrator.Orchestrator
	// namespaces are the namespaces Rollouts may reach in a route cluster
	// (-route-namespaces).
	namespaces []string
	err        error
	// requests count the requests of the cluster's clients (metrics).
	requests *kubeclient.Requests
}

// connect builds the backend: in-cluster config, else KUBECONFIG (or
// ~/.kube/config), else an error saying neither is there. It sends no
// request; the first calls do.
func connect(w wiring, log *logrus.Entry) (plugin.Backend, error) {
	cfg, err := kubeclient.Config()
	if err != nil {
		return nil, err
	}
	b := &backend{w: w, log: log, routeClusters: map[string]*cluster{}}
	own, rec, err := b.connectCluster(cfg, log)
	if err != nil {
		return nil, err
	}
	b.own, b.rollouts = own, events.NewRollouts(rec) // the Rollouts are in the controller's cluster
	w.Metrics.Watch("", own.watched(rec))
	for _, rc := range w.RouteClusters {
		rlog := log.WithFields(logrus.Fields{"routeCluster": rc.Name, "kubeconfig": rc.Kubeconfig})
		c, rec, err := b.connectRouteCluster(rc, rlog)
		if err != nil {
			c = &cluster{err: fmt.Errorf("route cluster %q cannot be used: %w; fix -route-cluster %s=%s in the plugin's args and restart the controller",
				rc.Name, err, rc.Name, rc.Kubeconfig)}
			rlog.Error(c.err.Error())
		} else {
			w.Metrics.Watch(rc.Name, c.watched(rec))
			rlog.WithField("namespaces", strings.Join(rc.Namespaces, ",")).Info("route cluster ready")
		}
		b.routeClusters[rc.Name] = c
	}
	b.startSweeps()
	log.WithFields(logrus.Fields{"host": cfg.Host, "fieldManager": w.FieldManager}).Info("plugin initialized")
	return b, nil
}

// connectRouteCluster builds the clients of a route cluster from its
// kubeconfig, as connectCluster does for the controller's own.
func (b *backend) connectRouteCluster(rc rollout.RouteCluster, log *logrus.Entry) (*cluster, *events.Recorder, error) {
	cfg, err := kubeclient.ConfigFromFile(rc.Kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	c, rec, err := b.connectCluster(cfg, log)
	if c != nil {
		c.namespaces = rc.Namespaces
	}
	return c, rec, err
}

// connectCluster builds the clients, watch caches, Leases, Events recorder
// and orchestrator of one cluster. The Events about the routes are
// recorded in the routes' cluster.
func (b *backend) connectCluster(cfg *rest.Config, log *logrus.Entry) (*cluster, *events.Recorder, error) {
	cfg.QPS, cfg.Burst = b.w.QPS, b.w.Burst
	cfg.UserAgent = userAgent
	clients, err := kubeclient.NewClients(cfg, b.w.Retry, log)
	if err != nil {
		return nil, nil, err
	}
	rec, err := events.NewRecorder(cfg, events.Options{Controller: b.w.FieldManager, Instance: b.w.Identity}, log)
	if err != nil {
		return nil, nil, err
	}
	if b.naming == nil { // the first cluster is the controller's
		b.naming = clients.Gateway.GatewayV1().RESTClient()
		b.services = kube.DynamicServices{Dynamic: clients.Dynamic}
	}
	reader := kube.NewCluster(clients.Gateway.GatewayV1().RESTClient(), log)
	reader.StopIdleCaches(b.w.WatchCacheIdle)
	pp := peers.Start(clients.Leases, peers.Options{Namespace: b.w.PeersNamespace, FieldManager: b.w.FieldManager, Identity: b.w.Identity}, log)
	var exclusion orchestrator.Exclusion
	if pp != nil {
		exclusion = pp
	}
	var routeEvents orchestrator.RouteEvents
	if b.w.RouteEvents {
		routeEvents = events.NewRoutes(rec)
	}
	writer := ssa.NewWriter(clients.Gateway, clients.Dynamic, b.w.FieldManager, log).ReviewingAccess(clients.Reviews)
	orch := orchestrator.New(reader, writer, exclusion, routeEvents, log, orchestrator.Bounds{
		WritesPerCall: b.w.WritesPerCall, Routes: b.w.Routes, CallTimeout: b.w.CallTimeout,
	}).ReadServicesWith(b.services) // an experiment's Services are where its Rollout is
	c := &cluster{reader: reader, dyn: clients.Dynamic, peers: pp, orch: orch}
	c.requests = clients.Requests
	return c, rec, nil
}

// watched is what the metrics read of a cluster.
func (c *cluster) watched(rec *events.Recorder) metrics.Cluster {
	return metrics.Cluster{Requests: c.requests, Reader: c.reader, Writes: c.orch, Logged: c.orch, Events: rec, Peers: c.peers}
}

// Orchestrators are the orchestrators of the controller's cluster and of
// each route cluster, or why a route cluster cannot be used (its
// kubeconfig).
func (b *backend) Orchestrators() plugin.Orchestrators {
	o := plugin.Orchestrators{Own: b.own.orch, RouteClusters: map[string]*orchestrator.Orchestrator{}, Unusable: map[string]error{}}
	for name, c := range b.routeClusters {
		if c.err != nil {
			o.Unusable[name] = c.err
		} else {
			o.RouteClusters[name] = c.orch
		}
	}
	return o
}

// Rollouts records Events on the Rollouts.
func (b *backend) Rollouts() *events.Rollouts { return b.rollouts }

// Member names the controller's cluster for the claims on the routes of
// route clusters (kube.NameCluster), at the first call there, once: until
// a name is found, every such call asks again. Calls on the cluster's own
// routes need no name, nor its permissions.
func (b *backend) Member(ctx context.Context) (rollout.Member, error) {
	b.mu.Lock()
	m := b.member
	b.mu.Unlock()
	if m.Name != "" {
		return m, nil
	}
	n, err := kube.NameCluster(ctx, b.naming, b.w.ClusterName, func(msg string) { b.log.Warn(msg) })
	if err != nil {
		return rollout.Member{}, err
	}
	m = rollout.Member{Name: n.Name, UID: n.UID, Source: n.Source}
	b.mu.Lock()
	b.member = m
	b.mu.Unlock()
	b.log.WithFields(logrus.Fields{"cluster": n.Name, "from": n.Source, "kubeSystemUID": n.UID}).Info("claims on the routes of route clusters name this cluster")
	return m, nil
}

// Close stops what the backend keeps running: it deletes its Leases
// (package peers), so that the plugin's other processes need not wait for
// them to go stale, and stops the watch caches.
func (b *backend) Close(ctx context.Context) {
	for _, c := range append([]*cluster{b.own}, slices.Collect(maps.Values(b.routeClusters))...) {
		if c.peers != nil {
			c.peers.Stop(ctx)
		}
		if c.reader != nil {
			c.reader.Close()
		}
	}
}

// startSweeps starts, if the plugin was asked to, the cleanup of deleted
// Rollouts' claims: on the routes of the controller's cluster at once, and
// on those of each route cluster (there within -route-namespaces) once the
// cluster has a name, each taking back only this cluster's claims.
func (b *backend) startSweeps() {
	if b.w.CleanupInterval <= 0 {
		return
	}
	own := &cleanup.Cleaner{Dynamic: b.own.dyn, Versions: b.own.reader, Orchestrator: b.own.orch, FieldManager: b.w.FieldManager,
		IgnoreReferenceGrants: b.w.AnyNamespace, Log: b.log}
	go (&cleanup.Sweeper{Cleaner: own, Interval: b.w.CleanupInterval}).Run(kubeclient.ForSweeps(context.Background())) // its own share of the rate
	var shared []*cleanup.Sweeper
	for name, rc := range b.routeClusters {
		if rc.err != nil {
			continue
		}
		c := *own
		c.Dynamic, c.Rollouts, c.Versions, c.Orchestrator, c.SharedRoutes = rc.dyn, b.own.dyn, rc.reader, rc.orch, true
		c.Log = b.log.WithField("routeCluster", name)
		var namespaces []string
		if !slices.Contains(rc.namespaces, rollout.AnyNamespace) {
			namespaces = rc.namespaces
		}
		shared = append(shared, &cleanup.Sweeper{Cleaner: &c, Interval: b.w.CleanupInterval, Namespaces: namespaces})
	}
	if len(shared) > 0 {
		go b.sweep(shared)
	}
	b.log.WithFields(logrus.Fields{"interval": b.w.CleanupInterval.String(), "routeClusters": len(shared)}).Info("undoing the claims of deleted Rollouts")
}

// sweep runs the sweepers of the route clusters once the cluster has a
// name, asking again every interval until it has.
func (b *backend) sweep(sweepers []*cleanup.Sweeper) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), b.w.CallTimeout)
		m, err := b.Member(ctx)
		cancel()
		if err == nil {
			for _, s := range sweepers {
				s.Cleaner.Cluster, s.Cleaner.ClusterUID = m.Name, m.UID
				go s.Run(kubeclient.ForSweeps(context.Background())) // their own share of the rate
			}
			return
		}
		b.log.WithError(err).Warn("cleanup sweep of the route clusters: waiting for a name of this cluster, which its claims there carry")
		time.Sleep(b.w.CleanupInterval)
	}
}
