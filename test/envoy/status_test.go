//go:build envoy

package envoy

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/utils/plugin/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// A backend Envoy Gateway cannot resolve: the canary's Service is deleted
// mid-canary. Envoy Gateway's status says ResolvedRefs=False for this
// generation; fed that status, VerifyWeight answers NotVerified with an
// error naming the condition (docs/verify-weight.md), and Envoy answers
// the canary's share itself (500) instead of sending it anywhere.
func TestVerifyWeightWithAnUnresolvedBackend(t *testing.T) {
	s := newScenario(t, "status: canary Service deleted", "", "stable", "canary")
	s.create(routeYAML("HTTPRoute", 100))
	ro := s.rollout(`{"httpRoute": "route", "verifyWeight": true}`)
	step := "SetWeight(30)"
	must(t, step, s.plugin.SetWeight(ro, 30, nil))
	tr := s.translate()
	s.check(step, "Accepted, ResolvedRefs", checkAccepted(tr, httpRoute))
	s.verify(step, ro, 30, nil, httpRoute, tr)

	step = "Service canary deleted"
	if err := cluster.Kube.CoreV1().Services(s.ns).Delete(context.Background(), "canary", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	tr = s.translate()
	got := conditions(tr.status[httpRoute.String()])
	s.check(step, "Envoy Gateway: Accepted=True, ResolvedRefs=False", func() error {
		if strings.Join(got, " ") != "Accepted=True ResolvedRefs=False" {
			return fmt.Errorf("conditions %v", got)
		}
		return nil
	}())
	s.check(step, "Envoy answers the canary's share itself", checkTaken(tr.envoy, s.ns, httpRoute, request{Method: "GET", Path: "/"},
		taken{Rule: "0", Served: map[string]uint32{"stable": 70, answeredBy("INTERNAL_SERVER_ERROR"): 30}}))
	s.feedStatus(httpRoute, tr)
	v, err := s.plugin.VerifyWeight(ro, 30, nil)
	s.check(step, "VerifyWeight: NotVerified, an error naming ResolvedRefs", func() error {
		if v != types.NotVerified || !err.HasError() || !strings.Contains(err.ErrorString, "ResolvedRefs") {
			return fmt.Errorf("VerifyWeight = %s, error %q", harness.VerifiedName(v), err.ErrorString)
		}
		t.Logf("VerifyWeight: %s", err.ErrorString)
		return nil
	}())
}
