package orchestrator

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gatewayapi-ssa/rollouts-plugin/apierr"
	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/ssa"
)

// DecideFunc returns the desired state of a route from its live state. It must
// be pure: Write calls it again after every optimistic-lock conflict.
type DecideFunc func(live routes.Route) (desired.Result, error)

// Plan is a decided change to one route, not yet written.
type Plan struct {
	Live    routes.Route
	Desired desired.Result
	decide  DecideFunc
}

// MakePlan decides the desired state of a live route. Deciding every route's
// plan before writing any lets a caller refuse bad input with nothing
// written.
func MakePlan(live routes.Route, decide DecideFunc) (Plan, error) {
	d, err := decide(live)
	if err != nil {
		return Plan{}, routes.RouteError(live.Ref, err)
	}
	return Plan{Live: live, Desired: d, decide: decide}, nil
}

// Write applies the plan. The process writes one route one call at a time:
// a plan decided before another call of the process wrote the route is
// decided again from that write's answer first.
//
// The apply is guarded by field ownership alone when the plugin owns
// spec.rules alone and no other process of its field manager is there
// (Exclusion): others' changes to labels, annotations or hostnames do not
// stop it, and a change of the rules by another manager makes it conflict.
// Otherwise (the first write, which takes spec.rules from another owner;
// another process of the plugin there) it carries the resourceVersion it
// was decided from. After a conflict it reads the route again and decides
// again: at once when the write comes out the same (the route changed only
// where the plugin does not write; at most ssa.MaxBusyAttempts times), else
// after a Backoff, at most ssa.MaxAttempts times in all; so it does when
// the apiserver no longer serves the route's version (the reader discovers
// it again). It records every answer with the reader, logs one line per
// write that reached the apiserver, and tells the route's owners
// (RouteEvents) what it changed, or that it failed.
func (o *Orchestrator) Write(ctx context.Context, p Plan, by Cause) (err error) {
	log := o.log.WithFields(logrus.Fields{"rollout": by.Rollout, "call": by.Call})
	defer func(live routes.Route) {
		if err != nil {
			o.events.Refused(live, by.Rollout, by.Call, err)
		}
	}(p.Live)
	route, written, err := o.locks.lock(ctx, p.Live.Ref)
	if err != nil {
		return routes.RouteError(p.Live.Ref, fmt.Errorf("waiting for another call writing the route: %w", err))
	}
	defer route.unlock()
	if written {
		// The process wrote the route lately, maybe after this plan was
		// decided: the reader holds that write's answer (or newer).
		if p, err = o.replanIfNewer(ctx, p); err != nil {
			return err
		}
	}
	if !p.Desired.Unchanged {
		if err := o.writer.ReviewOwnershipChange(ctx, p.Live, p.Desired.Release); err != nil {
			return routes.RouteError(p.Live.Ref, err)
		}
	}
	busy := 0         // attempts after conflicts that did not change the write (MaxBusyAttempts)
	takeOver := false // an ownership-guarded apply conflicted: the next one carries the resourceVersion
	for attempt := 1; ; attempt++ {
		if p.Desired.Unchanged {
			return o.releaseIfDone(ctx, p, p.Live, nil, route, by, log)
		}
		d := p.Desired
		guard, epoch, leave, err := o.guard(ctx, p.Live, route, takeOver)
		if err != nil {
			return routes.RouteError(p.Live.Ref, err)
		}
		answer, unstructured, err := o.writer.Apply(ctx, p.Live, ssa.Content{Rules: d.Rules, Labels: d.Labels, Annotations: d.Annotations}, guard)
		leave()
		if err == nil {
			route.wrote(epoch)
			o.reader.Written(answer)
			fields := logrus.Fields{
				"route":           p.Live.Ref.String(),
				"fieldManager":    o.writer.FieldManager(),
				"resourceVersion": p.Live.ResourceVersion + "→" + answer.ResourceVersion,
				"guard":           guard.String(),
				"changes":         strings.Join(d.Changes, "; "),
			}
			if unstructured != "" {
				fields["unstructured"] = unstructured
			}
			log.WithFields(fields).Info("applied route")
			o.events.Changed(p.Live, by.Rollout, by.Call, d.Changes)
			o.sayUnchecked(p.Live.Ref, d.Unchecked, log)
			if !d.Release {
				return nil
			}
			stored, err := answer.Route()
			if err != nil {
				return routes.RouteError(p.Live.Ref, fmt.Errorf("reading the apiserver's answer: %w", err))
			}
			return o.releaseIfDone(ctx, p, stored, answer, route, by, log)
		}
		if guard == ssa.ByOwnership && ssa.IsOwnershipConflict(err) {
			// Another manager changed spec.rules since the plugin read it:
			// decide again on the route as it is (the decision reports a
			// change of what the plugin manages as a conflict); what is left
			// to write takes the rules back, guarded by the resourceVersion.
			log.WithFields(logrus.Fields{"route": p.Live.Ref.String(), "error": err.Error()}).
				Debug("another manager changed the rules since the route was read; reading it again")
			takeOver = true
			attempt-- // once per write: the next applies are forced
			if p, err = o.replan(ctx, p); err != nil {
				return err
			}
			continue
		}
		if !ssa.IsStale(err) && !apierr.NotServed(err) {
			return routes.RouteError(p.Live.Ref, ssa.Explain(ctx, err, p.Live.Ref, "patch"))
		}
		// Read the route again and decide again: from the watch cache once
		// it holds the change that made the apply conflict (its event comes
		// right after it: the quietest moment to send the next attempt, and
		// no request to read), else fresh. When the write comes out the
		// same, the route changed only where the plugin does not write
		// (another manager's labels, annotations, hostnames): send it at
		// once, guarded by the new resourceVersion. Otherwise the rules
		// changed: take turns (Backoff) and read once more.
		next, err := o.replanOnNextEvent(ctx, p)
		if err != nil {
			return err
		}
		if sameWrite(p.Desired, next.Desired) && busy < ssa.MaxBusyAttempts {
			busy++
			attempt--
			p = next
			continue
		}
		if attempt == ssa.MaxAttempts || busy == ssa.MaxBusyAttempts {
			return routes.RouteError(p.Live.Ref, keptChanging(attempt, busy))
		}
		log.WithFields(logrus.Fields{"route": p.Live.Ref.String(), "resourceVersion": p.Live.ResourceVersion, "attempt": attempt}).
			Debug("route changed since it was read; reading it again")
		if err := ssa.Backoff(ctx, attempt); err != nil {
			return routes.RouteError(p.Live.Ref, fmt.Errorf("gave up after %d optimistic-lock conflicts: %w", attempt, err))
		}
		if p, err = o.replan(ctx, p); err != nil {
			return err
		}
	}
}

// guard chooses how an apply to the live route is guarded: by field
// ownership alone where that is enough, else by the resourceVersion. It is
// enough when the plugin owns spec.rules alone, no other process of its
// field manager is there, this process has written the route since it
// became the only one (a write of a process gone a moment ago may not be
// in its watch cache yet: the first write after that carries the
// resourceVersion, which catches it), and no apply to the route conflicted
// in this write. It returns the peers' epoch to record with the write;
// leave must be called once the apply has ended.
func (o *Orchestrator) guard(ctx context.Context, live routes.Route, route *routeLock, takeOver bool) (ssa.Guard, uint64, func(), error) {
	if o.peers == nil {
		return ssa.ByResourceVersion, 0, func() {}, nil
	}
	alone, epoch, leave, err := o.peers.Enter(ctx)
	if err != nil {
		return ssa.ByResourceVersion, 0, leave, err
	}
	fm := o.writer.FieldManager()
	if alone && !takeOver && route.writtenIn(epoch) && routes.OwnsRules(live.ManagedFields, fm) && len(routes.RulesOwners(live.ManagedFields, fm)) == 0 {
		return ssa.ByOwnership, epoch, leave, nil
	}
	leave()
	return ssa.ByResourceVersion, epoch, func() {}, nil
}

// keptChanging is the error of a write whose attempts all ended in
// optimistic-lock conflicts, busy of them after changes only to what the
// plugin does not write.
func keptChanging(attempts, busy int) error {
	if busy == 0 {
		return fmt.Errorf("the route kept changing under the plugin: %d attempts ended in optimistic-lock conflicts; the call is safe to repeat", attempts)
	}
	return fmt.Errorf("the route kept changing under the plugin: %d attempts ended in optimistic-lock conflicts, %d of them after changes only to "+
		"what the plugin does not write (another manager writing the route more often than the plugin can read and write it); the call is safe to repeat",
		attempts+busy, busy)
}

// replan reads the route fresh and decides again.
func (o *Orchestrator) replan(ctx context.Context, p Plan) (Plan, error) {
	live, err := o.reader.Fresh(ctx, p.Live.Ref)
	if err != nil {
		return Plan{}, routes.RouteError(p.Live.Ref, ssa.Explain(ctx, err, p.Live.Ref, "get"))
	}
	return MakePlan(live, p.decide)
}

// eventWait bounds how long a write waits for the watch cache to bring the
// change its apply conflicted with before it reads the route with a GET.
const eventWait = 100 * time.Millisecond

// replanOnNextEvent decides again on the first version of the route newer
// than the plan's that the reader holds within eventWait; failing that, on
// a fresh read.
func (o *Orchestrator) replanOnNextEvent(ctx context.Context, p Plan) (Plan, error) {
	deadline := time.Now().Add(eventWait)
	for {
		live, err := o.reader.Get(ctx, p.Live.Ref)
		if err == nil && kube.Newer(live.ResourceVersion, p.Live.ResourceVersion) {
			return MakePlan(live, p.decide)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return o.replan(ctx, p)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// replanIfNewer decides again when the reader knows a newer version of the
// route than the plan was decided from.
func (o *Orchestrator) replanIfNewer(ctx context.Context, p Plan) (Plan, error) {
	if rv := o.reader.ResourceVersion(ctx, p.Live.Ref); rv != "" && !kube.Newer(rv, p.Live.ResourceVersion) {
		return p, nil // known without a copy of the route
	}
	live, err := o.reader.Get(ctx, p.Live.Ref)
	if err != nil {
		return Plan{}, routes.RouteError(p.Live.Ref, ssa.Explain(ctx, err, p.Live.Ref, "get"))
	}
	if !kube.Newer(live.ResourceVersion, p.Live.ResourceVersion) {
		return p, nil
	}
	return MakePlan(live, p.decide)
}

// sameWrite says whether two decisions send the same apply.
func sameWrite(a, b desired.Result) bool {
	return a.Unchanged == b.Unchanged && a.Release == b.Release && reflect.DeepEqual(a.Rules, b.Rules) &&
		reflect.DeepEqual(a.Labels, b.Labels) && reflect.DeepEqual(a.Annotations, b.Annotations)
}

// releaseIfDone gives up the plugin's ownership when the plan says the
// rollouts on the route are done and the plugin still owns something there.
// answer is the apply's answer, nil if nothing was applied.
func (o *Orchestrator) releaseIfDone(ctx context.Context, p Plan, current routes.Route, answer *routes.Answer, route *routeLock, by Cause, log *logrus.Entry) error {
	if !p.Desired.Release {
		return nil
	}
	done, err := o.writer.Release(ctx, current, answer)
	if err != nil {
		return routes.RouteError(current.Ref, fmt.Errorf("giving up ownership: %w", ssa.Explain(ctx, err, current.Ref, "patch")))
	}
	if done == nil {
		return nil
	}
	route.wrote(0) // the next write carries the resourceVersion: the route is someone else's now
	if done.Answer != nil {
		o.reader.Written(done.Answer)
	}
	log.WithFields(logrus.Fields{
		"route":           current.Ref.String(),
		"fieldManager":    o.writer.FieldManager(),
		"resourceVersion": done.From + "→" + done.To,
		"changes":         "ownership released (" + strings.Join(done.Dropped, ", ") + " entry removed), every value kept",
	}).Info("released route")
	o.events.Released(current, by.Rollout, by.Call, done.Dropped)
	return nil
}
