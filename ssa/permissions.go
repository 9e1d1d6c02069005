package ssa

import (
	"context"
	"slices"
	"strings"

	"github.com/sirupsen/logrus"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// A rollout's first write on a route makes the plugin an owner of it, and its
// last gives that ownership back with an Update after the apply. Without
// update (or get, which the release and every conflict need) the last call
// would apply the weights and then fail half-way, leaving the plugin owning
// spec.rules for good. So before a write that starts or ends its ownership,
// the applier asks the apiserver (SelfSubjectAccessReviews, which store
// nothing) whether it may patch, get and update the route, and refuses with
// nothing written if not, naming every verb missing. A review that cannot be
// made decides nothing: the apiserver still judges the write itself.

// ownershipVerbs are what a rollout on a route takes from its first write to
// giving ownership back.
var ownershipVerbs = []string{"patch", "get", "update"}

// checkOwnershipChange refuses a plan that starts or ends the plugin's
// ownership of the route when the plugin may not do all that ending it
// takes.
func (a *Applier) checkOwnershipChange(ctx context.Context, p Plan) error {
	if a.reviews == nil || p.Desired.Unchanged {
		return nil
	}
	owns := routes.OwnsAnything(p.Live.ManagedFields, a.fieldManager)
	starts, ends := !owns && !p.Desired.Release, owns && p.Desired.Release
	if !starts && !ends {
		return nil
	}
	var denied, reasons []string
	for _, verb := range ownershipVerbs {
		review, err := a.reviews.Create(ctx, &authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authzv1.ResourceAttributes{
				Namespace: p.Live.Namespace, Verb: verb, Group: routes.Group, Resource: p.Live.Kind.Resource(), Name: p.Live.Name,
			},
		}}, metav1.CreateOptions{})
		if err != nil {
			a.log.WithError(err).WithFields(logrus.Fields{"route": p.Live.Ref.String(), "verb": verb}).
				Debug("access review failed; the apiserver decides on the write itself")
			continue
		}
		if !review.Status.Allowed {
			denied = append(denied, verb)
			if r := review.Status.Reason; r != "" && !slices.Contains(reasons, r) {
				reasons = append(reasons, r)
			}
		}
	}
	if len(denied) == 0 {
		return nil
	}
	why := "a rollout applies the route (patch), reads it again after a conflict (get) and gives its ownership of spec.rules back when it ends (update); nothing was written"
	if len(reasons) > 0 {
		why += " (" + strings.Join(reasons, "; ") + ")"
	}
	return &routes.PermissionError{Verbs: denied, Resource: p.Live.Kind.GroupResource(), Namespace: p.Live.Namespace, Why: why}
}
