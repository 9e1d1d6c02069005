package kube

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gatewayapi-ssa/rollouts-plugin/kubeclient"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// MissingError is a named route that does not exist or a selector that
// matches nothing.
type MissingError struct{ msg string }

// Reason is the Event reason of the error (package events).
func (e *MissingError) Reason() string { return "RouteNotFound" }

func (e *MissingError) Error() string { return e.msg }

// maxRoutesPerCall bounds the routes one call works on, named and selected
// together: what docs/performance.md measured (1,000 routes, a step of about
// 4 s and 58 MiB), and what fits the call's deadline at the flags it gives.
const maxRoutesPerCall = 1000

// TooManyRoutesError is a selector that takes the routes of a call past
// maxRoutesPerCall.
type TooManyRoutesError struct{ msg string }

// Reason is the Event reason of the error (package events): the config is
// what to fix.
func (e *TooManyRoutesError) Reason() string { return "InvalidConfig" }

func (e *TooManyRoutesError) Error() string { return e.msg }

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
	// TooMany is the selector that took the routes past maxRoutesPerCall (a
	// *TooManyRoutesError): no selector after it was read, and the call
	// must work on none of them.
	TooMany error
}

// Err is every missing target and failed read, and too many routes, joined;
// nil if there is none.
func (r Resolution) Err() error {
	return errors.Join(append(append(r.Missing, r.Failed...), r.TooMany)...)
}

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
		if apierrors.IsNotFound(err) && !kubeclient.NotServed(err) {
			out.Missing = append(out.Missing, &MissingError{fmt.Sprintf("%s not found: create it, or fix the route's name or namespace in the rollout's plugin config", ref)})
			continue
		}
		if err != nil {
			out.Failed = append(out.Failed, fmt.Errorf("reading %s: %w", ref, kubeclient.AsPermissionError(err, "get", ref.Kind.GroupResource(), ref.Namespace)))
			continue
		}
		out.Routes = append(out.Routes, route)
	}
	for _, sel := range t.Selectors {
		found, err := r.List(ctx, sel.Kind, sel.Namespace, sel.Selector)
		if err != nil {
			out.Failed = append(out.Failed, fmt.Errorf("listing %s: %w", sel, kubeclient.AsPermissionError(err, "list", sel.Kind.GroupResource(), sel.Namespace)))
			continue
		}
		if len(found) == 0 {
			out.Missing = append(out.Missing, &MissingError{fmt.Sprintf("%s matches no route: label the routes or fix the selector", sel)})
		}
		if n := len(out.Routes) + len(found); n > maxRoutesPerCall {
			out.TooMany = &TooManyRoutesError{fmt.Sprintf("key %q: %s matches %d routes, which takes the call to %d, and a call works on at most %d routes, named and selected together: narrow the selector, or spread the routes over Rollouts",
				sel.Key(), sel, len(found), n, maxRoutesPerCall)}
			return out
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
