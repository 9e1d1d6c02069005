package decode

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/transform"
)

// Method is a call of the traffic router plugin interface.
type Method string

const (
	SetWeight           Method = "SetWeight"
	SetHeaderRoute      Method = "SetHeaderRoute"
	SetMirrorRoute      Method = "SetMirrorRoute"
	RemoveManagedRoutes Method = "RemoveManagedRoutes"
	VerifyWeight        Method = "VerifyWeight"
)

// Request is one call of the controller as the RPC interface hands it over:
// Weight and Additional for SetWeight and VerifyWeight, Header for
// SetHeaderRoute, Mirror for SetMirrorRoute.
type Request struct {
	Method     Method
	Weight     int32
	Additional []v1alpha1.WeightDestination
	Header     *v1alpha1.SetHeaderRoute
	Mirror     *v1alpha1.SetMirrorRoute
}

// Name names the call in logs and errors: SetWeight(20),
// SetWeight(20, exp-a=10), SetHeaderRoute(canary-header), RemoveManagedRoutes.
func (r Request) Name() string {
	switch r.Method {
	case SetWeight, VerifyWeight:
		if len(r.Additional) == 0 {
			return fmt.Sprintf("%s(%d)", r.Method, r.Weight)
		}
		parts := make([]string, len(r.Additional))
		for i, d := range r.Additional {
			parts[i] = fmt.Sprintf("%s=%d", d.ServiceName, d.Weight)
		}
		return fmt.Sprintf("%s(%d, %s)", r.Method, r.Weight, strings.Join(parts, ","))
	case SetHeaderRoute:
		if r.Header != nil {
			return fmt.Sprintf("%s(%s)", r.Method, r.Header.Name)
		}
	case SetMirrorRoute:
		if r.Mirror != nil {
			return fmt.Sprintf("%s(%s)", r.Method, r.Mirror.Name)
		}
	}
	return string(r.Method)
}

// Decoded is a decoded request: the Rollout's config, and what the call does.
type Decoded struct {
	Settings Settings
	// Intent is what the call does to each route; nil for VerifyWeight.
	Intent desired.Intent
	// Split and Extra are the weights VerifyWeight checks (with the
	// Rollout's verifyWeight option; without it, neither is set): the
	// experiment Services' weights come out of stable's share.
	Split transform.Split
	Extra []desired.BackendWeight
	// Skip, when set, says why the call is answered without doing anything
	// (Intent is nil then).
	Skip string
}

// skipWhenEnding says why a header or mirror step's call is to do nothing:
// while a Rollout is aborted or promoted in full, the controller calls
// RemoveManagedRoutes and then, in the same reconcile, the current step's
// SetHeaderRoute or SetMirrorRoute again. Carried out, that call would put
// the rule back for good (nothing removes it after the abort), or, when the
// step cannot be carried out, fail the reconcile before the SetWeight that
// ends the abort.
func skipWhenEnding(ro *v1alpha1.Rollout) string {
	switch {
	case ro.Status.Abort:
		return "the Rollout is aborted: its header and mirror rules stay removed (the controller repeats the current step's call after removing them)"
	case ro.Status.PromoteFull:
		return "the Rollout is promoted in full: its header and mirror rules stay removed (the controller repeats the current step's call after removing them)"
	}
	return ""
}

// Decode turns a Rollout and one call of the controller into a Call, the
// same way for every call: first the Rollout's config for the plugin
// registered as pluginName, then the call's own values, each validated
// before any route is read. ports reads the Services an experiment step
// names (SetWeight with additional destinations).
func Decode(ctx context.Context, ro *v1alpha1.Rollout, pluginName string, req Request, ports ServicePorts) (Decoded, error) {
	s, err := ParseConfig(ro, pluginName)
	if err != nil {
		return Decoded{}, &ConfigError{Err: err}
	}
	c := Decoded{Settings: s}
	switch req.Method {
	case SetHeaderRoute, SetMirrorRoute:
		if c.Skip = skipWhenEnding(ro); c.Skip != "" {
			return c, nil
		}
	}
	switch req.Method {
	case SetWeight:
		var sw desired.SetWeight
		sw, err = setWeight(ctx, ro, req.Weight, req.Additional, ports)
		sw.Sticky = s.Sticky.For(ro)
		c.Intent = sw
	case SetHeaderRoute:
		if req.Header == nil {
			return Decoded{}, &StepError{errors.New("no setHeaderRoute given")}
		}
		c.Intent, err = setHeader(ro, req.Header, &s)
		err = stepError(err)
	case SetMirrorRoute:
		if req.Mirror == nil {
			return Decoded{}, &StepError{errors.New("no setMirrorRoute given")}
		}
		c.Intent, err = setMirror(ro, req.Mirror)
		err = stepError(err)
	case RemoveManagedRoutes:
		c.Intent = desired.RemoveManaged{}
	case VerifyWeight:
		if !s.VerifyWeight {
			return c, nil
		}
		if c.Split, err = validateSplit(ro, req.Weight, req.Additional); err != nil {
			return Decoded{}, &StepError{err}
		}
		for _, d := range req.Additional {
			// Experiment Services are in the Rollout's namespace, as SetWeight adds them.
			c.Extra = append(c.Extra, desired.BackendWeight{Backend: routes.ServiceRef(ro.Namespace, d.ServiceName), Weight: int64(d.Weight)})
		}
	default:
		return Decoded{}, &StepError{fmt.Errorf("unknown call %q", req.Method)}
	}
	if err != nil {
		return Decoded{}, err
	}
	return c, nil
}

// ConfigError says the Rollout's plugin config is wrong (ParseConfig): the
// user fixes the Rollout; no route was read.
type ConfigError struct{ Err error }

// Reason is the Event reason of the error (package events).
func (e *ConfigError) Reason() string { return "InvalidConfig" }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// StepError says the call's own values are wrong (a step, a weight): the
// user fixes the Rollout's step; no route was read.
type StepError struct{ Err error }

// Reason is the Event reason of the error (package events).
func (e *StepError) Reason() string { return "InvalidStep" }

func (e *StepError) Error() string { return e.Err.Error() }
func (e *StepError) Unwrap() error { return e.Err }

// stepError makes err a StepError (nil stays nil).
func stepError(err error) error {
	if err == nil {
		return nil
	}
	return &StepError{err}
}
