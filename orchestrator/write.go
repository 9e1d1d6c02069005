package orchestrator

import (
	"context"
	"fmt"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/ssa"
)

// Decide returns the desired state of a route from its live state. It must
// be pure: Write calls it again after every optimistic-lock conflict.
type Decide func(live routes.Route) (desired.Result, error)

// Plan is a decided change to one route, not yet written.
type Plan struct {
	Live    routes.Route
	Desired desired.Result
	decide  Decide
}

// Plan decides the desired state of a live route. Deciding every route's
// plan before writing any lets a caller refuse bad input with nothing
// written.
func (o *Orchestrator) Plan(live routes.Route, decide Decide) (Plan, error) {
	d, err := decide(live)
	if err != nil {
		return Plan{}, routes.About(live.Ref, err)
	}
	return Plan{Live: live, Desired: d, decide: decide}, nil
}

// Write applies the plan. On an optimistic-lock conflict it reads the route
// again, decides again and retries, at most ssa.MaxAttempts times in all; so
// it does when the apiserver no longer serves the route's version (the
// reader discovers it again). It records every answer with the reader and
// logs one line per write that reached the apiserver.
func (o *Orchestrator) Write(ctx context.Context, p Plan, log *logrus.Entry) error {
	if !p.Desired.Unchanged {
		if err := o.writer.ReviewOwnershipChange(ctx, p.Live, p.Desired.Release); err != nil {
			return routes.About(p.Live.Ref, err)
		}
	}
	for attempt := 1; ; attempt++ {
		if p.Desired.Unchanged {
			return o.releaseIfDone(ctx, p, p.Live, nil, log)
		}
		d := p.Desired
		answer, unstructured, err := o.writer.Apply(ctx, p.Live, ssa.Want{Rules: d.Rules, Labels: d.Labels, Annotations: d.Annotations})
		if err == nil {
			o.reader.Written(answer)
			fields := logrus.Fields{
				"route":           p.Live.Ref.String(),
				"fieldManager":    o.writer.FieldManager(),
				"resourceVersion": p.Live.ResourceVersion + "→" + answer.ResourceVersion,
				"changes":         strings.Join(d.Changes, "; "),
			}
			if unstructured != "" {
				fields["unstructured"] = unstructured
			}
			log.WithFields(fields).Info("applied route")
			o.sayUnchecked(p.Live.Ref, d.Unchecked, log)
			if !d.Release {
				return nil
			}
			stored, err := answer.Route()
			if err != nil {
				return routes.About(p.Live.Ref, fmt.Errorf("reading the apiserver's answer: %w", err))
			}
			return o.releaseIfDone(ctx, p, stored, answer, log)
		}
		if !ssa.IsStale(err) && !kube.NotServed(err) {
			return routes.About(p.Live.Ref, ssa.Explain(ctx, err, p.Live.Ref, "patch"))
		}
		if attempt == ssa.MaxAttempts {
			return routes.About(p.Live.Ref, fmt.Errorf("the route kept changing under the plugin: %d attempts ended in optimistic-lock conflicts; the call is safe to repeat", attempt))
		}
		log.WithFields(logrus.Fields{"route": p.Live.Ref.String(), "resourceVersion": p.Live.ResourceVersion, "attempt": attempt}).
			Debug("route changed since it was read; reading it again")
		if err := ssa.Backoff(ctx, attempt); err != nil {
			return routes.About(p.Live.Ref, fmt.Errorf("gave up after %d optimistic-lock conflicts: %w", attempt, err))
		}
		live, err := o.reader.Fresh(ctx, p.Live.Ref)
		if err != nil {
			return routes.About(p.Live.Ref, ssa.Explain(ctx, err, p.Live.Ref, "get"))
		}
		if p, err = o.Plan(live, p.decide); err != nil {
			return err
		}
	}
}

// releaseIfDone gives up the plugin's ownership when the plan says the
// rollouts on the route are done and the plugin still owns something there.
// answer is the apply's answer, nil if nothing was applied.
func (o *Orchestrator) releaseIfDone(ctx context.Context, p Plan, current routes.Route, answer *routes.Answer, log *logrus.Entry) error {
	if !p.Desired.Release {
		return nil
	}
	done, err := o.writer.Release(ctx, current, answer)
	if err != nil {
		return routes.About(current.Ref, fmt.Errorf("giving up ownership: %w", ssa.Explain(ctx, err, current.Ref, "update")))
	}
	if done == nil {
		return nil
	}
	if done.Answer != nil {
		o.reader.Written(done.Answer)
	}
	log.WithFields(logrus.Fields{
		"route":           current.Ref.String(),
		"fieldManager":    o.writer.FieldManager(),
		"resourceVersion": done.From + "→" + done.To,
		"changes":         "ownership released (" + strings.Join(done.Dropped, ", ") + " entry removed), every value kept",
	}).Info("released route")
	return nil
}
