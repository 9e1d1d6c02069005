package kube

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gatewayapi-ssa/rollouts-plugin/apierr"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// MissingError is a named route that does not exist or a selector that
// matches nothing.
type MissingError struct{ msg string }

// Reason is the Event reason of the error (package events).
func (e *MissingError) Reason() string { return "RouteNotFound" }

func (e *MissingError) Error() string { return e.msg }

// Resolution is what reading a Rollout's targets found.
type Resolution struct {
	// Routes are the routes read, each once: named routes first, in order,
	// then the selected ones.
	Routes []routes.Route
	// Missing are the named routes that do not exist and the selectors that
	// match nothing (each a *MissingError): input to fix, not a fault.
	Missing []error
	// Failed are the reads that got no answer: the routes (or selectors)
	// they were about are neither in Routes nor in Missing.
	Failed []error
}

// Err is every missing target and failed read, joined; nil if there is none.
func (r Resolution) Err() error { return errors.Join(append(r.Missing, r.Failed...)...) }

// Resolve reads every route the targets name, all or nothing: the routes, or
// an error naming every target missing or not read.
func Resolve(ctx context.Context, r RouteReader, t routes.Targets) ([]routes.Route, error) {
	res := ResolveEach(ctx, r, t)
	return res.Routes, res.Err()
}

// ResolveEach reads every route the targets name, and says what it found
// target by target. A named route that does not exist and a selector that
// matches nothing are Missing: a rollout would otherwise shift no traffic
// without saying so.
func ResolveEach(ctx context.Context, r RouteReader, t routes.Targets) Resolution {
	seen := map[routes.Ref]bool{}
	var out Resolution
	for _, ref := range t.Named {
		if seen[ref] {
			continue
		}
		seen[ref] = true
		route, err := r.Get(ctx, ref)
		if apierrors.IsNotFound(err) && !apierr.NotServed(err) {
			out.Missing = append(out.Missing, &MissingError{fmt.Sprintf("%s not found: create it, or fix the route's name or namespace in the rollout's plugin config", ref)})
			continue
		}
		if err != nil {
			out.Failed = append(out.Failed, fmt.Errorf("reading %s: %w", ref, apierr.AsPermissionError(err, "get", ref.Kind.GroupResource(), ref.Namespace)))
			continue
		}
		out.Routes = append(out.Routes, route)
	}
	for _, sel := range t.Selectors {
		found, err := r.List(ctx, sel.Kind, sel.Namespace, sel.Selector)
		if err != nil {
			out.Failed = append(out.Failed, fmt.Errorf("listing %s: %w", sel, apierr.AsPermissionError(err, "list", sel.Kind.GroupResource(), sel.Namespace)))
			continue
		}
		if len(found) == 0 {
			out.Missing = append(out.Missing, &MissingError{fmt.Sprintf("%s matches no route: label the routes or fix the selector", sel)})
		}
		for _, route := range found {
			if !seen[route.Ref] {
				seen[route.Ref] = true
				out.Routes = append(out.Routes, route)
			}
		}
	}
	return out
}
