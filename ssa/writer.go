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

	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// DefaultFieldManager is the field manager every write uses unless configured.
const DefaultFieldManager = "argo-rollouts-gatewayapi"

// MaxAttempts bounds the writes of one route in a call: the orchestrator's
// read-and-decide-again loop on optimistic-lock conflicts and the release's
// retried Update. Between attempts a writer waits a little longer each time
// (Backoff), with jitter, so writers contending for one route take turns.
const MaxAttempts = 8

// Backoff waits before attempt+1, or until ctx ends.
func Backoff(ctx context.Context, attempt int) error {
	d := time.Duration(attempt*attempt)*5*time.Millisecond + time.Duration(rand.Int64N(int64(10*time.Millisecond)))
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// Want is what the plugin applies to a route: spec.rules whole, and its own
// labels and annotations (one it applied before and leaves out goes away,
// unless another manager owns it).
type Want struct {
	Rules       []routes.Rule
	Labels      map[string]string
	Annotations map[string]string
}

// Writer writes routes as one field manager. It decides nothing: what to
// write comes decided, and what a write's answer means for the next one is
// the caller's (package orchestrator).
type Writer struct {
	client       gateway.Interface
	dyn          dynamic.Interface
	reviews      authorizationv1.SelfSubjectAccessReviewInterface
	access       accessAnswers
	fieldManager string
	log          *logrus.Entry
}

// NewWriter returns a Writer that writes as fieldManager.
func NewWriter(client gateway.Interface, dyn dynamic.Interface, fieldManager string, log *logrus.Entry) *Writer {
	return &Writer{client: client, dyn: dyn, fieldManager: fieldManager, log: log}
}

// FieldManager is the field manager the writer writes as.
func (a *Writer) FieldManager() string { return a.fieldManager }

// ReviewingAccess makes ReviewOwnershipChange ask, with access reviews,
// whether the plugin may also do what ending its ownership of a route takes
// (permissions.go). With kube's client set:
// ReviewingAccess(kube.AuthorizationV1().SelfSubjectAccessReviews()).
func (a *Writer) ReviewingAccess(reviews authorizationv1.SelfSubjectAccessReviewInterface) *Writer {
	a.reviews = reviews
	return a
}

// Apply sends one server-side apply of want for the live route, guarded by
// the live resourceVersion and forced: the precondition guarantees want was
// decided from the latest value, so taking ownership loses nobody's change.
// It returns the apiserver's answer, why it was applied unstructured (empty
// if typed), and the apiserver's error as it came (IsStale, Explain).
func (a *Writer) Apply(ctx context.Context, live routes.Route, want Want) (*routes.Answer, string, error) {
	return apply(ctx, a.client, a.dyn, live, want, metav1.ApplyOptions{FieldManager: a.fieldManager, Force: true})
}

// Released is what a release did: the update's answer (nil if it could not
// be read as a route), the resourceVersions before and after it, and the
// operations of the entries it removed.
type Released struct {
	Answer   *routes.Answer
	From, To string
	Dropped  []string
}

// Release drops the plugin's ownership of the route, unless it owns nothing
// there any more or a Rollout has a claim on it again (then it answers nil).
// answer is the apply's answer the route is known from, nil if nothing was
// applied.
func (a *Writer) Release(ctx context.Context, current routes.Route, answer *routes.Answer) (*Released, error) {
	if !routes.OwnsAnything(current.ManagedFields, a.fieldManager) {
		return nil, nil
	}
	return a.release(ctx, current, answer)
}

// release removes the plugin's managedFields entries and keeps every value:
// an Update of the object as read, minus those entries, guarded by its
// resourceVersion. It is the one write that is not an apply; an apply cannot
// give up a field without deleting its value. The object an apply just
// stored (its answer, if not nil) is the object to update: reading it again
// would answer the same; after a conflict the route is read.
func (a *Writer) release(ctx context.Context, current routes.Route, answer *routes.Answer) (*Released, error) {
	res := a.dyn.Resource(current.Kind.GVR(current.Version)).Namespace(current.Namespace)
	for attempt := 1; ; attempt++ {
		u, err := answer.Object()
		if err != nil {
			return nil, err
		}
		answer = nil
		if u == nil {
			if u, err = res.Get(ctx, current.Name, metav1.GetOptions{}); err != nil {
				return nil, kube.Grant(err, "get", current.Kind.GroupResource(), current.Namespace)
			}
		}
		live, err := routes.FromUnstructured(u)
		if err != nil {
			return nil, err
		}
		claims, err := routes.ReadClaims(live)
		if err != nil {
			return nil, err
		}
		if len(claims.Rollouts()) > 0 || !routes.OwnsAnything(live.ManagedFields, a.fieldManager) {
			return nil, nil // a Rollout started meanwhile, or someone else released it
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
		if IsStale(err) && attempt < MaxAttempts {
			if err := Backoff(ctx, attempt); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, kube.Grant(err, "update", current.Kind.GroupResource(), current.Namespace)
		}
		done := &Released{From: live.ResourceVersion, To: updated.GetResourceVersion(), Dropped: dropped}
		if r, err := routes.FromUnstructuredNoCopy(updated); err == nil {
			done.Answer = routes.Answered(r, nil)
		}
		return done, nil
	}
}

// IsStale tells an optimistic-lock conflict (the route changed since it was
// read) from a field-manager conflict.
func IsStale(err error) bool {
	return apierrors.IsConflict(err) && !apierrors.HasStatusCause(err, metav1.CauseTypeFieldManagerConflict)
}

// Explain adds what to do to the apiserver's answer to a request of verb.
func Explain(ctx context.Context, err error, ref routes.Ref, verb string) error {
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

// UnrepresentableError says a route holds something the plugin's Gateway API
// types cannot carry: a typed apply would delete that part of the route. The
// writer then applies the same content unstructured.
type UnrepresentableError struct{ Reason string }

func (e *UnrepresentableError) Error() string {
	return "spec.rules holds fields this build's Gateway API types do not know: " + e.Reason
}
