package orchestrator

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// Slots bounds how many routes are worked on at once: one per call, and one
// for the whole process, which up to --rollout-threads calls share.
type Slots chan struct{}

// NewSlots bounds to n (at least 1) at once.
func NewSlots(n int) Slots { return make(Slots, max(n, 1)) }

// take waits for a slot until ctx ends.
func (s Slots) take(ctx context.Context) error {
	select {
	case s <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s Slots) give() { <-s }

// perRoute runs fn for every route, each holding a slot of every bound (taken
// in the order given), and returns the errors in route order (nil where fn
// succeeded). A route whose Slots did not come before ctx ended is not
// started and gets that as its error. A panic in fn becomes that route's
// error: it must not take the plugin process down. A route's goroutine starts
// once it holds the first bound's slot, so a call over 200 routes runs as
// many goroutines as that bound, not 200.
func perRoute(ctx context.Context, refs []routes.Ref, bounds []Slots, fn func(i int) error) []error {
	errs := make([]error, len(refs))
	var wg sync.WaitGroup
	for i := range refs {
		if len(bounds) > 0 {
			if err := bounds[0].take(ctx); err != nil {
				errs[i] = fmt.Errorf("%s: not started: %w", refs[i], err)
				continue
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if len(bounds) > 0 {
				defer bounds[0].give()
			}
			defer func() {
				if r := recover(); r != nil {
					errs[i] = fmt.Errorf("%s: internal error: %v", refs[i], r)
				}
			}()
			for _, b := range bounds[min(len(bounds), 1):] {
				if err := b.take(ctx); err != nil {
					errs[i] = fmt.Errorf("%s: not started: %w", refs[i], err)
					return
				}
				defer b.give()
			}
			errs[i] = fn(i)
		}()
	}
	wg.Wait()
	return errs
}

// eachAtOnce runs fn(0) … fn(n-1) on as many goroutines as the process has
// CPUs (the decisions of a call: CPU only, no request). A panic in fn is
// raised again on the caller's goroutine once every fn has ended, the one of
// the lowest i, so the caller's recover answers it as if fn had run there.
func eachAtOnce(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	panics := make([]any, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				func() {
					defer func() { panics[i] = recover() }()
					fn(i)
				}()
			}
		})
	}
	wg.Wait()
	for _, p := range panics {
		if p != nil {
			panic(p)
		}
	}
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
