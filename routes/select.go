package routes

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
)

// Targets are the routes a rollout manages: by name and by label selector.
type Targets struct {
	Named     []Ref
	Selectors []Selection
}

// Selection is every route of one kind in a namespace whose labels match.
type Selection struct {
	Kind      Kind
	Namespace string
	Selector  labels.Selector
}

func (s Selection) String() string {
	return fmt.Sprintf("%s selector %q in namespace %s", s.Kind, s.Selector.String(), s.Namespace)
}

// MissingError is a named route that does not exist or a selector that
// matches nothing.
type MissingError struct{ msg string }

func (e *MissingError) Error() string { return e.msg }

// Resolve reads every route the targets name, each once: named routes first,
// in order, then the selected ones. A named route that does not exist and a
// selector that matches nothing are errors (MissingError): a rollout would
// otherwise shift no traffic without saying so.
func Resolve(ctx context.Context, r Reader, t Targets) ([]Route, error) {
	found, missing, err := resolve(ctx, r, t)
	return found, errors.Join(append(missing, err)...)
}

// ResolveExisting is Resolve for calls that only take away what the plugin
// added: a route that is not there has nothing of the plugin's on it.
func ResolveExisting(ctx context.Context, r Reader, t Targets) ([]Route, error) {
	found, _, err := resolve(ctx, r, t)
	return found, err
}

func resolve(ctx context.Context, r Reader, t Targets) ([]Route, []error, error) {
	seen := map[Ref]bool{}
	var out []Route
	var errs, missing []error
	for _, ref := range t.Named {
		if seen[ref] {
			continue
		}
		seen[ref] = true
		route, err := r.Get(ctx, ref)
		if apierrors.IsNotFound(err) {
			missing = append(missing, &MissingError{fmt.Sprintf("%s not found: create it, or fix the route's name or namespace in the rollout's plugin config", ref)})
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("reading %s: %w", ref, err))
			continue
		}
		out = append(out, route)
	}
	for _, sel := range t.Selectors {
		found, err := r.List(ctx, sel.Kind, sel.Namespace, sel.Selector)
		if err != nil {
			errs = append(errs, fmt.Errorf("listing %s: %w", sel, err))
			continue
		}
		if len(found) == 0 {
			missing = append(missing, &MissingError{fmt.Sprintf("%s matches no route: label the routes or fix the selector", sel)})
		}
		for _, route := range found {
			if !seen[route.Ref] {
				seen[route.Ref] = true
				out = append(out, route)
			}
		}
	}
	return out, missing, errors.Join(errs...)
}
