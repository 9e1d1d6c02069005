package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Each run's step grows from its smallest route count to each larger one,
// the plugin's and the bare client's apart; calibration runs and the rows
// that ran once are left out.
func TestGrowthRowsGathersEachRunsGrowth(t *testing.T) {
	res := func(s scenario, plugin, bare float64) result {
		r := result{s: s}
		r.steady.ms, r.bareSteady.ms = []float64{plugin, plugin * 2, plugin / 2}, []float64{bare, bare * 2, bare / 2}
		return r
	}
	results := []result{
		res(scenario{routes: 200, rollouts: 1, run: 1}, 100, 90),
		res(scenario{routes: 200, rollouts: 1, run: 1, calibration: true}, 1, 1),
		res(scenario{routes: 1000, rollouts: 1, run: 1}, 550, 450),
		res(scenario{routes: 1000, rollouts: 1, run: 1, calibration: true}, 1, 1),
		res(scenario{routes: 10, rollouts: 100, run: 0}, 7, 7),
		res(scenario{routes: 50, rollouts: 1, others: 10000}, 7, 7),
		res(scenario{routes: 50, rollouts: 1, backToBack: true}, 7, 7),
		res(scenario{routes: 200, rollouts: 1, run: 2}, 200, 100),
		res(scenario{routes: 1000, rollouts: 1, run: 2}, 1000, 600),
	}
	want := []growthRow{{from: 200, to: 1000, plugin: []float64{5.5, 5}, bare: []float64{5, 6}}}
	if diff := cmp.Diff(want, growthRows(results), cmp.AllowUnexported(growthRow{})); diff != "" {
		t.Errorf("growth rows (-want +got):\n%s", diff)
	}
	var got strings.Builder
	printGrowth(&got, []growthRow{
		{from: 200, to: 1000, plugin: []float64{5.3, 5.24, 6.5, 4.8, 5.7}, bare: []float64{5, 5, 6, 4.6, 5.9}},
		{from: 10, to: 50, plugin: []float64{4}, bare: []float64{5}},
	})
	wantText := `
How the step grows with the routes, run by run: the median step over the larger route count over the median step over the
smaller (linear: their ratio), the plugin's beside the bare client's in the same run. sd: the sample standard deviation between runs.

| routes | plugin per run | mean (sd) | bare client per run | mean (sd) |
| --- | --- | --- | --- | --- |
| 200 → 1000 | 5.30, 5.24, 6.50, 4.80, 5.70 | 5.51 (0.64) | 5.00, 5.00, 6.00, 4.60, 5.90 | 5.30 (0.62) |
| 10 → 50 | 4.00 | 4.00 (—) | 5.00 | 5.00 (—) |

The rows of a run ran minutes apart, and this machine's speed moves in minutes (the plugin's growth and the bare client's
move together run by run): the aim is judged on interleaved rounds (-interleave), whose steps meet the same moment.
`
	if diff := cmp.Diff(wantText, got.String()); diff != "" {
		t.Errorf("growth (-want +got):\n%s", diff)
	}
}

// Interleaved, a round's growth is its step over the larger count over its
// step over the smaller; the verdict is on the median of the rounds' growth,
// and says what the bare client's steps and the plugin's CPU grew by.
func TestInterleavedGrowthIsJudgedRoundByRound(t *testing.T) {
	g := interleaved{
		from: 200, to: 1000,
		plugin:    [2][]float64{{100, 200, 100}, {500, 1200, 700}},
		bare:      [2][]float64{{100, 100, 50}, {600, 700, 300}},
		pluginCPU: [2]float64{0.3, 1.5},
		serverCPU: [2][2]float64{{3, 15}, {3, 16.5}},
	}
	if diff := cmp.Diff([]float64{5, 6, 7}, growthOf(g.plugin)); diff != "" {
		t.Errorf("the plugin's growth per round (-want +got):\n%s", diff)
	}
	var got strings.Builder
	printInterleaved(&got, g)
	wantText := `
How the step grows with the routes, interleaved: one plugin serves a Rollout over 200 routes and one over 1000; each of 3 rounds
steps both, and the bare client over both, in an order drawn for the round, so the two steps of a ratio meet the same moment of the machine.
Growth: the step over 1000 routes over the step over 200 (linear: 5.0 ×); per round: the median of the rounds' ratios, with the interval
(5–95 % of 2000 resamples of the rounds).

| side | step ms, median (min–max) over 200 routes | over 1000 | growth of the medians | growth per round (interval) |
| --- | --- | --- | --- | --- |
| plugin | 100 (100–200) | 700 (500–1200) | 7.00 × | 6.00 × (5.00–7.00) |
| bare client | 100 (50–100) | 600 (300–700) | 6.00 × | 6.00 × (6.00–7.00) |

The plugin's step over the bare client's in the same round (paired ratio): 2.00 at 200 routes, 1.71 at 1000.

CPU seconds per step, the settle after it included (what the step leaves to do after it returns):

| CPU of | over 200 routes | over 1000 | growth |
| --- | --- | --- | --- |
| the plugin | 0.100 | 0.500 | 5.00 × |
| kube-apiserver and etcd, the plugin's steps | 1.000 | 5.000 | 5.00 × |
| kube-apiserver and etcd, the bare client's steps | 1.000 | 5.500 | 5.50 × |

aim (the 1000-route step at most 5.5 × the 200-route step): not met; 6.00 × per round, the median over 3 rounds (the bare client's: 6.00 ×; the plugin's CPU per step: 5.00 ×)
`
	if diff := cmp.Diff(wantText, got.String()); diff != "" {
		t.Errorf("interleaved growth (-want +got):\n%s", diff)
	}
	g.plugin[1] = []float64{500, 1100, 550}
	if v := interleavedVerdict(g); !strings.HasPrefix(v, "aim (the 1000-route step at most 5.5 × the 200-route step): met; 5.50 × per round") {
		t.Errorf("rounds at 5, 5.5 and 5.5 ×: %s", v)
	}
	g.from, g.to = 10, 50
	if v := interleavedVerdict(g); !strings.HasPrefix(v, "aim: asked of 200 → 1000 routes, not judged here") {
		t.Errorf("10 → 50 routes: %s", v)
	}
}
