package kubeclient

// The apiserver's refusals in the words the plugin shares between its
// packages: what to grant (PermissionError) and a resource the apiserver no
// longer serves (NotServed).

import (
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PermissionError says the plugin's ServiceAccount may not do what a call
// needs: Verbs on Resource in Namespace. Err is the apiserver's refusal, or
// nil when an access review found it before anything was sent.
type PermissionError struct {
	Verbs               []string
	Resource, Namespace string
	// Why says what the plugin needs the permission for, when that is not the
	// request that was refused.
	Why string
	Err error
}

// Reason is the Event reason of the error (package events).
func (e *PermissionError) Reason() string { return "PermissionMissing" }

func (e *PermissionError) Error() string {
	verbs := strings.Join(e.Verbs, ", ")
	if n := len(e.Verbs); n > 1 {
		verbs = strings.Join(e.Verbs[:n-1], ", ") + " and " + e.Verbs[n-1]
	}
	msg := fmt.Sprintf("forbidden: grant the plugin's ServiceAccount %s on %s in namespace %s (the ClusterRole of install/base, in docs/install.md, has every permission the plugin uses)",
		verbs, e.Resource, e.Namespace)
	if e.Why != "" {
		msg += ": " + e.Why
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *PermissionError) Unwrap() error { return e.Err }

// AsPermissionError turns the apiserver's Forbidden answer to a request of verb on
// resource into a PermissionError that says what to grant; other errors pass.
func AsPermissionError(err error, verb, resource, namespace string) error {
	if !apierrors.IsForbidden(err) {
		return err
	}
	return &PermissionError{Verbs: []string{verb}, Resource: resource, Namespace: namespace, Err: err}
}

// NotServed says a request failed because the apiserver does not serve the
// resource in the version asked for (a 404 for the path, not a Status about
// the object): the CRD's served versions changed since discovery.
func NotServed(err error) bool {
	return apierrors.IsNotFound(err) && apierrors.HasStatusCause(err, metav1.CauseTypeUnexpectedServerResponse)
}
