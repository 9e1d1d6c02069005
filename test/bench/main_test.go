package main

import (
	"math/rand/v2"
	"testing"
)

// Steps that all cost the same leave no room: the interval is the ratio.
func TestRatioIntervalOfEqualStepsIsTheRatio(t *testing.T) {
	bare := []float64{100, 100, 100, 100, 100}
	plugin := []float64{120, 120, 120, 120, 120}
	if lo, hi := ratioInterval(plugin, bare); lo != 1.2 || hi != 1.2 {
		t.Errorf("interval %.3f–%.3f; want 1.200–1.200", lo, hi)
	}
}

// A plugin step that always costs 1.1 × the bare step beside it has the
// ratio 1.1 in every draw, however much the machine moves both: drawing the
// steps in pairs keeps what ran side by side together.
func TestRatioIntervalKeepsStepsInPairs(t *testing.T) {
	var plugin, bare []float64
	for i := range 15 {
		ms := 100 + 20*float64(i%5) // the machine's load changes from round to round
		bare = append(bare, ms)
		plugin = append(plugin, 1.1*ms)
	}
	lo, hi := ratioInterval(plugin, bare)
	if lo < 1.0999 || hi > 1.1001 {
		t.Errorf("interval %.4f–%.4f; want 1.1 at both ends", lo, hi)
	}
}

// Noisy steps give an interval around the ratio of the medians, wider with
// fewer steps.
func TestRatioIntervalHoldsTheRatioAndNarrowsWithMoreSteps(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	steps := func(n int) (plugin, bare []float64) {
		for range n {
			bare = append(bare, 100+60*rng.Float64())
			plugin = append(plugin, 110+60*rng.Float64())
		}
		return plugin, bare
	}
	p, b := steps(15)
	lo, hi := ratioInterval(p, b)
	if r := median(p) / median(b); lo > r || hi < r || lo == hi {
		t.Errorf("15 steps: interval %.3f–%.3f around %.3f; want it to hold the ratio and have a width", lo, hi, r)
	}
	p, b = steps(300)
	lo300, hi300 := ratioInterval(p, b)
	if hi300-lo300 >= hi-lo {
		t.Errorf("300 steps: interval %.3f–%.3f, not narrower than 15 steps' %.3f–%.3f", lo300, hi300, lo, hi)
	}
}
