package cluster

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

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
	// GatewayListener is the Gateway's one listener (HTTP, routes from every namespace).
	GatewayListener = "web"
)

var (
	gatewayClassGVR = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gatewayclasses"}
	gatewayGVR      = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"}
)

// startTraefik starts Traefik out of cluster with its Gateway API provider,
// its entrypoint "web" on a free port of 127.0.0.1, and creates the
// GatewayClass and the Gateway whose listener has that port (Traefik matches
// listeners to entrypoints by port). It waits until Traefik reports the
// Gateway Programmed. Traefik runs with its default settings otherwise (the
// 2 s providers throttle included): the plugin's VerifyWeight must be right
// on a Traefik as users run it.
func (c *Cluster) startTraefik(assets string) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	web, admin := ports[0], ports[1]
	p, err := c.start("traefik", filepath.Join(assets, "traefik"), []string{
		"--global.checkNewVersion=false",
		"--global.sendAnonymousUsage=false",
		"--entryPoints.web.address=127.0.0.1:" + strconv.Itoa(web),
		// /ping and the API (no dashboard: a build from the module proxy has none) on loopback.
		"--entryPoints.traefik.address=127.0.0.1:" + strconv.Itoa(admin),
		"--ping=true",
		"--api.insecure=true",
		"--api.dashboard=false",
		"--providers.kubernetesgateway=true",
		"--providers.kubernetesgateway.statusaddress.ip=127.0.0.1",
		"--log.level=INFO",
	}, []string{"KUBECONFIG=" + c.Kubeconfig}, c.Dir, nil)
	if err != nil {
		return err
	}
	if err := waitHealthy(p, fmt.Sprintf("http://127.0.0.1:%d/ping", admin), 90*time.Second); err != nil {
		return err
	}
	c.Entrypoint = net.JoinHostPort("127.0.0.1", strconv.Itoa(web))
	c.TraefikAPI = fmt.Sprintf("http://127.0.0.1:%d/api", admin)
	if c.Meter, err = traffic.NewMeter(c.Entrypoint); err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	class := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
		"metadata": map[string]any{"name": GatewayClassName},
		"spec":     map[string]any{"controllerName": TraefikController},
	}}
	if _, err := c.Dynamic.Resource(gatewayClassGVR).Create(ctx, class, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating GatewayClass %s: %w", GatewayClassName, err)
	}
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: GatewayNamespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	gw := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": GatewayName, "namespace": GatewayNamespace},
		"spec": map[string]any{
			"gatewayClassName": GatewayClassName,
			"listeners": []any{map[string]any{
				"name": GatewayListener, "protocol": "HTTP", "port": int64(web),
				"allowedRoutes": map[string]any{"namespaces": map[string]any{"from": "All"}},
			}},
		},
	}}
	if _, err := c.Dynamic.Resource(gatewayGVR).Namespace(GatewayNamespace).Create(ctx, gw, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Gateway %s/%s: %w", GatewayNamespace, GatewayName, err)
	}
	err = c.Await(ctx, 90*time.Second, func() (string, error) {
		u, err := c.Dynamic.Resource(gatewayGVR).Namespace(GatewayNamespace).Get(ctx, GatewayName, metav1.GetOptions{})
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
		return err
	}
	// What Traefik publishes: the plugin checks steps against it
	// (docs/gateway-features.md quotes this line).
	u, err := c.Dynamic.Resource(gatewayClassGVR).Get(ctx, GatewayClassName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	features, _, _ := unstructured.NestedSlice(u.Object, "status", "supportedFeatures")
	var names []string
	for _, f := range features {
		if m, ok := f.(map[string]any); ok {
			names = append(names, fmt.Sprint(m["name"]))
		}
	}
	c.printf("GatewayClass %s publishes %d supportedFeatures: %s\n", GatewayClassName, len(names), strings.Join(names, ", "))
	return nil
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
