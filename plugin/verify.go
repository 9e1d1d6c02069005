package plugin

import (
	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/argoproj/argo-rollouts/utils/plugin/types"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/orchestrator"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// verifyWeight answers VerifyWeight. Without verifyWeight: true in the
// Rollout's config it answers NotImplemented: the plugin cannot know whether
// the gateway reports observedGeneration, and a blind Verified would let a
// rollout promote on weights no gateway has taken.
//
// With the option it reads every route of the Rollout fresh from the apiserver (it
// writes nothing) and answers Verified only when every route's spec carries
// the desired weights (canary, experiment Services, stable the rest of
// maxTrafficWeight) and every parent it names reports Accepted and
// ResolvedRefs True for the route's current generation (desired.VerifyStatus),
// and, for a gateway whose status leads its data plane, that gateway's
// settle time has passed since that status was written (settling).
// A route that is behind gives NotVerified and one log line saying what is
// behind; a condition reported False gives an RpcError naming the route, the
// parent and the reason. Every error comes with NotVerified, never
// NotImplemented: Argo Rollouts keeps the Verified value it gets alongside an
// error, and NotVerified keeps a setWeight step from completing.
func (p *Plugin) verifyWeight(ro *v1alpha1.Rollout, desiredWeight int32, additional []v1alpha1.WeightDestination) (verified types.RpcVerified, resp types.RpcError) {
	call := describeSplit("VerifyWeight", desiredWeight, additional)
	verified = types.NotVerified
	defer p.recoverInto(ro, call, &resp)
	cfg := p.config(ro)
	if cfg.err != nil {
		return types.NotVerified, p.fail(ro, call, cfg.err)
	}
	settings := cfg.Settings
	if !settings.VerifyWeight {
		return types.NotImplemented, types.RpcError{}
	}
	split, err := validateSplit(ro, desiredWeight, additional)
	if err != nil {
		return types.NotVerified, p.fail(ro, call, err)
	}
	// Experiment Services (in the Rollout's namespace, as SetWeight adds them)
	// take their weights out of stable's share.
	var extra []desired.BackendWeight
	for _, d := range additional {
		extra = append(extra, desired.BackendWeight{Backend: routes.ServiceRef(ro.Namespace, d.ServiceName), Weight: int64(d.Weight)})
	}
	p.mu.Lock()
	orch := p.orch
	p.mu.Unlock()
	if orch == nil {
		return types.NotVerified, p.fail(ro, call, errNoClient)
	}
	ctx, cancel := p.callContext()
	defer cancel()
	ok, err := orch.Verify(ctx, orchestrator.Check{
		Rollout: ro.Namespace + "/" + ro.Name, Name: call, Targets: settings.Targets,
		Split: split, Extra: extra, RuleNames: settings.RuleNames, Settle: settings.VerifyWeightSettle,
	})
	switch {
	case err != nil:
		return types.NotVerified, p.fail(ro, call, err)
	case !ok:
		return types.NotVerified, types.RpcError{}
	}
	return types.Verified, types.RpcError{}
}
