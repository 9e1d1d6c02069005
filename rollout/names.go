package rollout

import (
	"fmt"
	"strings"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Every name a Rollout gives ends up in the path of a request: each is
// checked here as the Kubernetes name it must be, before any request, so
// that "../../shop/httproutes/web" is a wrong name and never a path.

// notASubdomain says why name is no DNS-1123 subdomain (the names of
// routes and ConfigMaps), "" when it is one.
func notASubdomain(name string) string {
	return strings.Join(validation.IsDNS1123Subdomain(name), "; ")
}

// notALabel says why name is no DNS-1123 label (the names of Services),
// "" when it is one.
func notALabel(name string) string {
	return strings.Join(validation.IsDNS1123Label(name), "; ")
}

// rolloutServices are the names of the stable and the canary Service
// (StableAndCanary), each checked as a Service name; an error names the
// key of the Rollout that gives a wrong one.
func rolloutServices(ro *v1alpha1.Rollout) (stable, canary string, err error) {
	stable, canary, err = StableAndCanary(ro)
	if err != nil {
		return "", "", err
	}
	c := ro.Spec.Strategy.Canary
	keys := [][2]string{{"stableService", c.StableService}, {"canaryService", c.CanaryService}}
	if c.PingPong != nil {
		keys = [][2]string{{"pingPong.pingService", c.PingPong.PingService}, {"pingPong.pongService", c.PingPong.PongService}}
	}
	for _, k := range keys {
		if why := notALabel(k[1]); why != "" {
			return "", "", fmt.Errorf("spec.strategy.canary.%s: %q is not a Service name (a DNS-1123 label): %s", k[0], k[1], why)
		}
	}
	return stable, canary, nil
}
