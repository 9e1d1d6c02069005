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

// acquire waits for a slot until ctx ends.
func (s Slots) acquire(ctx context.Context) error {
	select {
	case s <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s Slots) free() { <-s }

// perRoute runs fn for every route, each holding a slot of every bound (taken
// in the order given), and returns the errors in route order (nil where fn
// succeeded). A route whose Slots did not come before ctx ended is not
// started and gets that as its error. A panic in fn becomes that route's
// error: it must not take the plugin process down.
//
// The routes are run by as many workers as the first bound holds (one per
// route without bounds), each taking the next route when it is done with
// one: a call over 200 routes runs as many goroutines as that bound, not
// 200. A worker keeps the stack its first route grew (writing a route goes
// deep: encoding, the HTTP client), where a goroutine per route grew a new
// one from 2 KiB each time, which cost about a twelfth of the plugin's
// instructions on a step.
func perRoute(ctx context.Context, refs []routes.Ref, bounds []Slots, fn func(i int) error) []error {
	errs := make([]error, len(refs))
	workers := len(refs)
	if len(bounds) > 0 {
		workers = min(workers, cap(bounds[0]))
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(refs); i = int(next.Add(1) - 1) {
				errs[i] = runRoute(ctx, refs[i], bounds, func() error { return fn(i) })
			}
		})
	}
	wg.Wait()
	return errs
}

// runRoute runs fn for the route ref once it holds a slot of every bound.
func runRoute(ctx context.Context, ref routes.Ref, bounds []Slots, fn func() error) (err error) {
	for _, b := range bounds {
		if err := b.acquire(ctx); err != nil {
			return fmt.Errorf("%s: not started: %w", ref, err)
		}
		defer b.free()
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: internal error: %v", ref, r)
		}
	}()
	return fn()
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
