package traffic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// BackendHeader is the response header in which a backend names its Service.
const BackendHeader = "X-Backend"

// BackendPort is the port every backend listens on (each on an address of
// its own): the Services' targetPort, and the container port from which the
// Experiment controller makes its Services' ports.
const BackendPort = 8080

// ManagedBy is the EndpointSlices' endpointslice.kubernetes.io/managed-by
// label: kube-controller-manager's EndpointSlice controller leaves them alone.
const ManagedBy = "e2e.gatewayapi-ssa.dev"

// Backends runs one HTTP server per Service inside a Netns and keeps the
// Service's EndpointSlice pointing at it.
type Backends struct {
	netns *Netns
	kube  kubernetes.Interface

	mu      sync.Mutex
	servers []*server
	closed  bool
}

// NewBackends serves backends in netns and writes their EndpointSlices with kube.
func NewBackends(netns *Netns, kube kubernetes.Interface) *Backends {
	return &Backends{netns: netns, kube: kube}
}

// Backend is one Service's endpoint: the Service it answers for and the
// port of the Service it is reached through.
type Backend struct {
	Namespace, Service string
	// PortName is the name of the Service's port (the EndpointSlice's port
	// must have the same name); "" for an unnamed port, as the Experiment
	// controller makes them from an unnamed container port.
	PortName string
	// Protocol is what the backend speaks (default HTTP).
	Protocol Protocol
	// Host is the name in a TLS backend's certificate (the route's hostname).
	Host string
}

// Serve starts a server for b (speaking b.Protocol) on a new address of the namespace and creates
// the EndpointSlice <service>-e2e that makes it the Service's only, ready
// endpoint. The Service itself may come later (the Experiment controller
// creates its own). It returns the address the server listens on.
func (bs *Backends) Serve(ctx context.Context, b Backend) (netip.AddrPort, error) {
	addr, err := bs.netns.NewAddress()
	if err != nil {
		return netip.AddrPort{}, err
	}
	ap := netip.AddrPortFrom(addr, BackendPort)
	if _, err := bs.start(ap, b.Protocol, b.Service, b.Host); err != nil {
		return netip.AddrPort{}, err
	}

	slice := endpointSlice(b, ap)
	if _, err := bs.kube.DiscoveryV1().EndpointSlices(b.Namespace).Create(ctx, slice, metav1.CreateOptions{FieldManager: "e2e-backends"}); err != nil {
		return netip.AddrPort{}, fmt.Errorf("creating EndpointSlice %s/%s for Service %s: %w", b.Namespace, slice.Name, b.Service, err)
	}
	return ap, nil
}

// start serves proto at ap inside the namespace, answering as name.
func (bs *Backends) start(ap netip.AddrPort, proto Protocol, name, host string) (*server, error) {
	l, err := bs.netns.Listen(ap)
	if err != nil {
		return nil, err
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if bs.closed {
		l.Close()
		return nil, errors.New("the backends are stopped")
	}
	srv, err := startServer(l, proto, name, host)
	if err != nil {
		return nil, err
	}
	bs.servers = append(bs.servers, srv)
	return srv, nil
}

// answer is a backend: every request gets 200, the Service's name in
// BackendHeader and in the body.
func answer(service string) http.Handler {
	body := []byte(service + "\n")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(BackendHeader, service)
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(body)
	})
}

// endpointSlice is what kube-controller-manager would write for one ready
// pod at ap: the Service's name in kubernetes.io/service-name, the port
// named as the Service's port.
func endpointSlice(b Backend, ap netip.AddrPort) *discoveryv1.EndpointSlice {
	ready, proto := true, corev1.ProtocolTCP
	port, name := int32(ap.Port()), b.PortName
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:      b.Service + "-e2e",
			Namespace: b.Namespace,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: b.Service,
				discoveryv1.LabelManagedBy:   ManagedBy,
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{ap.Addr().String()},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &ready},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
	}
}

// Close stops every server (their addresses go with the namespace).
func (bs *Backends) Close() {
	bs.mu.Lock()
	servers := bs.servers
	bs.servers, bs.closed = nil, true
	bs.mu.Unlock()
	for _, s := range servers {
		s.stop()
	}
}
