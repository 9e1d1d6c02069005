package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/traffic"
)

// RouteClusterName is the name the plugin is given the route cluster by
// (-route-cluster), which Rollouts name with their config key "cluster".
const RouteClusterName = "config"

// RouteCluster is a second cluster that holds routes for the Rollouts of the
// first, as a fleet's config cluster does (GKE multi-cluster Gateways, a
// Cilium ClusterMesh): its own etcd and kube-apiserver with the Gateway API
// CRDs, a Traefik of its own, and Services whose EndpointSlices point at
// backends in the run's network namespace, as a ClusterMesh global service's
// point at the pods of another cluster. The plugin, in the first cluster's
// controller, reaches it with an admin kubeconfig and may write routes in
// every namespace there.
type RouteCluster struct {
	Kubeconfig string
	Kube       kubernetes.Interface
	Dynamic    dynamic.Interface
	Traefik    *Traefik
	// Backends serve the route cluster's Services (their EndpointSlices are
	// written there).
	Backends *traffic.Backends
	// Meter sends requests to the route cluster's Traefik.
	Meter *traffic.Meter
	env   *envtest.Environment
}

// startRouteControlPlane starts the route cluster's etcd and kube-apiserver
// with the Gateway API CRDs of the first cluster, and writes its admin
// kubeconfig.
func (c *Cluster) startRouteControlPlane(assets string) error {
	crds, err := gatewayCRDs()
	if err != nil {
		return err
	}
	etcdLog, err := c.openLog("etcd-" + RouteClusterName)
	if err != nil {
		return err
	}
	apiLog, err := c.openLog("kube-apiserver-" + RouteClusterName)
	if err != nil {
		return err
	}
	pki := filepath.Join(c.Dir, "pki-"+RouteClusterName)
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return err
	}
	api := &envtest.APIServer{CertDir: pki, Out: apiLog, Err: apiLog}
	api.Configure().Set("endpoint-reconciler-type", "none")
	rc := &RouteCluster{env: &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDs:                  crds,
		ErrorIfCRDPathMissing: true,
		ControlPlane: envtest.ControlPlane{
			APIServer: api,
			Etcd:      &envtest.Etcd{Out: etcdLog, Err: etcdLog},
		},
		ControlPlaneStartTimeout: 90 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
	}}
	c.RouteCluster = rc
	if _, err := rc.env.Start(); err != nil {
		return fmt.Errorf("starting the route cluster's etcd and kube-apiserver: %w", err)
	}
	admin, err := rc.env.AddUser(envtest.User{Name: "e2e-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		return err
	}
	rc.Kubeconfig = filepath.Join(c.Dir, "kubeconfig-"+RouteClusterName)
	if err := os.WriteFile(rc.Kubeconfig, kc, 0o600); err != nil {
		return err
	}
	cfg := admin.Config()
	cfg.QPS, cfg.Burst = 200, 400
	rc.Kube = kubernetes.NewForConfigOrDie(cfg)
	rc.Dynamic = dynamic.NewForConfigOrDie(cfg)
	// The plugin may write routes in every namespace of the route cluster.
	c.pluginArgs = append(c.pluginArgs, "-route-cluster="+RouteClusterName+"="+rc.Kubeconfig, "-route-namespaces="+RouteClusterName+"=*")
	return nil
}

// startRouteDataPlane starts the route cluster's Traefik (one HTTP
// listener, GatewayListener) and its backends, in the run's network
// namespace.
func (c *Cluster) startRouteDataPlane(assets string) error {
	rc := c.RouteCluster
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	t, err := c.StartTraefik(assets, TraefikSpec{
		Name: "traefik-" + RouteClusterName, Kubeconfig: rc.Kubeconfig, Dynamic: rc.Dynamic, AdminPort: ports[0],
		Listeners: []Listener{{Name: GatewayListener, Protocol: "HTTP", Port: ports[1]}},
		Flags:     []string{"--providers.kubernetesgateway.experimentalChannel=true"},
	})
	if err != nil {
		return fmt.Errorf("route cluster %s: %w", RouteClusterName, err)
	}
	rc.Traefik = t
	rc.Backends = traffic.NewBackends(c.netns, rc.Kube)
	rc.Meter, err = traffic.NewMeter(t.Entrypoints[GatewayListener])
	return err
}

// stop stops what the route cluster runs beside its Traefik (Stop stops
// that with the other processes).
func (rc *RouteCluster) stop(name string) {
	if rc.Meter != nil {
		rc.Meter.Close()
	}
	if rc.Backends != nil {
		rc.Backends.Close()
	}
	if err := rc.env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: stopping the route cluster's etcd and kube-apiserver: %v\n", name, err)
	}
}
