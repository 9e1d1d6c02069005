package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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

// The mean and the sample standard deviation (over n − 1): 1.1, 1.2 and 1.3
// give 1.2 and 0.1; one run has no spread to give.
func TestMeanSDIsTheMeanAndTheSampleStandardDeviation(t *testing.T) {
	mean, sd := meanSD([]float64{1.1, 1.2, 1.3})
	if math.Abs(mean-1.2) > 1e-12 || math.Abs(sd-0.1) > 1e-12 {
		t.Errorf("meanSD(1.1, 1.2, 1.3) = %v, %v; want 1.2, 0.1", mean, sd)
	}
	mean, sd = meanSD([]float64{1, 2, 3, 4})
	if mean != 2.5 || math.Abs(sd-math.Sqrt(5.0/3)) > 1e-12 {
		t.Errorf("meanSD(1, 2, 3, 4) = %v, %v; want 2.5, %v", mean, sd, math.Sqrt(5.0/3))
	}
	if mean, sd = meanSD([]float64{1.3}); mean != 1.3 || !math.IsNaN(sd) {
		t.Errorf("meanSD(1.3) = %v, %v; want 1.3, NaN", mean, sd)
	}
}

// With -repeat, every run of a route count is right followed by its
// calibration (-aa unwatched), run after run, each a scenario of its own (and
// so namespaces of its own); the rows that run once come after the first
// run; only the first run's plugin scenario profiles.
func TestPlanInterleavesEachRunWithItsCalibration(t *testing.T) {
	cfg := config{counts: []int{50, 200}, repeat: 3, together: 10, eachRoutes: 20, aa: "", profileDir: "/tmp/prof"}
	want := []string{
		`50 (run 1 of 3) | aa "" | profile false`,
		`50 (calibration: -aa unwatched, run 1 of 3) | aa "unwatched" | profile false`,
		`200 (run 1 of 3) | aa "" | profile true`,
		`200 (calibration: -aa unwatched, run 1 of 3) | aa "unwatched" | profile false`,
		`10×20 | aa "" | profile false`,
		`50 (run 2 of 3) | aa "" | profile false`,
		`50 (calibration: -aa unwatched, run 2 of 3) | aa "unwatched" | profile false`,
		`200 (run 2 of 3) | aa "" | profile false`,
		`200 (calibration: -aa unwatched, run 2 of 3) | aa "unwatched" | profile false`,
		`50 (run 3 of 3) | aa "" | profile false`,
		`50 (calibration: -aa unwatched, run 3 of 3) | aa "unwatched" | profile false`,
		`200 (run 3 of 3) | aa "" | profile false`,
		`200 (calibration: -aa unwatched, run 3 of 3) | aa "unwatched" | profile false`,
	}
	if diff := cmp.Diff(want, describePlan(plan(cfg))); diff != "" {
		t.Errorf("plan with -repeat 3 (-want +got):\n%s", diff)
	}
}

// Without -repeat the plan is the rows as they always were, each with the
// bench-wide -aa.
func TestPlanWithoutRepeatRunsEachRowOnce(t *testing.T) {
	cfg := config{counts: []int{1, 50}, repeat: 1, together: 10, eachRoutes: 20, defaultsRoutes: 50, aa: "watched"}
	want := []string{
		`1 | aa "watched" | profile false`,
		`50 | aa "watched" | profile false`,
		`10×20 | aa "watched" | profile false`,
		`50 (default flags: steady steps back to back, first and last after 4 s) | aa "watched" | profile false`,
	}
	if diff := cmp.Diff(want, describePlan(plan(cfg))); diff != "" {
		t.Errorf("plan without -repeat (-want +got):\n%s", diff)
	}
}

// describePlan is each scenario's label, calibration and profiling, in order.
func describePlan(scenarios []scenario) []string {
	var out []string
	for _, s := range scenarios {
		out = append(out, fmt.Sprintf("%s | aa %q | profile %v", s.label, s.aa, s.profile))
	}
	return out
}

// Each repeated run's paired ratio lands in its route count's row, the
// plugin's and the calibration's apart; rows that ran once are left out.
func TestRatioRowsGathersEachRunsPairedRatioByRouteCount(t *testing.T) {
	steps := func(plugin, bare float64) (phase, phase) {
		return phase{ms: []float64{plugin, plugin, plugin}}, phase{ms: []float64{bare, bare, bare}}
	}
	res := func(s scenario, plugin, bare float64) result {
		r := result{s: s}
		r.steady, r.bareSteady = steps(plugin, bare)
		return r
	}
	results := []result{
		res(scenario{routes: 50, run: 1}, 120, 100),
		res(scenario{routes: 50, run: 1, calibration: true}, 100, 100),
		res(scenario{routes: 200, run: 1}, 110, 100),
		res(scenario{routes: 200, run: 1, calibration: true}, 90, 100),
		res(scenario{routes: 20, rollouts: 10}, 150, 100),
		res(scenario{routes: 50, run: 2}, 130, 100),
		res(scenario{routes: 50, run: 2, calibration: true}, 105, 100),
		res(scenario{routes: 200, run: 2}, 100, 100),
		res(scenario{routes: 200, run: 2, calibration: true}, 102, 100),
	}
	want := []ratioRow{
		{routes: 50, plugin: []float64{1.2, 1.3}, calibration: []float64{1, 1.05}},
		{routes: 200, plugin: []float64{1.1, 1}, calibration: []float64{0.9, 1.02}},
	}
	if diff := cmp.Diff(want, ratioRows(results), cmp.AllowUnexported(ratioRow{})); diff != "" {
		t.Errorf("ratio rows (-want +got):\n%s", diff)
	}
}

// The summary prints each run's paired ratio, their mean and standard
// deviation, the calibration's beside them and the difference of the means,
// then the target and, per route count, whether it is met.
func TestPrintSummary(t *testing.T) {
	rows := []ratioRow{
		{routes: 10, plugin: []float64{1.3, 1.1}, calibration: []float64{1, 1.04}},
		{routes: 50, plugin: []float64{1.1, 1.2, 1.3, 1.1, 1.3}, calibration: []float64{1, 1.1, 1, 0.9, 1}},
	}
	var got strings.Builder
	printSummary(&got, rows)
	want := `
The paired ratio of every run (-repeat), each run right followed by a calibration run of the same route count: the bare
client on both sides (-aa unwatched), what two equal sides come to on this machine at that moment. sd: the sample standard
deviation between runs.

| routes | paired ratio per run: plugin / bare | mean (sd) | calibration per run: bare / bare | mean (sd) | plugin mean − calibration mean |
| --- | --- | --- | --- | --- | --- |
| 10 | 1.30, 1.10 | 1.20 (0.14) | 1.00, 1.04 | 1.02 (0.03) | +0.18 |
| 50 | 1.10, 1.20, 1.30, 1.10, 1.30 | 1.20 (0.10) | 1.00, 1.10, 1.00, 0.90, 1.00 | 1.00 (0.07) | +0.20 |

target: mean paired ratio ≤ 1.20 at 50 and 200 routes over 5 runs
10 routes: no target at this route count; mean paired ratio 1.20 over 2 runs (calibration, two equal sides: 1.02)
50 routes: met, 1.20 ≤ 1.20; mean paired ratio 1.20 over 5 runs (calibration, two equal sides: 1.00)
`
	if diff := cmp.Diff(want, got.String()); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}

// The target is judged on the mean as printed, at the route counts it names
// and over the runs it asks for, never more than said in words.
func TestVerdictSaysWhetherTheTargetIsMet(t *testing.T) {
	five := func(x float64) []float64 { return []float64{x, x, x, x, x} }
	for _, c := range []struct {
		row  ratioRow
		want string
	}{
		{ratioRow{routes: 200, plugin: five(1.204), calibration: five(1.01)}, "200 routes: met, 1.20 ≤ 1.20; mean paired ratio 1.20 over 5 runs (calibration, two equal sides: 1.01)"},
		{ratioRow{routes: 200, plugin: five(1.206), calibration: five(1.01)}, "200 routes: not met, 1.21 > 1.20; mean paired ratio 1.21 over 5 runs (calibration, two equal sides: 1.01)"},
		{ratioRow{routes: 50, plugin: []float64{1.1, 1.1}, calibration: []float64{1, 1}}, "50 routes: not judged, the target asks for 5 runs; mean paired ratio 1.10 over 2 runs (calibration, two equal sides: 1.00)"},
		{ratioRow{routes: 10, plugin: five(1.5), calibration: five(1)}, "10 routes: no target at this route count; mean paired ratio 1.50 over 5 runs (calibration, two equal sides: 1.00)"},
	} {
		if got := verdict(c.row); got != c.want {
			t.Errorf("verdict(%v)\n got %s\nwant %s", c.row, got, c.want)
		}
	}
}

// Three times the work counts about three times the instructions, counted
// as the bench counts the plugin's: under callgrindWrapper's script,
// between start and stop.
func TestInstructionsCountTheWorkBetweenStartAndStop(t *testing.T) {
	if _, err := exec.LookPath("valgrind"); err != nil {
		t.Skip("valgrind is not installed")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "work")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/work").CombinedOutput(); err != nil {
		t.Fatalf("building the worker: %v: %s", err, out)
	}
	script, err := callgrindWrapper(bin, dir)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(script)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	lines := bufio.NewScanner(stdout)
	next := func() string {
		if !lines.Scan() {
			t.Fatalf("the worker ended: %v; valgrind's log:\n%s", lines.Err(), valgrindLogs(dir))
		}
		return lines.Text()
	}
	if got := next(); got != "ready" {
		t.Fatalf("the worker said %q; want ready", got)
	}
	count := &instructions{pid: cmd.Process.Pid, dir: dir}
	measure := func(n int) uint64 {
		if err := count.start(); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(stdin, n)
		if got := next(); !strings.HasPrefix(got, "done") {
			t.Fatalf("the worker said %q; want done", got)
		}
		total, err := count.stop()
		if err != nil {
			t.Fatal(err)
		}
		return total
	}
	once, thrice := measure(20000), measure(60000)
	t.Logf("%d instructions for 20,000 hashes, %d for 60,000", once, thrice)
	if r := float64(thrice) / float64(once); r < 2.7 || r > 3.3 {
		t.Errorf("%d instructions for 20,000 hashes, %d for 60,000: ratio %.2f; want about 3", once, thrice, r)
	}
}

// valgrindLogs returns the logs callgrindWrapper's script had valgrind write
// into dir, for a failure to show (the directory goes with the test).
func valgrindLogs(dir string) string {
	paths, _ := filepath.Glob(filepath.Join(dir, "callgrind-*.log"))
	var all strings.Builder
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			b = []byte(err.Error())
		}
		fmt.Fprintf(&all, "%s:\n%s\n", filepath.Base(p), b)
	}
	return all.String()
}
