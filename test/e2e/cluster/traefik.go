package cluster

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/traffic"
)

// The gateway every traffic scenario's route attaches to.
const (
	// GatewayNamespace and GatewayName name the Gateway Traefik serves.
	GatewayNamespace = "gateway"
	GatewayName      = "traefik"
	// GatewayClassName is the GatewayClass Traefik's provider claims.
	GatewayClassName = "traefik"
	// TraefikController is the controllerName Traefik writes into route
	// status.parents (and claims GatewayClasses by).
	TraefikController = "traefik.io/gateway-controller"
	// GatewayListener is the Gateway's HTTP listener (routes from every namespace).
	GatewayListener = "web"
)

var (
	gatewayClassGVR = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gatewayclasses"}
	gatewayGVR      = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"}
)

// Listener is one listener of the Gateway and the Traefik entrypoint of the
// same name and port (Traefik matches listeners to entrypoints by port).
type Listener struct {
	// Name is the listener's name (sectionName in routes) and the entrypoint's.
	Name string
	// Protocol is the listener's protocol: HTTP, TCP, or TLS (passthrough).
	Protocol string
	// Port is a free port of 127.0.0.1.
	Port int
	// Flags are more of Traefik's flags for this entrypoint, without the
	// "--entryPoints.<name>." prefix (e.g. "transport.respondingTimeouts.readTimeout=0").
	Flags []string
}

// Traefik is a running Traefik and what it serves.
type Traefik struct {
	// Entrypoints are the listeners' addresses on 127.0.0.1 (host:port), by name.
	Entrypoints map[string]string
	// API is Traefik's API (rawdata, for a person looking into a failure).
	API string
	// Features are the supportedFeatures Traefik published on the GatewayClass.
	Features []string
	proc     *proc
}

// TraefikSpec says how to run a Traefik against a cluster: its kubeconfig
// and a client of the same cluster (for the GatewayClass and Gateway), the
// listeners with their ports, and Traefik's flags beyond those StartTraefik
// always sets. Nothing in it is tied to one cluster: a second cluster gets a
// Traefik of its own from the same function.
type TraefikSpec struct {
	// Name names the process and its log (logs/<Name>.log).
	Name       string
	Kubeconfig string
	Dynamic    dynamic.Interface
	// AdminPort is a free port of 127.0.0.1 for /ping and the API.
	AdminPort int
	Listeners []Listener
	// Flags are Traefik's other flags.
	Flags []string
}

// StartTraefik starts Traefik (the binary in assets) out of cluster with its
// Gateway API provider on spec's cluster and one entrypoint per listener on
// 127.0.0.1, creates the GatewayClass traefik and the Gateway gateway/traefik
// with those listeners (routes from every namespace), and waits until Traefik
// reports the Gateway Programmed. Traefik keeps its defaults otherwise (the
// 2 s providers throttle included): the plugin's VerifyWeight must be right
// on a Traefik as users run it.
func (c *Cluster) StartTraefik(assets string, spec TraefikSpec) (*Traefik, error) {
	args := []string{
		"--global.checkNewVersion=false",
		"--global.sendAnonymousUsage=false",
		// /ping and the API (no dashboard: a build from the module proxy has none) on loopback.
		"--entryPoints.traefik.address=127.0.0.1:" + strconv.Itoa(spec.AdminPort),
		"--ping=true",
		"--api.insecure=true",
		"--api.dashboard=false",
		"--providers.kubernetesgateway=true",
		"--providers.kubernetesgateway.statusaddress.ip=127.0.0.1",
		"--log.level=INFO",
	}
	t := &Traefik{Entrypoints: map[string]string{}, API: fmt.Sprintf("http://127.0.0.1:%d/api", spec.AdminPort)}
	var listeners []any
	for _, l := range spec.Listeners {
		args = append(args, fmt.Sprintf("--entryPoints.%s.address=127.0.0.1:%d", l.Name, l.Port))
		for _, f := range l.Flags {
			args = append(args, fmt.Sprintf("--entryPoints.%s.%s", l.Name, f))
		}
		t.Entrypoints[l.Name] = net.JoinHostPort("127.0.0.1", strconv.Itoa(l.Port))
		listener := map[string]any{
			"name": l.Name, "protocol": l.Protocol, "port": int64(l.Port),
			"allowedRoutes": map[string]any{"namespaces": map[string]any{"from": "All"}},
		}
		if l.Protocol == "TLS" {
			listener["tls"] = map[string]any{"mode": "Passthrough"}
		}
		listeners = append(listeners, listener)
	}
	p, err := c.start(spec.Name, filepath.Join(assets, "traefik"), append(args, spec.Flags...), []string{"KUBECONFIG=" + spec.Kubeconfig}, c.Dir, nil)
	if err != nil {
		return nil, err
	}
	t.proc = p
	if err := waitHealthy(p, fmt.Sprintf("http://127.0.0.1:%d/ping", spec.AdminPort), 90*time.Second); err != nil {
		return nil, err
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	class := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
		"metadata": map[string]any{"name": GatewayClassName},
		"spec":     map[string]any{"controllerName": TraefikController},
	}}
	if _, err := spec.Dynamic.Resource(gatewayClassGVR).Create(ctx, class, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating GatewayClass %s: %w", GatewayClassName, err)
	}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": GatewayNamespace}}}
	if _, err := spec.Dynamic.Resource(corev1.SchemeGroupVersion.WithResource("namespaces")).Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	gw := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": GatewayName, "namespace": GatewayNamespace},
		"spec":     map[string]any{"gatewayClassName": GatewayClassName, "listeners": listeners},
	}}
	if _, err := spec.Dynamic.Resource(gatewayGVR).Namespace(GatewayNamespace).Create(ctx, gw, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating Gateway %s/%s: %w", GatewayNamespace, GatewayName, err)
	}
	err = c.Await(ctx, 90*time.Second, func() (string, error) {
		u, err := spec.Dynamic.Resource(gatewayGVR).Namespace(GatewayNamespace).Get(ctx, GatewayName, metav1.GetOptions{})
		if err != nil {
			return err.Error(), nil
		}
		if conditionTrue(u, "Programmed") {
			return "", nil
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		return fmt.Sprintf("Gateway %s/%s not Programmed by Traefik yet: %v (see %s)", GatewayNamespace, GatewayName, conds, p.logPath), nil
	})
	if err != nil {
		return nil, err
	}
	// What Traefik publishes: the plugin checks steps against it
	// (docs/gateway-features.md quotes this line).
	u, err := spec.Dynamic.Resource(gatewayClassGVR).Get(ctx, GatewayClassName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	features, _, _ := unstructured.NestedSlice(u.Object, "status", "supportedFeatures")
	for _, f := range features {
		if m, ok := f.(map[string]any); ok {
			t.Features = append(t.Features, fmt.Sprint(m["name"]))
		}
	}
	slices.Sort(t.Features)
	c.printf("GatewayClass %s publishes %d supportedFeatures: %s\n", GatewayClassName, len(t.Features), strings.Join(t.Features, ", "))
	return t, nil
}

// The listeners of the Gateway of Start's cluster, beside GatewayListener
// ("web", HTTP, Traefik's defaults).
const (
	// GRPCListener is an HTTP listener for GRPCRoutes, whose entrypoint has no
	// read timeout: Traefik's default (60 s) ends every gRPC stream at 60 s,
	// since Go's HTTP/2 server applies it to each stream (docs/performance/traffic.md).
	GRPCListener = "grpc"
	// TLSListener is a TLS listener in Passthrough mode, for TLSRoutes (by SNI).
	TLSListener = "tls"
)

// TCPListeners are the TCP listeners, one per TCPRoute: Traefik gives a
// TCPRoute the catch-all rule HostSNI(*) on its listener, so two TCPRoutes
// cannot share one.
var TCPListeners = []string{"tcp-canary", "tcp-pingpong", "tcp-contrast", "tcp-demo"}

// startTraefik starts the cluster's Traefik: GatewayListener (HTTP, Traefik's
// defaults), GRPCListener, TLSListener and the TCPListeners, each on a free
// port of 127.0.0.1; the experimental channel on, for TCPRoute.
func (c *Cluster) startTraefik(assets string) error {
	names := append([]string{GatewayListener, GRPCListener, TLSListener}, TCPListeners...)
	ports, err := freePorts(len(names) + 1)
	if err != nil {
		return err
	}
	var listeners []Listener
	for i, name := range names {
		l := Listener{Name: name, Protocol: "TCP", Port: ports[i+1]}
		switch name {
		case GatewayListener:
			l.Protocol = "HTTP"
		case GRPCListener:
			l.Protocol, l.Flags = "HTTP", []string{"transport.respondingTimeouts.readTimeout=0"}
		case TLSListener:
			l.Protocol = "TLS"
		}
		listeners = append(listeners, l)
	}
	t, err := c.StartTraefik(assets, TraefikSpec{
		Name: "traefik", Kubeconfig: c.Kubeconfig, Dynamic: c.Dynamic, AdminPort: ports[0], Listeners: listeners,
		// TCPRoute is read only with the experimental channel (at v1alpha2).
		Flags: []string{"--providers.kubernetesgateway.experimentalChannel=true"},
	})
	if err != nil {
		return err
	}
	c.Traefik = t
	c.Entrypoint, c.TraefikAPI = t.Entrypoints[GatewayListener], t.API
	c.Meter, err = traffic.NewMeter(c.Entrypoint)
	return err
}

// conditionTrue says whether status.conditions has the type with status True
// for the object's current generation.
func conditionTrue(u *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		gen, _, _ := unstructured.NestedInt64(m, "observedGeneration")
		if m["type"] == typ && m["status"] == "True" && gen == u.GetGeneration() {
			return true
		}
	}
	return false
}

// startDataPlane creates the network namespace the backends live in and the
// Meter that sends requests to Traefik's entrypoint.
func (c *Cluster) startDataPlane() error {
	ns, err := traffic.CreateNetns()
	if err != nil {
		return err
	}
	c.netns = ns
	c.Backends = traffic.NewBackends(ns, c.Kube)
	c.printf("backends in network namespace %s (%s)\n", ns.Name, ns.Subnet)
	return nil
}
