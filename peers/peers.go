package peers

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	coordinationac "k8s.io/client-go/applyconfigurations/coordination/v1"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/gatewayapi-ssa/rollouts-plugin/retry"
)

// defaultLeaseDuration is how long a process's Lease may go unchanged before
// the other processes take it for gone.
const defaultLeaseDuration = 15 * time.Second

const (
	// managerLabel marks the Leases of the plugin's processes. Its value is
	// a digest of the field manager: processes of another field manager are
	// no peers, field ownership tells their writes apart.
	managerLabel = "gatewayapi-ssa.dev/peers"
	// acknowledgedAnnotation lists the Leases of the processes a process
	// has acknowledged.
	acknowledgedAnnotation = "gatewayapi-ssa.dev/acknowledged"
	// leasePrefix begins the name of every process's Lease.
	leasePrefix = "gatewayapi-ssa-"
)

// Options say where the processes keep their Leases and how long one lives.
type Options struct {
	// Namespace holds the Leases: the same for every process of the field
	// manager in the cluster (main: -peers-namespace, else POD_NAMESPACE).
	Namespace string
	// FieldManager is the field manager the process writes as.
	FieldManager string
	// LeaseDuration is defaultLeaseDuration when zero.
	LeaseDuration time.Duration
	// Identity names the process for people (the Lease's holderIdentity).
	Identity string
}

// Peers is one process's view of the plugin's processes of its field
// manager, and the gate of its writes.
type Peers struct {
	opts   Options
	leases coordinationclient.LeaseInterface
	log    *logrus.Entry
	clock  clock.WithTicker // the real clock but in this package's tests
	name   string           // this process's Lease
	digest string           // managerLabel's value

	// gate is held shared by every write sent guarded by ownership alone,
	// and taken exclusively before acknowledging another process, so that
	// the acknowledgement comes after every such write has ended.
	gate sync.RWMutex

	mu sync.Mutex
	// disabled says why the process cannot keep its Lease; every write then
	// carries the resourceVersion.
	disabled string
	// registering says why the Lease is not there yet ("" once it is).
	registering string
	created     bool
	// sent is set once an apply of the Lease was sent: the apiserver may
	// have stored it even if its answer was lost, so Stop deletes it.
	sent     bool
	renewed  time.Time // the last renewal that succeeded
	renewErr error
	synced   bool
	// solo is set once a fresh list showed no other live process, and
	// cleared as soon as one is seen; epoch counts the times it was set.
	solo   bool
	epoch  uint64
	others map[string]*peer
	// acked are the processes this one has acknowledged (and published).
	acked map[string]bool
	// told are the processes whose arrival has been logged.
	told map[string]bool
	wake chan struct{}

	publishing sync.Mutex
	seen       chan struct{} // a process was seen: acknowledge it
	stop       chan struct{}
	stopOnce   sync.Once
	done       chan struct{}
}

// peer is what this process knows of another.
type peer struct {
	resourceVersion string
	// changed is when this process saw the other's Lease change; zero for
	// a Lease already stale when first seen.
	changed      time.Time
	acknowledged map[string]bool
	identity     string
}

// Start registers the process among its peers and keeps its Lease, in the
// background, until Stop. It never fails: until the Lease is there, Enter
// waits; a process that cannot keep one writes with the resourceVersion.
func Start(leases coordinationclient.LeasesGetter, opts Options, log *logrus.Entry) *Peers {
	return start(leases, opts, log, clock.RealClock{})
}

// start is Start on the given clock.
func start(leases coordinationclient.LeasesGetter, opts Options, log *logrus.Entry, clk clock.WithTicker) *Peers {
	if opts.LeaseDuration <= 0 {
		opts.LeaseDuration = defaultLeaseDuration
	}
	sum := sha256.Sum256([]byte(opts.FieldManager))
	p := &Peers{
		opts: opts, log: log.WithField("peers", opts.Namespace), clock: clk,
		name:        leasePrefix + randomHex(5),
		digest:      hex.EncodeToString(sum[:8]),
		registering: "registering this process's Lease",
		others:      map[string]*peer{}, acked: map[string]bool{}, told: map[string]bool{},
		wake: make(chan struct{}), seen: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	if opts.Namespace == "" {
		p.disable("no namespace for the Leases of the plugin's processes (POD_NAMESPACE is not set and -peers-namespace is not given)")
		close(p.done)
		return p
	}
	p.leases = leases.Leases(opts.Namespace)
	go p.run()
	return p
}

// Name is the process's Lease.
func (p *Peers) Name() string { return p.name }

// Enter waits until the process may write routes (its Lease is there and
// fresh, and every other live process has acknowledged it), then says
// whether it may write guarded by field ownership alone: no other process of
// its field manager is there. epoch counts the times the process has become
// the only one: a write of another process that ended before may not have
// reached this process's watch cache yet, so the caller writes a route
// guarded by its resourceVersion the first time in an epoch. leave must be
// called when that write has ended. A process that cannot keep a Lease may
// always write, never alone.
func (p *Peers) Enter(ctx context.Context) (alone bool, epoch uint64, leave func(), err error) {
	for {
		p.mu.Lock()
		now := p.clock.Now()
		disabled := p.disabled != ""
		why := p.waitingLocked(now)
		alone = !disabled && why == "" && p.aloneLocked(now)
		wake := p.wake
		p.mu.Unlock()
		switch {
		case alone:
			// Taken shared, then checked again: acknowledge takes the gate
			// only after it has recorded the other process, so either this
			// sees it, or acknowledge waits for this write.
			p.gate.RLock()
			p.mu.Lock()
			alone = p.waitingLocked(p.clock.Now()) == "" && p.aloneLocked(p.clock.Now())
			epoch = p.epoch
			p.mu.Unlock()
			if alone {
				return true, epoch, sync.OnceFunc(p.gate.RUnlock), nil
			}
			p.gate.RUnlock()
			continue
		case disabled || why == "":
			return false, 0, func() {}, nil
		}
		select {
		case <-ctx.Done():
			return false, 0, func() {}, fmt.Errorf("the plugin writes nothing while %s (Leases in namespace %s): %w", why, p.opts.Namespace, ctx.Err())
		case <-wake:
		case <-p.clock.After(p.opts.LeaseDuration / 10):
		}
	}
}

// Others is how many other processes of the field manager this one takes
// for live now (their Lease renewed within a lease duration), for people
// watching the plugin (package metrics).
func (p *Peers) Others() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	now, n := p.clock.Now(), 0
	for _, q := range p.others {
		if p.live(q, now) {
			n++
		}
	}
	return n
}

// Stop stops keeping the Lease and deletes it, so the other processes need
// not wait for it to go stale: once an apply of it was sent, even if no
// answer came (the apiserver may have stored it).
func (p *Peers) Stop(ctx context.Context) {
	p.stopOnce.Do(func() { close(p.stop) })
	<-p.done
	p.mu.Lock()
	sent := p.sent
	p.mu.Unlock()
	if sent {
		if err := p.leases.Delete(ctx, p.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			p.log.WithError(err).Warn("could not delete this process's Lease; the other processes take it for gone once it is stale")
		}
	}
}

// waitingLocked says what keeps the process from writing ("" for nothing).
func (p *Peers) waitingLocked(now time.Time) string {
	switch {
	case p.disabled != "":
		return ""
	case !p.created:
		if p.renewErr != nil {
			return fmt.Sprintf("%s (%v)", p.registering, p.renewErr)
		}
		return p.registering
	case !p.leaseCurrent(now):
		return fmt.Sprintf("this process's Lease %s has not been renewed for %s (%v): the other processes may take it for gone",
			p.name, now.Sub(p.renewed).Round(time.Second), p.renewErr)
	case !p.synced:
		return "reading the Leases of the plugin's other processes"
	}
	var waiting []string
	for name, q := range p.others {
		if p.live(q, now) && !q.acknowledged[p.name] {
			waiting = append(waiting, name)
		}
	}
	if len(waiting) == 0 {
		return ""
	}
	slices.Sort(waiting)
	return fmt.Sprintf("waiting for the plugin's other processes (%s) to acknowledge this one", strings.Join(waiting, ", "))
}

// aloneLocked says whether no other live process is there, as a fresh
// list confirmed.
func (p *Peers) aloneLocked(now time.Time) bool {
	if !p.solo {
		return false
	}
	for _, q := range p.others {
		if p.live(q, now) {
			return false
		}
	}
	return true
}

// leaseCurrent says whether the Lease was renewed recently enough that no other
// process can have taken this one for gone: the others wait LeaseDuration
// after they saw the renewal, this one stops writing a renewal period
// before that.
func (p *Peers) leaseCurrent(now time.Time) bool {
	return now.Sub(p.renewed) < p.opts.LeaseDuration-p.renewEvery()
}

func (p *Peers) live(q *peer, now time.Time) bool {
	return !q.changed.IsZero() && now.Sub(q.changed) < p.opts.LeaseDuration
}

func (p *Peers) renewEvery() time.Duration { return p.opts.LeaseDuration / 3 }

// run keeps the Lease: registers it, watches the others', acknowledges
// them, renews, and notices when they are gone.
func (p *Peers) run() {
	defer close(p.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-p.stop
		cancel()
	}()
	if !p.register(ctx) || !p.watchOthers() {
		return
	}
	p.mu.Lock()
	p.synced = true
	p.mu.Unlock()
	p.confirmSolo(ctx)
	p.acknowledge(ctx)
	p.wakeAll()
	p.keep(ctx)
}

// register publishes the Lease until the apiserver has it, backing off
// between attempts up to the renewal period. It gives up (false) when the
// process may not keep a Lease there, which disables the peers, or at Stop.
func (p *Peers) register(ctx context.Context) bool {
	for backoff := retry.FirstLeaseDelay; ; backoff = retry.NextLeaseDelay(backoff, p.renewEvery()) {
		err := p.publish(ctx)
		if err == nil {
			return true
		}
		if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
			p.disable(fmt.Sprintf("this process cannot keep a Lease in namespace %s (%v); grant the plugin's ServiceAccount get, list, watch, create, "+
				"patch and delete on leases.coordination.k8s.io there (install/base)", p.opts.Namespace, err))
			return false
		}
		p.log.WithError(err).Warn("could not register this process's Lease; the plugin writes nothing until it has")
		select {
		case <-p.stop:
			return false
		case <-p.clock.After(backoff):
		}
	}
}

// watchOthers starts watching the Leases of the field manager's processes
// (observe, forget) until Stop, and waits until the watch has listed them:
// false when Stop came first.
func (p *Peers) watchOthers() bool {
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = managerLabel + "=" + p.digest
			return p.leases.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = managerLabel + "=" + p.digest
			return p.leases.Watch(ctx, o)
		},
	}, &coordinationv1.Lease{}, 0, cache.Indexers{})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    p.observe,
		UpdateFunc: func(_, obj any) { p.observe(obj) },
		DeleteFunc: p.forget,
	})
	go inf.Run(p.stop)
	return cache.WaitForCacheSync(p.stop, inf.HasSynced)
}

// keep acknowledges the processes that arrive and, every renewal period,
// renews the Lease, deletes those of processes long gone (collect) and
// confirms whether this one is alone, until Stop.
func (p *Peers) keep(ctx context.Context) {
	// Acknowledging waits for the writes in flight, as long as a call's
	// deadline: it has a goroutine of its own, so renewals never wait.
	acknowledging := make(chan struct{})
	go func() {
		defer close(acknowledging)
		p.every(p.seen, func() { p.acknowledge(ctx) })
	}()
	defer func() { <-acknowledging }()
	p.every(nil, func() {
		if err := p.publish(ctx); err != nil {
			p.log.WithError(err).Warn("could not renew this process's Lease")
		}
		p.collect(ctx)
		p.confirmSolo(ctx)
	})
}

// every runs do at every renewal period and whenever now has something,
// then wakes the callers waiting in Enter, until Stop.
func (p *Peers) every(now <-chan struct{}, do func()) {
	tick := p.clock.NewTicker(p.renewEvery())
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C():
		case <-now:
		}
		do()
		p.wakeAll()
	}
}

// publish applies the process's Lease: renewed now, with the processes it
// has acknowledged. Renewals and acknowledgements publish one at a time.
func (p *Peers) publish(ctx context.Context) error {
	p.publishing.Lock()
	defer p.publishing.Unlock()
	p.mu.Lock()
	var acked []string
	for name := range p.acked {
		acked = append(acked, name)
	}
	p.sent = true
	p.mu.Unlock()
	slices.Sort(acked)
	now := metav1.NewMicroTime(p.clock.Now())
	lease := coordinationac.Lease(p.name, p.opts.Namespace).
		WithLabels(map[string]string{managerLabel: p.digest, "app.kubernetes.io/name": "rollouts-gatewayapi-ssa"}).
		WithAnnotations(map[string]string{acknowledgedAnnotation: strings.Join(acked, ",")}).
		WithSpec(coordinationac.LeaseSpec().
			WithHolderIdentity(p.opts.Identity).
			WithLeaseDurationSeconds(int32(p.opts.LeaseDuration.Seconds())).
			WithRenewTime(now))
	start := p.clock.Now()
	_, err := p.leases.Apply(ctx, lease, metav1.ApplyOptions{FieldManager: p.opts.FieldManager, Force: true})
	p.mu.Lock()
	defer p.mu.Unlock()
	p.renewErr = err
	if err == nil {
		// Counted from before the request: the others may have seen the
		// renewal as early as that.
		p.renewed = start
		if !p.created {
			p.created, p.registering = true, ""
			p.log.WithField("lease", p.name).Info("registered this process among the plugin's processes")
		}
	}
	return err
}

// observe records another process's Lease as this process saw it.
func (p *Peers) observe(obj any) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok || l.Name == p.name {
		return
	}
	now := p.clock.Now()
	p.mu.Lock()
	q, known := p.others[l.Name]
	if !known {
		q = &peer{}
		p.others[l.Name] = q
	}
	if q.resourceVersion != l.ResourceVersion {
		q.resourceVersion = l.ResourceVersion
		q.changed = now
		if !known && staleWhenFirstSeen(l, now) {
			q.changed = time.Time{}
		}
	}
	q.identity = ""
	if l.Spec.HolderIdentity != nil {
		q.identity = *l.Spec.HolderIdentity
	}
	q.acknowledged = map[string]bool{}
	for _, name := range strings.Split(l.Annotations[acknowledgedAnnotation], ",") {
		if name != "" {
			q.acknowledged[name] = true
		}
	}
	if p.live(q, now) {
		p.solo = false
	}
	p.wakeLocked()
	p.mu.Unlock()
	select {
	case p.seen <- struct{}{}:
	default:
	}
}

// staleWhenFirstSeen says a Lease seen for the first time was last renewed
// more than three times its duration ago by this process's clock: left by
// a process that ended without deleting it. Only this first look compares
// clocks, with two durations of slack; every later change is timed as this
// process sees it.
func staleWhenFirstSeen(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return false
	}
	d := time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	return now.Sub(l.Spec.RenewTime.Time) > 3*d
}

// forget drops a process whose Lease was deleted.
func (p *Peers) forget(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	p.mu.Lock()
	delete(p.others, l.Name)
	p.wakeLocked()
	p.mu.Unlock()
	select {
	case p.seen <- struct{}{}:
	default:
	}
}

// acknowledge acknowledges every live process not acknowledged yet, after
// every write in flight that was guarded by ownership alone has ended (no
// new one starts once another process is seen: aloneLocked), and forgets
// the acknowledgements of processes that are gone.
func (p *Peers) acknowledge(ctx context.Context) {
	now := p.clock.Now()
	p.mu.Lock()
	var arrived []string
	changed := false
	for name, q := range p.others {
		if p.live(q, now) && !p.acked[name] {
			arrived = append(arrived, name)
		}
	}
	for name := range p.acked {
		if q, ok := p.others[name]; !ok || !p.live(q, now) {
			delete(p.acked, name)
			changed = true
		}
	}
	p.mu.Unlock()
	if len(arrived) > 0 {
		p.drain()
		p.mu.Lock()
		for _, name := range arrived {
			p.acked[name] = true
			if !p.told[name] {
				p.told[name] = true
				p.log.WithFields(logrus.Fields{"lease": name, "identity": p.others[name].identity}).
					Info("another plugin process writes as this field manager: every write carries its resourceVersion while it is there")
			}
		}
		p.mu.Unlock()
		changed = true
	}
	if changed {
		if err := p.publish(ctx); err != nil {
			p.log.WithError(err).Warn("could not publish this process's acknowledgements; trying again")
		}
	}
}

// drain returns once every write in flight that entered alone has ended:
// the gate is taken exclusively, which waits for them, and let go at once.
func (p *Peers) drain() {
	p.gate.Lock()
	defer p.gate.Unlock()
}

// confirmSolo, when no other process looks live, lists the Leases afresh
// (a watch can be behind) before the process writes guarded by ownership
// alone again.
func (p *Peers) confirmSolo(ctx context.Context) {
	now := p.clock.Now()
	p.mu.Lock()
	if p.solo {
		p.mu.Unlock()
		return
	}
	for _, q := range p.others {
		if p.live(q, now) {
			p.mu.Unlock()
			return
		}
	}
	p.mu.Unlock()
	list, err := p.leases.List(ctx, metav1.ListOptions{LabelSelector: managerLabel + "=" + p.digest})
	if err != nil {
		p.log.WithError(err).Debug("could not list the Leases to confirm this process is alone; trying again")
		return
	}
	for i := range list.Items {
		p.observe(&list.Items[i])
	}
	now = p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, q := range p.others {
		if p.live(q, now) {
			return
		}
	}
	if !p.solo && len(p.told) > 0 {
		p.log.Info("no other plugin process of this field manager is there any more: writes are guarded by field ownership again")
	}
	if !p.solo {
		p.epoch++
	}
	p.solo = true
}

// collect deletes the Leases of processes gone for three durations, which
// ended without deleting their own.
func (p *Peers) collect(ctx context.Context) {
	now := p.clock.Now()
	p.mu.Lock()
	var gone []string
	for name, q := range p.others {
		if !p.live(q, now) && (q.changed.IsZero() || now.Sub(q.changed) > 3*p.opts.LeaseDuration) {
			gone = append(gone, name)
		}
	}
	p.mu.Unlock()
	for _, name := range gone {
		p.mu.Lock()
		rv := p.others[name].resourceVersion
		p.mu.Unlock()
		err := p.leases.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		if err == nil || apierrors.IsNotFound(err) {
			p.forget(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
	}
}

func (p *Peers) disable(why string) {
	p.mu.Lock()
	p.disabled = why
	p.wakeLocked()
	p.mu.Unlock()
	p.log.Warn(why + "; every write carries its resourceVersion, as the plugin cannot know whether another of its processes writes the same routes")
}

func (p *Peers) wakeAll() {
	p.mu.Lock()
	p.wakeLocked()
	p.mu.Unlock()
}

func (p *Peers) wakeLocked() {
	close(p.wake)
	p.wake = make(chan struct{})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
