package events

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The reasons of the Warnings, one per kind of error. An error about
// several routes of different kinds takes the first of this list that it
// holds (docs/troubleshooting.md#events).
const (
	reasonInvalidConfig        = "InvalidConfig"
	reasonInvalidStep          = "InvalidStep"
	reasonRouteNotFound        = "RouteNotFound"
	reasonServiceNotFound      = "ServiceNotFound"
	reasonServiceImportMissing = "ServiceImportMissing"
	reasonPermissionMissing    = "PermissionMissing"
	reasonNotGranted           = "ReferenceGrantMissing"
	reasonClusterRenamed       = "ClusterRenamed"
	reasonClusterNameShared    = "ClusterNameShared"
	reasonConflict             = "Conflict"
	reasonLimitExceeded        = "LimitExceeded"
	reasonGatewayUnsupported   = "GatewayUnsupported"
	reasonCRDTooOld            = "CRDTooOld"
	reasonRouteMismatch        = "RouteMismatch"
	reasonWriteRejected        = "WriteRejected"
	reasonApiserverUnavailable = "ApiserverUnavailable"
	reasonInternalError        = "InternalError"
	reasonCallFailed           = "CallFailed"
)

// Panic is a call that panicked, as package plugin recovered it.
type Panic struct{ Value any }

func (p Panic) Error() string { return fmt.Sprintf("panic: %v", p.Value) }

// Reason is the Event reason of a panic.
func (p Panic) Reason() string { return reasonInternalError }

// reasoned is an error that says its Event reason: each package's error
// types do (rollout.ConfigError, desired.ConflictError, …), so this package
// classifies them without knowing them.
type reasoned interface{ Reason() string }

// byPriority are the reasons an error may say of itself, in the order an
// error about several routes takes the first it holds.
var byPriority = []string{
	reasonInternalError, reasonInvalidConfig, reasonInvalidStep, reasonPermissionMissing, reasonNotGranted,
	reasonClusterRenamed, reasonClusterNameShared, reasonRouteNotFound, reasonServiceNotFound, reasonServiceImportMissing, reasonConflict, reasonLimitExceeded,
	reasonGatewayUnsupported, reasonCRDTooOld, reasonRouteMismatch,
}

// Reason names the kind of err, for a Warning's reason, and for the result
// of a call in the plugin's metrics: one of the reasons above, a bounded set.
// What the errors in err say of themselves comes first (byPriority), then
// what the apiserver's answer says, else CallFailed.
func Reason(err error) string {
	said := map[string]bool{}
	walk(err, func(e error) {
		if r, ok := e.(reasoned); ok {
			said[r.Reason()] = true
		}
	})
	for _, r := range byPriority {
		if said[r] {
			return r
		}
	}
	switch {
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return reasonWriteRejected
	case said[reasonApiserverUnavailable] || unavailable(err):
		return reasonApiserverUnavailable
	}
	return reasonCallFailed
}

// walk calls fn with err and every error it wraps, depth first.
func walk(err error, fn func(error)) {
	if err == nil {
		return
	}
	fn(err)
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		walk(u.Unwrap(), fn)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			walk(e, fn)
		}
	}
}

// unavailable says err is the apiserver's not answering, or answering that
// it cannot now.
func unavailable(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) || apierrors.IsUnexpectedServerError(err)
}

// refusedOnRoute are the reasons a call is refused on a route for what the
// route is (or its gateway, or its CRD): they are also told on the route,
// to its owners. The others are the Rollout's or the plugin's to fix.
var refusedOnRoute = map[string]bool{
	reasonConflict: true, reasonLimitExceeded: true, reasonGatewayUnsupported: true, reasonServiceImportMissing: true,
	reasonCRDTooOld: true, reasonRouteMismatch: true, reasonWriteRejected: true,
}
