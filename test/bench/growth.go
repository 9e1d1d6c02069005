package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// interleaved is how the step grew from one route count to a larger one,
// measured in one window of time: one plugin serves a Rollout over each
// count, and every round steps both, and the bare client over both, in an
// order drawn for the round. The rows of the scale table run minutes apart,
// and this machine's speed moves in minutes; a round's four steps meet the
// same moment of it.
type interleaved struct {
	from, to int
	// plugin and bare are each round's step in ms, over from routes [0] and
	// over to routes [1].
	plugin, bare [2][]float64
	// cpu is the CPU seconds of a round's step and the settle after it, by
	// count as above, summed over the rounds: the plugin's over its steps,
	// and kube-apiserver's and etcd's over the plugin's steps [0] and over
	// the bare client's [1].
	pluginCPU [2]float64
	serverCPU [2][2]float64
}

// growthOf is each round's step over the larger count over its step over the
// smaller one.
func growthOf(steps [2][]float64) []float64 {
	n := min(len(steps[0]), len(steps[1]))
	g := make([]float64, n)
	for i := range n {
		g[i] = steps[1][i] / steps[0][i]
	}
	return g
}

// interleave measures an interleaved growth from routes to routes over
// rounds rounds, each Rollout warmed first by a call that changes nothing and
// a first step.
func (b *bench) interleave(id, from, to, rounds int, args []string) (interleaved, error) {
	ctx := context.Background()
	res := interleaved{from: from, to: to}
	counts := [2]int{from, to}
	var pluginNS, bareNS [2]string
	var bareRVs [2]*sync.Map
	for k, n := range counts {
		pluginNS[k], bareNS[k] = fmt.Sprintf("bench-%d-plugin-%d", id, n), fmt.Sprintf("bench-%d-bare-%d", id, n)
		for _, ns := range []string{pluginNS[k], bareNS[k]} {
			if err := b.createRoutes(ctx, ns, scenario{routes: n, rollouts: 1}); err != nil {
				return res, err
			}
		}
		rvs, err := b.resourceVersions(ctx, bareNS[k])
		if err != nil {
			return res, err
		}
		bareRVs[k] = rvs
	}
	p, logPath, stop, err := b.startPlugin(id, args)
	if err != nil {
		return res, err
	}
	defer stop()
	pid, servers := p.Pid(), serverPids()
	// A step of each side over counts[k] routes: its ms, the settle after
	// it not counted.
	steps := [2]func(k int, weight int32) (float64, error){
		func(k int, weight int32) (float64, error) {
			start := time.Now()
			if e := p.Plugin.SetWeight(rollout(pluginNS[k], "ro-0"), weight, nil); e.HasError() {
				return 0, fmt.Errorf("SetWeight(%d) over %d routes: %s (plugin log: %s)", weight, counts[k], e.ErrorString, logPath)
			}
			return msSince(start), nil
		},
		func(k int, weight int32) (float64, error) {
			return b.bareStep(ctx, bareNS[k], scenario{routes: counts[k], rollouts: 1}, weight, bareRVs[k])
		},
	}
	const pluginSide, bareSide = 0, 1
	for k := range counts {
		for _, weight := range []int32{0, 10} {
			if _, err := steps[pluginSide](k, weight); err != nil {
				return res, err
			}
			time.Sleep(settle)
		}
	}
	ms := [2]*[2][]float64{pluginSide: &res.plugin, bareSide: &res.bare}
	type step struct{ side, k int }
	order := []step{{pluginSide, 0}, {pluginSide, 1}, {bareSide, 0}, {bareSide, 1}}
	for i := range rounds {
		weight := int32(20 + 10*(i%2))
		rand.Shuffle(len(order), func(a, c int) { order[a], order[c] = order[c], order[a] })
		for _, s := range order {
			plugin, srv := cpuSeconds(pid), cpuOf(servers)
			took, err := steps[s.side](s.k, weight)
			if err != nil {
				return res, err
			}
			time.Sleep(settle)
			ms[s.side][s.k] = append(ms[s.side][s.k], took)
			if s.side == pluginSide {
				res.pluginCPU[s.k] += cpuSeconds(pid) - plugin
			}
			res.serverCPU[s.side][s.k] += cpuOf(servers) - srv
		}
	}
	return res, nil
}

// printInterleaved prints an interleaved growth: the medians, the growth of
// the medians and the median of each round's growth with its interval, the
// plugin's beside the bare client's, and whether the aim is met.
func printInterleaved(w io.Writer, g interleaved) {
	if len(g.plugin[0]) == 0 {
		return
	}
	fmt.Fprintf(w, "\nHow the step grows with the routes, interleaved: one plugin serves a Rollout over %d routes and one over %d; each of %d rounds\n"+
		"steps both, and the bare client over both, in an order drawn for the round, so the two steps of a ratio meet the same moment of the machine.\n"+
		"Growth: the step over %d routes over the step over %d (linear: %.1f ×); per round: the median of the rounds' ratios, with the interval\n"+
		"(%.0f–%.0f %% of %d resamples of the rounds).\n\n", g.from, g.to, len(g.plugin[0]), g.to, g.from, float64(g.to)/float64(g.from), tail*100, (1-tail)*100, resamples)
	fmt.Fprintln(w, "| side | step ms, median (min–max) over "+fmt.Sprint(g.from)+" routes | over "+fmt.Sprint(g.to)+" | growth of the medians | growth per round (interval) |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- |")
	for _, side := range []struct {
		name  string
		steps [2][]float64
	}{{"plugin", g.plugin}, {"bare client", g.bare}} {
		lo, hi := interval(side.steps[1], side.steps[0], pairedRatio)
		fmt.Fprintf(w, "| %s | %s | %s | %.2f × | %.2f × (%.2f–%.2f) |\n", side.name, spreadOf(side.steps[0]), spreadOf(side.steps[1]),
			ratioOfMedians(side.steps[1], side.steps[0]), median(growthOf(side.steps)), lo, hi)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "The plugin's step over the bare client's in the same round (paired ratio): %.2f at %d routes, %.2f at %d.\n\n",
		pairedRatio(g.plugin[0], g.bare[0]), g.from, pairedRatio(g.plugin[1], g.bare[1]), g.to)
	rounds := float64(len(g.plugin[0]))
	perStep := func(sums [2]float64) string {
		return fmt.Sprintf("%.3f | %.3f | %.2f ×", sums[0]/rounds, sums[1]/rounds, sums[1]/sums[0])
	}
	fmt.Fprintln(w, "CPU seconds per step, the settle after it included (what the step leaves to do after it returns):")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "| CPU of | over %d routes | over %d | growth |\n", g.from, g.to)
	fmt.Fprintln(w, "| --- | --- | --- | --- |")
	fmt.Fprintf(w, "| the plugin | %s |\n", perStep(g.pluginCPU))
	fmt.Fprintf(w, "| kube-apiserver and etcd, the plugin's steps | %s |\n", perStep(g.serverCPU[0]))
	fmt.Fprintf(w, "| kube-apiserver and etcd, the bare client's steps | %s |\n", perStep(g.serverCPU[1]))
	fmt.Fprintln(w)
	fmt.Fprintln(w, interleavedVerdict(g))
}

// spreadOf is a median with the least and the most.
func spreadOf(xs []float64) string {
	return fmt.Sprintf("%.0f (%.0f–%.0f)", median(xs), slices.Min(xs), slices.Max(xs))
}

// interleavedVerdict says in words whether the interleaved rounds meet the
// aim: the median of the rounds' growth, as printed (2 decimals), at most
// targetGrowth, when the rounds are the growth asked about.
func interleavedVerdict(g interleaved) string {
	growth, bare := median(growthOf(g.plugin)), median(growthOf(g.bare))
	figures := fmt.Sprintf("%.2f × per round, the median over %d rounds (the bare client's: %.2f ×; the plugin's CPU per step: %.2f ×)",
		growth, len(g.plugin[0]), bare, g.pluginCPU[1]/g.pluginCPU[0])
	switch {
	case g.from != targetGrowthFrom || g.to != targetGrowthTo:
		return fmt.Sprintf("aim: asked of %d → %d routes, not judged here; %s", targetGrowthFrom, targetGrowthTo, figures)
	case math.Round(growth*100)/100 <= targetGrowth:
		return fmt.Sprintf("aim (the %d-route step at most %.1f × the %d-route step): met; %s", targetGrowthTo, targetGrowth, targetGrowthFrom, figures)
	}
	return fmt.Sprintf("aim (the %d-route step at most %.1f × the %d-route step): not met; %s", targetGrowthTo, targetGrowth, targetGrowthFrom, figures)
}

// The aim of the step's growth: the step over targetGrowthTo routes at most
// targetGrowth × the step over targetGrowthFrom (linear would be 5 ×),
// judged on interleaved rounds (printInterleaved).
const (
	targetGrowth     = 5.5
	targetGrowthFrom = 200
	targetGrowthTo   = 1000
)

// growthRow is how the step grows from a run's smallest route count to a
// larger one: the median step at to over the median step at from, the
// plugin's and the bare client's of the same run, run by run.
type growthRow struct {
	from, to     int
	plugin, bare []float64
}

// growthRows gathers, run by run (each run of -repeat; the one run without),
// the growth of the step from the smallest route count of the run's
// one-Rollout rows to each larger one. Calibration runs and the rows that
// run once (-together, -defaults-routes, the rows beside 10,000 other
// routes) are left out.
func growthRows(results []result) []growthRow {
	type medians struct{ plugin, bare float64 }
	steps := map[int]map[int]medians{} // run → route count → median steps
	var runs []int
	for _, r := range results {
		s := r.s
		if s.calibration || s.rollouts != 1 || s.others > 0 || s.backToBack {
			continue
		}
		if steps[s.run] == nil {
			steps[s.run], runs = map[int]medians{}, append(runs, s.run)
		}
		steps[s.run][s.routes] = medians{median(r.steady.ms), median(r.bareSteady.ms)}
	}
	var rows []growthRow
	for _, run := range runs {
		counts := slices.Sorted(maps.Keys(steps[run]))
		from := steps[run][counts[0]]
		for _, to := range counts[1:] {
			i := slices.IndexFunc(rows, func(g growthRow) bool { return g.from == counts[0] && g.to == to })
			if i < 0 {
				rows, i = append(rows, growthRow{from: counts[0], to: to}), len(rows)
			}
			m := steps[run][to]
			rows[i].plugin = append(rows[i].plugin, m.plugin/from.plugin)
			rows[i].bare = append(rows[i].bare, m.bare/from.bare)
		}
	}
	return rows
}

// printGrowth prints how the step grew with the routes, run by run, the
// plugin's beside the bare client's, and whether the aim is met.
func printGrowth(w io.Writer, rows []growthRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprint(w, "\nHow the step grows with the routes, run by run: the median step over the larger route count over the median step over the\n"+
		"smaller (linear: their ratio), the plugin's beside the bare client's in the same run. sd: the sample standard deviation between runs.\n\n")
	fmt.Fprintln(w, "| routes | plugin per run | mean (sd) | bare client per run | mean (sd) |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- |")
	for _, g := range rows {
		fmt.Fprintf(w, "| %d → %d | %s | %s | %s | %s |\n", g.from, g.to, ratios(g.plugin), meanAndSD(g.plugin), ratios(g.bare), meanAndSD(g.bare))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "The rows of a run ran minutes apart, and this machine's speed moves in minutes (the plugin's growth and the bare client's\n"+
		"move together run by run): the aim is judged on interleaved rounds (-interleave), whose steps meet the same moment.")
}
