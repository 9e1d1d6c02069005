package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

func refsNamed(names ...string) []routes.Ref {
	out := make([]routes.Ref, len(names))
	for i, n := range names {
		out[i] = routes.Ref{Kind: routes.HTTPRoute, Namespace: "ns", Name: n}
	}
	return out
}

// peak counts how many run at once.
type peak struct{ running, most atomic.Int32 }

func (p *peak) enter() {
	n := p.running.Add(1)
	for {
		m := p.most.Load()
		if n <= m || p.most.CompareAndSwap(m, n) {
			return
		}
	}
}

func (p *peak) leave() { p.running.Add(-1) }

// perRoute keeps each route's error in its place, turns a panic into that
// route's error, and never runs more than the call's limit at once.
func TestPerRoute(t *testing.T) {
	var p peak
	errs := perRoute(context.Background(), refsNamed("a", "b", "c"), []Slots{NewSlots(2), NewSlots(16)}, func(i int) error {
		p.enter()
		defer p.leave()
		time.Sleep(10 * time.Millisecond)
		switch i {
		case 1:
			panic("boom")
		case 2:
			return errors.New("refused")
		}
		return nil
	})
	if errs[0] != nil || errs[2] == nil || errs[2].Error() != "refused" {
		t.Errorf("errors out of place: %v", errs)
	}
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "HTTPRoute ns/b: internal error: boom") {
		t.Errorf("panic not turned into the route's error: %v", errs[1])
	}
	if m := p.most.Load(); m > 2 {
		t.Errorf("%d ran at once, limit 2", m)
	}
	if got := failures(errs); len(got) != 2 {
		t.Errorf("failures = %v", got)
	}
}

// Many routes over few slots: every route runs once, on a worker that
// goes on to the next route after one that panicked or failed, and each
// route's error stays in its place.
func TestPerRouteManyRoutesFewSlots(t *testing.T) {
	names := make([]string, 50)
	for i := range names {
		names[i] = fmt.Sprintf("r%02d", i)
	}
	var ran [50]atomic.Int32
	var p peak
	errs := perRoute(context.Background(), refsNamed(names...), []Slots{NewSlots(3), NewSlots(16)}, func(i int) error {
		p.enter()
		defer p.leave()
		ran[i].Add(1)
		switch i % 10 {
		case 3:
			panic(fmt.Sprintf("boom %d", i))
		case 7:
			return fmt.Errorf("refused %d", i)
		}
		return nil
	})
	for i := range ran {
		if n := ran[i].Load(); n != 1 {
			t.Errorf("route %d ran %d times", i, n)
		}
		var want string
		switch i % 10 {
		case 3:
			want = fmt.Sprintf("HTTPRoute ns/r%02d: internal error: boom %d", i, i)
		case 7:
			want = fmt.Sprintf("refused %d", i)
		}
		if got := fmt.Sprint(errs[i]); (want == "" && errs[i] != nil) || (want != "" && got != want) {
			t.Errorf("route %d: error %v, want %q", i, errs[i], want)
		}
	}
	if m := p.most.Load(); m > 3 {
		t.Errorf("%d ran at once, limit 3", m)
	}
}

// Calls running at the same time share the process's bound: four calls of
// four routes, each allowed four at once, never run more than the process's
// three together.
func TestPerRouteProcessBound(t *testing.T) {
	process := NewSlots(3)
	var p peak
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			perRoute(context.Background(), refsNamed("a", "b", "c", "d"), []Slots{NewSlots(4), process}, func(int) error {
				p.enter()
				defer p.leave()
				time.Sleep(5 * time.Millisecond)
				return nil
			})
		}()
	}
	wg.Wait()
	t.Logf("at most %d routes at once across 4 calls (process bound 3)", p.most.Load())
	if m := p.most.Load(); m > 3 {
		t.Errorf("%d ran at once across calls, process bound 3", m)
	}
}

// A route that gets no slot before the call's deadline is not started, and
// says so.
func TestPerRouteNotStartedAfterDeadline(t *testing.T) {
	busy := NewSlots(1)
	if err := busy.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer busy.free()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	ran := false
	errs := perRoute(ctx, refsNamed("a"), []Slots{NewSlots(1), busy}, func(int) error { ran = true; return nil })
	if ran || errs[0] == nil || !strings.Contains(errs[0].Error(), "HTTPRoute ns/a: not started: context deadline exceeded") {
		t.Errorf("ran=%v, err=%v; want not started", ran, errs[0])
	}
}

// eachAtOnce runs every index once, and raises a panic again on the
// caller's goroutine (the lowest index's), after every other has run.
func TestEachAtOnce(t *testing.T) {
	var ran [50]atomic.Int32
	eachAtOnce(len(ran), func(i int) { ran[i].Add(1) })
	for i := range ran {
		if n := ran[i].Load(); n != 1 {
			t.Errorf("index %d ran %d times", i, n)
		}
	}
	var done atomic.Int32
	defer func() {
		if r := recover(); r != "boom 3" {
			t.Errorf("recovered %v, want boom 3", r)
		}
		if n := done.Load(); n != 18 {
			t.Errorf("%d of the 18 that do not panic ran", n)
		}
	}()
	eachAtOnce(20, func(i int) {
		if i == 3 || i == 17 {
			panic(fmt.Sprintf("boom %d", i))
		}
		done.Add(1)
	})
	t.Error("no panic")
}
