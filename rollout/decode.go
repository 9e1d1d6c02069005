package rollout

import (
	"errors"
	"fmt"
	"strings"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"k8s.io/apimachinery/pkg/types"

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
	// Cleanup is no call of the controller: the cleanup command's, and the
	// sweep's, undoing of a deleted Rollout's claims (package cleanup).
	Cleanup Method = "cleanup"
)

// Label is a call of the controller as the RPC interface hands it over:
// its method and its arguments (Weight and Additional for SetWeight and
// VerifyWeight, Header for SetHeaderRoute, Mirror for SetMirrorRoute).
type Label struct {
	Method     Method
	Weight     int32
	Additional []v1alpha1.WeightDestination
	Header     *v1alpha1.SetHeaderRoute
	Mirror     *v1alpha1.SetMirrorRoute
}

// String names the call in logs, errors and Events: SetWeight(20),
// SetWeight(20, exp-a=10), SetHeaderRoute(canary-header), RemoveManagedRoutes.
func (l Label) String() string {
	switch l.Method {
	case SetWeight, VerifyWeight:
		if len(l.Additional) == 0 {
			return fmt.Sprintf("%s(%d)", l.Method, l.Weight)
		}
		parts := make([]string, len(l.Additional))
		for i, d := range l.Additional {
			parts[i] = fmt.Sprintf("%s=%d", d.ServiceName, d.Weight)
		}
		return fmt.Sprintf("%s(%d, %s)", l.Method, l.Weight, strings.Join(parts, ","))
	case SetHeaderRoute:
		if l.Header != nil {
			return fmt.Sprintf("%s(%s)", l.Method, l.Header.Name)
		}
	case SetMirrorRoute:
		if l.Mirror != nil {
			return fmt.Sprintf("%s(%s)", l.Method, l.Mirror.Name)
		}
	}
	return string(l.Method)
}

// Rollout names the Rollout a call is for.
type Rollout struct {
	Namespace, Name string
	UID             types.UID
}

// String is namespace/name: the key of the Rollout's claims.
func (r Rollout) String() string { return r.Namespace + "/" + r.Name }

// Process is what every call of one plugin process decodes with: the name
// its config is read under, the field manager it writes as, the route
// clusters the platform team allows, whether a Rollout reaches any
// namespace (-require-reference-grants=false), and the Settings of each
// Rollout's config as parsed last (nil: parsed at every call).
type Process struct {
	PluginName, FieldManager string
	RouteClusters            []RouteCluster
	AnyNamespace             bool
	Configs                  *Configs
}

// Member is how the claims a call makes on the routes of a route cluster,
// which the members of a fleet share, name the controller's cluster
// (kube.NameCluster): the name, its kube-system's UID, and where the name
// was read.
type Member struct {
	Name, UID, Source string
}

// Call is one call of the controller on one Rollout, decoded once (Decode):
// the only value the rest of the plugin knows a call by.
type Call struct {
	Rollout Rollout
	Label   Label
	// Name is the call as logs name it, Label.String() made once.
	Name string
	// Settings is the Rollout's plugin config; Envs what each of its
	// routes is decided in.
	Settings Settings
	Envs     Envs
	// Intent is what the call does to each route; nil for VerifyWeight
	// and when Skip says why the call does nothing.
	Intent desired.Intent
	// Verify is what VerifyWeight checks, with the Rollout's verifyWeight
	// option (without it, nothing is checked).
	Verify Verify
	// Skip, when set, says why the call is answered without doing anything.
	Skip string
	// RouteCluster is the route cluster that holds the routes, "" for the
	// controller's own.
	RouteCluster string
	// Member names the controller's cluster on the routes of a route
	// cluster (the plugin reads it at the call's first write there); the
	// zero value on its own routes, where no name is needed.
	Member Member
	// AnyNamespace is -require-reference-grants=false: the Rollout may
	// reach every namespace.
	AnyNamespace bool
}

// Verify is the split VerifyWeight checks: the experiment Services' weights
// (Extra) come out of stable's share.
type Verify struct {
	Split transform.Split
	Extra []desired.BackendWeight
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

// Decode turns a Rollout and one call of the controller (l) into a Call,
// the same way for every call: first the Rollout's config for the plugin
// registered as p.PluginName, then the call's own values, each validated
// before any route is read, then the route cluster its config names, which
// p.RouteClusters must allow. It reads nothing: the ports of the Services
// an experiment step names are read by the orchestrator
// (orchestrator.ReadPorts). On an error the Call still names its Rollout
// and its Label, for the error to be told.
func Decode(p Process, ro *v1alpha1.Rollout, l Label) (Call, error) {
	named := Call{Rollout: Rollout{Namespace: ro.Namespace, Name: ro.Name, UID: ro.UID}, Label: l, Name: l.String(), AnyNamespace: p.AnyNamespace}
	c := named
	s, envs, err := p.Configs.Parse(ro, p.PluginName, p.FieldManager)
	if err != nil {
		return c, &ConfigError{Err: err}
	}
	c.Settings, c.Envs = s, envs
	if err := c.decide(ro); err != nil {
		return named, err
	}
	rc, err := s.RouteClusterOf(p.RouteClusters)
	if err != nil {
		return named, err
	}
	if rc != nil {
		c.RouteCluster = rc.Name
	}
	return c, nil
}

// decide decodes what the call does: its Intent (or why it does nothing),
// or VerifyWeight's split.
func (c *Call) decide(ro *v1alpha1.Rollout) error {
	var err error
	switch c.Label.Method {
	case SetHeaderRoute, SetMirrorRoute:
		if c.Skip = skipWhenEnding(ro); c.Skip != "" {
			return nil
		}
	}
	switch c.Label.Method {
	case SetWeight:
		var sw desired.SetWeight
		sw, err = setWeight(ro, c.Label.Weight, c.Label.Additional)
		sw.Sticky = c.Settings.Sticky.For(ro)
		c.Intent = sw
	case SetHeaderRoute:
		if c.Label.Header == nil {
			return &StepError{errors.New("no setHeaderRoute given")}
		}
		c.Intent, err = setHeader(ro, c.Label.Header, &c.Settings)
		err = stepError(err)
	case SetMirrorRoute:
		if c.Label.Mirror == nil {
			return &StepError{errors.New("no setMirrorRoute given")}
		}
		c.Intent, err = setMirror(ro, c.Label.Mirror)
		err = stepError(err)
	case RemoveManagedRoutes:
		c.Intent = desired.RemoveManaged{}
	case VerifyWeight:
		if !c.Settings.VerifyWeight {
			return nil
		}
		if c.Verify.Split, err = validateSplit(ro, c.Label.Weight, c.Label.Additional); err != nil {
			return &StepError{err}
		}
		for _, d := range c.Label.Additional {
			// Experiment Services are in the Rollout's namespace, as SetWeight adds them.
			c.Verify.Extra = append(c.Verify.Extra, desired.BackendWeight{Backend: routes.ServiceRef(ro.Namespace, d.ServiceName), Weight: int64(d.Weight)})
		}
	default:
		return &StepError{fmt.Errorf("unknown call %q", c.Label.Method)}
	}
	return err
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
