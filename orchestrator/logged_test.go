package orchestrator

import (
	"fmt"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// Routes' owners name ever new parents whose features are not known: each
// is logged once, the orchestrator remembers at most maxLoggedGateways of
// them (GatewaysLogged says how many), and the one logged longest ago is
// forgotten first: logged again, once.
func TestTheParentsLoggedAreRememberedWithinTheirBound(t *testing.T) {
	logger, hook := logtest.NewNullLogger()
	o := &Orchestrator{loggedGateways: &loggedOnce{max: 3}}
	log := logrus.NewEntry(logger)
	route := routes.Ref{Kind: routes.HTTPRoute, Namespace: "shop", Name: "web"}
	parent := func(i int) []desired.Unchecked {
		return []desired.Unchecked{{Gateway: routes.Gateway{Parent: routes.ParentRef{Namespace: "shop", Name: fmt.Sprintf("gw-%d", i)}, Unknown: "not there"}}}
	}
	for _, i := range []int{0, 1, 0, 2, 3, 4, 4, 0} {
		o.sayUnchecked(route, parent(i), log)
	}
	if got := o.GatewaysLogged(); got != 3 {
		t.Errorf("%d parents remembered; want 3", got)
	}
	// 0, 1, 2, 3 (forgets 0), 4 (forgets 1), 0 again (forgets 2).
	if got := len(hook.AllEntries()); got != 6 {
		t.Errorf("%d lines logged; want 6", got)
	}
	for _, i := range []int{3, 4, 0} {
		if o.loggedGateways.first(parent(i)[0].Gateway.String()) {
			t.Errorf("gw-%d is not remembered; want the 3 newest remembered", i)
		}
	}
}
