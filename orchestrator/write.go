package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

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
		return Plan{}, refusal{routes.RouteError(live.Ref, err)}
	}
	return Plan{Live: live, Desired: d, decide: decide}, nil
}

// refusal is a route's decision refusing the call (MakePlan): nothing is
// written to the route, whether the decision was made before the write or
// again after a conflict.
type refusal struct{ error }

func (r refusal) Unwrap() error { return r.error }

// refused says whether every error is a refusal.
func refused(errs []error) bool {
	for _, err := range errs {
		if !errors.As(err, new(refusal)) {
			return false
		}
	}
	return true
}

// Write applies the plan. The process writes one route one call at a time:
// a plan decided before another call of the process wrote the route is
// decided again from that write's answer first. Each apply is guarded as
// guards chooses (guard.go). After a conflict it reads the route again and
// decides again, as the retry policy says (retry.go, and the loop below).
// It records every answer with the reader, logs one line per write that
// reached the apiserver, and tells the route's owners (RouteEvents) what it
// changed, or that it failed.
func (o *Orchestrator) Write(ctx context.Context, p Plan, by Cause) (err error) {
	log := o.log.WithFields(logrus.Fields{"rollout": by.Rollout, "call": by.Call})
	defer func(live routes.Route) {
		o.counts.ended(err)
		if err != nil {
			o.events.Refused(live, by.Rollout, by.Call, err)
		}
	}(p.Live)
	route, written, err := o.guards.lock(ctx, p.Live.Ref)
	if err != nil {
		return routes.RouteError(p.Live.Ref, fmt.Errorf("waiting for another call writing the route: %w", err))
	}
	defer route.unlock()
	if p, err = o.prepare(ctx, p, written); err != nil {
		return err
	}
	// The retry policy. A conflict of an apply guarded by ownership (another
	// manager took spec.rules) is answered once per write with a fresh read;
	// every later apply carries the resourceVersion, and it counts as no
	// attempt. An optimistic-lock conflict after which the write comes out
	// the same (only what the plugin does not write changed) is answered at
	// once, at most maxBusyAttempts times, and counts as no attempt either.
	// One after which the rules changed is answered after a backoff and a
	// fresh read, at most maxAttempts times in all.
	attempts, busy := 1, 0
	takeOver := false
	for again := false; ; again = true {
		if again && !p.Desired.Unchanged {
			o.counts.retried.Add(1)
		}
		next, what, err := o.applyOnce(ctx, p, route, takeOver, by, log)
		switch what {
		case finished:
			return err
		case rulesTaken:
			takeOver = true
			next, err = o.replan(ctx, p)
		case sameWriteAgain:
			if busy == maxBusyAttempts {
				return routes.RouteError(p.Live.Ref, keptChanging(attempts, busy))
			}
			busy++
		case rulesChanged:
			if attempts == maxAttempts || busy == maxBusyAttempts {
				return routes.RouteError(p.Live.Ref, keptChanging(attempts, busy))
			}
			log.WithFields(logrus.Fields{"route": p.Live.Ref.String(), "resourceVersion": p.Live.ResourceVersion, "attempt": attempts}).
				Debug("route changed since it was read; reading it again")
			if err := backoff(ctx, attempts); err != nil {
				return routes.RouteError(p.Live.Ref, fmt.Errorf("gave up after %d optimistic-lock conflicts: %w", attempts, err))
			}
			attempts++
			next, err = o.replan(ctx, p)
		}
		if err != nil {
			return err
		}
		p = next
	}
}

// prepare makes a plan ready to write once the route's lock is held:
// decided again when the process wrote the route lately (written), maybe
// after the plan was decided (the reader holds that write's answer, or
// newer); and, when it writes, the access it needs to start or end the
// plugin's ownership reviewed.
func (o *Orchestrator) prepare(ctx context.Context, p Plan, written bool) (Plan, error) {
	var err error
	if written {
		if p, err = o.replanIfNewer(ctx, p); err != nil {
			return p, err
		}
	}
	if !p.Desired.Unchanged {
		if err := o.writer.ReviewOwnershipChange(ctx, p.Live, p.Desired.Release); err != nil {
			return p, routes.RouteError(p.Live.Ref, err)
		}
	}
	return p, nil
}

// attempt is what one apply came to (applyOnce).
type attempt int

const (
	// finished: the write is over; applied (and released when the
	// rollouts are done), nothing to apply, or failed for good.
	finished attempt = iota
	// rulesTaken: the apply, guarded by ownership, conflicted: another
	// manager changed spec.rules since the route was read.
	rulesTaken
	// sameWriteAgain: an optimistic-lock conflict, and the write decided
	// again on the route as the watch cache brings it is the same: only
	// what the plugin does not write changed.
	sameWriteAgain
	// rulesChanged: an optimistic-lock conflict, and the write decided
	// again is not the same.
	rulesChanged
)

// applyOnce sends the plan's apply once, guarded as the route's lock chooses (routeLock.guard), and says
// what came of it; after an optimistic-lock conflict, next is the plan
// decided again on the route as the watch cache brings it.
func (o *Orchestrator) applyOnce(ctx context.Context, p Plan, route *routeLock, takeOver bool, by Cause, log *logrus.Entry) (next Plan, what attempt, err error) {
	if p.Desired.Unchanged {
		o.counts.unchanged.Add(1)
		return p, finished, o.releaseIfDone(ctx, p, p.Live, nil, route, by, log)
	}
	d := p.Desired
	guard, leave, err := route.guard(ctx, p.Live, takeOver)
	if err != nil {
		return p, finished, routes.RouteError(p.Live.Ref, err)
	}
	answer, unstructured, err := o.writer.Apply(ctx, p.Live, ssa.Content{Rules: d.Rules, Labels: d.Labels, Annotations: d.Annotations}, guard)
	leave()
	if apierrors.IsConflict(err) {
		o.counts.conflicts.Add(1)
	}
	switch {
	case err == nil:
		o.counts.applied.Add(1)
		return p, finished, o.applied(ctx, p, answer, guard, unstructured, route, by, log)
	case guard == ssa.ByOwnership && ssa.IsOwnershipConflict(err):
		// The decision, made again on the route as it is, reports a change
		// of what the plugin manages as a conflict; what is left to write
		// takes the rules back, guarded by the resourceVersion.
		log.WithFields(logrus.Fields{"route": p.Live.Ref.String(), "error": err.Error()}).
			Debug("another manager changed the rules since the route was read; reading it again")
		return p, rulesTaken, nil
	case !ssa.IsStale(err) && !apierr.NotServed(err):
		return p, finished, routes.RouteError(p.Live.Ref, ssa.Explain(ctx, err, p.Live.Ref, "patch"))
	}
	// Decide again from the watch cache once it holds the change that made
	// the apply conflict (its event comes right after it: the quietest
	// moment to send the next attempt, and no request to read), else fresh.
	// So it does too when the apiserver no longer serves the route's version
	// (the reader discovers it again).
	if next, err = o.replanOnNextEvent(ctx, p); err != nil {
		return p, finished, err
	}
	if sameWrite(p.Desired, next.Desired) {
		return next, sameWriteAgain, nil
	}
	return next, rulesChanged, nil
}

// applied records an apply's answer with the route's lock and the reader,
// logs it, tells the route's owners what it changed, and releases the
// route when the plan says the rollouts on it are done.
func (o *Orchestrator) applied(ctx context.Context, p Plan, answer *routes.Answer, guard ssa.Guard, unstructured string, route *routeLock, by Cause, log *logrus.Entry) error {
	d := p.Desired
	route.wrote()
	o.reader.Written(answer)
	fields := logrus.Fields{
		"route":           p.Live.Ref.String(),
		"fieldManager":    o.writer.FieldManager(),
		"resourceVersion": p.Live.ResourceVersion + "→" + answer.ResourceVersion,
		"guard":           guard.String(),
		"changes":         routes.JoinChanges(d.Changes),
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

// replan reads the route fresh and decides again.
func (o *Orchestrator) replan(ctx context.Context, p Plan) (Plan, error) {
	live, err := o.reader.Fresh(ctx, p.Live.Ref)
	if err != nil {
		return Plan{}, routes.RouteError(p.Live.Ref, ssa.Explain(ctx, err, p.Live.Ref, "get"))
	}
	return MakePlan(live, p.decide)
}

// replanOnNextEvent decides again on the first version of the route newer
// than the plan's that the reader holds within eventWait, waiting for the
// route's watch events; failing that, or when no watch tells, on a fresh
// read.
func (o *Orchestrator) replanOnNextEvent(ctx context.Context, p Plan) (Plan, error) {
	timeout := time.NewTimer(eventWait)
	defer timeout.Stop()
	for {
		changed := o.reader.Changed(p.Live.Ref) // before the read: an event after it closes it
		live, err := o.reader.Get(ctx, p.Live.Ref)
		if err == nil && kube.Newer(live.ResourceVersion, p.Live.ResourceVersion) {
			return MakePlan(live, p.decide)
		}
		if changed == nil {
			return o.replan(ctx, p)
		}
		select {
		case <-changed:
		case <-timeout.C:
			return o.replan(ctx, p)
		case <-ctx.Done():
			return o.replan(ctx, p)
		}
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
	route.released()
	o.counts.released.Add(1)
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
