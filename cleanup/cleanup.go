package cleanup

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/orchestrator"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// rolloutsResource is the resource of Argo Rollouts' Rollout.
var rolloutsResource = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}

// Versions tells the served API version of each route kind.
type Versions interface {
	ServedVersion(ctx context.Context, kind routes.Kind) (string, error)
}

// Cleaner finds and undoes Rollouts' claims on routes.
type Cleaner struct {
	// Dynamic lists the routes; Rollouts reads the Rollouts, in the
	// controller's cluster (nil: with Dynamic, when the routes are there
	// too).
	Dynamic      dynamic.Interface
	Rollouts     dynamic.Interface
	Versions     Versions
	Orchestrator *orchestrator.Orchestrator
	FieldManager string
	Log          *logrus.Entry
}

// Routes lists every route (of every kind the cluster serves) in namespace,
// "" for all, with the claims it carries. A kind the cluster does not serve
// is skipped.
func (c *Cleaner) Routes(ctx context.Context, namespace string) ([]routes.Route, error) {
	var out []routes.Route
	for _, kind := range routes.Kinds {
		version, err := c.Versions.ServedVersion(ctx, kind)
		if err != nil {
			continue // not installed: nothing of the plugin's can be there
		}
		list, err := c.Dynamic.Resource(kind.GVR(version)).Namespace(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", kind.Resource(), err)
		}
		for i := range list.Items {
			r, err := routes.FromUnstructured(&list.Items[i])
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// Claimed are the routes among rs on which rollout ("<namespace>/<name>")
// has a claim that records anything.
func Claimed(rs []routes.Route, rollout string) []routes.Route {
	var out []routes.Route
	for _, r := range rs {
		claims, err := routes.ReadClaims(r)
		if err == nil && !claims[rollout].Empty() {
			out = append(out, r)
		}
	}
	return out
}

// claimingRollouts lists the Rollouts that have a claim recording anything
// on any of rs, sorted.
func claimingRollouts(rs []routes.Route) []string {
	seen := map[string]bool{}
	for _, r := range rs {
		claims, err := routes.ReadClaims(r)
		if err != nil {
			continue
		}
		for k, c := range claims {
			if !c.Empty() {
				seen[k] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Exists says whether the Rollout ("<namespace>/<name>") exists.
func (c *Cleaner) Exists(ctx context.Context, rollout string) (bool, error) {
	ns, name, ok := strings.Cut(rollout, "/")
	if !ok {
		return false, fmt.Errorf("%q is not <namespace>/<name>", rollout)
	}
	rollouts := c.Rollouts
	if rollouts == nil {
		rollouts = c.Dynamic
	}
	_, err := rollouts.Resource(rolloutsResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("reading Rollout %s: %w", rollout, err)
}

// Outcome is what undoing a claim did, or would do, on one route.
type Outcome struct {
	Route   routes.Ref
	Changes []string
	// Unchanged says the route needed no write.
	Unchanged bool
	Err       error
}

// Undo takes rollout's claim back on each route. With dryRun it only says
// what it would change. policy says what to do with values another manager
// changed since the plugin set them.
func (c *Cleaner) Undo(ctx context.Context, rollout string, rs []routes.Route, policy desired.ConflictPolicy, dryRun bool) []Outcome {
	env := desired.Env{Rollout: rollout, FieldManager: c.FieldManager, ConflictPolicy: policy}
	compute := func(l routes.Route) (desired.Result, error) { return desired.Undo{}.Desired(l, env) }
	by := orchestrator.Cause{Rollout: rollout, Call: "cleanup"}
	out := make([]Outcome, 0, len(rs))
	for _, r := range rs {
		o := Outcome{Route: r.Ref}
		plan, err := orchestrator.MakePlan(r, compute)
		if err != nil {
			o.Err = err
		} else if o.Changes, o.Unchanged = plan.Desired.Changes, plan.Desired.Unchanged; !dryRun {
			o.Err = c.Orchestrator.Write(ctx, plan, by)
		}
		out = append(out, o)
	}
	return out
}

// Failed joins the errors of the outcomes.
func Failed(outcomes []Outcome) error {
	var errs []error
	for _, o := range outcomes {
		if o.Err != nil {
			errs = append(errs, o.Err)
		}
	}
	return errors.Join(errs...)
}
