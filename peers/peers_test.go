package peers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// The protocol of the package doc, process by process, on a fake apiserver
// (fake_test.go) and a fake clock: every wait is for an event (a list, an
// apply, what a process has seen), never for some time to pass; the clock
// moves only when a test steps it.

// solo says whether p knows, from a fresh list, that no other process is there.
func solo(p *Peers) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.solo
}

// sees says whether p takes the process of that Lease for live.
func sees(p *Peers, name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.others[name]
	return q != nil && p.live(q, p.clock.Now())
}

// knows says whether p has that Lease among the others at all.
func knows(p *Peers, name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.others[name] != nil
}

// aloneFromTheStart starts a process by itself and waits until it knows.
func (c *cluster) aloneFromTheStart(identity string) *Peers {
	c.t.Helper()
	p := c.process(identity)
	c.running(p)
	c.until(identity+" to know it is alone", func() bool { return solo(p) })
	return p
}

// renew steps the clock by one renewal period and waits until each
// process's Lease is renewed at the clock's new time.
func (c *cluster) renew(ps ...*Peers) {
	c.t.Helper()
	c.step(renewal)
	now := metav1.NewMicroTime(c.clock.Now())
	for _, p := range ps {
		c.until(p.opts.Identity+" to renew its Lease", func() bool {
			l := c.leases.lease(p.Name())
			return l != nil && l.Spec.RenewTime.Equal(&now)
		})
	}
}

// tryToRenew steps the clock by one renewal period and waits until p has
// tried to renew its Lease, for renewals that fail.
func (c *cluster) tryToRenew(p *Peers) {
	c.t.Helper()
	before := c.leases.appliesOf(p.Name())
	c.step(renewal)
	c.until(p.opts.Identity+" to try to renew its Lease", func() bool { return c.leases.appliesOf(p.Name()) > before })
}

// A process by itself writes nothing before it has read the Leases (Enter
// waits for the first list), then writes alone, in its first epoch. Its
// Lease says who it is; a Lease of another field manager is no peer.
func TestAProcessByItselfWritesAloneOnceItHasReadTheLeases(t *testing.T) {
	c := newCluster(t)
	c.leases.set(func(s *leaseStore) {
		s.putLocked(watch.Added, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "gatewayapi-ssa-othermanager", Namespace: "leases",
			Labels: map[string]string{managerLabel: digestOf("another-manager")}}})
		s.holdLists = make(chan struct{})
	})
	a := c.process("a")
	c.until("a to list the Leases", func() bool { return c.leases.listed() > 0 })
	if why := whyWaiting(a); !strings.Contains(why, "the plugin writes nothing while reading the Leases of the plugin's other processes (Leases in namespace leases)") {
		t.Errorf("before the first list Enter says %q, want it to wait for the list", why)
	}
	c.leases.set(func(s *leaseStore) { close(s.holdLists); s.holdLists = nil })
	c.until("a to know it is alone", func() bool { return solo(a) })
	if alone, epoch, err := enter(a); !alone || epoch != 1 || err != nil {
		t.Errorf("Enter: alone %v, epoch %d, error %v; want alone in epoch 1", alone, epoch, err)
	}
	want := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name: a.Name(), Namespace: "leases", ResourceVersion: "2",
			Labels:      map[string]string{managerLabel: digestOf(fieldManager), "app.kubernetes.io/name": "rollouts-gatewayapi-ssa"},
			Annotations: map[string]string{acknowledgedAnnotation: ""},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a"), LeaseDurationSeconds: ptr.To[int32](15), RenewTime: ptr.To(metav1.NewMicroTime(t0))},
	}
	if diff := cmp.Diff(want, c.leases.lease(a.Name())); diff != "" {
		t.Errorf("a's Lease (-want +got):\n%s", diff)
	}
}

// Every third of the lease duration a process applies its Lease again,
// renewed at the clock's time: each renewal is a change the others see, so
// two processes that keep renewing stay live to each other however long
// they run.
func TestProcessesThatRenewStayLiveToEachOther(t *testing.T) {
	c := newCluster(t)
	a := c.aloneFromTheStart("a")
	b := c.process("b")
	c.running(a, b)
	c.until("a and b to see each other", func() bool { return sees(a, b.Name()) && sees(b, a.Name()) })
	for i := 1; i <= 9; i++ { // three lease durations
		c.renew(a, b)
	}
	c.until("a and b to see each other's ninth renewal", func() bool {
		return c.leases.lease(b.Name()).ResourceVersion == resourceVersionSeen(a, b) &&
			c.leases.lease(a.Name()).ResourceVersion == resourceVersionSeen(b, a)
	})
	if !sees(a, b.Name()) || !sees(b, a.Name()) {
		t.Errorf("after 9 renewals a sees b: %v, b sees a: %v; want both", sees(a, b.Name()), sees(b, a.Name()))
	}
	for _, p := range []*Peers{a, b} {
		if alone, _, err := enter(p); alone || err != nil {
			t.Errorf("%s: alone %v, error %v; want admitted, not alone", p.opts.Identity, alone, err)
		}
	}
}

func resourceVersionSeen(p, of *Peers) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if q := p.others[of.Name()]; q != nil {
		return q.resourceVersion
	}
	return ""
}

// A second process arrives: the first sees it, stops writing alone and
// acknowledges it in its Lease; the second writes only once it has been
// acknowledged, and not alone either. Each acknowledges the other.
func TestASecondProcessIsAcknowledgedBeforeItWrites(t *testing.T) {
	c := newCluster(t)
	a := c.aloneFromTheStart("a")
	b := c.process("b")
	alone, _, err := enter(b)
	if err != nil || alone {
		t.Fatalf("b: alone %v, error %v; want admitted, not alone", alone, err)
	}
	if got := c.acknowledges(a); got != b.Name() {
		t.Errorf("b was admitted while a's Lease acknowledges %q, want %q", got, b.Name())
	}
	if alone, _, err := enter(a); err != nil || alone {
		t.Errorf("a with b there: alone %v, error %v; want not alone", alone, err)
	}
	c.until("b to acknowledge a", func() bool { return c.acknowledges(b) == a.Name() })
	if !sees(a, b.Name()) || !sees(b, a.Name()) {
		t.Errorf("a sees b: %v, b sees a: %v; want both", sees(a, b.Name()), sees(b, a.Name()))
	}
}

// A newcomer waits for every live process's acknowledgement, and says
// which it waits for; it writes once the last has acknowledged it.
func TestANewcomerWaitsForEveryLiveProcessToAcknowledgeIt(t *testing.T) {
	c := newCluster(t)
	c.another("gatewayapi-ssa-other")
	b := c.process("b")
	c.running(b)
	c.until("b to see the other process", func() bool { return sees(b, "gatewayapi-ssa-other") })
	want := "the plugin writes nothing while waiting for the plugin's other processes (gatewayapi-ssa-other) to acknowledge this one (Leases in namespace leases)"
	if why := whyWaiting(b); !strings.Contains(why, want) {
		t.Errorf("b unacknowledged: Enter says %q, want %q", why, want)
	}
	c.another("gatewayapi-ssa-other", b)
	if alone, _, err := enter(b); alone || err != nil {
		t.Errorf("b acknowledged: alone %v, error %v; want admitted, not alone", alone, err)
	}
	if got := c.acknowledges(b); got != "gatewayapi-ssa-other" {
		t.Errorf("b's Lease acknowledges %q, want the other process", got)
	}
}

// A process that never acknowledges the newcomer and stops renewing its
// Lease keeps the newcomer waiting one lease duration, no longer; the
// newcomer counts it among the live processes until then, and then writes
// alone.
func TestANewcomerWaitsNoLongerThanALeaseForAProcessThatIsGone(t *testing.T) {
	c := newCluster(t)
	c.another("gatewayapi-ssa-other")
	b := c.process("b")
	c.running(b)
	c.until("b to see the other process", func() bool { return sees(b, "gatewayapi-ssa-other") })
	c.renew(b)
	c.renew(b)
	if whyWaiting(b) == "" || solo(b) {
		t.Fatalf("b was admitted (alone: %v) two thirds of a lease after the other's last renewal", solo(b))
	}
	if n := b.Others(); n != 1 {
		t.Errorf("b two thirds of a lease after the other's last renewal counts %d other processes, want 1", n)
	}
	c.renew(b)
	c.until("b to know it is alone", func() bool { return solo(b) })
	if n := b.Others(); n != 0 {
		t.Errorf("b a lease after the other's last renewal counts %d other processes, want 0", n)
	}
	if alone, epoch, err := enter(b); !alone || epoch != 1 || err != nil {
		t.Errorf("b a lease after the other's last renewal: alone %v, epoch %d, error %v; want alone in epoch 1", alone, epoch, err)
	}
}

// A write that entered alone is in flight when a second process comes: the
// first stops letting writes in alone at once, but acknowledges the second
// only once that write has ended, so the second cannot write while it is
// in flight.
func TestAnAcknowledgementWaitsForTheWriteInFlight(t *testing.T) {
	c := newCluster(t)
	a := c.aloneFromTheStart("a")
	alone, _, leave, err := a.Enter(context.Background())
	if err != nil || !alone {
		t.Fatalf("a: alone %v, error %v", alone, err)
	}
	b := c.process("b")
	c.running(a, b)
	c.until("a to see b", func() bool { return sees(a, b.Name()) })
	if alone, _, err := enter(a); err != nil || alone {
		t.Errorf("a's next write with b there: alone %v, error %v; want not alone", alone, err)
	}
	if got := c.acknowledges(a); got != "" {
		t.Errorf("a acknowledges %q while its write guarded by ownership alone is in flight", got)
	}
	if why := whyWaiting(b); !strings.Contains(why, "waiting for the plugin's other processes ("+a.Name()+")") {
		t.Errorf("b while a's write is in flight: Enter says %q, want it to wait for a", why)
	}
	leave()
	if alone, _, err := enter(b); alone || err != nil {
		t.Errorf("b after a's write ended: alone %v, error %v; want admitted, not alone", alone, err)
	}
	if got := c.acknowledges(a); got != b.Name() {
		t.Errorf("b was admitted while a acknowledges %q", got)
	}
}

// A process that stops deletes its Lease: the other forgets it at once,
// drops it from its acknowledgements, and writes alone again after its next
// renewal's fresh list, in a new epoch.
func TestAProcessThatStopsIsForgotten(t *testing.T) {
	c := newCluster(t)
	a := c.aloneFromTheStart("a")
	b := c.process("b")
	if _, _, err := enter(b); err != nil {
		t.Fatal(err)
	}
	c.running(a, b)
	b.Stop(context.Background())
	if l := c.leases.lease(b.Name()); l != nil {
		t.Errorf("b stopped and left its Lease %s", l.Name)
	}
	c.until("a to forget b", func() bool { return !knows(a, b.Name()) })
	c.until("a to drop b from its acknowledgements", func() bool { return c.acknowledges(a) == "" })
	c.renew(a)
	c.until("a to know it is alone again", func() bool { return solo(a) })
	if alone, epoch, err := enter(a); !alone || epoch != 2 || err != nil {
		t.Errorf("a after b stopped: alone %v, epoch %d, error %v; want alone in epoch 2", alone, epoch, err)
	}
}

// A process that ended without a word (its Lease left, never renewed
// again): the other writes alone again once the Lease has gone unchanged
// for a lease duration, forgets its acknowledgement, and deletes the Lease
// once it has gone unchanged for three.
func TestAProcessGoneWithoutAWordIsForgottenAfterItsLease(t *testing.T) {
	c := newCluster(t)
	a := c.aloneFromTheStart("a")
	c.another("gatewayapi-ssa-gone", a)
	c.until("a to acknowledge the other process", func() bool { return c.acknowledges(a) == "gatewayapi-ssa-gone" })
	if alone, _, err := enter(a); alone || err != nil {
		t.Errorf("a beside the other process: alone %v, error %v; want not alone", alone, err)
	}
	c.renew(a)
	c.renew(a)
	if solo(a) {
		t.Errorf("a writes alone two thirds of a lease after the other's last renewal")
	}
	c.renew(a)
	c.until("a to know it is alone again", func() bool { return solo(a) })
	if alone, epoch, err := enter(a); !alone || epoch != 2 || err != nil {
		t.Errorf("a a lease after the other's last renewal: alone %v, epoch %d, error %v; want alone in epoch 2", alone, epoch, err)
	}
	c.until("a to drop the other from its acknowledgements", func() bool { return c.acknowledges(a) == "" })
	for range 6 { // three lease durations since the last change
		c.renew(a)
	}
	if c.leases.lease("gatewayapi-ssa-gone") == nil {
		t.Fatal("a deleted the other's Lease three lease durations after it last changed, want only after that")
	}
	c.renew(a)
	c.until("a to delete the other's Lease", func() bool { return c.leases.lease("gatewayapi-ssa-gone") == nil })
}

// A Lease renewed more than three durations ago by this process's clock
// when it is first seen was left by a process long gone: it keeps nobody
// from writing alone, and the first renewal deletes it.
func TestALeaseLeftLongAgoKeepsNobodyWaiting(t *testing.T) {
	c := newCluster(t)
	c.leaseRenewedAt("gatewayapi-ssa-left", t0.Add(-3*duration-time.Second))
	a := c.aloneFromTheStart("a")
	if alone, epoch, err := enter(a); !alone || epoch != 1 || err != nil {
		t.Errorf("a beside a Lease left long ago: alone %v, epoch %d, error %v; want alone in epoch 1", alone, epoch, err)
	}
	c.renew(a)
	c.until("a to delete the Lease left long ago", func() bool { return c.leases.lease("gatewayapi-ssa-left") == nil })
}

// A process whose renewals fail stops writing two thirds of a lease after
// its last renewal, before the others take it for gone, and says why; it
// writes again (alone, in the same epoch) once a renewal succeeds.
func TestAProcessThatCannotRenewStopsWritingBeforeTheOthersTakeItForGone(t *testing.T) {
	c := newCluster(t)
	a := c.aloneFromTheStart("a")
	c.leases.set(func(s *leaseStore) { s.applyErr = apierrors.NewServiceUnavailable("etcd is away") })
	c.tryToRenew(a)
	if why := whyWaiting(a); why != "" {
		t.Errorf("a third of a lease after the last renewal Enter says %q, want a write let through", why)
	}
	c.tryToRenew(a)
	want := "the plugin writes nothing while this process's Lease " + a.Name() + " has not been renewed for 10s (etcd is away): the other processes may take it for gone"
	if why := whyWaiting(a); !strings.Contains(why, want) {
		t.Errorf("two thirds of a lease after the last renewal Enter says %q, want %q", why, want)
	}
	c.leases.set(func(s *leaseStore) { s.applyErr = nil })
	c.renew(a)
	c.until("the renewal to be taken", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.renewErr == nil
	})
	if alone, epoch, err := enter(a); !alone || epoch != 1 || err != nil {
		t.Errorf("a renewed again: alone %v, epoch %d, error %v; want alone in epoch 1", alone, epoch, err)
	}
}

// A process that cannot keep a Lease, for want of a namespace or of
// permission, writes at once, never alone (every write carries the
// resourceVersion), and leaves no Lease.
func TestAProcessThatCannotKeepALeaseWritesNeverAlone(t *testing.T) {
	c := newCluster(t)
	if alone, epoch, err := enter(c.processIn("", "no namespace")); alone || epoch != 0 || err != nil {
		t.Errorf("without a namespace: alone %v, epoch %d, error %v; want never alone, no error", alone, epoch, err)
	}
	c.leases.set(func(s *leaseStore) { s.applyErr = apierrors.NewForbidden(leaseResource, "", nil) })
	p := c.process("forbidden")
	c.until("the process to give up its Lease", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.disabled != ""
	})
	if alone, epoch, err := enter(p); alone || epoch != 0 || err != nil {
		t.Errorf("forbidden: alone %v, epoch %d, error %v; want never alone, no error", alone, epoch, err)
	}
	if names := c.leases.names(); len(names) != 0 {
		t.Errorf("Leases left: %v", names)
	}
}

// A process stopped while its first Lease apply was in flight (the
// apiserver stored the Lease, its answer was lost) deletes the Lease all the
// same: the others need not wait 45 s for it to go stale.
func TestAProcessStoppedWhileRegisteringDeletesItsLease(t *testing.T) {
	c := newCluster(t)
	a := c.aloneFromTheStart("a")
	c.leases.set(func(s *leaseStore) { s.createAnswersLost = true })
	b := c.process("b")
	c.until("b's Lease to be stored", func() bool { return c.leases.lease(b.Name()) != nil })
	b.Stop(context.Background())
	c.leases.set(func(s *leaseStore) { s.createAnswersLost = false })
	if c.leases.lease(b.Name()) != nil {
		t.Fatal("b's Lease outlived b's Stop: the other processes take b for live until its Lease is stale")
	}
	c.until("a to forget b", func() bool { return !knows(a, b.Name()) })
	c.until("a to drop b from its acknowledgements", func() bool { return c.acknowledges(a) == "" })
	c.renew(a)
	c.until("a to know it is alone again", func() bool { return solo(a) })
}
