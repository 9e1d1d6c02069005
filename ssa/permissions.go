package ssa

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/kubeclient"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// A rollout's first write on a route makes the plugin an owner of it, and its
// last gives that ownership back with a JSON patch of its managedFields
// after the apply. Without get (which the release and every conflict need)
// the last call would apply the weights and then fail half-way, leaving the
// plugin owning spec.rules for good. So before a write that starts or ends
// its ownership, the writer asks the apiserver (SelfSubjectAccessReviews,
// which store nothing) whether it may patch and get the route, and refuses
// with nothing written if not, naming every verb missing. A review that cannot be
// made decides nothing: the apiserver still judges the write itself.
//
// RBAC grants verbs per namespace and resource in practice, so the writer
// first asks for the whole namespace, and remembers a yes for the process,
// for allowedFor: a step over 200 routes of one namespace costs three
// reviews, not 600, and ten Rollouts starting at once share them. A no is
// never remembered: a role may still grant the verb on this route by name
// (resourceNames), so the writer asks for the route itself, every time.

// ownershipVerbs are what a rollout on a route takes from its first write to
// giving ownership back.
var ownershipVerbs = []string{"patch", "get"}

// allowedFor is how long a namespace-wide yes is taken as the answer. A
// permission taken away meanwhile is still refused by the apiserver on the
// write itself.
const allowedFor = 30 * time.Second

// accessKey is a question asked for a whole namespace.
type accessKey struct{ namespace, resource, verb string }

// accessAnswers remembers the namespace-wide yeses, and lets the routes
// asking the same question at once wait for one review.
type accessAnswers struct {
	mu      sync.Mutex
	allowed map[accessKey]time.Time // until when
	asking  kubeclient.Flights[accessKey, bool]
}

// ReviewOwnershipChange refuses a write that starts or ends the plugin's
// ownership of the live route (ends it: release) when the plugin may not do
// all that ending it takes. Without ReviewingAccess it refuses nothing.
func (w *Writer) ReviewOwnershipChange(ctx context.Context, live routes.Route, release bool) error {
	if w.reviews == nil {
		return nil
	}
	owns := live.ManagedFields.OwnsAnything(w.fieldManager)
	starts, ends := !owns && !release, owns && release
	if !starts && !ends {
		return nil
	}
	var denied, reasons []string
	for _, verb := range ownershipVerbs {
		attrs := authzv1.ResourceAttributes{Namespace: live.Namespace, Verb: verb, Group: routes.Group, Resource: live.Kind.Resource()}
		allowed, err := w.namespaceAllows(ctx, attrs)
		if err == nil && !allowed {
			attrs.Name = live.Name
			var reason string
			if allowed, reason, err = w.review(ctx, attrs); reason != "" && !slices.Contains(reasons, reason) {
				reasons = append(reasons, reason)
			}
		}
		if err != nil {
			w.log.WithError(err).WithFields(logrus.Fields{"route": live.Ref.String(), "verb": verb}).
				Debug("access review failed; the apiserver decides on the write itself")
			continue
		}
		if !allowed {
			denied = append(denied, verb)
		}
	}
	if len(denied) == 0 {
		return nil
	}
	why := "a rollout applies the route (patch), reads it again after a conflict (get) and gives its ownership of spec.rules back when it ends (patch); nothing was written"
	if len(reasons) > 0 {
		why += " (" + strings.Join(reasons, "; ") + ")"
	}
	return &kubeclient.PermissionError{Verbs: denied, Resource: live.Kind.GroupResource(), Namespace: live.Namespace, Why: why}
}

// namespaceAllows says whether the plugin may do attrs.Verb on every route of
// the resource in the namespace: from a yes remembered, or from one review
// that the routes asking at the same time share.
func (w *Writer) namespaceAllows(ctx context.Context, attrs authzv1.ResourceAttributes) (bool, error) {
	key := accessKey{attrs.Namespace, attrs.Resource, attrs.Verb}
	c := &w.access
	remembered := func() (bool, bool) {
		yes := c.remembers(key)
		return yes, yes
	}
	return c.asking.Do(ctx, key, remembered, func() (bool, error) {
		allowed, _, err := w.review(ctx, attrs)
		if err == nil && allowed {
			c.mu.Lock()
			if c.allowed == nil {
				c.allowed = map[accessKey]time.Time{}
			}
			c.allowed[key] = time.Now().Add(allowedFor)
			c.mu.Unlock()
		}
		return allowed, err
	})
}

// remembers says a namespace-wide yes for key is remembered and not older
// than allowedFor.
func (c *accessAnswers) remembers(key accessKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	until, ok := c.allowed[key]
	return ok && time.Now().Before(until)
}

// review asks the apiserver once.
func (w *Writer) review(ctx context.Context, attrs authzv1.ResourceAttributes) (allowed bool, reason string, err error) {
	r, err := w.reviews.Create(ctx, &authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}, metav1.CreateOptions{})
	if err != nil {
		return false, "", err
	}
	return r.Status.Allowed, r.Status.Reason, nil
}
