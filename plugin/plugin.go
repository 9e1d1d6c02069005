package plugin

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/argoproj/argo-rollouts/utils/plugin/types"
	"github.com/sirupsen/logrus"

	"github.com/gatewayapi-ssa/rollouts-plugin/events"
	"github.com/gatewayapi-ssa/rollouts-plugin/metrics"
	"github.com/gatewayapi-ssa/rollouts-plugin/orchestrator"
	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
)

// pluginType is what the plugin answers to Type().
const pluginType = "GatewayAPI"

// Options configure the adapter; main sets them from flags.
type Options struct {
	// Process is what every call is decoded with (rollout.Process) but the
	// cluster's name, which the backend finds.
	Process rollout.Process
	// CallTimeout bounds each RPC call, all its requests included: the call
	// answers within it even if the apiserver never does.
	CallTimeout time.Duration
	// Metrics observes the calls (-metrics-address); nil: nothing.
	Metrics *metrics.Metrics
}

// DefaultCallTimeout is the deadline of a call: a stuck call holds one of the
// controller's workers, so it must end well before anyone would notice.
const DefaultCallTimeout = 30 * time.Second

// Backend carries the calls out: the orchestrator of each cluster that
// holds routes, the cluster's name, the Events on the Rollouts. main builds
// it when the controller calls InitPlugin.
type Backend interface {
	// Orchestrators are the orchestrators of the clusters that hold routes,
	// asked once, when the backend is built.
	Orchestrators() Orchestrators
	// Member names the controller's cluster for the claims on the routes
	// of route clusters.
	Member(ctx context.Context) (rollout.Member, error)
	// Rollouts records Events on the Rollouts.
	Rollouts() *events.Rollouts
	// Close stops what the backend keeps running.
	Close(ctx context.Context)
}

// Plugin implements Argo Rollouts' traffic router plugin interface.
type Plugin struct {
	opts    Options
	log     *logrus.Entry
	connect func() (Backend, error)

	// initMu makes InitPlugin build the backend once, however often it is called.
	initMu  sync.Mutex
	mu      sync.Mutex
	backend Backend
	orchs   Orchestrators
}

// Orchestrators are the orchestrators of the clusters that hold routes: the
// controller's own, and each route cluster's by name, or the error that
// says why it cannot be used (Unusable).
type Orchestrators struct {
	Own           *orchestrator.Orchestrator
	RouteClusters map[string]*orchestrator.Orchestrator
	Unusable      map[string]error
}

// of is the orchestrator of the routes' cluster ("" the controller's own),
// or why that route cluster cannot be used.
func (o Orchestrators) of(routeCluster string) (*orchestrator.Orchestrator, error) {
	if routeCluster == "" {
		return o.Own, nil
	}
	if err, ok := o.Unusable[routeCluster]; ok {
		return nil, err
	}
	orch, ok := o.RouteClusters[routeCluster]
	if !ok { // rollout.Decode allows only the route clusters given
		return nil, fmt.Errorf("no route cluster %q", routeCluster)
	}
	return orch, nil
}

// New returns a plugin that builds its backend with connect in InitPlugin.
func New(opts Options, log *logrus.Entry, connect func() (Backend, error)) *Plugin {
	if opts.Process.FieldManager == "" {
		opts.Process.FieldManager = "argo-rollouts-gatewayapi"
	}
	if opts.Process.PluginName == "" {
		opts.Process.PluginName = rollout.DefaultPluginName
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	return &Plugin{opts: opts, log: log, connect: connect}
}

// InitPlugin builds the backend. Once it has succeeded, calling it again
// does nothing.
func (p *Plugin) InitPlugin() (resp types.RpcError) {
	defer p.recoverInto(nil, rollout.Label{Method: "InitPlugin"}, nil, &resp)
	p.initMu.Lock()
	defer p.initMu.Unlock()
	if p.current() != nil {
		p.log.Debug("InitPlugin called again; the clients are built already")
		return types.RpcError{}
	}
	b, err := p.connect()
	if err != nil {
		return types.RpcError{ErrorString: err.Error()}
	}
	orchs := b.Orchestrators()
	p.mu.Lock()
	p.backend, p.orchs = b, orchs
	p.mu.Unlock()
	return types.RpcError{}
}

// current is the backend, nil before InitPlugin.
func (p *Plugin) current() Backend {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.backend
}

// Close stops what the backend keeps running.
func (p *Plugin) Close(ctx context.Context) {
	if b := p.current(); b != nil {
		b.Close(ctx)
	}
}

// callContext is the context of one call. Its work ends a little before the
// call's deadline, so that the answer, error included, reaches the
// controller within CallTimeout.
func (p *Plugin) callContext() (context.Context, context.CancelFunc) {
	reserve := min(p.opts.CallTimeout/20, 500*time.Millisecond)
	return context.WithTimeout(context.Background(), p.opts.CallTimeout-reserve)
}

// UpdateHash has nothing to route: Gateway API routes select Services, not
// pod hashes.
func (p *Plugin) UpdateHash(*v1alpha1.Rollout, string, string, []v1alpha1.WeightDestination) types.RpcError {
	return types.RpcError{}
}

// Type returns the plugin's type.
func (p *Plugin) Type() string { return pluginType }

// SetWeight gives the canary desiredWeight, each experiment Service in
// additional its weight, and stable the rest of maxTrafficWeight, in every
// weighted rule of every route of the Rollout. Experiment backendRefs the
// plugin added before and that are no longer asked for leave the route.
func (p *Plugin) SetWeight(ro *v1alpha1.Rollout, desiredWeight int32, additional []v1alpha1.WeightDestination) types.RpcError {
	return p.run(ro, rollout.Label{Method: rollout.SetWeight, Weight: desiredWeight, Additional: additional})
}

// SetHeaderRoute adds, on every HTTPRoute and GRPCRoute that takes header
// routes, one rule per weighted rule that sends the requests with the step's
// headers to the canary; with no match it removes them.
func (p *Plugin) SetHeaderRoute(ro *v1alpha1.Rollout, h *v1alpha1.SetHeaderRoute) types.RpcError {
	return p.run(ro, rollout.Label{Method: rollout.SetHeaderRoute, Header: h})
}

// SetMirrorRoute adds, on every HTTPRoute and GRPCRoute, a rule that sends the
// matching requests to stable and mirrors a percentage of them to the canary;
// with no match or percentage 0 it removes it.
func (p *Plugin) SetMirrorRoute(ro *v1alpha1.Rollout, m *v1alpha1.SetMirrorRoute) types.RpcError {
	return p.run(ro, rollout.Label{Method: rollout.SetMirrorRoute, Mirror: m})
}

// RemoveManagedRoutes removes every header and mirror rule the plugin added
// for the Rollout, on every one of its routes.
func (p *Plugin) RemoveManagedRoutes(ro *v1alpha1.Rollout) types.RpcError {
	return p.run(ro, rollout.Label{Method: rollout.RemoveManagedRoutes})
}

// VerifyWeight says whether the gateways took the weights: with the Rollout's
// verifyWeight option, from the routes' spec and status.parents
// (orchestrator.Verify); without it NotImplemented, never a blind Verified:
// the plugin cannot know whether the gateway reports observedGeneration, and
// a blind Verified would let a rollout promote on weights no gateway has
// taken. Every error comes with NotVerified, never NotImplemented: Argo
// Rollouts keeps the Verified value it gets alongside an error, and
// NotVerified keeps a setWeight step from completing.
func (p *Plugin) VerifyWeight(ro *v1alpha1.Rollout, desiredWeight int32, additional []v1alpha1.WeightDestination) (verified types.RpcVerified, resp types.RpcError) {
	l := rollout.Label{Method: rollout.VerifyWeight, Weight: desiredWeight, Additional: additional}
	verified = types.NotVerified
	m := p.meter(ro, l.Method)
	defer p.recoverInto(ro, l, m, &resp)
	ctx, cancel := p.callContext()
	defer cancel()
	call, orch, err := p.decode(ro, l)
	m.in(call.RouteCluster)
	switch {
	case err != nil:
		return types.NotVerified, p.fail(call, m, err)
	case !call.Settings.VerifyWeight:
		p.succeeded(call, m)
		return types.NotImplemented, types.RpcError{}
	case orch == nil:
		return types.NotVerified, p.fail(call, m, errNoClient)
	}
	ok, err := orch.Verify(ctx, call)
	if err != nil {
		return types.NotVerified, p.fail(call, m, inRouteCluster(call, err))
	}
	p.succeeded(call, m) // NotVerified without an error is an answer too
	if !ok {
		return types.NotVerified, types.RpcError{}
	}
	return types.Verified, types.RpcError{}
}

// run carries out one call on every route of the Rollout (package
// orchestrator) and answers as the controller expects.
func (p *Plugin) run(ro *v1alpha1.Rollout, l rollout.Label) (resp types.RpcError) {
	m := p.meter(ro, l.Method)
	defer p.recoverInto(ro, l, m, &resp)
	ctx, cancel := p.callContext()
	defer cancel()
	call, orch, err := p.decode(ro, l)
	m.in(call.RouteCluster)
	switch {
	case err != nil:
		return p.fail(call, m, err)
	case orch == nil:
		return p.fail(call, m, errNoClient)
	case call.Skip != "":
		p.log.WithFields(logrus.Fields{"rollout": call.Rollout.String(), "call": l.String()}).Info("nothing to do: " + call.Skip)
		p.succeeded(call, m)
		return types.RpcError{}
	case call.RouteCluster != "":
		// The members of a fleet share the route cluster's routes: the
		// claims there name this cluster. Its own routes need no name.
		member, err := p.current().Member(ctx)
		if err != nil {
			return p.fail(call, m, err)
		}
		call.Member = member
	}
	if err := orch.Run(ctx, call); err != nil {
		return p.fail(call, m, inRouteCluster(call, err))
	}
	p.succeeded(call, m)
	return types.RpcError{}
}

// decode decodes the call once (package rollout) and returns the
// orchestrator of the cluster that holds the Rollout's routes: nil before
// InitPlugin. The call's own
// errors come first, then a route cluster the platform team has not
// configured, or one that cannot be used.
func (p *Plugin) decode(ro *v1alpha1.Rollout, l rollout.Label) (rollout.Call, *orchestrator.Orchestrator, error) {
	p.mu.Lock()
	b, orchs := p.backend, p.orchs
	p.mu.Unlock()
	call, err := rollout.Decode(p.opts.Process, ro, l)
	if err != nil || b == nil {
		return call, nil, err
	}
	orch, err := orchs.of(call.RouteCluster)
	return call, orch, err
}

// inRouteCluster names the route cluster in err, if the call's routes are
// in one.
func inRouteCluster(call rollout.Call, err error) error {
	if err == nil || call.RouteCluster == "" {
		return err
	}
	return fmt.Errorf("in route cluster %q: %w", call.RouteCluster, err)
}

var errNoClient = errors.New("the plugin has no Kubernetes client: InitPlugin failed or was not called")

// fail logs and returns an RpcError that names the Rollout and the call,
// records it on the Rollout as a Warning Event, and ends the call's meter.
func (p *Plugin) fail(call rollout.Call, m *callMeter, err error) types.RpcError {
	m.end(err)
	msg := fmt.Sprintf("rollout %s: %s: %s", call.Rollout, call.Label, strings.ReplaceAll(err.Error(), "\n", "; "))
	p.log.WithFields(logrus.Fields{"rollout": call.Rollout.String(), "call": call.Label.String()}).Error(err.Error())
	p.rollouts().Failed(call, msg, err)
	return types.RpcError{ErrorString: msg}
}

// succeeded records that the call answered without an error: on the
// Rollout, once, if the last such call failed; and ends the call's meter.
func (p *Plugin) succeeded(call rollout.Call, m *callMeter) {
	m.end(nil)
	p.rollouts().Succeeded(call)
}

// rollouts records Events on the Rollouts (nil before InitPlugin: nothing).
func (p *Plugin) rollouts() *events.Rollouts {
	if b := p.current(); b != nil {
		return b.Rollouts()
	}
	return nil
}

// recoverInto turns a panic into an RpcError naming the Rollout (nil for
// InitPlugin) and the call: a panic crossing the RPC boundary would kill the
// plugin process under the controller. It ends the call's meter (nil for
// InitPlugin) with the panic.
func (p *Plugin) recoverInto(ro *v1alpha1.Rollout, l rollout.Label, m *callMeter, resp *types.RpcError) {
	r := recover()
	if r == nil {
		return
	}
	m.end(events.Panic{Value: r})
	where := l.String()
	if ro != nil {
		where = fmt.Sprintf("rollout %s/%s: %s", ro.Namespace, ro.Name, l)
	}
	p.log.WithField("call", where).Errorf("panic: %v\n%s", r, debug.Stack())
	*resp = types.RpcError{ErrorString: fmt.Sprintf("%s: internal error in the plugin: %v (please report it); the call is safe to repeat", where, r)}
	if ro != nil {
		call := rollout.Call{Rollout: rollout.Rollout{Namespace: ro.Namespace, Name: ro.Name, UID: ro.UID}, Label: l}
		p.rollouts().Failed(call, resp.ErrorString, events.Panic{Value: r})
	}
}
