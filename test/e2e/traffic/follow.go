package traffic

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// podHashLabel is the label by which a pod belongs to a ReplicaSet of a
// Rollout (Argo Rollouts adds it to the stable and canary Services' selectors).
const podHashLabel = "rollouts-pod-template-hash"

// Follower stands in for kube-controller-manager's EndpointSlice controller
// and for the pods themselves in one namespace: one backend per ReplicaSet
// (pods with the same rollouts-pod-template-hash), started when the first of
// its pods is Ready and stopped, with every connection it holds, when none is
// left (the ReplicaSet scaled down: its pods went away), named after the
// pods' image tag; and for every Service with a selector, an EndpointSlice
// <service>-e2e listing the backends of the ReplicaSets whose Ready pods the
// selector picks. So a Service's selector change moves its endpoints, as in
// a cluster, and a ReplicaSet's end ends its connections.
type Follower struct {
	bs     *Backends
	ns     string
	proto  Protocol
	stopCh chan struct{}
	kick   chan struct{}
	done   chan struct{}

	mu       sync.Mutex
	backends map[string]*rsBackend // by pod-template-hash
	slices   map[string]string     // Service → the addresses last written
	changes  map[string][]EndpointsChange
	log      []string
	err      error
}

type rsBackend struct {
	name    string
	addr    netip.AddrPort
	srv     *server
	started time.Time
	stopped time.Time
}

// Follow starts a Follower for namespace ns whose backends speak proto.
func (bs *Backends) Follow(ctx context.Context, ns string, proto Protocol) (*Follower, error) {
	f := &Follower{bs: bs, ns: ns, proto: proto, stopCh: make(chan struct{}), kick: make(chan struct{}, 1), done: make(chan struct{}),
		backends: map[string]*rsBackend{}, slices: map[string]string{}, changes: map[string][]EndpointsChange{}}
	factory := informers.NewSharedInformerFactoryWithOptions(bs.kube, 0, informers.WithNamespace(ns))
	pods, services := factory.Core().V1().Pods(), factory.Core().V1().Services()
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { f.poke() },
		UpdateFunc: func(any, any) { f.poke() },
		DeleteFunc: func(any) { f.poke() },
	}
	for _, inf := range []cache.SharedIndexInformer{pods.Informer(), services.Informer()} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return nil, err
		}
	}
	factory.Start(f.stopCh)
	syncCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, ok := range factory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			close(f.stopCh)
			return nil, fmt.Errorf("following pods and Services of %s: the informers did not sync", ns)
		}
	}
	go f.loop(pods.Lister().Pods(ns).List, services.Lister().Services(ns).List)
	f.poke()
	return f, nil
}

func (f *Follower) poke() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

func (f *Follower) loop(listPods func(labels.Selector) ([]*corev1.Pod, error), listServices func(labels.Selector) ([]*corev1.Service, error)) {
	defer close(f.done)
	for {
		select {
		case <-f.stopCh:
			return
		case <-f.kick:
		}
		pods, err := listPods(labels.Everything())
		if err == nil {
			var svcs []*corev1.Service
			if svcs, err = listServices(labels.Everything()); err == nil {
				err = f.reconcile(pods, svcs)
			}
		}
		if err != nil {
			f.mu.Lock()
			f.err = err
			f.mu.Unlock()
			// Try again shortly: an apiserver hiccup must not freeze the endpoints.
			go func() {
				time.Sleep(200 * time.Millisecond)
				f.poke()
			}()
		}
	}
}

func ready(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// reconcile starts and stops backends, then writes the slices.
func (f *Follower) reconcile(pods []*corev1.Pod, svcs []*corev1.Service) error {
	live := map[string]*corev1.Pod{} // hash → one Ready pod
	for _, p := range pods {
		if h := p.Labels[podHashLabel]; h != "" && ready(p) {
			live[h] = p
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for h, p := range live {
		if b := f.backends[h]; b != nil && b.stopped.IsZero() {
			continue
		}
		addr, err := f.bs.netns.NewAddress()
		if err != nil {
			return err
		}
		ap := netip.AddrPortFrom(addr, BackendPort)
		name := imageTag(p)
		srv, err := f.bs.start(ap, f.proto, name, "")
		if err != nil {
			return err
		}
		f.backends[h] = &rsBackend{name: name, addr: ap, srv: srv, started: time.Now()}
		f.logf("ReplicaSet %s (%s): backend started at %s", h, name, ap)
	}
	for h, b := range f.backends {
		if _, ok := live[h]; !ok && b.stopped.IsZero() {
			// The time first: a client may see its connection end before
			// stop returns.
			b.stopped = time.Now()
			b.srv.stop()
			f.logf("ReplicaSet %s (%s): no Ready pod left, backend stopped", h, b.name)
		}
	}
	for _, svc := range svcs {
		if len(svc.Spec.Selector) == 0 || len(svc.Spec.Ports) == 0 {
			continue
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		var addrs, names []string
		for h, p := range live {
			if sel.Matches(labels.Set(p.Labels)) {
				addrs = append(addrs, f.backends[h].addr.Addr().String())
				names = append(names, f.backends[h].name)
			}
		}
		slices.Sort(names)
		slices.Sort(addrs)
		key := strings.Join(addrs, ",")
		if prev, ok := f.slices[svc.Name]; ok && prev == key {
			continue
		}
		if err := f.writeSlice(svc, addrs); err != nil {
			return err
		}
		f.slices[svc.Name] = key
		f.changes[svc.Name] = append(f.changes[svc.Name], EndpointsChange{At: time.Now(), Backends: names})
		f.logf("Service %s: endpoints [%s]", svc.Name, key)
	}
	return nil
}

func imageTag(p *corev1.Pod) string {
	if len(p.Spec.Containers) == 0 {
		return p.Labels[podHashLabel]
	}
	img := p.Spec.Containers[0].Image
	last := img[strings.LastIndex(img, "/")+1:]
	if i := strings.LastIndex(last, ":"); i >= 0 {
		return last[i+1:]
	}
	return img
}

// writeSlice creates or updates the Service's EndpointSlice.
func (f *Follower) writeSlice(svc *corev1.Service, addrs []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	slice := endpointSlice(Backend{Namespace: f.ns, Service: svc.Name, PortName: svc.Spec.Ports[0].Name}, netip.AddrPortFrom(netip.IPv4Unspecified(), BackendPort))
	ep := slice.Endpoints[0]
	slice.Endpoints = nil
	for _, a := range addrs {
		e := ep
		e.Addresses = []string{a}
		slice.Endpoints = append(slice.Endpoints, e)
	}
	client := f.bs.kube.DiscoveryV1().EndpointSlices(f.ns)
	live, err := client.Get(ctx, slice.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = client.Create(ctx, slice, metav1.CreateOptions{FieldManager: "e2e-follower"})
	case err == nil:
		live.Endpoints = slice.Endpoints
		_, err = client.Update(ctx, live, metav1.UpdateOptions{FieldManager: "e2e-follower"})
	}
	if err != nil {
		return fmt.Errorf("EndpointSlice %s/%s: %w", f.ns, slice.Name, err)
	}
	return nil
}

func (f *Follower) logf(format string, args ...any) {
	f.log = append(f.log, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
}

// Stopped says when the backend named name (an image tag) stopped; zero
// while it runs or if there is none.
func (f *Follower) Stopped(name string) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.backends {
		if b.name == name {
			return b.stopped
		}
	}
	return time.Time{}
}

// EndpointsChange is an EndpointSlice write: when, and the backends (image
// tags) it listed.
type EndpointsChange struct {
	At       time.Time
	Backends []string
}

// Changes lists the writes of a Service's EndpointSlice, oldest first.
func (f *Follower) Changes(service string) []EndpointsChange {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.changes[service])
}

// Log is what the Follower did, one line per change, and its last error.
func (f *Follower) Log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Clone(f.log)
	if f.err != nil {
		out = append(out, "last error: "+f.err.Error())
	}
	return out
}

// Stop ends the Follower; the backends stop with the Backends.
func (f *Follower) Stop() {
	select {
	case <-f.stopCh:
	default:
		close(f.stopCh)
		<-f.done
	}
}
