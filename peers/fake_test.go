package peers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	coordinationac "k8s.io/client-go/applyconfigurations/coordination/v1"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
)

// leaseStore is an apiserver that keeps Leases of one namespace, as much of
// one as package peers uses: apply (forced, one manager per Lease), delete
// with a resourceVersion precondition, list and watch by label, every
// change a new resourceVersion. A test can hold lists back, make applies
// fail, and write Leases itself, playing another process.
type leaseStore struct {
	mu       sync.Mutex
	rv       int
	leases   map[string]*coordinationv1.Lease
	log      []watch.Event // every change, in order, for watches that start behind
	watches  map[*leaseWatch]labels.Selector
	applies  map[string]int // attempts, by Lease
	lists    int
	applyErr error
	// holdLists, when not nil, keeps every list waiting until it is closed.
	holdLists chan struct{}
	// createAnswersLost, when set, makes an apply that creates a Lease take
	// effect and then wait for its context to end and fail: the answer of
	// the apiserver was lost.
	createAnswersLost bool
}

func newLeaseStore() *leaseStore {
	return &leaseStore{leases: map[string]*coordinationv1.Lease{}, watches: map[*leaseWatch]labels.Selector{}, applies: map[string]int{}}
}

// leasesOf is the store as the LeasesGetter of one process; the unused
// methods of the interface panic.
type leasesOf struct {
	coordinationclient.LeaseInterface
	s *leaseStore
}

func (s *leaseStore) Leases(string) coordinationclient.LeaseInterface { return leasesOf{s: s} }

var leaseResource = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

func (l leasesOf) Apply(ctx context.Context, ac *coordinationac.LeaseApplyConfiguration, opts metav1.ApplyOptions) (*coordinationv1.Lease, error) {
	s := l.s
	s.mu.Lock()
	s.applies[*ac.Name]++
	if err := s.applyErr; err != nil {
		s.mu.Unlock()
		return nil, err
	}
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: *ac.Name, Namespace: *ac.Namespace, Labels: ac.Labels, Annotations: ac.Annotations},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ac.Spec.HolderIdentity, LeaseDurationSeconds: ac.Spec.LeaseDurationSeconds, RenewTime: ac.Spec.RenewTime,
		},
	}
	typ := watch.Modified
	if s.leases[lease.Name] == nil {
		typ = watch.Added
	}
	s.putLocked(typ, lease)
	lost := s.createAnswersLost && typ == watch.Added
	s.mu.Unlock()
	if lost {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return lease.DeepCopy(), nil
}

func (l leasesOf) Delete(_ context.Context, name string, opts metav1.DeleteOptions) error {
	s := l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	lease := s.leases[name]
	if lease == nil {
		return apierrors.NewNotFound(leaseResource, name)
	}
	if p := opts.Preconditions; p != nil && p.ResourceVersion != nil && *p.ResourceVersion != lease.ResourceVersion {
		return apierrors.NewConflict(leaseResource, name, fmt.Errorf("the resourceVersion is %s, not %s", lease.ResourceVersion, *p.ResourceVersion))
	}
	delete(s.leases, name)
	s.rv++
	gone := lease.DeepCopy()
	gone.ResourceVersion = strconv.Itoa(s.rv)
	s.sendLocked(watch.Event{Type: watch.Deleted, Object: gone})
	return nil
}

func (l leasesOf) List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	s := l.s
	s.mu.Lock()
	s.lists++
	hold := s.holdLists
	s.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	sel, err := labels.Parse(opts.LabelSelector)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	list := &coordinationv1.LeaseList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(s.rv)}}
	for _, lease := range s.leases {
		if sel.Matches(labels.Set(lease.Labels)) {
			list.Items = append(list.Items, *lease.DeepCopy())
		}
	}
	return list, nil
}

func (l leasesOf) Watch(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if opts.SendInitialEvents != nil {
		// As an apiserver without streaming lists: the reflector lists.
		return nil, apierrors.NewBadRequest("sendInitialEvents is not supported")
	}
	sel, err := labels.Parse(opts.LabelSelector)
	if err != nil {
		return nil, err
	}
	s := l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &leaseWatch{s: s, ch: make(chan watch.Event, 1000)}
	from, _ := strconv.Atoi(opts.ResourceVersion)
	for _, e := range s.log {
		if rv, _ := strconv.Atoi(e.Object.(*coordinationv1.Lease).ResourceVersion); rv > from && sel.Matches(labels.Set(e.Object.(*coordinationv1.Lease).Labels)) {
			w.ch <- e
		}
	}
	s.watches[w] = sel
	return w, nil
}

// putLocked stores a Lease under a new resourceVersion and tells the watches.
func (s *leaseStore) putLocked(typ watch.EventType, lease *coordinationv1.Lease) {
	s.rv++
	lease = lease.DeepCopy()
	lease.ResourceVersion = strconv.Itoa(s.rv)
	s.leases[lease.Name] = lease
	s.sendLocked(watch.Event{Type: typ, Object: lease.DeepCopy()})
}

func (s *leaseStore) sendLocked(e watch.Event) {
	s.log = append(s.log, e)
	for w, sel := range s.watches {
		if sel.Matches(labels.Set(e.Object.(*coordinationv1.Lease).Labels)) {
			w.ch <- e
		}
	}
}

// lease is the stored Lease of that name, or nil.
func (s *leaseStore) lease(name string) *coordinationv1.Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leases[name].DeepCopy()
}

func (s *leaseStore) names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for name := range s.leases {
		names = append(names, name)
	}
	return names
}

func (s *leaseStore) appliesOf(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applies[name]
}

func (s *leaseStore) listed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists
}

func (s *leaseStore) set(f func(s *leaseStore)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

type leaseWatch struct {
	s    *leaseStore
	ch   chan watch.Event
	once sync.Once
}

func (w *leaseWatch) ResultChan() <-chan watch.Event { return w.ch }

func (w *leaseWatch) Stop() {
	w.once.Do(func() {
		w.s.mu.Lock()
		delete(w.s.watches, w)
		w.s.mu.Unlock()
	})
}

// tickingClock is a fake clock that counts the tickers made on it, so a
// test steps it only once a process's loops are waiting for their ticks.
type tickingClock struct {
	*testingclock.FakeClock
	mu      sync.Mutex
	tickers int
}

func (c *tickingClock) NewTicker(d time.Duration) clock.Ticker {
	t := c.FakeClock.NewTicker(d)
	c.mu.Lock()
	c.tickers++
	c.mu.Unlock()
	return t
}

func (c *tickingClock) made() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tickers
}

// t0 is when every test begins, by its fake clock.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const (
	fieldManager = "rollouts-gatewayapi-ssa"
	duration     = 15 * time.Second
	renewal      = duration / 3
)

// cluster is one apiserver's Leases and one clock that the processes of a
// test share.
type cluster struct {
	t      *testing.T
	leases *leaseStore
	clock  *tickingClock
}

func newCluster(t *testing.T) *cluster {
	return &cluster{t: t, leases: newLeaseStore(), clock: &tickingClock{FakeClock: testingclock.NewFakeClock(t0)}}
}

// process starts a process's Peers on the cluster, stopped at the end of
// the test.
func (c *cluster) process(identity string) *Peers {
	c.t.Helper()
	return c.processIn("leases", identity)
}

func (c *cluster) processIn(namespace, identity string) *Peers {
	c.t.Helper()
	log := logrus.New()
	log.SetOutput(kubetest.Log(c.t))
	p := start(c.leases, Options{Namespace: namespace, FieldManager: fieldManager, LeaseDuration: duration, Identity: identity},
		logrus.NewEntry(log).WithField("process", identity), c.clock)
	c.t.Cleanup(func() { p.Stop(context.Background()) })
	return p
}

// running waits until p keeps its Lease and watches the others': its two
// loops wait for their ticks.
func (c *cluster) running(ps ...*Peers) {
	c.t.Helper()
	c.until("the processes' loops to wait for their ticks", func() bool { return c.clock.made() >= 2*len(ps) })
	for _, p := range ps {
		c.until(p.opts.Identity+" to read the Leases", func() bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			return p.synced
		})
	}
}

// step moves the clock on by d.
func (c *cluster) step(d time.Duration) { c.clock.Step(d) }

// until waits for what to happen, however long it takes: the test's
// deadline (go test -timeout) is the only limit, so a loaded machine can
// make a test slow, never wrong.
func (c *cluster) until(what string, happened func() bool) {
	c.t.Helper()
	deadline, ok := c.t.Deadline()
	for !happened() {
		if ok && time.Until(deadline) < 5*time.Second {
			c.t.Fatalf("still waiting for %s at the test's deadline", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// another writes a Lease as another process of the field manager would,
// renewed now by the cluster's clock, acknowledging the processes named.
func (c *cluster) another(name string, acknowledged ...*Peers) {
	c.t.Helper()
	c.leaseRenewedAt(name, c.clock.Now(), acknowledged...)
}

func (c *cluster) leaseRenewedAt(name string, renewed time.Time, acknowledged ...*Peers) {
	c.t.Helper()
	var acked string
	for i, p := range acknowledged {
		if i > 0 {
			acked += ","
		}
		acked += p.Name()
	}
	ac := coordinationac.Lease(name, "leases").
		WithLabels(map[string]string{managerLabel: digestOf(fieldManager)}).
		WithAnnotations(map[string]string{acknowledgedAnnotation: acked}).
		WithSpec(coordinationac.LeaseSpec().WithHolderIdentity("by hand").WithLeaseDurationSeconds(int32(duration.Seconds())).
			WithRenewTime(metav1.NewMicroTime(renewed)))
	if _, err := c.leases.Leases("leases").Apply(context.Background(), ac, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
		c.t.Fatal(err)
	}
}

// digestOf is managerLabel's value for a field manager.
func digestOf(fieldManager string) string {
	sum := sha256.Sum256([]byte(fieldManager))
	return hex.EncodeToString(sum[:8])
}

// enter is Enter for a write that ends at once.
func enter(p *Peers) (alone bool, epoch uint64, err error) {
	alone, epoch, leave, err := p.Enter(context.Background())
	leave()
	return alone, epoch, err
}

// whyWaiting is what keeps p from writing now, as Enter says it when its
// context has already ended ("" when p may write).
func whyWaiting(p *Peers) string {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, leave, err := p.Enter(ctx)
	leave()
	if err == nil {
		return ""
	}
	return err.Error()
}

// acknowledges is what p's Lease in the store acknowledges.
func (c *cluster) acknowledges(p *Peers) string {
	l := c.leases.lease(p.Name())
	if l == nil {
		return "(no Lease)"
	}
	return l.Annotations[acknowledgedAnnotation]
}
