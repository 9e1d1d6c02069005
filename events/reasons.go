package events

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gatewayapi-ssa/rollouts-plugin/apierr"
	"github.com/gatewayapi-ssa/rollouts-plugin/decode"
	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/kubeclient"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/transform"
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

// Reason names the kind of err, for a Warning's reason, and for the result
// of a call in the plugin's metrics: one of the reasons above, a bounded set.
func Reason(err error) string {
	var (
		config      *decode.ConfigError
		cluster     *decode.ClusterError
		step        *decode.StepError
		permission  *apierr.PermissionError
		missing     *kube.MissingError
		service     *decode.MissingServiceError
		imported    *desired.MissingImportError
		conflict    *desired.ConflictError
		fleet       *desired.FleetConflictError
		notGranted  *routes.NotGrantedError
		limit       *transform.LimitError
		unsupported *desired.UnsupportedError
		schema      *routes.SchemaError
		invalid     *desired.InvalidError
		panicked    Panic
	)
	switch {
	case errors.As(err, &panicked):
		return reasonInternalError
	case errors.As(err, &config), errors.As(err, &cluster):
		return reasonInvalidConfig
	case errors.As(err, &step):
		return reasonInvalidStep
	case errors.As(err, &permission):
		return reasonPermissionMissing
	case errors.As(err, &notGranted):
		return reasonNotGranted
	case errors.As(err, &missing):
		return reasonRouteNotFound
	case errors.As(err, &service):
		return reasonServiceNotFound
	case errors.As(err, &imported):
		return reasonServiceImportMissing
	case errors.As(err, &conflict), errors.As(err, &fleet):
		return reasonConflict
	case errors.As(err, &limit):
		return reasonLimitExceeded
	case errors.As(err, &unsupported):
		return reasonGatewayUnsupported
	case errors.As(err, &schema):
		return reasonCRDTooOld
	case errors.As(err, &invalid):
		return reasonRouteMismatch
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return reasonWriteRejected
	case unavailable(err):
		return reasonApiserverUnavailable
	}
	return reasonCallFailed
}

// unavailable says err is the apiserver's not answering, or answering that
// it cannot now.
func unavailable(err error) bool {
	return kubeclient.Unanswered(err) || errors.Is(err, context.DeadlineExceeded) ||
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
