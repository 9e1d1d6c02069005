package ssa

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// DefaultFieldManager is the field manager every write uses unless configured.
const DefaultFieldManager = "argo-rollouts-gatewayapi"

// maxAttempts bounds the re-read-and-recompute loop on optimistic-lock
// conflicts; between attempts the applier waits a little longer each time,
// with jitter, so writers contending for one route take turns.
const maxAttempts = 8

func backoff(ctx context.Context, attempt int) error {
	d := time.Duration(attempt*attempt)*5*time.Millisecond + time.Duration(rand.Int64N(int64(10*time.Millisecond)))
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// Compute returns the desired state of a route from its live state. It must be
// pure: the applier calls it again after every optimistic-lock conflict.
type Compute func(live routes.Route) (desired.Result, error)

// Applier writes routes.
type Applier struct {
	client       gateway.Interface
	dyn          dynamic.Interface
	reviews      authorizationv1.SelfSubjectAccessReviewInterface
	access       accessAnswers
	reader       kube.Reader
	fieldManager string
	log          *logrus.Entry
}

// NewApplier returns an Applier that writes as fieldManager.
func NewApplier(client gateway.Interface, dyn dynamic.Interface, reader kube.Reader, fieldManager string, log *logrus.Entry) *Applier {
	return &Applier{client: client, dyn: dyn, reader: reader, fieldManager: fieldManager, log: log}
}

// ReviewingAccess makes the applier ask, with access reviews, before a write
// that starts or ends the plugin's ownership of a route, whether the plugin
// may also do what ending it takes (permissions.go). With kube's client set:
// ReviewingAccess(kube.AuthorizationV1().SelfSubjectAccessReviews()).
func (a *Applier) ReviewingAccess(reviews authorizationv1.SelfSubjectAccessReviewInterface) *Applier {
	a.reviews = reviews
	return a
}

// Plan is a computed change to one route, not yet written.
type Plan struct {
	Live    routes.Route
	Desired desired.Result
	compute Compute
}

// Plan computes the desired state of a live route. Computing every route's
// plan before writing any lets a caller refuse bad input with nothing written.
func (a *Applier) Plan(live routes.Route, compute Compute) (Plan, error) {
	d, err := compute(live)
	if err != nil {
		return Plan{}, &RouteError{Route: live.Ref, Err: err}
	}
	return Plan{Live: live, Desired: d, compute: compute}, nil
}

// Write applies the plan. On an optimistic-lock conflict it reads the route
// again, recomputes and retries, at most maxAttempts times in all; so it does
// when the apiserver no longer serves the route's version (the reader
// discovers it again). It logs one line per write that reached the apiserver.
func (a *Applier) Write(ctx context.Context, p Plan, log *logrus.Entry) error {
	if err := a.checkOwnershipChange(ctx, p); err != nil {
		return &RouteError{Route: p.Live.Ref, Err: err}
	}
	for attempt := 1; ; attempt++ {
		if p.Desired.Unchanged {
			return a.releaseIfDone(ctx, p, p.Live, nil, log)
		}
		answer, unstructured, err := apply(ctx, a.client, a.dyn, p.Live, p.Desired, metav1.ApplyOptions{
			FieldManager: a.fieldManager,
			// The resourceVersion precondition guarantees the rules were computed
			// from the latest value, so taking ownership loses nobody's change.
			Force: true,
		})
		if err == nil {
			a.reader.Written(answer)
			fields := logrus.Fields{
				"route":           p.Live.Ref.String(),
				"fieldManager":    a.fieldManager,
				"resourceVersion": p.Live.ResourceVersion + "→" + answer.ResourceVersion,
				"changes":         strings.Join(p.Desired.Changes, "; "),
			}
			if unstructured != "" {
				fields["unstructured"] = unstructured
			}
			log.WithFields(fields).Info("applied route")
			if !p.Desired.Release {
				return nil
			}
			stored, err := answer.Route()
			if err != nil {
				return &RouteError{Route: p.Live.Ref, Err: fmt.Errorf("reading the apiserver's answer: %w", err)}
			}
			return a.releaseIfDone(ctx, p, stored, answer, log)
		}
		if !isStale(err) && !kube.NotServed(err) {
			return &RouteError{Route: p.Live.Ref, Err: explain(ctx, err, p.Live.Ref, "patch")}
		}
		if attempt == maxAttempts {
			return &RouteError{Route: p.Live.Ref, Err: fmt.Errorf("the route kept changing under the plugin: %d attempts ended in optimistic-lock conflicts; the call is safe to repeat", attempt)}
		}
		log.WithFields(logrus.Fields{"route": p.Live.Ref.String(), "resourceVersion": p.Live.ResourceVersion, "attempt": attempt}).
			Debug("route changed since it was read; reading it again")
		if err := backoff(ctx, attempt); err != nil {
			return &RouteError{Route: p.Live.Ref, Err: fmt.Errorf("gave up after %d optimistic-lock conflicts: %w", attempt, err)}
		}
		live, err := a.reader.Fresh(ctx, p.Live.Ref)
		if err != nil {
			return &RouteError{Route: p.Live.Ref, Err: explain(ctx, err, p.Live.Ref, "get")}
		}
		d, err := p.compute(live)
		if err != nil {
			return &RouteError{Route: p.Live.Ref, Err: err}
		}
		p = Plan{Live: live, Desired: d, compute: p.compute}
	}
}

// releaseIfDone drops the plugin's ownership when the plan says the rollouts
// on the route are done and the plugin still owns something there. answer is
// the apply's answer, nil if nothing was applied.
func (a *Applier) releaseIfDone(ctx context.Context, p Plan, current routes.Route, answer *routes.Answer, log *logrus.Entry) error {
	if !p.Desired.Release || !routes.OwnsAnything(current.ManagedFields, a.fieldManager) {
		return nil
	}
	if err := a.release(ctx, current, answer, log); err != nil {
		return &RouteError{Route: current.Ref, Err: fmt.Errorf("giving up ownership: %w", explain(ctx, err, current.Ref, "update"))}
	}
	return nil
}

// release removes the plugin's managedFields entries and keeps every value:
// an Update of the object as read, minus those entries, guarded by its
// resourceVersion. It is the one write that is not an apply; an apply cannot
// give up a field without deleting its value. The object an apply just
// stored (its answer, if not nil) is the object to update: reading it again
// would answer the same; after a conflict the route is read.
func (a *Applier) release(ctx context.Context, current routes.Route, answer *routes.Answer, log *logrus.Entry) error {
	res := a.dyn.Resource(current.Kind.GVR(current.Version)).Namespace(current.Namespace)
	for attempt := 1; ; attempt++ {
		u, err := answer.Object()
		if err != nil {
			return err
		}
		answer = nil
		if u == nil {
			if u, err = res.Get(ctx, current.Name, metav1.GetOptions{}); err != nil {
				return kube.Grant(err, "get", current.Kind.GroupResource(), current.Namespace)
			}
		}
		live, err := routes.FromUnstructured(u)
		if err != nil {
			return err
		}
		claims, err := routes.ReadClaims(live)
		if err != nil {
			return err
		}
		if len(claims.Rollouts()) > 0 || !routes.OwnsAnything(live.ManagedFields, a.fieldManager) {
			return nil // a Rollout started meanwhile, or someone else released it
		}
		var keep []metav1.ManagedFieldsEntry
		var dropped []string
		for _, e := range live.ManagedFields {
			if e.Manager == a.fieldManager {
				dropped = append(dropped, string(e.Operation))
				continue
			}
			keep = append(keep, e)
		}
		if len(keep) == 0 {
			// An empty list would mean "leave managedFields as they are".
			keep = []metav1.ManagedFieldsEntry{{}}
		}
		u.SetManagedFields(keep)
		updated, err := res.Update(ctx, u, metav1.UpdateOptions{FieldManager: a.fieldManager})
		if isStale(err) && attempt < maxAttempts {
			if err := backoff(ctx, attempt); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return kube.Grant(err, "update", current.Kind.GroupResource(), current.Namespace)
		}
		if r, err := routes.FromUnstructuredNoCopy(updated); err == nil {
			a.reader.Written(routes.Answered(r, nil))
		}
		log.WithFields(logrus.Fields{
			"route":           current.Ref.String(),
			"fieldManager":    a.fieldManager,
			"resourceVersion": live.ResourceVersion + "→" + updated.GetResourceVersion(),
			"changes":         "ownership released (" + strings.Join(dropped, ", ") + " entry removed), every value kept",
		}).Info("released route")
		return nil
	}
}

// isStale tells an optimistic-lock conflict (the route changed since it was
// read) from a field-manager conflict.
func isStale(err error) bool {
	return apierrors.IsConflict(err) && !apierrors.HasStatusCause(err, metav1.CauseTypeFieldManagerConflict)
}

// explain adds what to do to the apiserver's answer to a request of verb.
func explain(ctx context.Context, err error, ref routes.Ref, verb string) error {
	var perm *kube.PermissionError
	var transport *url.Error
	unanswered := errors.As(err, &transport)
	if unanswered {
		err = transport.Err // the request's URL says again what the route does
	}
	switch {
	case errors.As(err, &perm):
		return err
	case ctx.Err() != nil:
		return fmt.Errorf("not confirmed written before the call's deadline (the call is safe to repeat): %w", err)
	case unanswered:
		return fmt.Errorf("%w; whether it was written is not known, and the call is safe to repeat", err)
	case apierrors.IsNotFound(err) && !kube.NotServed(err):
		return fmt.Errorf("not found (deleted while the plugin worked on it?): %w", err)
	case apierrors.IsForbidden(err):
		return kube.Grant(err, verb, ref.Kind.GroupResource(), ref.Namespace)
	case apierrors.IsInvalid(err):
		return fmt.Errorf("the apiserver rejected the new rules as invalid: %w", err)
	case strings.Contains(err.Error(), "field not declared in schema"):
		// The plugin leaves out what the installed CRD lacks (routes.Schema);
		// it meets this only when the CRDs lost a field while it ran.
		return fmt.Errorf("the installed Gateway API CRDs do not declare a field of the apply; if they were downgraded while the plugin ran, restart it: %w", err)
	}
	return fmt.Errorf("the apiserver refused the apply: %w", err)
}

// RouteError is a failure on one route.
type RouteError struct {
	Route routes.Ref
	Err   error
}

func (e *RouteError) Error() string {
	msg := e.Err.Error()
	if strings.HasPrefix(msg, e.Route.String()) {
		return msg
	}
	return e.Route.String() + ": " + msg
}
func (e *RouteError) Unwrap() error { return e.Err }

// UnrepresentableError says a route holds something the plugin's Gateway API
// types cannot carry: a typed apply would delete that part of the route. The
// applier then applies the same content unstructured.
type UnrepresentableError struct{ Reason string }

func (e *UnrepresentableError) Error() string {
	return "spec.rules holds fields this build's Gateway API types do not know: " + e.Reason
}
