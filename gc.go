package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// How often the plugin collects garbage. Go's default (GOGC 100) lets the
// heap grow to twice what is live before it collects; at 50 it grows to
// 1.5 ×, for about twice the collections. The plugin's live heap is small
// (package initialisation, plus a few KiB per route in its watch caches),
// and at 50 most of its CPU per route written went to the collector. But
// at 100 a plugin whose caches hold 10,000 routes peaks several MiB higher
// than at 50 (docs/performance/memory.md has both counts). So the plugin
// spends a fixed heap budget instead of a fixed ratio: after each
// collection it sets GOGC to what lets the heap grow to heapBudget, at most
// 100 and at least 50. A plugin with a small live heap collects as Go does
// by default; one whose heap is large collects as at 50, and its heap never
// grows past what 50 allows once its live heap is two thirds of the budget.

// heapBudget is what the heap may grow to between collections while what
// is live is less than two thirds of it. Over a few hundred routes the live
// heap is about half the budget, so the budget is what the heap peaks at:
// lower, the peak RSS is lower, and the collections more frequent, which
// the plugin pays in CPU (docs/performance/memory.md weighs both). The
// heap's peak at 10,000 cached routes (about 9.7 MiB live, so 14.5 MiB at
// 50) stays what it was at 50 for any budget up to that.
const heapBudget = 10 << 20

// Bounds of the GC percent the plugin sets.
const (
	minGCPercent = 50
	maxGCPercent = 100
)

// gcPercentFor is the GC percent that lets a heap with live bytes live grow
// to heapBudget, within [minGCPercent, maxGCPercent].
func gcPercentFor(live uint64) int {
	if live == 0 {
		return maxGCPercent
	}
	p := (int64(heapBudget) - int64(live)) * 100 / int64(live)
	return int(min(max(p, minGCPercent), maxGCPercent))
}

// tuneGC sets the GC percent for the live heap now, and again after every
// collection, from then on. It is not called when GOGC is set: the user's
// setting stays.
func tuneGC() {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	set := -1
	tune := func() {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return
		}
		if p := gcPercentFor(sample[0].Value.Uint64()); p != set {
			debug.SetGCPercent(p)
			set = p
		}
	}
	tune()
	afterEachGC(tune)
}

// gcCycle is an object no one holds, whose finalizer runs after the
// collection that finds it unreachable. It is larger than the tiny
// allocator's blocks, whose objects may not be freed (or finalized) when
// they become unreachable.
type gcCycle [32]byte

// afterEachGC runs fn in the finalizer goroutine after every collection.
func afterEachGC(fn func()) {
	var arm func()
	arm = func() {
		runtime.SetFinalizer(new(gcCycle), func(*gcCycle) {
			fn()
			arm()
		})
	}
	arm()
}
