package plugin

import (
	"fmt"
	"sync"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// perRoute runs fn for every route, at most limit at a time, and returns the
// errors in route order (nil where fn succeeded). A panic in fn becomes that
// route's error: it must not take the plugin process down.
func perRoute(refs []routes.Ref, limit int, fn func(i int) error) []error {
	errs := make([]error, len(refs))
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := range refs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					errs[i] = fmt.Errorf("%s: internal error: %v", refs[i], r)
				}
			}()
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = fn(i)
		}()
	}
	wg.Wait()
	return errs
}

// failures keeps the non-nil errors.
func failures(errs []error) []error {
	var out []error
	for _, err := range errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}
