package test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
	"github.com/gatewayapi-ssa/rollouts-plugin/peers"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// The tests of this file are serial: their Leases last 1.5 s, and a
// renewal late for want of CPU would take a process for gone.

// The protocol by which the plugin's processes of one field manager know
// of each other (package peers), between processes in this test process,
// on the real apiserver: who may write guarded by ownership alone, who
// waits, and when. Each test keeps its Leases in a namespace of its own.

const peersLease = 1500 * time.Millisecond

// peersIn starts a process's Peers with Leases in ns, through the
// recorder (so faults can be injected), logging into the test log.
func peersIn(t *testing.T, ns, identity string) *peers.Peers {
	t.Helper()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: standard.Recorder.URL})
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(kubetest.Log(t))
	p := peers.Start(client.CoordinationV1(), peers.Options{Namespace: ns, FieldManager: fieldManager, LeaseDuration: peersLease, Identity: identity},
		logrus.NewEntry(log).WithField("process", identity))
	t.Cleanup(func() { p.Stop(context.Background()) })
	return p
}

// enterWithin is Enter with a deadline, leaving at once.
func enterWithin(p *peers.Peers, within time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	alone, _, leave, err := p.Enter(ctx)
	leave()
	return alone, err
}

// leaseOf reads a process's Lease.
func leaseOf(t *testing.T, ns string, p *peers.Peers) *coordinationv1.Lease {
	t.Helper()
	l, err := standard.Kube.CoordinationV1().Leases(ns).Get(context.Background(), p.Name(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// One process by itself writes alone once its Lease is there.
func TestPeersAProcessByItselfWritesAlone(t *testing.T) {
	ns := namespace(t, standard)
	a := peersIn(t, ns, "a")
	// Until a list of the Leases has confirmed that it is alone, Enter
	// lets it write, not alone (guarded by the resourceVersion).
	eventually(t, "the process writes alone", func() bool {
		alone, err := enterWithin(a, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return alone
	})
	if l := leaseOf(t, ns, a); *l.Spec.HolderIdentity != "a" {
		t.Errorf("the Lease names %q, want the process's identity", *l.Spec.HolderIdentity)
	}
}

// A second process arrives: the first stops writing alone and acknowledges
// it (its Lease lists the second's); the second writes only once it has
// been acknowledged, and not alone either. When the second stops (deleting
// its Lease) the first writes alone again.
func TestPeersASecondProcessIsAcknowledgedBeforeItWrites(t *testing.T) {
	ns := namespace(t, standard)
	a := peersIn(t, ns, "a")
	if alone, err := enterWithin(a, 5*time.Second); err != nil || !alone {
		t.Fatalf("a by itself: alone %v, error %v", alone, err)
	}
	b := peersIn(t, ns, "b")
	alone, err := enterWithin(b, 5*time.Second)
	if err != nil || alone {
		t.Fatalf("b: alone %v, error %v; want admitted, not alone", alone, err)
	}
	if acked := leaseOf(t, ns, a).Annotations["gatewayapi-ssa.dev/acknowledged"]; !strings.Contains(acked, b.Name()) {
		t.Errorf("b was admitted while a's Lease acknowledges %q, not b", acked)
	}
	if alone, err := enterWithin(a, 5*time.Second); err != nil || alone {
		t.Errorf("a with b there: alone %v, error %v; want not alone", alone, err)
	}
	b.Stop(context.Background())
	eventually(t, "a to write alone again after b left", func() bool {
		alone, err := enterWithin(a, time.Second)
		return err == nil && alone
	})
}

// A write of the first process that started alone before the second came
// is in flight: the first acknowledges the second only once that write has
// ended, so the second cannot write while it is in flight.
func TestPeersAnAcknowledgementWaitsForTheWriteInFlight(t *testing.T) {
	ns := namespace(t, standard)
	a := peersIn(t, ns, "a")
	ctx := context.Background()
	if _, err := enterWithin(a, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	alone, _, leave, err := a.Enter(ctx)
	if err != nil || !alone {
		t.Fatalf("a: alone %v, error %v", alone, err)
	}
	b := peersIn(t, ns, "b")
	admitted := make(chan time.Time, 1)
	go func() {
		if _, _, l, err := b.Enter(ctx); err == nil {
			l()
			admitted <- time.Now()
		}
	}()
	time.Sleep(time.Second) // a has seen b long since
	if alone, _, l, err := a.Enter(ctx); err != nil || alone {
		t.Errorf("a's next write with b there: alone %v, error %v; want not alone", alone, err)
	} else {
		l()
	}
	select {
	case <-admitted:
		t.Fatal("b was admitted while a's write guarded by ownership alone was in flight")
	default:
	}
	ended := time.Now()
	leave()
	select {
	case at := <-admitted:
		t.Logf("b admitted %s after a's write ended", at.Sub(ended).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("b was not admitted after a's write ended")
	}
}

// A process that ended without deleting its Lease: the others write alone
// again once its Lease has gone unchanged for the lease duration, and a
// new process does not wait for its acknowledgement longer than that.
func TestPeersAProcessGoneWithoutAWordIsForgottenAfterItsLease(t *testing.T) {
	ns := namespace(t, standard)
	a := peersIn(t, ns, "a")
	if _, err := enterWithin(a, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	now := metav1.NewMicroTime(time.Now())
	seconds := int32(2)
	holder := "b"
	dead := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "gatewayapi-ssa-dead", Labels: leaseOf(t, ns, a).Labels},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, RenewTime: &now},
	}
	if _, err := standard.Kube.CoordinationV1().Leases(ns).Create(context.Background(), dead, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a to see b", func() bool {
		alone, _ := enterWithin(a, time.Second)
		return !alone
	})
	seen := time.Now()
	eventually(t, "a to write alone again", func() bool {
		alone, _ := enterWithin(a, time.Second)
		return alone
	})
	t.Logf("a wrote alone again %s after it saw b's Lease", time.Since(seen).Round(time.Millisecond))
	c := peersIn(t, ns, "c")
	if _, err := enterWithin(c, 2*peersLease+time.Second); err != nil {
		t.Errorf("c: %v", err)
	}
	eventually(t, "the dead process's Lease to be deleted", func() bool {
		_, err := standard.Kube.CoordinationV1().Leases(ns).Get(context.Background(), "gatewayapi-ssa-dead", metav1.GetOptions{})
		return err != nil
	})
}

// A process that cannot renew its Lease stops writing before the others
// can take it for gone, says why, and writes again once it has renewed.
func TestPeersAProcessThatCannotRenewItsLeaseStopsWriting(t *testing.T) {
	ns := namespace(t, standard)
	a := peersIn(t, ns, "a")
	if _, err := enterWithin(a, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(standard.Recorder.ClearFaults)
	standard.Recorder.Inject(harness.Fault{Method: http.MethodPatch, Path: "/namespaces/" + ns + "/leases/", Do: harness.Answer, Status: http.StatusServiceUnavailable})
	time.Sleep(peersLease)
	_, err := enterWithin(a, 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "has not been renewed") {
		t.Fatalf("error %v; want that a writes nothing with a Lease it could not renew", err)
	}
	t.Logf("the error: %v", err)
	standard.Recorder.ClearFaults()
	eventually(t, "a to write again once its Lease is renewed", func() bool {
		_, err := enterWithin(a, time.Second)
		return err == nil
	})
}

// A process that may not keep a Lease writes, never alone; so does one
// with no namespace for its Lease.
func TestPeersAProcessWithoutALeaseNeverWritesAlone(t *testing.T) {
	ns := namespace(t, standard)
	t.Cleanup(standard.Recorder.ClearFaults)
	standard.Recorder.Inject(harness.Fault{Method: http.MethodPatch, Path: "/namespaces/" + ns + "/leases/", Do: harness.Answer, Status: http.StatusForbidden})
	a := peersIn(t, ns, "a")
	time.Sleep(500 * time.Millisecond)
	if alone, err := enterWithin(a, 5*time.Second); err != nil || alone {
		t.Errorf("forbidden: alone %v, error %v; want admitted, never alone", alone, err)
	}
	b := peersIn(t, "", "b")
	if alone, err := enterWithin(b, time.Second); err != nil || alone {
		t.Errorf("no namespace: alone %v, error %v; want admitted, never alone", alone, err)
	}
}
