package kube

import (
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// A writer waiting for a route's next version (NextEvent) is told by the
// route's watch event, and by no other route's; with no watch of the
// route's kind and namespace nothing could tell, and NextEvent says so (nil).
func TestNextEventIsClosedByTheRoutesNextWatchEvent(t *testing.T) {
	c := NewCluster(nil, logrus.NewEntry(logrus.New()))
	served := servedRoute()
	ref := routes.Ref{Kind: routes.HTTPRoute, Namespace: served.GetNamespace(), Name: served.GetName()}
	if ch := c.NextEvent(ref); ch != nil {
		t.Fatal("NextEvent without a watch of the route's namespace is not nil")
	}
	c.informers[informerKey{kind: ref.Kind, namespace: ref.Namespace}] = &namespaceCache{}
	changed := c.NextEvent(ref)
	if changed == nil || c.NextEvent(ref) != changed {
		t.Fatal("NextEvent with a watch of the route's namespace: want one channel, the same for every waiter")
	}
	other := servedRoute()
	other.SetName("other")
	c.caughtUp(cached(t, other))
	select {
	case <-changed:
		t.Fatal("another route's event closed the channel")
	default:
	}
	c.caughtUp(cached(t, served))
	select {
	case <-changed:
	default:
		t.Fatal("the route's event did not close the channel")
	}
	if next := c.NextEvent(ref); next == changed {
		t.Error("after the event, NextEvent answers with the closed channel; want a new one for the next event")
	}
}
