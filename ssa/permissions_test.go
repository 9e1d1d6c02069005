package ssa

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/kubeclient"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// reviewer answers access reviews as RBAC would for a role that grants
// verbs namespace-wide (grants) and on single routes by name (byName), and
// counts the reviews.
type reviewer struct {
	mu      sync.Mutex
	grants  map[string]bool // verb
	byName  map[string]bool // verb/name
	asked   []string
	refuses error
}

func (r *reviewer) Create(_ context.Context, review *authzv1.SelfSubjectAccessReview, _ metav1.CreateOptions) (*authzv1.SelfSubjectAccessReview, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := review.Spec.ResourceAttributes
	r.asked = append(r.asked, a.Verb+"/"+a.Name)
	if r.refuses != nil {
		return nil, r.refuses
	}
	out := review.DeepCopy()
	out.Status.Allowed = r.grants[a.Verb] || (a.Name != "" && r.byName[a.Verb+"/"+a.Name])
	if !out.Status.Allowed {
		out.Status.Reason = "no RBAC policy matched"
	}
	return out, nil
}

func (r *reviewer) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.asked)
}

func reviewingWriter(r *reviewer) *Writer {
	a := NewWriter(nil, nil, DefaultFieldManager, logrus.NewEntry(logrus.New()))
	a.reviews = r
	return a
}

// startRoute is a route the plugin does not own yet: its first write
// starts the ownership.
func startRoute(name string) routes.Route {
	return routes.Route{Ref: routes.Ref{Kind: routes.HTTPRoute, Namespace: "shop", Name: name}}
}

// A step over 200 routes of one namespace asks two reviews, not 400, and
// the next step within allowedFor asks none.
func TestOneReviewPerNamespaceAndVerb(t *testing.T) {
	r := &reviewer{grants: map[string]bool{"patch": true, "get": true}}
	a := reviewingWriter(r)
	var wg sync.WaitGroup
	errs := make([]error, 200)
	for i := range 200 {
		wg.Go(func() {
			errs[i] = a.ReviewOwnershipChange(context.Background(), startRoute(fmt.Sprintf("r%d", i)), false)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := r.count(); n != 2 {
		t.Errorf("%d reviews for 200 routes, want 2: %v", n, r.asked)
	}
	if err := a.ReviewOwnershipChange(context.Background(), startRoute("later"), false); err != nil || r.count() != 2 {
		t.Errorf("the next route asked again (%d reviews, %v)", r.count(), err)
	}
	// Once the yes is older than allowedFor, the plugin asks again.
	a.access.mu.Lock()
	for k := range a.access.allowed {
		a.access.allowed[k] = time.Now().Add(-time.Second)
	}
	a.access.mu.Unlock()
	if err := a.ReviewOwnershipChange(context.Background(), startRoute("much-later"), false); err != nil || r.count() != 4 {
		t.Errorf("after allowedFor: %d reviews, want 4 (%v)", r.count(), err)
	}
}

// A no is never remembered, and a verb granted on a route by name
// (resourceNames) still counts: the route is asked about by name. The error
// names the verb and says nothing was written.
func TestDenialIsAskedByNameAndNotRemembered(t *testing.T) {
	r := &reviewer{grants: map[string]bool{"patch": true}, byName: map[string]bool{"get/a": true}}
	a := reviewingWriter(r)
	if err := a.ReviewOwnershipChange(context.Background(), startRoute("a"), false); err != nil {
		t.Errorf("route a, granted get by name: %v", err)
	}
	err := a.ReviewOwnershipChange(context.Background(), startRoute("b"), false)
	var perm *kubeclient.PermissionError
	if !errors.As(err, &perm) || strings.Join(perm.Verbs, ",") != "get" || !strings.Contains(err.Error(), "nothing was written") {
		t.Fatalf("route b without get: %v", err)
	}
	r.mu.Lock()
	r.grants["get"] = true
	r.mu.Unlock()
	if err := a.ReviewOwnershipChange(context.Background(), startRoute("b"), false); err != nil {
		t.Errorf("once get is granted: %v", err)
	}
}

// A review that cannot be made decides nothing, and is not remembered.
func TestFailedReviewDecidesNothing(t *testing.T) {
	r := &reviewer{refuses: errors.New("the apiserver did not answer")}
	a := reviewingWriter(r)
	if err := a.ReviewOwnershipChange(context.Background(), startRoute("a"), false); err != nil {
		t.Fatal(err)
	}
	if err := a.ReviewOwnershipChange(context.Background(), startRoute("b"), false); err != nil || r.count() != 4 {
		t.Errorf("%d reviews, want every one asked again (%v)", r.count(), err)
	}
}
