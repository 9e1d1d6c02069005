package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/ssa"
)

// Orchestrator carries out calls with one reader and one writer.
type Orchestrator struct {
	reader kube.Reader
	writer *ssa.Writer
	locks  *locks
	events RouteEvents
	log    *logrus.Entry
	bounds Bounds
	// loggedGateways are the parents whose unknown features have been
	// logged: once each per process, while it remembers them.
	loggedGateways *loggedOnce
	// counts are what came of the writes (Writes).
	counts writeCounts
	// claimed are the routes where each Rollout had a claim at its last
	// call: what it may still undo once their grant is revoked.
	claimed claimMemory
	// services reads the experiment Services (ReadServicesWith).
	services kube.Services
}

// Bounds are how much of the apiserver calls take at once, and how long.
type Bounds struct {
	// WritesPerCall bounds the routes one call writes (or reads fresh) at once.
	WritesPerCall int
	// Routes bounds the routes all calls of the process work on at once; the
	// orchestrators of one process share it.
	Routes Slots
	// CallTimeout is the calls' deadline, named when it passes.
	CallTimeout time.Duration
}

// Exclusion says whether the process may write a route guarded by field
// ownership alone: whether no other process of its field manager writes
// routes (package peers), and since when (epoch counts the times the
// process became the only one). leave is called once that write has ended.
type Exclusion interface {
	Enter(ctx context.Context) (alone bool, epoch uint64, leave func(), err error)
}

// RouteEvents tells the people who own the routes what the plugin did to
// them for a call and what it refused there (package events records
// Kubernetes Events on the route). Its methods must return at once: they
// are called on the call's path.
type RouteEvents interface {
	// Changed says what a write changed: one routes.Note of its changes
	// (desired.Result.Changes), of reason.
	Changed(route corev1.ObjectReference, call rollout.Call, reason, note string)
	// Released says the plugin gave its ownership of spec.rules back,
	// removing the managedFields entries dropped.
	Released(route corev1.ObjectReference, call rollout.Call, dropped []string)
	// Refused says the call failed on the route with err.
	Refused(route corev1.ObjectReference, call rollout.Call, err error)
}

// regarding is what an Event on route is about.
func regarding(route routes.Route) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: routes.APIVersion(route.Version), Kind: string(route.Kind),
		Namespace: route.Namespace, Name: route.Name, UID: route.UID}
}

// New returns an orchestrator that reads with reader and writes with
// writer; with peers nil, every write carries its resourceVersion; with
// events nil, nothing is told on the routes.
func New(reader kube.Reader, writer *ssa.Writer, peers Exclusion, events RouteEvents, log *logrus.Entry, b Bounds) *Orchestrator {
	if b.Routes == nil {
		b.Routes = NewSlots(b.WritesPerCall)
	}
	if events == nil {
		events = untold{}
	}
	keep := max(2*time.Minute, 2*b.CallTimeout)
	return &Orchestrator{reader: reader, writer: writer, locks: newLocks(peers, writer.FieldManager(), keep), events: events, log: log, bounds: b,
		loggedGateways: &loggedOnce{max: maxLoggedGateways}}
}

// untold is RouteEvents that tells nobody.
type untold struct{}

func (untold) Changed(corev1.ObjectReference, rollout.Call, string, string) {}
func (untold) Released(corev1.ObjectReference, rollout.Call, []string)      {}
func (untold) Refused(corev1.ObjectReference, rollout.Call, error)          {}

// Run carries out the call on every route of its targets: read every route,
// decide every route's desired state, and only if all of that worked, write
// the routes that change, concurrently.
// Before anything of theirs is read, the targets must be within the
// Rollout's reach (kube.ResolveInReach): its own namespace, and another only
// where that namespace grants it with a ReferenceGrant, unless the platform
// team lets Rollouts reach every namespace (-require-reference-grants=false).
// Outside it, nothing is read, written or recorded.
func (o *Orchestrator) Run(ctx context.Context, c rollout.Call) (out error) {
	c, err := ReadPorts(ctx, o.services, c)
	if err != nil {
		return err
	}
	targets := c.Settings.Targets
	res, refused, err := kube.ResolveInReach(ctx, o.reader, reachOf(c), targets)
	if err != nil {
		return nothingWritten(err)
	}
	var undone []routes.Route
	if len(refused) > 0 {
		if !desired.Undoes(c.Intent) {
			return nothingWritten(notGranted(refused)...)
		}
		var still []error
		if targets, undone, still, err = o.ownClaimsOnly(ctx, c, targets, refused); err != nil || len(undone) == 0 {
			return nothingWritten(append(still, err)...)
		}
		if len(still) > 0 {
			// What the Rollout may still undo is undone; the rest is refused.
			defer func() { out = errors.Join(append([]error{out}, still...)...) }()
		}
		res = kube.ResolveEach(ctx, o.reader, targets)
	}
	if res.TooMany != nil {
		return nothingWritten(res.TooMany)
	}
	if err := withinTargets(targets, res.Routes); err != nil {
		return nothingWritten(err)
	}
	res.Routes = append(res.Routes, undone...) // each checked to be the route named (ownClaimsOnly)
	if _, removing := c.Intent.(desired.RemoveManaged); removing {
		// Nothing of the plugin's is on a route that is not there; SetWeight
		// reports the missing route (the controller shows its errors, and calls
		// RemoveManagedRoutes first on every reconcile before the canary is up).
		res.Missing = nil
	}
	if len(res.Missing) > 0 {
		return nothingWritten(res.Err())
	}
	plans := make([]Plan, len(res.Routes))
	errs := make([]error, len(res.Routes))
	intent := faulty(c.Intent)
	eachAtOnce(len(res.Routes), func(i int) {
		r := res.Routes[i]
		plans[i], errs[i] = o.MakePlan(ctx, r, EnvOf(c, r.Ref), intent)
	})
	for i, plan := range plans {
		if errs[i] == nil {
			o.claimed.note(plan.Env.Rollout, plan.Live.Ref, !plan.Desired.Claim.Empty())
		}
	}
	for i, err := range errs {
		if err != nil {
			o.counts.ended(err)
			o.events.Refused(regarding(res.Routes[i]), c, err)
		}
	}
	if errs := failures(errs); len(errs) > 0 {
		return nothingWritten(append(errs, res.Failed...)...)
	}
	res.Routes = nil // the plans hold what is still needed of them
	return o.writeAll(ctx, c, plans, res.Failed)
}

// EnvOf is what the route ref is decided in for call c: its Env as the
// Rollout's config says (a named route's own, even when a selector finds it
// too; else the one the routes only a selector finds share), with the name
// of the controller's cluster when the routes are in a route cluster.
func EnvOf(c rollout.Call, ref routes.Ref) desired.Env {
	env, named := c.Envs.Named[ref]
	if !named {
		env = c.Envs.Selected
	}
	env.Cluster, env.ClusterUID, env.ClusterSource = c.Member.Name, c.Member.UID, c.Member.Source
	return env
}

// reachOf is where call c may reach routes from.
func reachOf(c rollout.Call) kube.Reachable {
	return kube.Reachable{From: c.Rollout.Namespace, Any: c.AnyNamespace}
}

func notGranted(refused []*routes.NotGrantedError) []error {
	errs := make([]error, len(refused))
	for i, e := range refused {
		errs[i] = e
	}
	return errs
}

// withinTargets refuses, before any decision, a route the reader returned
// that is none of the targets whose reach was checked (reach): a named
// route other than the one named, or one a selector found in another
// namespace. The reach is thus the reach of what the apiserver returned.
func withinTargets(t routes.Targets, found []routes.Route) error {
	var errs []error
	for _, r := range found {
		if !slices.Contains(t.Named, r.Ref) && !slices.ContainsFunc(t.Selectors, func(s routes.Selection) bool {
			return s.Kind == r.Kind && s.Namespace == r.Namespace
		}) {
			errs = append(errs, fmt.Errorf("%s was returned for the Rollout's routes and is none of them: its reach was never checked, and nothing of it is used", r.Ref))
		}
	}
	return errors.Join(errs...)
}

// writeAll writes the plans concurrently and says which routes failed: those
// whose write failed and those that could not be read (unread). Input the
// user must fix stops a call before any write (Run); a fault of the
// apiserver on some routes does not keep the others from being written, and
// the error names exactly the routes that were not.
func (o *Orchestrator) writeAll(ctx context.Context, c rollout.Call, plans []Plan, unread []error) error {
	refs := make([]routes.Ref, len(plans))
	for i, plan := range plans {
		refs[i] = plan.Live.Ref
	}
	writes := failures(perRoute(ctx, refs, o.slots(), func(i int) error {
		faultyWrite(plans[i])
		err := o.Write(ctx, plans[i], c)
		plans[i] = Plan{} // a written route's plan is garbage: a call over many routes holds less at once
		return err
	}))
	failed := append(slices.Clip(unread), writes...)
	if len(failed) == 0 {
		return nil
	}
	err := errors.Join(failed...)
	switch total := len(plans) + len(unread); {
	case len(plans) > 0 && len(writes) == len(plans) && refused(writes):
		// Every route was refused when decided again (after a conflict, or
		// on another call's write): the call ends as one refused before any
		// write does (Run), in the same words, whatever the watch cache held.
		err = nothingWritten(append(writes, unread...)...)
	case len(failed) < total:
		err = fmt.Errorf("%d of %d routes failed; the others are written and the call is safe to repeat: %w", len(failed), total, err)
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("the call's deadline (%s, -call-timeout) passed before every route was written: %w", o.bounds.CallTimeout, err)
	}
	return err
}

// nothingWritten is the error of a call that wrote no route, in the one
// wording it has whether it stopped before any write or every route it
// wrote was refused.
func nothingWritten(errs ...error) error {
	return fmt.Errorf("nothing was written: %w", errors.Join(errs...))
}

// slots are the bounds a route of a call holds while it is worked on.
func (o *Orchestrator) slots() []Slots {
	return []Slots{NewSlots(o.bounds.WritesPerCall), o.bounds.Routes}
}

// sayUnchecked logs, once per parent and process, that a route was written
// with something its gateway could not be asked about.
func (o *Orchestrator) sayUnchecked(route routes.Ref, unchecked []desired.Unchecked, log *logrus.Entry) {
	for _, u := range unchecked {
		if !o.loggedGateways.first(u.Gateway.String()) {
			continue
		}
		log.WithFields(logrus.Fields{"route": route.String(), "gateway": u.Gateway.String()}).
			Warn(u.String())
	}
}

// ReadServicesWith makes the orchestrator read the experiment Services
// with s: they are in the Rollout's cluster, which need not be the routes'.
func (o *Orchestrator) ReadServicesWith(s kube.Services) *Orchestrator {
	o.services = s
	return o
}

// ReadPorts is c with the ports of the Services its experiment step names
// (SetWeight with additional destinations; rollout.Decode leaves them
// empty): stable's and each experiment Service's, in the Rollout's
// namespace. A missing one is an error (the controller retries; skipping
// it would send its share to nobody). Every other call is c as it is. The
// plugin's calls (Run) and plan read them through it.
func ReadPorts(ctx context.Context, s kube.Services, c rollout.Call) (rollout.Call, error) {
	sw, ok := c.Intent.(desired.SetWeight)
	if !ok || len(sw.Experiment.Destinations) == 0 {
		return c, nil
	}
	if s == nil {
		return c, errors.New("the plugin reads no Services in this cluster: an experiment step cannot be carried out here")
	}
	in, ns := sw.Experiment, c.Rollout.Namespace
	var err error
	if in.StablePorts, err = s.Ports(ctx, ns, in.Stable.Name); err != nil {
		return c, fmt.Errorf("stable %w", err)
	}
	in.Destinations = slices.Clone(in.Destinations)
	for i, d := range in.Destinations {
		if in.Destinations[i].Ports, err = s.Ports(ctx, ns, d.Service); err != nil {
			return c, fmt.Errorf("experiment %w", err)
		}
	}
	sw.Experiment = in
	c.Intent = sw
	return c, nil
}
