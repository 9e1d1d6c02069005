package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/argoproj/argo-rollouts/utils/plugin/types"
	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
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
	reader := p.reader
	p.mu.Unlock()
	if reader == nil {
		return types.NotVerified, p.fail(ro, call, errNoClient)
	}
	ctx, cancel := p.callContext()
	defer cancel()

	live, err := p.freshRoutes(ctx, reader, settings.Targets)
	if err != nil {
		return types.NotVerified, p.fail(ro, call, err)
	}
	log := p.log.WithFields(logrus.Fields{"rollout": ro.Namespace + "/" + ro.Name, "call": call})
	var errs []error
	var failed []string
	behind := 0
	for _, r := range live {
		v, err := desired.VerifyStatus(r, split, extra, settings.RuleNames[r.Ref])
		if err != nil {
			errs = append(errs, routes.About(r.Ref, err))
			continue
		}
		if len(v.Failed) > 0 {
			failed = append(failed, v.String())
			continue
		}
		if len(v.Behind) > 0 {
			behind++
			log.WithFields(logrus.Fields{
				"route":      r.Ref.String(),
				"generation": r.Generation,
				"behind":     findings(v.Behind),
			}).Info("weights not verified yet")
		}
	}
	if len(failed) > 0 {
		errs = append(errs, fmt.Errorf("a gateway controller refused the route: %s", strings.Join(failed, "; ")))
	}
	if len(errs) > 0 {
		return types.NotVerified, p.fail(ro, call, errors.Join(errs...))
	}
	if behind > 0 {
		return types.NotVerified, types.RpcError{}
	}
	n, err := settling(log, live, settings.VerifyWeightSettle, time.Now())
	if err != nil {
		return types.NotVerified, p.fail(ro, call, err)
	}
	if n > 0 {
		return types.NotVerified, types.RpcError{}
	}
	log.WithField("routes", len(live)).Debug("weights verified")
	return types.Verified, types.RpcError{}
}

// freshRoutes resolves the targets and reads every route again with a GET,
// concurrently: VerifyWeight comes right after SetWeight, and a watch cache a
// moment behind would show the generation before the write.
func (p *Plugin) freshRoutes(ctx context.Context, reader kube.Reader, t routes.Targets) ([]routes.Route, error) {
	resolved, err := kube.Resolve(ctx, reader, t)
	if err != nil {
		return nil, err
	}
	out := make([]routes.Route, len(resolved))
	refs := make([]routes.Ref, len(resolved))
	for i, r := range resolved {
		refs[i] = r.Ref
	}
	errs := perRoute(ctx, refs, []slots{newSlots(p.opts.MaxConcurrentWrites), p.routeSlots}, func(i int) error {
		fresh, err := reader.Fresh(ctx, refs[i])
		switch {
		case apierrors.IsNotFound(err):
			return fmt.Errorf("%s not found (deleted?)", refs[i])
		case err != nil:
			return fmt.Errorf("reading %s: %w", refs[i], kube.Grant(err, "get", refs[i].Kind.GroupResource(), refs[i].Namespace))
		}
		out[i] = fresh
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

func findings(fs []desired.Finding) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = f.String()
	}
	return strings.Join(parts, "; ")
}
