package main

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// Steps that all cost the same leave no room: the interval is the ratio.
func TestRatioIntervalOfEqualStepsIsTheRatio(t *testing.T) {
	bare := []float64{100, 100, 100, 100, 100}
	plugin := []float64{120, 120, 120, 120, 120}
	if lo, hi := interval(plugin, bare, ratioOfMedians); lo != 1.2 || hi != 1.2 {
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
	lo, hi := interval(plugin, bare, ratioOfMedians)
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
	lo, hi := interval(p, b, ratioOfMedians)
	if r := median(p) / median(b); lo > r || hi < r || lo == hi {
		t.Errorf("15 steps: interval %.3f–%.3f around %.3f; want it to hold the ratio and have a width", lo, hi, r)
	}
	p, b = steps(300)
	lo300, hi300 := interval(p, b, ratioOfMedians)
	if hi300-lo300 >= hi-lo {
		t.Errorf("300 steps: interval %.3f–%.3f, not narrower than 15 steps' %.3f–%.3f", lo300, hi300, lo, hi)
	}
}

// The paired ratio is the median of each round's ratio, not the ratio of
// the medians: 1.2, 0.5 and 2.0 give 1.2, where the medians give 120/200.
func TestPairedRatioIsTheMedianOfTheRoundsRatios(t *testing.T) {
	plugin := []float64{120, 100, 400}
	bare := []float64{100, 200, 200}
	if got := pairedRatio(plugin, bare); got != 1.2 {
		t.Errorf("paired ratio %.3f; want 1.200", got)
	}
	if got := ratioOfMedians(plugin, bare); got != 0.6 {
		t.Errorf("ratio of medians %.3f; want 0.600", got)
	}
}

// When the machine's load moves both steps of a round together, the paired
// ratio's interval is narrower than the ratio of medians' (which draws each
// side's median from rounds of different loads), and both hold the ratio
// the steps were made with.
func TestPairedRatioIsSteadierUnderALoadThatMovesBothSides(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	var plugin, bare []float64
	for range 40 {
		load := 1 + rng.Float64() // the same for both steps of the round
		bare = append(bare, 100*load*(1+0.04*(rng.Float64()-0.5)))
		plugin = append(plugin, 110*load*(1+0.04*(rng.Float64()-0.5)))
	}
	plo, phi := interval(plugin, bare, pairedRatio)
	rlo, rhi := interval(plugin, bare, ratioOfMedians)
	if plo > 1.1 || phi < 1.1 || rlo > 1.1 || rhi < 1.1 {
		t.Errorf("paired %.3f–%.3f, ratio of medians %.3f–%.3f; want both to hold 1.1", plo, phi, rlo, rhi)
	}
	if phi-plo >= (rhi-rlo)/2 {
		t.Errorf("paired interval %.3f–%.3f is not half as wide as the ratio of medians' %.3f–%.3f", plo, phi, rlo, rhi)
	}
}

// Installing the plugin as Argo Rollouts does, either way, gives the bench
// an executable copy of exactly the built file, beside nothing it replaced.
func TestInstallPluginWritesAnExecutableCopy(t *testing.T) {
	src := filepath.Join(t.TempDir(), "plugin")
	built := bytes.Repeat([]byte("0123456789abcdef"), 100_000) // 1.6 MB: many writes of 32 KiB
	if err := os.WriteFile(src, built, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"download", "copy"} {
		dir := t.TempDir()
		path, err := installPlugin(src, dir, mode)
		if err != nil {
			t.Fatalf("-install %s: %v", mode, err)
		}
		if filepath.Dir(path) != dir || path == src {
			t.Errorf("-install %s wrote %s; want a new file in %s", mode, path, dir)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, built) {
			t.Errorf("-install %s: the copy (%d bytes) differs from the file built (%d bytes)", mode, len(got), len(built))
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o100 == 0 {
			t.Errorf("-install %s: the copy's mode is %v; want it executable by its owner", mode, fi.Mode())
		}
		if _, err := installPlugin(src, dir, mode); err == nil {
			t.Errorf("-install %s over an installed copy: no error; want it refused, not overwritten", mode)
		}
	}
}
