package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/kubeclient"
	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// Verify reads every route of the check fresh from the apiserver (it writes
// nothing) and says verified only when every route's spec carries the
// split and every parent it names reports Accepted and ResolvedRefs True
// for the route's current generation (desired.VerifyStatus), and, for a
// gateway whose status leads its data plane, that gateway's settle time has
// passed since that status was written (settling). A route that is behind
// gives false and one log line saying what is behind; a condition reported
// False gives an error naming the route, the parent and the reason.
func (o *Orchestrator) Verify(ctx context.Context, c rollout.Call) (bool, error) {
	s := c.Settings
	live, err := o.freshRoutes(ctx, reachOf(c), s.Targets)
	if err != nil {
		return false, err
	}
	log := o.log.WithFields(logrus.Fields{"rollout": c.Rollout.String(), "call": c.Name})
	var errs []error
	var failed []string
	behind := 0
	for _, r := range live {
		v, err := desired.VerifyStatus(r, c.Verify.Split, c.Verify.Extra, s.RuleNames[r.Ref])
		if err != nil {
			errs = append(errs, routes.RouteError(r.Ref, err))
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
		return false, errors.Join(errs...)
	}
	if behind > 0 {
		return false, nil
	}
	n, err := settling(log, live, s.VerifyWeightSettle, time.Now())
	if err != nil || n > 0 {
		return false, err
	}
	log.WithField("routes", len(live)).Debug("weights verified")
	return true, nil
}

// freshRoutes resolves the targets, when they are within reach, and reads
// every route again with a GET, concurrently: VerifyWeight comes right after
// SetWeight, and a watch cache a moment behind would show the generation
// before the write.
func (o *Orchestrator) freshRoutes(ctx context.Context, reach kube.Reachable, t routes.Targets) ([]routes.Route, error) {
	res, refused, err := kube.ResolveInReach(ctx, o.reader, reach, t)
	if err != nil || len(refused) > 0 {
		return nil, errors.Join(append(notGranted(refused), err)...)
	}
	if err := res.Err(); err != nil {
		return nil, err
	}
	resolved := res.Routes
	if err := withinTargets(t, resolved); err != nil {
		return nil, err // read again, they would be read outside the reach
	}
	out := make([]routes.Route, len(resolved))
	refs := make([]routes.Ref, len(resolved))
	for i, r := range resolved {
		refs[i] = r.Ref
	}
	errs := perRoute(ctx, refs, o.slots(), func(i int) error {
		fresh, err := o.reader.Fresh(ctx, refs[i])
		switch {
		case apierrors.IsNotFound(err):
			return fmt.Errorf("%s not found (deleted?)", refs[i])
		case err != nil:
			return fmt.Errorf("reading %s: %w", refs[i], kubeclient.AsPermissionError(err, "get", refs[i].Kind.GroupResource(), refs[i].Namespace))
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
