package rollout

import (
	"errors"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
)

// StableAndCanary returns the names of the stable and the canary Service
// of the Rollout now: every call of the plugin asks it.
//
// With spec.strategy.canary.pingPong the two Services never change their
// selectors; Argo Rollouts records in status.canary.stablePingPong which of
// them is stable ("ping": the ping Service is stable and pong is canary;
// anything else, empty included: the reverse) and flips it at promotion. The
// plugin only moves weight between them.
//
// When a Rollout sets both pingPong and stableService/canaryService, pingPong
// wins: that is how the Argo Rollouts controller itself picks the Services for
// plugin-based traffic routers (trafficrouting.GetStableAndCanaryServices with
// ping-pong preferred, in rollout/canary.go and rollout/service.go).
func StableAndCanary(ro *v1alpha1.Rollout) (stable, canary string, err error) {
	c := ro.Spec.Strategy.Canary
	if c == nil {
		return "", "", errors.New("spec.strategy.canary is not set: the plugin routes canary rollouts only")
	}
	if pp := c.PingPong; pp != nil {
		if pp.PingService == "" || pp.PongService == "" {
			return "", "", errors.New("spec.strategy.canary.pingPong needs both pingService and pongService")
		}
		if ro.Status.Canary.StablePingPong == v1alpha1.PPPing {
			return pp.PingService, pp.PongService, nil
		}
		return pp.PongService, pp.PingService, nil
	}
	if c.StableService == "" || c.CanaryService == "" {
		return "", "", errors.New("spec.strategy.canary needs stableService and canaryService (or pingPong) for traffic routing")
	}
	return c.StableService, c.CanaryService, nil
}
