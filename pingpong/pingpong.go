package pingpong

import (
	"errors"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
)

// Services returns the names of the stable and the canary Service.
func Services(ro *v1alpha1.Rollout) (stable, canary string, err error) {
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
