// Command bench measures what a SetWeight step costs: the real plugin binary,
// started over go-plugin RPC as Argo Rollouts starts it, against a real
// kube-apiserver (envtest), over N HTTPRoutes found by a label selector,
// side by side with a bare client that sends the same server-side apply per
// route, 8 in flight, in the same run against the same apiserver. Every
// request goes through the recording proxy, which counts them by verb and
// user agent; the plugin's CPU time and peak RSS come from /proc.
//
// It prints figures; it asserts nothing about time. Run it with make bench.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

const (
	// selectorLabel groups each Rollout's routes; its value names the Rollout.
	selectorLabel = "bench.gatewayapi-ssa.dev/rollout"
	bareAgent     = "bench-bare-client"
	pluginAgent   = "rollouts-gatewayapi-ssa"
	inFlight      = 8
	// settle lets the plugin's watch caches take in the events of a round's
	// writes before the next round starts, so one round's work does not run
	// in another's time.
	settle = 300 * time.Millisecond
)

func main() {
	var (
		routeCounts = flag.String("routes", "1,10,50,200", "route counts, one Rollout each (\"\": none, for -interleave alone)")
		runs        = flag.Int("runs", 40, "steady SetWeight steps per route count (plugin and bare client each)")
		together    = flag.Int("together", 10, "Rollouts calling at once in the concurrent scenario (0: skip it)")
		eachRoutes  = flag.Int("together-routes", 20, "routes of each Rollout in the concurrent scenario")
		defaultsN   = flag.Int("defaults-routes", 50, "routes of the scenario run at the plugin's default -kubeClientQPS/-kubeClientBurst (0: skip it)")
		qps         = flag.Int("qps", 1000, "-kubeClientQPS of the plugin and QPS of the bare client")
		burst       = flag.Int("burst", 2000, "-kubeClientBurst of the plugin and burst of the bare client")
		bin         = flag.String("plugin", "", "plugin binary to measure (default: built from this tree)")
		profileDir  = flag.String("profile", "", "write CPU and allocation profiles of the plugin, and a CPU profile of kube-apiserver, during extra steps of the largest route count to this directory (the binary needs -pprof-addr)")
		profileSecs = flag.Int("profile-seconds", 10, "how long -profile profiles")
		keepLogs    = flag.Bool("keep-logs", false, "keep the plugin's logs (and say where)")
		drainURL    = flag.String("drain", "", "internal: read the watch at this URL and drop what it reads (the reader of -aa drained-process)")
		pinCPUs     = flag.Bool("pin", false, "kube-apiserver and etcd on the first half of the CPUs, the bench (its proxy and bare client) and the plugin on the other half, as in a cluster, where the plugin does not run on the apiserver's cores")
		stepsOut    = flag.String("steps", "", "write every steady step's ms, plugin and bare client side by side in their rounds, to this file (JSON, one row per line)")
		install     = flag.String("install", "download", "how the file the plugin runs from is written, which sets how much of it the kernel maps (peak RSS); the plugin runs from a file: "+describe(installWhat))
		bareWatch   = flag.Bool("bare-watch", false, "the bare client also watches its routes and decodes the events, as the plugin's cache does")
		aa          = flag.String("aa", "", "calibration: the plugin rows' steady steps are the bare client's too, so a ratio row shows what two equal sides come to; where the calibrated side's steps run, by mode: "+describe(aaWhat))
		scale       = flag.Bool("scale", false, "the scale table (make bench-scale): one Rollout over 200 and over 1,000 routes, 100 Rollouts × 10 routes at once, and one Rollout over 50 routes beside 10,000 other HTTPRoutes in its namespace, and beside 10,000 other routes of every kind in 100 other namespaces, then how the step grows from 200 to 1,000 routes, interleaved; -routes, -together, -together-routes and -defaults-routes are then set, -runs defaults to 10 and -interleave to 200,1000")
		profileBare = flag.Bool("profile-bare", false, "with -profile: the extra steps are the bare client's, not the plugin's, so kube-apiserver's profile can be set beside the plugin's (with -aa, in the calibrated side's namespace)")
		instr       = flag.Bool("instructions", false, "run the plugin under valgrind's callgrind and count the instructions it executes during the steady steps (needs valgrind; the plugin runs some 50 times slower, so the time columns are not its own): a figure of the plugin's CPU work that the machine's speed does not move")
		interleave  = flag.String("interleave", "", "FROM,TO: how the step grows from FROM to TO routes, measured interleaved: one plugin serves a Rollout over each count, and every round steps both, and the bare client over both, in an order drawn for the round, run after the other rows (-scale: 200,1000)")
		ilRounds    = flag.Int("interleave-rounds", 20, "rounds of -interleave")
		extraArgs   = flag.String("plugin-args", "", "more flags for the plugin, space-separated (e.g. \"-route-events=false\" to see what route Events cost)")
		repeat      = flag.Int("repeat", 1, "runs of each route count of -routes (one Rollout each): with more than 1, every run of a route count is followed by a calibration run of it (-aa unwatched: the bare client on both sides), each on namespaces of its own, run after run, and a summary table gives each run's paired ratio, their mean and standard deviation beside the calibration's, and whether the target is met; the usual table shows the first run, and the -together, -defaults-routes and -scale rows run once, after the first run")
	)
	flag.Parse()
	if *drainURL != "" {
		ready := make(chan error, 1)
		if err := drainWatch(context.Background(), http.DefaultClient, *drainURL, ready); err != nil {
			fmt.Fprintln(os.Stderr, "bench -drain:", err)
			os.Exit(1)
		}
		return
	}
	if _, ok := installWhat[*install]; !ok {
		fmt.Fprintf(os.Stderr, "bench: -install: %q is none of %v\n", *install, modes(installWhat))
		os.Exit(2)
	}
	if *repeat < 1 {
		fmt.Fprintf(os.Stderr, "bench: -repeat: %d is not a number of runs\n", *repeat)
		os.Exit(2)
	}
	if _, ok := aaWhat[*aa]; *aa != "" && !ok {
		fmt.Fprintf(os.Stderr, "bench: -aa: %q is none of %v\n", *aa, modes(aaWhat))
		os.Exit(2)
	}
	if *scale {
		*routeCounts, *together, *eachRoutes, *defaultsN = "200,1000", 100, 10, 0
		if !flagSet("interleave") {
			*interleave = "200,1000"
		}
		if !flagSet("runs") {
			*runs = 10
		}
	}
	if n := len(parseCounts("-interleave", *interleave)); n != 0 && n != 2 {
		fmt.Fprintf(os.Stderr, "bench: -interleave: %q is not two route counts\n", *interleave)
		os.Exit(2)
	}
	start := time.Now()
	if err := run(config{
		counts: parseCounts("-routes", *routeCounts), interleave: parseCounts("-interleave", *interleave), interleaveRounds: *ilRounds, runs: *runs, repeat: *repeat, together: *together, eachRoutes: *eachRoutes, defaultsRoutes: *defaultsN, bareWatch: *bareWatch, profileBare: *profileBare, aa: *aa, scale: *scale,
		qps: *qps, burst: *burst, extraArgs: strings.Fields(*extraArgs), bin: *bin, profileDir: *profileDir, profileSeconds: *profileSecs, keepLogs: *keepLogs, stepsOut: *stepsOut, pin: *pinCPUs, install: *install, instructions: *instr,
	}); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	fmt.Printf("\nmake bench took %s\n", time.Since(start).Round(time.Second))
}

// flagSet says whether the flag was given on the command line.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

type config struct {
	scale                      bool
	counts                     []int
	interleave                 []int // "from" and "to" of -interleave, or none
	interleaveRounds           int
	runs, together, eachRoutes int
	repeat                     int
	defaultsRoutes             int
	bareWatch, profileBare     bool
	aa                         string
	qps, burst                 int
	extraArgs                  []string
	bin, profileDir            string
	profileSeconds             int
	keepLogs, pin              bool
	instructions               bool
	stepsOut, install          string
}

// parseCounts reads the route counts of a flag; "" is none.
func parseCounts(name, s string) []int {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bench: %s: %q is not a route count\n", name, f)
			os.Exit(2)
		}
		out = append(out, n)
	}
	return out
}

// scenario is one row group of the table: rollouts Rollouts of routes routes
// each, calling at once, on one plugin process started with args.
type scenario struct {
	label            string
	routes, rollouts int
	args             []string
	profile          bool
	// others are routes no Rollout selects, created beside the Rollout's
	// before the plugin starts: HTTPRoutes in its namespace, or, with
	// otherNamespaces, routes of every kind spread over that many other
	// namespaces.
	others, otherNamespaces int
	// backToBack runs the plugin's steady steps one right after the other,
	// with no bare client in between: what the token bucket allows. Its first
	// and last steps come after refill, as Argo Rollouts' steps come after a
	// pause or an analysis.
	backToBack bool
	// aa is the -aa calibration of this scenario's steady steps ("": none);
	// it is the bench-wide -aa but in the calibration runs of -repeat.
	aa string
	// run is which run of its route count the scenario is, from 1, with
	// -repeat (0: not repeated); calibration says it is the calibration run
	// beside it.
	run         int
	calibration bool
}

var routesGVR = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}

// refill is longer than a full bucket of the plugin's default flags takes to
// refill (-kubeClientBurst 120 at -kubeClientQPS 40: 3 s).
const refill = 4 * time.Second

func run(cfg config) error {
	dir, err := os.MkdirTemp("", "gatewayapi-ssa-bench-")
	if err != nil {
		return err
	}
	bin := cfg.bin
	if bin == "" {
		fmt.Fprintln(os.Stderr, "bench: building the plugin")
		if bin, err = harness.BuildPlugin(dir); err != nil {
			return err
		}
	}
	if cfg.install != "none" {
		if bin, err = installPlugin(bin, dir, cfg.install); err != nil {
			return err
		}
	}
	if cfg.instructions {
		if bin, err = callgrindWrapper(bin, dir); err != nil {
			return err
		}
	}
	var serverCPUs, clientCPUs []int
	if cfg.pin {
		if serverCPUs, clientCPUs, err = splitCPUs(); err != nil {
			return err
		}
		// kube-apiserver and etcd inherit the affinity of the process that
		// starts them, and size their Go runtime by it.
		if err := pinProcess(os.Getpid(), serverCPUs); err != nil {
			return err
		}
	}
	fmt.Fprintln(os.Stderr, "bench: starting kube-apiserver and etcd (envtest)")
	c, err := harness.Start(harness.Standard)
	if err != nil {
		return err
	}
	defer c.Stop()
	if cfg.pin {
		if err := pinProcess(os.Getpid(), clientCPUs); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "bench: kube-apiserver and etcd on CPUs %v, the bench and the plugin on CPUs %v\n", serverCPUs, clientCPUs)
	}
	bare, err := gateway.NewForConfig(&rest.Config{Host: c.Recorder.URL, QPS: float32(cfg.qps), Burst: cfg.burst, UserAgent: bareAgent})
	if err != nil {
		return err
	}
	b := &bench{c: c, bare: bare, bareWatch: cfg.bareWatch, profileBare: cfg.profileBare, bin: bin, dir: dir, runs: cfg.runs, instructions: cfg.instructions, profileDir: cfg.profileDir, profileSeconds: cfg.profileSeconds}
	var results []result
	for i, s := range plan(cfg) {
		fmt.Fprintf(os.Stderr, "bench: %s routes × %d Rollout(s)\n", s.label, s.rollouts)
		t0 := time.Now()
		r, err := b.scenario(i, s)
		if err != nil {
			return fmt.Errorf("%s routes: %w", s.label, err)
		}
		fmt.Fprintf(os.Stderr, "bench: %s routes took %s\n", s.label, time.Since(t0).Round(time.Second))
		results = append(results, r)
	}
	var grown interleaved
	if len(cfg.interleave) == 2 {
		from, to := cfg.interleave[0], cfg.interleave[1]
		fmt.Fprintf(os.Stderr, "bench: %d and %d routes, interleaved, %d rounds\n", from, to, cfg.interleaveRounds)
		t0 := time.Now()
		if grown, err = b.interleave(len(results), from, to, cfg.interleaveRounds, lifted(cfg)); err != nil {
			return fmt.Errorf("%d and %d routes, interleaved: %w", from, to, err)
		}
		fmt.Fprintf(os.Stderr, "bench: %d and %d routes, interleaved, took %s\n", from, to, time.Since(t0).Round(time.Second))
	}
	first, later := byRun(results)
	if len(first) > 0 {
		printTable(os.Stdout, cfg, first)
	}
	if cfg.repeat > 1 {
		printShort(os.Stdout, later)
		printSummary(os.Stdout, ratioRows(results))
	}
	if cfg.repeat > 1 || cfg.scale {
		printGrowth(os.Stdout, growthRows(results))
	}
	printInterleaved(os.Stdout, grown)
	if cfg.stepsOut != "" {
		if err := writeSteps(cfg.stepsOut, results); err != nil {
			return err
		}
	}
	if cfg.keepLogs {
		fmt.Fprintf(os.Stderr, "bench: the plugin's logs are in %s\n", dir)
		return nil
	}
	os.RemoveAll(dir)
	return nil
}

// lifted are the plugin's flags that lift its client's rate limits to the
// bench's -qps and -burst.
func lifted(cfg config) []string {
	return append([]string{fmt.Sprintf("-kubeClientQPS=%d", cfg.qps), fmt.Sprintf("-kubeClientBurst=%d", cfg.burst)}, cfg.extraArgs...)
}

// plan is the scenarios of a bench in the order they run: one Rollout over
// each route count of -routes, then the Rollouts at once (-together), the
// default flags (-defaults-routes) and -scale's rows. With -repeat, the route
// counts run run after run, each with its calibration (repeated), and the
// other rows once, after the first run.
func plan(cfg config) []scenario {
	args := lifted(cfg)
	var counts, once []scenario
	largest := 0
	if len(cfg.counts) > 0 {
		largest = slices.Max(cfg.counts)
	}
	for _, n := range cfg.counts {
		counts = append(counts, scenario{label: strconv.Itoa(n), routes: n, rollouts: 1, args: args, aa: cfg.aa, profile: cfg.profileDir != "" && n == largest})
	}
	if cfg.together > 0 {
		once = append(once, scenario{label: fmt.Sprintf("%d×%d", cfg.together, cfg.eachRoutes), routes: cfg.eachRoutes, rollouts: cfg.together, args: args, aa: cfg.aa})
	}
	if cfg.defaultsRoutes > 0 {
		once = append(once, scenario{label: fmt.Sprintf("%d (default flags: steady steps back to back, first and last after 4 s)", cfg.defaultsRoutes), routes: cfg.defaultsRoutes, rollouts: 1, backToBack: true, aa: cfg.aa})
	}
	if cfg.scale {
		once = append(once,
			scenario{label: "50, beside 10,000 other HTTPRoutes in its namespace", routes: 50, rollouts: 1, args: args, others: 10000, aa: cfg.aa},
			scenario{label: "50, beside 10,000 other routes (every kind) in 100 other namespaces", routes: 50, rollouts: 1, args: args, others: 10000, otherNamespaces: 100, aa: cfg.aa})
	}
	runs := repeated(counts, cfg.repeat)
	return slices.Concat(slices.Concat(runs[:1]...), once, slices.Concat(runs[1:]...))
}

// repeated is the scenarios of each run, run after run. With repeat 1 it is
// the scenarios as they are; with more, every run has each scenario, its run
// numbered, right followed by its calibration: the same scenario with -aa
// unwatched, the bare client on both sides, so that the two meet the same
// moments of the machine. Only the first run profiles, and not in its
// calibration.
func repeated(scenarios []scenario, repeat int) [][]scenario {
	if repeat <= 1 {
		return [][]scenario{scenarios}
	}
	runs := make([][]scenario, repeat)
	for i := range runs {
		for _, s := range scenarios {
			s.run, s.profile = i+1, s.profile && i == 0
			cal := s
			s.label = fmt.Sprintf("%s (run %d of %d)", s.label, s.run, repeat)
			cal.label = fmt.Sprintf("%s (calibration: -aa unwatched, run %d of %d)", cal.label, cal.run, repeat)
			cal.aa, cal.calibration, cal.profile = "unwatched", true, false
			runs[i] = append(runs[i], s, cal)
		}
	}
	return runs
}

type bench struct {
	c              *harness.Cluster
	bare           gateway.Interface
	bareWatch      bool
	profileBare    bool
	bin, dir       string
	runs           int
	instructions   bool
	profileDir     string
	profileSeconds int
}

// phase is what one kind of call cost.
type phase struct {
	ms       []float64
	requests map[string]int // by verb, over every call of the phase
	calls    int
	// changes is how many routes each call of the phase changes (0: not
	// known); short counts the calls that applied fewer.
	changes, short int
}

func (p phase) perRouteCall(routes int) map[string]float64 {
	out := map[string]float64{}
	for v, n := range p.requests {
		out[v] = float64(n) / float64(p.calls*routes)
	}
	return out
}

type result struct {
	s                        scenario
	warm, first, last, same  phase
	steady, bareSteady       phase
	pluginCPU                float64 // seconds per steady call
	pluginSysCPU             float64 // of which in the kernel (system time)
	pluginInstructions       float64 // per steady call, with -instructions
	serverCPU, bareServerCPU float64 // kube-apiserver + etcd seconds per steady call
	peakRSS                  float64 // MiB
	memory                   string  // RssAnon and RssFile at the end
	profileNote              string
}

// scenario creates the routes, starts a plugin and walks it and the bare
// client side by side.
func (b *bench) scenario(id int, s scenario) (result, error) {
	ctx := context.Background()
	res := result{s: s}
	pluginNS, bareNS := fmt.Sprintf("bench-%d-plugin", id), fmt.Sprintf("bench-%d-bare", id)
	for _, ns := range []string{pluginNS, bareNS} {
		if err := b.createRoutes(ctx, ns, s); err != nil {
			return res, err
		}
	}
	if s.others > 0 {
		t0 := time.Now()
		if err := b.createOthers(ctx, id, pluginNS, s); err != nil {
			return res, err
		}
		fmt.Fprintf(os.Stderr, "bench: %d other routes created in %s\n", s.others, time.Since(t0).Round(time.Second))
	}
	args := slices.Clone(s.args)
	if b.instructions {
		// Some 50 times slower under callgrind, a call over many routes
		// would pass the default deadline.
		args = append(args, "-call-timeout=10m")
	}
	var pprofAddr string
	if s.profile {
		port, err := freePort()
		if err != nil {
			return res, err
		}
		pprofAddr = fmt.Sprintf("127.0.0.1:%d", port)
		args = append(args, "-pprof-addr="+pprofAddr)
	}
	p, logPath, stop, err := b.startPlugin(id, args)
	if err != nil {
		return res, err
	}
	defer stop()
	pid := p.Pid()
	servers := serverPids()
	rollouts := make([]*v1alpha1.Rollout, s.rollouts)
	for i := range rollouts {
		rollouts[i] = rollout(pluginNS, fmt.Sprintf("ro-%d", i))
	}
	call := func(weight int32) (float64, error) {
		errs := make([]string, len(rollouts))
		start := time.Now()
		var wg sync.WaitGroup
		for i, ro := range rollouts {
			wg.Go(func() {
				if e := p.Plugin.SetWeight(ro, weight, nil); e.HasError() {
					errs[i] = e.ErrorString
				}
			})
		}
		wg.Wait()
		ms := msSince(start)
		for _, e := range errs {
			if e != "" {
				return ms, fmt.Errorf("SetWeight(%d): %s (plugin log: %s)", weight, e, logPath)
			}
		}
		return ms, nil
	}
	pause := settle
	measure := func(ph *phase, weight int32) error {
		mark := b.c.Recorder.Count()
		ms, err := call(weight)
		if err != nil {
			return err
		}
		time.Sleep(pause)
		ph.ms = append(ph.ms, ms)
		ph.calls++
		before := ph.requests["apply"]
		addVerbs(ph, b.c.Recorder.RequestsSince(mark), pluginAgent)
		if ph.requests["apply"]-before < ph.changes {
			ph.short++
		}
		return nil
	}
	// The routes are at canary 0: the first call changes nothing and starts
	// the watch cache, as the controller's reconciles before the first step do.
	if err := measure(&res.warm, 0); err != nil {
		return res, err
	}
	if s.backToBack {
		time.Sleep(refill)
	}
	if err := measure(&res.first, 10); err != nil {
		return res, err
	}
	if b.bareWatch {
		w, err := b.c.Dynamic.Resource(routesGVR).Namespace(bareNS).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			return res, err
		}
		defer w.Stop()
		go func() {
			for range w.ResultChan() { // read and dropped, as a cache that keeps nothing
			}
		}()
	}
	bareRVs, err := b.resourceVersions(ctx, bareNS)
	if err != nil {
		return res, err
	}
	res.steady.changes = s.routes * s.rollouts // every steady step changes every route
	profiledNS, profiledRVs := bareNS, bareRVs
	steady := func(weight int32) error { return measure(&res.steady, weight) }
	if s.aa != "" {
		ns := pluginNS
		if s.aa != "watched" {
			ns = fmt.Sprintf("bench-%d-aa", id)
			if err := b.createRoutes(ctx, ns, s); err != nil {
				return res, err
			}
		}
		if strings.HasPrefix(s.aa, "drained-") {
			stop, err := b.drain(ns, s.aa)
			if err != nil {
				return res, err
			}
			defer stop()
		}
		rvs, err := b.resourceVersions(ctx, ns)
		if err != nil {
			return res, err
		}
		steady = func(weight int32) error { return b.bareRound(ctx, &res.steady, ns, s, weight, rvs) }
		// -profile-bare profiles the calibrated side's steps: with -aa
		// watched, the plugin as it reads the events of someone else's writes.
		profiledNS, profiledRVs = ns, rvs
	}
	var pluginCPU, pluginSysCPU, serverCPU, bareServerCPU float64
	// The instructions are counted over the whole loop: the plugin's steps,
	// the events of its writes it takes in after them, and what it does
	// while the bare client's steps run (next to nothing: it watches only
	// its own namespace).
	count := &instructions{pid: pid, dir: b.dir}
	if b.instructions {
		if err := count.start(); err != nil {
			return res, err
		}
	}
	if s.backToBack {
		pause = 0
	}
	// Which side runs first is shuffled over the rounds, each side first in
	// half of them: an order that repeats (plugin, bare, bare, plugin, ...)
	// can fall into step with periodic work of the apiserver (its garbage
	// collection, for one), which then lands on one side's steps for a whole
	// run; an order drawn round by round can put one side first far more
	// often (3 rounds of 15 with one seed). The seed is the time's, so runs
	// differ in order too.
	bareFirst := make([]bool, b.runs)
	for i := range b.runs / 2 {
		bareFirst[i] = true
	}
	rand.Shuffle(len(bareFirst), func(i, j int) { bareFirst[i], bareFirst[j] = bareFirst[j], bareFirst[i] })
	for i := range b.runs {
		weight := int32(20 + 10*(i%2))
		sides := []func() error{
			func() error {
				user, system := cpuTimes(pid)
				srv := cpuOf(servers)
				err := steady(weight)
				userAfter, systemAfter := cpuTimes(pid)
				pluginCPU += userAfter + systemAfter - user - system
				pluginSysCPU += systemAfter - system
				serverCPU += cpuOf(servers) - srv
				return err
			},
			func() error {
				srv := cpuOf(servers)
				err := b.bareRound(ctx, &res.bareSteady, bareNS, s, weight, bareRVs)
				bareServerCPU += cpuOf(servers) - srv
				return err
			},
		}
		switch {
		case s.backToBack:
			sides = sides[:1]
		case bareFirst[i]:
			slices.Reverse(sides)
		}
		for _, side := range sides {
			if err := side(); err != nil {
				return res, err
			}
		}
	}
	pause = settle
	if b.instructions {
		n, err := count.stop()
		if err != nil {
			return res, err
		}
		res.pluginInstructions = float64(n) / float64(b.runs)
	}
	res.pluginCPU = pluginCPU / float64(b.runs)
	res.pluginSysCPU = pluginSysCPU / float64(b.runs)
	res.serverCPU = serverCPU / float64(b.runs)
	res.bareServerCPU = bareServerCPU / float64(b.runs)
	weight := int32(20 + 10*((b.runs-1)%2))
	if s.profile {
		steps := call
		if b.profileBare {
			steps = func(w int32) (float64, error) { return b.bareStep(ctx, profiledNS, s, w, profiledRVs) }
		}
		note, err := b.profile(pprofAddr, steps, pid, servers, weight)
		if err != nil {
			return res, err
		}
		res.profileNote = note
		// The profiled steps end on the weight the steady steps ended on.
	}
	for range b.runs {
		if err := measure(&res.same, weight); err != nil {
			return res, err
		}
	}
	if s.backToBack {
		time.Sleep(refill)
	}
	if err := measure(&res.last, 0); err != nil {
		return res, err
	}
	res.peakRSS = peakRSS(pid)
	res.memory = memoryNow(pid)
	return res, nil
}

// startPlugin starts the plugin binary with args, its log in the bench's
// directory, named for the scenario id; stop stops it and closes the log.
func (b *bench) startPlugin(id int, args []string) (p *harness.PluginProcess, logPath string, stop func(), err error) {
	logPath = filepath.Join(b.dir, fmt.Sprintf("plugin-%d.log", id))
	logs, err := os.Create(logPath)
	if err != nil {
		return nil, "", nil, err
	}
	if p, err = harness.StartPlugin(b.bin, b.c.Kubeconfig, logs, args...); err != nil {
		logs.Close()
		return nil, "", nil, err
	}
	return p, logPath, func() { p.Stop(); logs.Close() }, nil
}

// aaWhat are the calibrations -aa runs, each with where it runs the
// calibrated side's steps.
var aaWhat = map[string]string{
	"unwatched":          "in a namespace nobody watches (the plugin does the other calls): this machine's noise alone",
	"watched":            "in the namespace the plugin watches (the plugin does the other calls): the noise and what reading a watch costs",
	"drained-proxy":      "in a namespace this process watches through the recording proxy, dropping what it reads",
	"drained-direct":     "in a namespace this process watches straight from kube-apiserver, on a connection of its own, dropping what it reads",
	"drained-process":    "in a namespace a Go process of its own (this program, -drain) watches through the recording proxy, dropping what it reads",
	"drained-process-1p": "in a namespace a Go process of its own (this program, -drain, GOMAXPROCS=1) watches through the recording proxy, dropping what it reads",
	"drained-curl":       "in a namespace curl watches through the recording proxy, dropping what it reads",
}

// modes are the names of a flag's modes, in order.
func modes(what map[string]string) []string { return slices.Sorted(maps.Keys(what)) }

// describe lists a flag's modes, in order, each with what it does.
func describe(what map[string]string) string {
	var parts []string
	for _, m := range modes(what) {
		parts = append(parts, fmt.Sprintf("%q: %s", m, what[m]))
	}
	return strings.Join(parts, "; ")
}

// drain watches the routes of ns and drops what it reads, the way an -aa
// drained-* mode says: in this process through the recording proxy, as the
// plugin's watch comes (drained-proxy), or straight to kube-apiserver on a
// connection of its own (drained-direct); in a process of its own through
// the proxy: this program (drained-process, and drained-process-1p with
// GOMAXPROCS=1) or curl (drained-curl). It returns what stops it.
func (b *bench) drain(ns, mode string) (func(), error) {
	path := fmt.Sprintf("/apis/%s/%s/namespaces/%s/%s?watch=true&allowWatchBookmarks=true", routesGVR.Group, routesGVR.Version, ns, routesGVR.Resource)
	var cmd *exec.Cmd
	switch mode {
	case "drained-process", "drained-process-1p":
		cmd = exec.Command(os.Args[0], "-drain", b.c.Recorder.URL+path)
		if mode == "drained-process-1p" {
			cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
		}
	case "drained-curl":
		cmd = exec.Command("curl", "-sfN", "-o", "/dev/null", b.c.Recorder.URL+path)
	}
	if cmd != nil {
		mark := b.c.Recorder.Count()
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("-aa %s: %w", mode, err)
		}
		stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if slices.ContainsFunc(b.c.Recorder.RequestsSince(mark), func(r harness.Request) bool { return verb(r) == "watch" }) {
				return stop, nil
			}
			if time.Now().After(deadline) {
				stop()
				return nil, fmt.Errorf("-aa %s: its watch did not reach the proxy within 10 s", mode)
			}
		}
	}
	client, host := http.DefaultClient, b.c.Recorder.URL
	if mode == "drained-direct" {
		cfg := rest.CopyConfig(b.c.Config)
		// A config with a proxy function is not shared from client-go's
		// transport cache: this watch gets a connection of its own.
		cfg.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
		var err error
		if client, err = rest.HTTPClientFor(cfg); err != nil {
			return nil, err
		}
		host = strings.TrimSuffix(cfg.Host, "/")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan error, 1)
	go func() { done <- drainWatch(ctx, client, host+path, ready) }()
	if err := <-ready; err != nil {
		cancel()
		return nil, err
	}
	return func() { cancel(); <-done }, nil
}

// drainWatch reads the watch at url and drops what it reads until ctx ends
// or the watch does; ready gets nil once the watch is open, or why it is not.
func drainWatch(ctx context.Context, client *http.Client, url string, ready chan<- error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		ready <- err
		return err
	}
	resp, err := client.Do(req)
	if err == nil && resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		err = fmt.Errorf("watching %s: %s", url, resp.Status)
	}
	ready <- err
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// createRoutes creates every route of the scenario in a new namespace, as
// kubectl create would: one rule to stable (100) and canary (0).
func (b *bench) createRoutes(ctx context.Context, ns string, s scenario) error {
	if _, err := b.c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	type item struct{ rollout, i int }
	var items []item
	for r := range s.rollouts {
		for i := range s.routes {
			items = append(items, item{r, i})
		}
	}
	errs := make([]error, len(items))
	var wg sync.WaitGroup
	sem := make(chan struct{}, inFlight)
	for k, it := range items {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			_, errs[k] = b.c.Gateway.GatewayV1().HTTPRoutes(ns).Create(ctx, benchRoute(ns, it.rollout, it.i), metav1.CreateOptions{FieldManager: "kubectl-create"})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// createOthers creates the scenario's routes no Rollout selects: HTTPRoutes
// in ns, or routes of every kind in turn over otherNamespaces namespaces of
// their own, each like a Rollout's route but for the selector label.
func (b *bench) createOthers(ctx context.Context, id int, ns string, s scenario) error {
	namespaces := []string{ns}
	if s.otherNamespaces > 0 {
		namespaces = nil
		for k := range s.otherNamespaces {
			other := fmt.Sprintf("bench-%d-other-%d", id, k)
			if _, err := b.c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{}); err != nil {
				return err
			}
			namespaces = append(namespaces, other)
		}
	}
	kinds := []string{"HTTPRoute"}
	if s.otherNamespaces > 0 {
		kinds = []string{"HTTPRoute", "GRPCRoute", "TCPRoute", "TLSRoute", "UDPRoute"}
	}
	errs := make([]error, s.others)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2*inFlight)
	for i := range s.others {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			route := otherRoute(namespaces[i%len(namespaces)], kinds[i%len(kinds)], i)
			gvr := schema.GroupVersionResource{Group: routesGVR.Group, Version: "v1", Resource: strings.ToLower(route.GetKind()) + "s"}
			_, errs[i] = b.c.Dynamic.Resource(gvr).Namespace(route.GetNamespace()).Create(ctx, route, metav1.CreateOptions{FieldManager: "kubectl-create"})
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// otherRoute is a route of kind no Rollout selects: one rule to stable and
// canary, as a Rollout's route before its first step.
func otherRoute(ns, kind string, i int) *unstructured.Unstructured {
	name := fmt.Sprintf("other-%05d", i)
	spec := map[string]any{
		"parentRefs": []any{map[string]any{"name": "gw"}},
		"rules": []any{map[string]any{"backendRefs": []any{
			map[string]any{"name": "stable", "port": int64(80), "weight": int64(100)},
			map[string]any{"name": "canary", "port": int64(80), "weight": int64(0)},
		}}},
	}
	switch kind {
	case "HTTPRoute", "GRPCRoute", "TLSRoute":
		spec["hostnames"] = []any{name + ".example.com"}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": routesGVR.Group + "/v1", "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{"app": "other"}},
		"spec":     spec,
	}}
}

func routeName(rollout, i int) string { return fmt.Sprintf("ro-%d-route-%03d", rollout, i) }

func benchRoute(ns string, rollout, i int) *gwv1.HTTPRoute {
	prefix := gwv1.PathMatchPathPrefix
	port := gwv1.PortNumber(80)
	ref := func(name string, w int32) gwv1.HTTPBackendRef {
		return gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(name), Port: &port}, Weight: &w}}
	}
	return &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: routeName(rollout, i), Namespace: ns, Labels: map[string]string{selectorLabel: fmt.Sprintf("ro-%d", rollout), "app": "bench"}},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}},
			Hostnames:       []gwv1.Hostname{gwv1.Hostname(fmt.Sprintf("%s.example.com", routeName(rollout, i)))},
			Rules: []gwv1.HTTPRouteRule{{
				Matches:     []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: &prefix, Value: ptr("/")}}},
				BackendRefs: []gwv1.HTTPBackendRef{ref("stable", 100), ref("canary", 0)},
			}},
		},
	}
}

func ptr[T any](v T) *T { return &v }

func rollout(ns, name string) *v1alpha1.Rollout {
	config := fmt.Sprintf(`{"httpRouteSelector": {"matchLabels": {%q: %q}}}`, selectorLabel, name)
	return &v1alpha1.Rollout{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.RolloutSpec{Strategy: v1alpha1.RolloutStrategy{Canary: &v1alpha1.CanaryStrategy{
			StableService: "stable",
			CanaryService: "canary",
			TrafficRouting: &v1alpha1.RolloutTrafficRouting{
				Plugins: map[string]json.RawMessage{"argoproj-labs/gatewayAPI": json.RawMessage(config)},
			},
		}}},
	}
}

// resourceVersions reads the bare client's routes once; afterwards it keeps
// the resourceVersion each apply returns, as a client that reads nothing.
func (b *bench) resourceVersions(ctx context.Context, ns string) (*sync.Map, error) {
	list, err := b.c.Gateway.GatewayV1().HTTPRoutes(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	rvs := &sync.Map{}
	for _, r := range list.Items {
		rvs.Store(r.Name, r.ResourceVersion)
	}
	return rvs, nil
}

// bareStep is the floor: for every route one typed server-side apply of what
// the plugin applies for the step (spec.rules with the new weights, the
// in-progress label, the claims annotation, the resourceVersion
// precondition), 8 in flight per Rollout, the Rollouts at once.
func (b *bench) bareStep(ctx context.Context, ns string, s scenario, weight int32, rvs *sync.Map) (float64, error) {
	start := time.Now()
	errs := make([]error, s.rollouts)
	var wg sync.WaitGroup
	for r := range s.rollouts {
		wg.Go(func() {
			sem := make(chan struct{}, inFlight)
			var inner sync.WaitGroup
			var mu sync.Mutex
			for i := range s.routes {
				inner.Go(func() {
					sem <- struct{}{}
					defer func() { <-sem }()
					name := routeName(r, i)
					rv, _ := rvs.Load(name)
					stored, err := b.bare.GatewayV1().HTTPRoutes(ns).Apply(ctx, bareApply(ns, name, fmt.Sprintf("%s/ro-%d", ns, r), rv.(string), weight), metav1.ApplyOptions{FieldManager: "bench-bare", Force: true})
					if err != nil {
						mu.Lock()
						errs[r] = fmt.Errorf("bare apply %s/%s: %w", ns, name, err)
						mu.Unlock()
						return
					}
					rvs.Store(name, stored.ResourceVersion)
				})
			}
			inner.Wait()
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return msSince(start), nil
}

// bareRound is one steady step of the bare client in ns, and the settle
// after it, counted in ph as measure counts the plugin's.
func (b *bench) bareRound(ctx context.Context, ph *phase, ns string, s scenario, weight int32, rvs *sync.Map) error {
	mark := b.c.Recorder.Count()
	ms, err := b.bareStep(ctx, ns, s, weight, rvs)
	if err != nil {
		return err
	}
	time.Sleep(settle)
	ph.ms = append(ph.ms, ms)
	ph.calls++
	addVerbs(ph, b.c.Recorder.RequestsSince(mark), bareAgent)
	return nil
}

func bareApply(ns, name, rolloutKey, rv string, weight int32) *gwv1ac.HTTPRouteApplyConfiguration {
	ref := func(svc string, w int32) *gwv1ac.HTTPBackendRefApplyConfiguration {
		return gwv1ac.HTTPBackendRef().WithGroup("").WithKind("Service").WithName(gwv1.ObjectName(svc)).WithPort(80).WithWeight(w)
	}
	claims := routes.Claims{rolloutKey: routes.Claim{CanaryWeight: int64(weight), Weights: []routes.RecordedWeight{
		{Rule: 0, Service: ns + "/stable", Weight: int64(100 - weight)},
		{Rule: 0, Service: ns + "/canary", Weight: int64(weight)},
	}}}
	return gwv1ac.HTTPRoute(name, ns).WithResourceVersion(rv).
		WithLabels(map[string]string{"rollouts.argoproj.io/gatewayapi-canary": "in-progress"}).
		WithAnnotations(claims.Annotations()).
		WithSpec(gwv1ac.HTTPRouteSpec().WithRules(gwv1ac.HTTPRouteRule().
			WithMatches(gwv1ac.HTTPRouteMatch().WithPath(gwv1ac.HTTPPathMatch().WithType(gwv1.PathMatchPathPrefix).WithValue("/"))).
			WithBackendRefs(ref("stable", 100-weight), ref("canary", weight))))
}

// profile takes a CPU profile of the plugin over profileSeconds of steps
// back to back, and its allocations over the same steps, into profileDir,
// with a summary of each; it says what the CPU went to, process by process.
func (b *bench) profile(addr string, call func(int32) (float64, error), pid int, servers []int, endWeight int32) (string, error) {
	if err := os.MkdirAll(b.profileDir, 0o755); err != nil {
		return "", err
	}
	base := "http://" + addr + "/debug/pprof/"
	if err := fetch(base+"allocs", filepath.Join(b.profileDir, "allocs-before.pprof")); err != nil {
		return "", err
	}
	cpuDone := make(chan error, 2)
	go func() {
		cpuDone <- fetch(fmt.Sprintf("%sprofile?seconds=%d", base, b.profileSeconds), filepath.Join(b.profileDir, "cpu.pprof"))
	}()
	go func() { cpuDone <- b.apiserverProfile(filepath.Join(b.profileDir, "apiserver-cpu.pprof")) }()
	time.Sleep(200 * time.Millisecond) // the profile has started
	plugin0, srv0, self0 := cpuSeconds(pid), cpuOf(servers), cpuSeconds(os.Getpid())
	deadline := time.Now().Add(time.Duration(b.profileSeconds)*time.Second - 500*time.Millisecond)
	steps := 0
	for ; time.Now().Before(deadline); steps++ {
		if _, err := call([]int32{40, 50}[steps%2]); err != nil {
			return "", err
		}
	}
	if _, err := call(endWeight); err != nil {
		return "", err
	}
	steps++
	plugin, srv, self := cpuSeconds(pid)-plugin0, cpuOf(servers)-srv0, cpuSeconds(os.Getpid())-self0
	for range 2 {
		if err := <-cpuDone; err != nil {
			return "", err
		}
	}
	if err := fetch(base+"allocs", filepath.Join(b.profileDir, "allocs-after.pprof")); err != nil {
		return "", err
	}
	if err := fetch(base+"heap?gc=1", filepath.Join(b.profileDir, "heap.pprof")); err != nil {
		return "", err
	}
	summary := filepath.Join(b.profileDir, "summary.txt")
	f, err := os.Create(summary)
	if err != nil {
		return "", err
	}
	defer f.Close()
	note := fmt.Sprintf("%d steps over %s: CPU seconds per step: plugin %.3f, kube-apiserver+etcd %.3f, bench process (proxy) %.3f",
		steps, time.Duration(b.profileSeconds)*time.Second, plugin/float64(steps), srv/float64(steps), self/float64(steps))
	fmt.Fprintln(f, note)
	for _, args := range [][]string{
		{"-top", "-nodecount=30", filepath.Join(b.profileDir, "cpu.pprof")},
		{"-top", "-cum", "-nodecount=40", filepath.Join(b.profileDir, "cpu.pprof")},
		{"-top", "-nodecount=30", "-sample_index=alloc_space", "-base", filepath.Join(b.profileDir, "allocs-before.pprof"), filepath.Join(b.profileDir, "allocs-after.pprof")},
		{"-top", "-cum", "-nodecount=40", "-sample_index=alloc_space", "-base", filepath.Join(b.profileDir, "allocs-before.pprof"), filepath.Join(b.profileDir, "allocs-after.pprof")},
		{"-top", "-nodecount=30", "-sample_index=inuse_space", filepath.Join(b.profileDir, "heap.pprof")},
		{"-top", "-cum", "-nodecount=60", filepath.Join(b.profileDir, "apiserver-cpu.pprof")},
	} {
		out, err := exec.Command("go", append([]string{"tool", "pprof"}, args...)...).CombinedOutput()
		fmt.Fprintf(f, "\n$ go tool pprof %s\n%s", strings.Join(args, " "), out)
		if err != nil {
			return "", fmt.Errorf("go tool pprof: %w", err)
		}
	}
	return note + "; profiles and " + summary, nil
}

// apiserverProfile writes a CPU profile of kube-apiserver (its own
// /debug/pprof, as the admin) taken over the same seconds as the plugin's.
func (b *bench) apiserverProfile(path string) error {
	raw, err := b.c.Kube.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
		Param("seconds", strconv.Itoa(b.profileSeconds)).Timeout(time.Duration(b.profileSeconds+30) * time.Second).DoRaw(context.Background())
	if err != nil {
		return fmt.Errorf("kube-apiserver's CPU profile: %w", err)
	}
	return os.WriteFile(path, raw, 0o644)
}

func fetch(url, path string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

// addVerbs counts the requests of one user agent by verb; not the
// plugin's Lease renewals, which come every 5 s whatever the calls, nor its
// Events, sent after the calls by a goroutine of their own (a phase would
// count some of the last one's).
func addVerbs(ph *phase, reqs []harness.Request, agent string) {
	if ph.requests == nil {
		ph.requests = map[string]int{}
	}
	for _, r := range reqs {
		if v := verb(r); strings.HasPrefix(r.UserAgent, agent) && v != "lease" && v != "event" {
			ph.requests[verb(r)]++
		}
	}
}

// verb names what a request does: apply, release, update, review, lease,
// get, list, watch, discovery, and the rest by method.
func verb(r harness.Request) string {
	switch {
	case strings.HasPrefix(r.Path, "/apis/authorization.k8s.io/"):
		return "review"
	case strings.HasPrefix(r.Path, "/apis/coordination.k8s.io/"):
		return "lease" // the plugin's Lease (package peers), renewed every 5 s whatever the calls
	case r.IsEvent():
		return "event" // an Event on a route or the Rollout (package events), sent off the call's path
	case r.Method == http.MethodPatch && r.ContentType == "application/json-patch+json":
		return "release"
	case r.IsApply():
		return "apply"
	case r.Method == http.MethodPut:
		return "update"
	case r.Method != http.MethodGet:
		return strings.ToLower(r.Method)
	case strings.Contains(r.Query, "watch=true") || strings.Contains(r.Query, "watch=1"):
		return "watch"
	}
	parts := strings.Split(strings.Trim(r.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		rest = parts[3:]
	default:
		return "discovery"
	}
	if len(rest) >= 2 && rest[0] == "namespaces" && len(rest) != 2 {
		rest = rest[2:]
	}
	switch len(rest) {
	case 0:
		return "discovery"
	case 1:
		return "list"
	}
	return "get"
}

// cpuSeconds is the user and system CPU time of a process so far.
func cpuSeconds(pid int) float64 {
	u, s := cpuTimes(pid)
	return u + s
}

// cpuTimes is the user and the system CPU time of a process so far, in
// seconds (0, 0 when it cannot be read). The system time is the kernel's
// work for it (its syscalls: sockets, futexes), which callgrind's count of
// the instructions it executes (-instructions) leaves out.
func cpuTimes(pid int) (user, system float64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	// The fields after the command name, which is in parentheses: utime and
	// stime are the 12th and 13th, in clock ticks of 1/100 s.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(fields) < 13 {
		return 0, 0
	}
	u, _ := strconv.ParseFloat(fields[11], 64)
	s, _ := strconv.ParseFloat(fields[12], 64)
	return u / 100, s / 100
}

func cpuOf(pids []int) float64 {
	var sum float64
	for _, p := range pids {
		sum += cpuSeconds(p)
	}
	return sum
}

// installWhat are the ways -install writes the plugin's file before it runs.
// On this machine's kernel a file written in large writes is kept in the
// page cache in large folios, and a page fault maps the whole folio, so the
// same binary shows from 25 MiB (written 32 KiB at a time) to 42 MiB (4 MiB
// at a time) of file-backed RSS right after it starts
// (docs/performance/memory.md). Argo Rollouts writes a plugin it installs
// with io.Copy, which "download" and "copy" do as it does. With a -plugin that is a script, the
// copy is of the script, not of what it runs.
var installWhat = map[string]string{
	"download": "written as Argo Rollouts writes a plugin it downloads (io.Copy from the HTTP body: writes of at most 32 KiB)",
	"copy":     "written as Argo Rollouts copies a plugin from a file:// location (io.Copy from file to file: copy_file_range)",
	"none":     "go build wrote, or -plugin named, where it is",
}

// installPlugin writes a copy of the plugin at bin into dir the way mode says
// and returns its path.
func installPlugin(bin, dir, mode string) (string, error) {
	in, err := os.Open(bin)
	if err != nil {
		return "", err
	}
	defer in.Close()
	path := filepath.Join(dir, "installed-"+filepath.Base(bin))
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o700)
	if err != nil {
		return "", err
	}
	var from io.Reader = in
	if mode == "download" {
		// Hide the file behind a plain reader, as an HTTP body is: io.Copy
		// then writes what its 32 KiB buffer reads.
		from = struct{ io.Reader }{in}
	}
	if _, err := io.Copy(out, from); err != nil {
		out.Close()
		return "", fmt.Errorf("-install %s: writing %s: %w", mode, path, err)
	}
	if err := out.Close(); err != nil {
		return "", fmt.Errorf("-install %s: writing %s: %w", mode, path, err)
	}
	return path, nil
}

// splitCPUs divides the CPUs this process may run on in two halves.
func splitCPUs() (servers, clients []int, err error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, nil, err
	}
	var cpus []int
	for c := range 1024 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) < 2 {
		return nil, nil, fmt.Errorf("-pin needs two CPUs, this process may use %v", cpus)
	}
	return cpus[:len(cpus)/2], cpus[len(cpus)/2:], nil
}

// pinProcess sets the CPU affinity of every thread of pid; threads and
// processes it starts afterwards inherit it.
func pinProcess(pid int, cpus []int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("pinning thread %d of process %d to CPUs %v: %w", tid, pid, cpus, err)
		}
	}
	return nil
}

// serverPids are the kube-apiserver and etcd that envtest started for this
// process (its children), not anyone else's on the machine.
func serverPids() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(data)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < open {
			continue
		}
		comm := s[open+1 : closing]
		fields := strings.Fields(s[closing+1:])
		if len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		if comm == "kube-apiserver" || comm == "etcd" {
			out = append(out, pid)
		}
	}
	return out
}

// memoryNow is what the process holds resident now: anonymous memory (the
// heap, stacks) and pages of the binary.
func memoryNow(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	var parts []string
	for _, line := range strings.Split(string(data), "\n") {
		for _, key := range []string{"RssAnon:", "RssFile:"} {
			if rest, ok := strings.CutPrefix(line, key); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
				parts = append(parts, fmt.Sprintf("%s %.1f MiB", strings.TrimSuffix(key, ":"), kb/1024))
			}
		}
	}
	return strings.Join(parts, ", ")
}

// peakRSS is the process's high-water resident set (VmHWM) in MiB.
func peakRSS(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return kb / 1024
		}
	}
	return 0
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// resamples and tail set interval: how many times the steps are drawn
// again, and the share of the ratios left out at each end.
const (
	resamples = 2000
	tail      = 0.05
)

// ratioOfMedians is the plugin's median step over the bare client's.
func ratioOfMedians(plugin, bare []float64) float64 { return median(plugin) / median(bare) }

// pairedRatio is the median, over the rounds, of the plugin's step over the
// bare client's step of the same round. The two ran one right after the
// other, under the same load of the machine, so a slow moment of the machine
// moves both and their ratio less than it moves either median.
func pairedRatio(plugin, bare []float64) float64 {
	n := min(len(plugin), len(bare))
	ratios := make([]float64, n)
	for i := range n {
		ratios[i] = plugin[i] / bare[i]
	}
	return median(ratios)
}

// interval is where stat of plugin and bare falls when their steps are drawn
// again with replacement, each plugin step together with the bare step of
// the same round (they ran side by side, under the same load of the
// machine): the values between the tail and the 1 - tail quantile of
// resamples draws. A fixed seed makes a table come out the same from the
// same steps.
func interval(plugin, bare []float64, stat func(plugin, bare []float64) float64) (lo, hi float64) {
	n := min(len(plugin), len(bare))
	if n == 0 {
		return 0, 0
	}
	rng := rand.New(rand.NewPCG(1, 2))
	p, b := make([]float64, n), make([]float64, n)
	values := make([]float64, resamples)
	for k := range values {
		for i := range n {
			j := rng.IntN(n)
			p[i], b[i] = plugin[j], bare[j]
		}
		values[k] = stat(p, b)
	}
	slices.Sort(values)
	return values[int(tail*resamples)], values[int((1-tail)*resamples)-1]
}

func spread(xs []float64) string {
	if len(xs) == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f / %.0f (%.0f–%.0f)", median(xs), slices.Max(xs), slices.Min(xs), slices.Max(xs))
}

// verbs prints requests per route per call, most common verb first.
func verbs(m map[string]float64) string {
	if len(m) == 0 {
		return "none"
	}
	keys := slices.SortedFunc(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}, func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %s", k, trim(m[k]))
	}
	return strings.Join(parts, ", ")
}

func trim(f float64) string {
	s := strconv.FormatFloat(f, 'f', 3, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func printTable(w io.Writer, cfg config, results []result) {
	fmt.Fprintf(w, "\nOne SetWeight over N HTTPRoutes selected by label: the plugin binary over go-plugin RPC, and a bare client sending the same\n"+
		"server-side apply per route (%d in flight per Rollout), interleaved (each side first in half the rounds, shuffled), against one envtest kube-apiserver; %d steady steps each\n"+
		"(median / max (min–max) ms), limits %d QPS / %d burst unless the row says default flags; %d CPUs, %s.\n\n",
		inFlight, cfg.runs, cfg.qps, cfg.burst, runtime.NumCPU(), runtime.Version())
	fmt.Fprintf(w, "A ratio row is the plugin's median over the bare client's, with in brackets where %d %% of that ratio falls when the\n"+
		"steady steps are drawn again (each plugin step with the bare step beside it, %d times): how far this run's noise moves it;\n"+
		"after the slash, the plugin's max over the bare client's; then the paired ratio: the median over the rounds of the plugin's\n"+
		"step over the bare step of the same round, with its own bracket (a slow moment of the machine moves both steps of a round,\n"+
		"so it moves their ratio less: two equal sides (-aa unwatched) come out closer to 1 by it).\n\n", int(100*(1-2*tail)), resamples)
	fmt.Fprintf(w, "-install %s: the plugin ran from a file %s.\n\n", cfg.install, installWhat[cfg.install])
	if cfg.pin {
		fmt.Fprint(w, "-pin: kube-apiserver and etcd on half of the CPUs, the bench (its proxy and bare client) and the plugin on the other half.\n\n")
	}
	if cfg.bareWatch {
		fmt.Fprint(w, "The bare client also watches its routes (-bare-watch), so the apiserver does the same work for both sides.\n\n")
	}
	if what, ok := aaWhat[cfg.aa]; ok {
		fmt.Fprintf(w, "-aa %s: the plugin rows' steady steps are the bare client's, %s.\n\n", cfg.aa, what)
	}
	if slices.ContainsFunc(results, func(r result) bool { return r.s.calibration }) {
		fmt.Fprintf(w, "Rows of a calibration run (-repeat) run with -aa unwatched: their plugin rows' steady steps are the bare client's, %s.\n\n", aaWhat["unwatched"])
	}
	fmt.Fprintln(w, "| routes | who | step ms median / max (min–max) | requests per route per step | first step, per route | last step, per route | unchanged call | CPU s per step: plugin / apiserver+etcd | peak RSS |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range results {
		n := r.s.routes * r.s.rollouts
		fmt.Fprintf(w, "| %s | plugin | %s | %s | %s, %.0f ms | %s, %.0f ms | %d requests, %.1f ms | %.3f / %.3f | %.1f MiB |\n",
			r.s.label, spread(r.steady.ms), verbs(r.steady.perRouteCall(n)),
			verbs(r.first.perRouteCall(n)), median(r.first.ms), verbs(r.last.perRouteCall(n)), median(r.last.ms),
			total(r.same.requests)/max(r.same.calls, 1), median(r.same.ms), r.pluginCPU, r.serverCPU, r.peakRSS)
		if len(r.bareSteady.ms) == 0 {
			continue // back to back: the plugin alone
		}
		fmt.Fprintf(w, "| %s | bare | %s | %s | — | — | — | — / %.3f | — |\n",
			r.s.label, spread(r.bareSteady.ms), verbs(r.bareSteady.perRouteCall(n)), r.bareServerCPU)
		lo, hi := interval(r.steady.ms, r.bareSteady.ms, ratioOfMedians)
		plo, phi := interval(r.steady.ms, r.bareSteady.ms, pairedRatio)
		fmt.Fprintf(w, "| %s | ratio | %.2f (%.2f–%.2f) / %.2f; paired %.2f (%.2f–%.2f) | | | | | | |\n",
			r.s.label, ratioOfMedians(r.steady.ms, r.bareSteady.ms), lo, hi, slices.Max(r.steady.ms)/slices.Max(r.bareSteady.ms),
			pairedRatio(r.steady.ms, r.bareSteady.ms), plo, phi)
	}
	fmt.Fprintln(w)
	printShort(w, results)
	for _, r := range results {
		fmt.Fprintf(w, "%s routes: the call before the first step (nothing to change; it starts the watch cache): %s requests in all, %.0f ms; plugin CPU per steady step %.3f s, of it system (kernel) %.3f s; plugin memory at the end: %s\n",
			r.s.label, verbsTotal(r.warm.requests), median(r.warm.ms), r.pluginCPU, r.pluginSysCPU, r.memory)
	}
	for _, r := range results {
		if r.pluginInstructions > 0 {
			fmt.Fprintf(w, "%s routes: the plugin executed %.0f instructions per steady step, %.0f per route (callgrind, -instructions; the times above are under it)\n",
				r.s.label, r.pluginInstructions, r.pluginInstructions/float64(r.s.routes*r.s.rollouts))
		}
	}
	for _, r := range results {
		if r.profileNote != "" {
			fmt.Fprintf(w, "profile, %s routes: %s\n", r.s.label, r.profileNote)
		}
	}
}

// printShort says which rows' steady steps answered done having applied
// fewer routes than they change.
func printShort(w io.Writer, results []result) {
	for _, r := range results {
		if r.steady.short > 0 {
			fmt.Fprintf(w, "WRONG, %s routes: %d of %d steady steps answered done with fewer applies than the %d routes they change\n",
				r.s.label, r.steady.short, r.steady.calls, r.steady.changes)
		}
	}
}

// byRun splits results into those of the usual table (every row but the
// second and later runs of -repeat) and the later runs.
func byRun(results []result) (first, later []result) {
	for _, r := range results {
		if r.s.run > 1 {
			later = append(later, r)
		} else {
			first = append(first, r)
		}
	}
	return first, later
}

// The target of the paired ratio: its mean over targetRuns runs at most
// targetRatio at each of targetRoutes.
const (
	targetRatio = 1.20
	targetRuns  = 5
)

var targetRoutes = []int{50, 200}

// ratioRow is one route count's paired ratios with -repeat, run by run: the
// plugin's over the bare client's, and its calibration's (bare over bare).
type ratioRow struct {
	routes              int
	plugin, calibration []float64
}

// ratioRows gathers the paired ratio of every run of -repeat by route count,
// the counts in the order they ran.
func ratioRows(results []result) []ratioRow {
	var rows []ratioRow
	for _, r := range results {
		if r.s.run == 0 {
			continue
		}
		i := slices.IndexFunc(rows, func(row ratioRow) bool { return row.routes == r.s.routes })
		if i < 0 {
			rows, i = append(rows, ratioRow{routes: r.s.routes}), len(rows)
		}
		ratio := pairedRatio(r.steady.ms, r.bareSteady.ms)
		if r.s.calibration {
			rows[i].calibration = append(rows[i].calibration, ratio)
		} else {
			rows[i].plugin = append(rows[i].plugin, ratio)
		}
	}
	return rows
}

// meanSD is the mean of xs and their sample standard deviation (over n − 1;
// NaN with fewer than two).
func meanSD(xs []float64) (mean, sd float64) {
	n := float64(len(xs))
	for _, x := range xs {
		mean += x
	}
	mean /= n
	var squares float64
	for _, x := range xs {
		squares += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(squares / (n - 1))
}

// ratios prints each run's ratio, 2 decimals.
func ratios(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, ", ")
}

// meanAndSD prints the mean of xs with their standard deviation in brackets
// ("—" for fewer than two).
func meanAndSD(xs []float64) string {
	mean, sd := meanSD(xs)
	if len(xs) < 2 {
		return fmt.Sprintf("%.2f (—)", mean)
	}
	return fmt.Sprintf("%.2f (%.2f)", mean, sd)
}

// printSummary prints the paired ratio of each run of -repeat beside its
// calibration's, by route count, and whether the target is met.
func printSummary(w io.Writer, rows []ratioRow) {
	fmt.Fprint(w, "\nThe paired ratio of every run (-repeat), each run right followed by a calibration run of the same route count: the bare\n"+
		"client on both sides (-aa unwatched), what two equal sides come to on this machine at that moment. sd: the sample standard\n"+
		"deviation between runs.\n\n")
	fmt.Fprintln(w, "| routes | paired ratio per run: plugin / bare | mean (sd) | calibration per run: bare / bare | mean (sd) | plugin mean − calibration mean |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- |")
	for _, r := range rows {
		p, _ := meanSD(r.plugin)
		c, _ := meanSD(r.calibration)
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %+.2f |\n", r.routes, ratios(r.plugin), meanAndSD(r.plugin), ratios(r.calibration), meanAndSD(r.calibration), p-c)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, targetLine())
	for _, r := range rows {
		fmt.Fprintln(w, verdict(r))
	}
}

// targetLine states the target.
func targetLine() string {
	counts := make([]string, len(targetRoutes))
	for i, n := range targetRoutes {
		counts[i] = strconv.Itoa(n)
	}
	return fmt.Sprintf("target: mean paired ratio ≤ %.2f at %s routes over %d runs", targetRatio, strings.Join(counts, " and "), targetRuns)
}

// verdict says in words whether a route count's runs meet the target: the
// mean as printed (2 decimals) at most targetRatio, over at least targetRuns
// runs. It judges nothing at a route count the target does not name, nor
// over fewer runs; a figure never fails the bench.
func verdict(r ratioRow) string {
	mean, _ := meanSD(r.plugin)
	cal, _ := meanSD(r.calibration)
	figures := fmt.Sprintf("mean paired ratio %.2f over %d runs (calibration, two equal sides: %.2f)", mean, len(r.plugin), cal)
	switch {
	case !slices.Contains(targetRoutes, r.routes):
		return fmt.Sprintf("%d routes: no target at this route count; %s", r.routes, figures)
	case len(r.plugin) < targetRuns:
		return fmt.Sprintf("%d routes: not judged, the target asks for %d runs; %s", r.routes, targetRuns, figures)
	case math.Round(mean*100)/100 <= targetRatio:
		return fmt.Sprintf("%d routes: met, %.2f ≤ %.2f; %s", r.routes, mean, targetRatio, figures)
	}
	return fmt.Sprintf("%d routes: not met, %.2f > %.2f; %s", r.routes, mean, targetRatio, figures)
}

// writeSteps writes each row's steady steps, round by round, as JSON lines.
func writeSteps(path string, results []result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, r := range results {
		if err := enc.Encode(struct {
			Routes string    `json:"routes"`
			Plugin []float64 `json:"plugin"`
			Bare   []float64 `json:"bare"`
		}{r.s.label, r.steady.ms, r.bareSteady.ms}); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

func verbsTotal(m map[string]int) string {
	f := map[string]float64{}
	for k, v := range m {
		f[k] = float64(v)
	}
	return verbs(f)
}
