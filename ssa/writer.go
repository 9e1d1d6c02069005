package ssa

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/kubeclient"
	"github.com/gatewayapi-ssa/rollouts-plugin/retry"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// DefaultFieldManager is the field manager every write uses unless configured.
const DefaultFieldManager = "argo-rollouts-gatewayapi"

// Content is what the plugin applies to a route: spec.rules whole, and its own
// labels and annotations (one it applied before and leaves out goes away,
// unless another manager owns it).
type Content struct {
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

	sendersMu sync.Mutex
	senders   map[kindVersion]*sender // send.go
}

// NewWriter returns a Writer that writes as fieldManager.
func NewWriter(client gateway.Interface, dyn dynamic.Interface, fieldManager string, log *logrus.Entry) *Writer {
	return &Writer{client: client, dyn: dyn, fieldManager: fieldManager, log: log}
}

// FieldManager is the field manager the writer writes as.
func (w *Writer) FieldManager() string { return w.fieldManager }

// ReviewingAccess makes ReviewOwnershipChange ask, with access reviews,
// whether the plugin may also do what ending its ownership of a route takes
// (permissions.go). With kube's client set:
// ReviewingAccess(kube.AuthorizationV1().SelfSubjectAccessReviews()).
func (w *Writer) ReviewingAccess(reviews authorizationv1.SelfSubjectAccessReviewInterface) *Writer {
	w.reviews = reviews
	return w
}

// Guard is what keeps an apply from losing a change someone else made
// after the route was read.
type Guard int

const (
	// ByResourceVersion: the apply carries the resourceVersion it was
	// decided from and is forced. Any change to the route since, by anyone,
	// makes it fail (IsStale); forcing then loses nobody's change, so it can
	// take spec.rules from another owner (the first write of a rollout).
	ByResourceVersion Guard = iota
	// ByOwnership: the apply carries no resourceVersion and is not forced;
	// for a route whose spec.rules the plugin owns alone. Another manager
	// that changed them since has taken that ownership (spec.rules is one
	// atomic field), so the apply fails with a conflict naming it
	// (IsOwnershipConflict); a change to anything else (labels, annotations,
	// hostnames) does not stop it. It cannot see a change by another process
	// of the plugin's own field manager: only a process that knows it is the
	// only one (package peers) may use it.
	ByOwnership
)

func (g Guard) String() string {
	if g == ByOwnership {
		return "ownership"
	}
	return "resourceVersion"
}

// Apply sends one server-side apply of want for the live route under the
// plugin's field manager, guarded by guard. It returns the apiserver's
// answer, why it was applied unstructured (empty if typed), and the
// apiserver's error as it came (IsStale, IsOwnershipConflict, Explain).
func (w *Writer) Apply(ctx context.Context, live routes.Route, want Content, guard Guard) (*kube.Answer, string, error) {
	opts := metav1.ApplyOptions{FieldManager: w.fieldManager, Force: true}
	if guard == ByOwnership {
		live.ResourceVersion = "" // live is a copy: the caller's keeps its version
		opts.Force = false
	}
	// Sent again after a lost answer, it cannot write twice: a second apply
	// guarded by the resourceVersion fails as stale, and one that is not
	// forced applies what is already there (or conflicts).
	repeatable := !opts.Force || live.ResourceVersion != ""
	return w.apply(ctx, live, want, opts, repeatable)
}

// Released is what a release did: the update's answer (nil if it could not
// be read as a route), the resourceVersions before and after it, and the
// operations of the entries it removed.
type Released struct {
	Answer   *kube.Answer
	From, To string
	Dropped  []string
}

// Release drops the plugin's ownership of the route, unless it owns nothing
// there any more or a Rollout has a claim on it again (then it answers nil).
// answer is the apply's answer the route is known from, nil if nothing was
// applied.
func (w *Writer) Release(ctx context.Context, current routes.Route, answer *kube.Answer) (*Released, error) {
	if !current.ManagedFields.OwnsAnything(w.fieldManager) {
		return nil, nil
	}
	return w.release(ctx, current, answer)
}

// release removes the plugin's managedFields entries and keeps every value.
// It is the one write that is not an apply (an apply cannot give up a field
// without deleting its value): a JSON patch that removes the entries, each
// after a test that it is still exactly as read. Nothing else of the route
// is sent, so changes others make meanwhile neither stop it nor get lost;
// an apply of the plugin's meanwhile (a Rollout starting on the route)
// changes its entry, fails the test, and the route is read again (at once,
// up to retry.ReleaseAttempts times). The object an apply just stored (its
// answer, if not nil) is the object read first.
func (w *Writer) release(ctx context.Context, current routes.Route, answer *kube.Answer) (*Released, error) {
	res := w.dyn.Resource(current.Kind.GVR(current.Version)).Namespace(current.Namespace)
	for attempt := 1; ; attempt++ {
		u, err := answer.Object()
		if err != nil {
			return nil, err
		}
		answer = nil
		if u == nil {
			if u, err = res.Get(ctx, current.Name, metav1.GetOptions{}); err != nil {
				return nil, kubeclient.AsPermissionError(err, "get", current.Kind.GroupResource(), current.Namespace)
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
		if len(claims.Rollouts()) > 0 || !live.ManagedFields.OwnsAnything(w.fieldManager) {
			return nil, nil // a Rollout started meanwhile, or someone else released it
		}
		patch, dropped, err := releasePatch(live.ManagedFields.Entries(), w.fieldManager)
		if err != nil {
			return nil, err
		}
		// Its tests make it safe to send again: applied once, they fail.
		updated, err := res.Patch(kubeclient.SafeToRepeat(ctx), current.Name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: w.fieldManager})
		if failedTest(err) && attempt < retry.ReleaseAttempts {
			continue // the plugin's entry changed since it was read: read it again
		}
		if err != nil {
			return nil, kubeclient.AsPermissionError(err, "patch", current.Kind.GroupResource(), current.Namespace)
		}
		done := &Released{From: live.ResourceVersion, To: updated.GetResourceVersion(), Dropped: dropped}
		if r, err := routes.FromUnstructuredNoCopy(updated); err == nil {
			done.Answer = kube.Answered(r, nil)
		}
		return done, nil
	}
}

// releasePatch is the JSON patch that removes manager's managedFields
// entries, each tested first to be as read, and the operations of the
// entries it removes. When they are every entry, it tests the whole list
// and leaves one empty entry: an empty list would mean "leave them as they
// are".
func releasePatch(entries []metav1.ManagedFieldsEntry, manager string) ([]byte, []string, error) {
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value,omitempty"`
	}
	var ops []op
	var dropped []string
	keep := 0
	for i := len(entries) - 1; i >= 0; i-- { // from the end: a removal shifts what follows
		e := entries[i]
		if e.Manager != manager {
			keep++
			continue
		}
		path := fmt.Sprintf("/metadata/managedFields/%d", i)
		ops = append(ops, op{Op: "test", Path: path, Value: e}, op{Op: "remove", Path: path})
		dropped = append([]string{string(e.Operation)}, dropped...)
	}
	if keep == 0 {
		ops = []op{
			{Op: "test", Path: "/metadata/managedFields", Value: entries},
			{Op: "replace", Path: "/metadata/managedFields", Value: []metav1.ManagedFieldsEntry{{}}},
		}
	}
	patch, err := json.Marshal(ops)
	return patch, dropped, err
}

// failedTest says a JSON patch may have failed one of its tests: the
// apiserver answers that with a bare 422, no cause given (checked on
// kube-apiserver 1.34).
func failedTest(err error) bool {
	return apierrors.IsInvalid(err)
}

// IsOwnershipConflict says an apply failed because another manager owns a
// field it would change: for a ByOwnership apply, someone else changed
// spec.rules after the route was read.
func IsOwnershipConflict(err error) bool {
	return apierrors.IsConflict(err) && apierrors.HasStatusCause(err, metav1.CauseTypeFieldManagerConflict)
}

// IsStale tells an optimistic-lock conflict (the route changed since it was
// read) from a field-manager conflict.
func IsStale(err error) bool {
	return apierrors.IsConflict(err) && !apierrors.HasStatusCause(err, metav1.CauseTypeFieldManagerConflict)
}

// Explain adds what to do to the apiserver's answer to a request of verb.
func Explain(ctx context.Context, err error, ref routes.Ref, verb string) error {
	var perm *kubeclient.PermissionError
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
	case apierrors.IsNotFound(err) && !kubeclient.NotServed(err):
		return fmt.Errorf("not found (deleted while the plugin worked on it?): %w", err)
	case apierrors.IsForbidden(err):
		return kubeclient.AsPermissionError(err, verb, ref.Kind.GroupResource(), ref.Namespace)
	case apierrors.IsInvalid(err):
		return fmt.Errorf("the apiserver rejected the new rules as invalid: %w", err)
	case strings.Contains(err.Error(), "field not declared in schema"):
		// The plugin leaves out what the installed CRD lacks (routes.Schema);
		// it meets this only when the CRDs lost a field while it ran.
		return fmt.Errorf("the installed Gateway API CRDs do not declare a field of the apply; if they were downgraded while the plugin ran, restart it: %w", err)
	}
	return fmt.Errorf("the apiserver refused the apply: %w", err)
}

// unrepresentableError says a route holds something the plugin's Gateway API
// types cannot carry: a typed apply would delete that part of the route. The
// writer then applies the same content unstructured.
type unrepresentableError struct{ Reason string }

func (e *unrepresentableError) Error() string {
	return "spec.rules holds fields this build's Gateway API types do not know: " + e.Reason
}
