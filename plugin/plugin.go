package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/argoproj/argo-rollouts/utils/plugin/types"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gatewayapi-ssa/rollouts-plugin/experiment"
	"github.com/gatewayapi-ssa/rollouts-plugin/pingpong"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/ssa"
)

// Type is what the plugin answers to Type().
const Type = "GatewayAPI"

// Options configure the plugin; main sets them from flags.
type Options struct {
	// FieldManager is the server-side apply field manager of every write.
	FieldManager string
	// PluginName is the key of the plugin's config under trafficRouting.plugins.
	PluginName string
	// QPS and Burst limit the plugin's requests to the apiserver.
	QPS   float32
	Burst int
	// CallTimeout bounds each RPC call, all its requests included.
	CallTimeout time.Duration
	// MaxConcurrentWrites bounds how many routes one call writes at once.
	MaxConcurrentWrites int
}

// UserAgent identifies the plugin's requests to the apiserver.
const UserAgent = "rollouts-gatewayapi-ssa"

// Plugin implements Argo Rollouts' traffic router plugin interface.
type Plugin struct {
	opts Options
	log  *logrus.Entry

	mu      sync.Mutex
	kube    kubernetes.Interface
	reader  routes.Reader
	applier *ssa.Applier
}

// New returns a plugin that builds its clients in InitPlugin.
func New(opts Options, log *logrus.Entry) *Plugin {
	if opts.FieldManager == "" {
		opts.FieldManager = ssa.DefaultFieldManager
	}
	if opts.PluginName == "" {
		opts.PluginName = DefaultPluginName
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 60 * time.Second
	}
	if opts.MaxConcurrentWrites <= 0 {
		opts.MaxConcurrentWrites = 8
	}
	return &Plugin{opts: opts, log: log}
}

// InitPlugin builds the clients: in-cluster config, else KUBECONFIG (or
// ~/.kube/config), else an error saying neither is there.
func (p *Plugin) InitPlugin() (resp types.RpcError) {
	defer p.recoverInto("InitPlugin", &resp)
	cfg, err := restConfig()
	if err != nil {
		return types.RpcError{ErrorString: err.Error()}
	}
	cfg.QPS, cfg.Burst = p.opts.QPS, p.opts.Burst
	cfg.UserAgent = UserAgent
	if err := p.Connect(cfg); err != nil {
		return types.RpcError{ErrorString: err.Error()}
	}
	p.log.WithFields(logrus.Fields{"host": cfg.Host, "fieldManager": p.opts.FieldManager, "pluginName": p.opts.PluginName}).Info("plugin initialized")
	return types.RpcError{}
}

func restConfig() (*rest.Config, error) {
	cfg, inClusterErr := rest.InClusterConfig()
	if inClusterErr == nil {
		return cfg, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("no Kubernetes client config: not running in a cluster (%v), and KUBECONFIG (%q) gives none: %v",
			inClusterErr, os.Getenv("KUBECONFIG"), err)
	}
	return cfg, nil
}

// Connect builds the plugin's clients for a cluster.
func (p *Plugin) Connect(cfg *rest.Config) error {
	gw, err := gateway.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building the Gateway API client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building the dynamic client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building the discovery client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building the Kubernetes client: %w", err)
	}
	reader := routes.NewCluster(dyn, disc, p.log)
	p.Use(kube, gw, dyn, reader)
	return nil
}

// Use sets the clients the plugin reads and writes with.
func (p *Plugin) Use(kube kubernetes.Interface, gw gateway.Interface, dyn dynamic.Interface, reader routes.Reader) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.kube = kube
	p.reader = reader
	p.applier = ssa.NewApplier(gw, dyn, reader, p.opts.FieldManager, p.log)
}

// UpdateHash has nothing to route: Gateway API routes select Services, not
// pod hashes.
func (p *Plugin) UpdateHash(*v1alpha1.Rollout, string, string, []v1alpha1.WeightDestination) types.RpcError {
	return types.RpcError{}
}

// Type returns the plugin's type.
func (p *Plugin) Type() string { return Type }

// SetWeight gives the canary desiredWeight, each experiment Service in
// additional its weight, and stable the rest of maxTrafficWeight, in every rule
// that holds both stable and canary, on every managed route. Experiment
// backendRefs the plugin added before and that are no longer asked for leave
// the route.
func (p *Plugin) SetWeight(ro *v1alpha1.Rollout, desiredWeight int32, additional []v1alpha1.WeightDestination) (resp types.RpcError) {
	call := fmt.Sprintf("SetWeight(%d)", desiredWeight)
	if len(additional) > 0 {
		call = fmt.Sprintf("SetWeight(%d, %s)", desiredWeight, describeDestinations(additional))
	}
	defer p.recoverInto(call, &resp)
	stable, canary, err := pingpong.Services(ro)
	if err != nil {
		return p.fail(ro, call, err)
	}
	if ro.Spec.Strategy.Canary.TrafficRouting == nil {
		return p.fail(ro, call, errors.New("spec.strategy.canary.trafficRouting is not set"))
	}
	max := int64(100)
	if m := ro.Spec.Strategy.Canary.TrafficRouting.MaxTrafficWeight; m != nil {
		max = int64(*m)
	}
	if desiredWeight < 0 || int64(desiredWeight) > max {
		return p.fail(ro, call, fmt.Errorf("weight %d is outside 0..%d (spec.strategy.canary.trafficRouting.maxTrafficWeight)", desiredWeight, max))
	}
	exp, err := p.experimentInput(ro, stable, canary, additional)
	if err != nil {
		return p.fail(ro, call, err)
	}
	split := routes.Split{
		Stable:       exp.Stable,
		Canary:       exp.Canary,
		CanaryWeight: int64(desiredWeight),
		MaxWeight:    max,
		Reserved:     experiment.Sum(exp.Destinations),
	}
	if split.StableWeight() < 0 {
		return p.fail(ro, call, fmt.Errorf("canary weight %d plus experiment weights %d exceed maxTrafficWeight %d; nothing was written",
			desiredWeight, split.Reserved, max))
	}
	key := ro.Namespace + "/" + ro.Name
	return p.update(ro, call, func(s Settings, live routes.Route) (ssa.Desired, error) {
		claims, err := routes.ReadClaims(live)
		if err != nil {
			return ssa.Desired{}, err
		}
		rules, changes, err := routes.SetWeights(live, split)
		if err != nil {
			return ssa.Desired{}, err
		}
		claim := claims[key]
		rules, backends, expChanges, err := experiment.Apply(live, rules, exp, claim.Backends)
		if err != nil {
			return ssa.Desired{}, err
		}
		takeover, err := p.checkConflict(s, key, live, claim, rules)
		if err != nil {
			return ssa.Desired{}, err
		}
		var expTargets []routes.ObjectRef
		for _, b := range backends {
			expTargets = append(expTargets, b.Target())
		}
		claim.CanaryWeight, claim.Backends = split.CanaryWeight, backends
		claim.Weights = routes.RecordWeights(live.Namespace, rules, split.Stable, split.Canary, expTargets)
		claims[key] = claim
		d := ssa.Desired{Rules: rules, Annotations: claims.Annotations(), Release: len(claims.Rollouts()) == 0}
		for _, c := range changes {
			d.Changes = append(d.Changes, c.String())
		}
		d.Changes = append(d.Changes, expChanges...)
		d.Changes = append(d.Changes, takeover...)
		if !d.Release {
			d.Labels = s.InProgressLabel
		}
		return d, nil
	})
}

// checkConflict tells whether the desired rules would overwrite values
// another manager changed since the plugin set them, while the Rollout is in
// progress on the route. With conflictPolicy Error that is a ConflictError;
// with Force the plugin takes over and says so in the write's log line.
func (p *Plugin) checkConflict(s Settings, rollout string, live routes.Route, claim routes.Claim, desired []routes.Rule) ([]string, error) {
	if !claim.Active() || ssa.OwnsRules(live.ManagedFields, p.opts.FieldManager) {
		// Not in progress here, or nobody has changed spec.rules since the plugin's last apply.
		return nil, nil
	}
	drift := routes.FindDrift(live.Namespace, live.Rules, desired, claim.Weights)
	ruleDrift := routes.FindRuleDrift(live.Rules, desired, claim.RuleDigests)
	if len(drift) == 0 && len(ruleDrift) == 0 {
		return nil, nil
	}
	conflict := &ssa.ConflictError{Route: live.Ref, Rollout: rollout, Managers: ssa.RulesOwners(live.ManagedFields, p.opts.FieldManager), Drift: drift, Rules: ruleDrift}
	if s.ConflictPolicy != ConflictForce {
		return nil, conflict
	}
	return []string{fmt.Sprintf("conflictPolicy Force: took spec.rules over from %s", strings.Join(conflict.Managers, ", "))}, nil
}

func describeDestinations(ds []v1alpha1.WeightDestination) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprintf("%s=%d", d.ServiceName, d.Weight)
	}
	return strings.Join(parts, ",")
}

// experimentInput reads the Services an experiment step asks for, so the pure
// transform can pick their ports. A missing Service is an error: the
// controller retries, and skipping it would send its share to nobody.
func (p *Plugin) experimentInput(ro *v1alpha1.Rollout, stable, canary string, additional []v1alpha1.WeightDestination) (experiment.Input, error) {
	in := experiment.Input{
		RolloutNamespace: ro.Namespace,
		Stable:           routes.ServiceRef(ro.Namespace, stable),
		Canary:           routes.ServiceRef(ro.Namespace, canary),
	}
	if len(additional) == 0 {
		return in, nil
	}
	p.mu.Lock()
	kube := p.kube
	p.mu.Unlock()
	if kube == nil {
		return in, errors.New("the plugin has no Kubernetes client: InitPlugin failed or was not called")
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.CallTimeout)
	defer cancel()
	get := func(name string) (*corev1.Service, error) {
		svc, err := kube.CoreV1().Services(ro.Namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("Service %s/%s not found; nothing was written", ro.Namespace, name)
		}
		if err != nil {
			return nil, fmt.Errorf("reading Service %s/%s: %w", ro.Namespace, name, err)
		}
		return svc, nil
	}
	stableSvc, err := get(stable)
	if err != nil {
		return in, fmt.Errorf("stable %w", err)
	}
	in.StablePorts = stableSvc.Spec.Ports
	seen := map[string]bool{}
	for _, d := range additional {
		if d.ServiceName == "" {
			return in, fmt.Errorf("additionalDestinations has an entry (weight %d) with no Service name: Argo Rollouts creates no Service for an experiment template whose pod template has no container port; give the template's container a port", d.Weight)
		}
		if d.Weight < 0 {
			return in, fmt.Errorf("experiment Service %s has negative weight %d", d.ServiceName, d.Weight)
		}
		if seen[d.ServiceName] {
			return in, fmt.Errorf("experiment Service %s is listed twice in additionalDestinations", d.ServiceName)
		}
		seen[d.ServiceName] = true
		svc, err := get(d.ServiceName)
		if err != nil {
			return in, fmt.Errorf("experiment %w", err)
		}
		in.Destinations = append(in.Destinations, experiment.Destination{Service: d.ServiceName, Weight: int64(d.Weight), Ports: svc.Spec.Ports})
	}
	return in, nil
}

// SetHeaderRoute adds, on every HTTPRoute and GRPCRoute that takes header
// routes, one rule per managed rule that sends the requests with the step's
// headers to the canary; with no match it removes them (managedrules.go).
func (p *Plugin) SetHeaderRoute(ro *v1alpha1.Rollout, h *v1alpha1.SetHeaderRoute) (resp types.RpcError) {
	defer p.recoverInto("SetHeaderRoute", &resp)
	return p.setHeaderRoute(ro, h)
}

// SetMirrorRoute adds, on every HTTPRoute and GRPCRoute, a rule that sends the
// matching requests to stable and mirrors a percentage of them to the canary;
// with no match or percentage 0 it removes it (managedrules.go).
func (p *Plugin) SetMirrorRoute(ro *v1alpha1.Rollout, m *v1alpha1.SetMirrorRoute) (resp types.RpcError) {
	defer p.recoverInto("SetMirrorRoute", &resp)
	return p.setMirrorRoute(ro, m)
}

// VerifyWeight says whether the gateways took the weights: with the Rollout's
// verifyWeight option, from the routes' spec and status.parents (verify.go);
// without it NotImplemented, never a blind Verified.
func (p *Plugin) VerifyWeight(ro *v1alpha1.Rollout, desiredWeight int32, additional []v1alpha1.WeightDestination) (types.RpcVerified, types.RpcError) {
	return p.verifyWeight(ro, desiredWeight, additional)
}

// RemoveManagedRoutes removes every header and mirror rule the plugin added
// for the Rollout, on every route it manages (managedrules.go).
func (p *Plugin) RemoveManagedRoutes(ro *v1alpha1.Rollout) (resp types.RpcError) {
	defer p.recoverInto("RemoveManagedRoutes", &resp)
	return p.removeManagedRoutes(ro)
}

const callRemoveManagedRoutes = "RemoveManagedRoutes"

// computeFunc is a call's pure transform of one live route.
type computeFunc func(s Settings, live routes.Route) (ssa.Desired, error)

// update runs one call on every managed route: parse the config, read every
// route, compute every route's desired state, and only if all of that worked,
// write the routes that change, concurrently.
func (p *Plugin) update(ro *v1alpha1.Rollout, call string, compute computeFunc) types.RpcError {
	p.mu.Lock()
	reader, applier := p.reader, p.applier
	p.mu.Unlock()
	if applier == nil {
		return p.fail(ro, call, errors.New("the plugin has no Kubernetes client: InitPlugin failed or was not called"))
	}
	settings, err := ParseConfig(ro, p.opts.PluginName)
	if err != nil {
		return p.fail(ro, call, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.CallTimeout)
	defer cancel()

	resolve := routes.Resolve
	if call == callRemoveManagedRoutes {
		// Nothing of the plugin's is on a route that is not there; SetWeight
		// reports the missing route (the controller shows its errors, and calls
		// RemoveManagedRoutes first on every reconcile before the canary is up).
		resolve = routes.ResolveExisting
	}
	live, err := resolve(ctx, reader, settings.Targets)
	if err != nil {
		return p.fail(ro, call, fmt.Errorf("nothing was written: %w", err))
	}
	plans := make([]ssa.Plan, 0, len(live))
	var errs []error
	for _, r := range live {
		plan, err := applier.Plan(r, func(l routes.Route) (ssa.Desired, error) { return compute(settings, l) })
		if err != nil {
			errs = append(errs, err)
			continue
		}
		plans = append(plans, plan)
	}
	if len(errs) > 0 {
		return p.fail(ro, call, fmt.Errorf("nothing was written: %w", errors.Join(errs...)))
	}

	log := p.log.WithFields(logrus.Fields{"rollout": ro.Namespace + "/" + ro.Name, "call": call})
	refs := make([]routes.Ref, len(plans))
	for i, plan := range plans {
		refs[i] = plan.Live.Ref
	}
	failed := failures(perRoute(refs, p.opts.MaxConcurrentWrites, func(i int) error {
		return applier.Write(ctx, plans[i], log)
	}))
	switch {
	case len(failed) == 0:
	case len(failed) == len(plans):
		return p.fail(ro, call, errors.Join(failed...))
	default:
		return p.fail(ro, call, fmt.Errorf("%d of %d routes failed; the others are written and the call is safe to repeat: %w",
			len(failed), len(plans), errors.Join(failed...)))
	}
	return types.RpcError{}
}

// fail logs and returns an RpcError that names the Rollout and the call.
func (p *Plugin) fail(ro *v1alpha1.Rollout, call string, err error) types.RpcError {
	msg := fmt.Sprintf("rollout %s/%s: %s: %s", ro.Namespace, ro.Name, call, strings.ReplaceAll(err.Error(), "\n", "; "))
	p.log.WithFields(logrus.Fields{"rollout": ro.Namespace + "/" + ro.Name, "call": call}).Error(err.Error())
	return types.RpcError{ErrorString: msg}
}

// recoverInto turns a panic into an RpcError: a panic crossing the RPC
// boundary would kill the plugin process under the controller.
func (p *Plugin) recoverInto(call string, resp *types.RpcError) {
	if r := recover(); r != nil {
		p.log.WithField("call", call).Errorf("panic: %v\n%s", r, debug.Stack())
		*resp = types.RpcError{ErrorString: fmt.Sprintf("%s: internal error in the plugin: %v (please report it)", call, r)}
	}
}
