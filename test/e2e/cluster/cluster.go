package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/traffic"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// Names the cluster is set up with.
const (
	// RolloutsNamespace holds the controller's ConfigMap.
	RolloutsNamespace = "argo-rollouts"
	// PluginName is the name Rollouts use under trafficRouting.plugins; the
	// plugin reads its config under the same name by default.
	PluginName = "argoproj-labs/gatewayAPI"
	// NodeName is the one fake Node kwok runs pods on.
	NodeName = "kwok-node-0"
	// kwokNodeAnnotation marks the Nodes kwok manages.
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
)

// proc is one process of the cluster, in a process group of its own.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	done    chan struct{}
	err     error // set before done closes
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// timing is one measured phase.
type timing struct {
	what string
	took time.Duration
}

// Options say how Start sets up a run.
type Options struct {
	// Name prefixes every line Start and Stop print ("e2e: ...") and the
	// run's temporary directory; default "cluster".
	Name string
	// Dir is the run's directory (logs, kubeconfig, PKI); default a new
	// temporary directory.
	Dir string
	// Out receives the progress lines; default os.Stdout.
	Out io.Writer
	// PluginArgs are the plugin's flags in its trafficRouterPlugins entry.
	PluginArgs []string
	// RouteCluster starts a second cluster holding routes for the first's
	// Rollouts, with a Traefik of its own (RouteCluster), and gives it to
	// the plugin with -route-cluster.
	RouteCluster bool
	// PluginMetrics has the plugin serve its metrics on a free port of
	// 127.0.0.1 (-metrics-address); Cluster.PluginMetrics is their URL.
	PluginMetrics bool
}

// Cluster is a Kubernetes cluster made of local processes: etcd and
// kube-apiserver (envtest), kube-controller-manager, kube-scheduler, kwok with
// one fake Node, and the Argo Rollouts controller running the plugin binary.
type Cluster struct {
	Dir        string // everything of this run
	LogDir     string // one log file per process
	Kubeconfig string // admin kubeconfig the processes use
	Plugin     string // the plugin binary the controller loads
	Config     *rest.Config
	Kube       kubernetes.Interface
	Dynamic    dynamic.Interface
	// ControllerLog keeps the controller's (and the plugin's) log lines that
	// report errors, say "not supported", or tell whether a desired weight
	// was verified, each with the time it arrived.
	ControllerLog *LineCatcher

	// Entrypoint is Traefik's entrypoint for the Gateway's listener, on
	// 127.0.0.1 (host:port); TraefikAPI its API (rawdata, for a person
	// looking into a failure).
	Entrypoint, TraefikAPI string
	// Traefik is the gateway: its entrypoints by listener name.
	Traefik *Traefik
	// Backends serves one backend per Service in the run's network namespace.
	Backends *traffic.Backends
	// Meter sends requests to Entrypoint.
	Meter *traffic.Meter
	// RouteCluster is the second cluster Options.RouteCluster asks for; nil
	// without it.
	RouteCluster *RouteCluster
	// PluginMetrics is the URL of the plugin's /metrics, with
	// Options.PluginMetrics; "" without it.
	PluginMetrics string
	netns         *traffic.Netns

	name     string
	out      io.Writer
	env      *envtest.Environment
	mu       sync.Mutex
	procs    []*proc
	timings  []timing
	stopOnce sync.Once
	logs     []*os.File
	// pluginArgs are Options.PluginArgs.
	pluginArgs []string
	// controllerBin is the Argo Rollouts controller's binary.
	controllerBin string
}

// Measure records and prints how long a phase took since since.
func (c *Cluster) Measure(what string, since time.Time) {
	d := time.Since(since)
	c.mu.Lock()
	c.timings = append(c.timings, timing{what, d})
	c.mu.Unlock()
	c.printf("%-58s %6.1fs\n", what, d.Seconds())
}

// printf prints one progress line, prefixed with the run's name.
func (c *Cluster) printf(format string, args ...any) {
	fmt.Fprintf(c.out, c.name+": "+format, args...)
}

// PrintTimings prints every phase Measure recorded, and where the logs are.
func (c *Cluster) PrintTimings() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.printf("timings\n")
	for _, t := range c.timings {
		fmt.Fprintf(c.out, "  %-60s %6.1fs\n", t.what, t.took.Seconds())
	}
	c.printf("logs in %s\n", c.LogDir)
}

func (c *Cluster) openLog(name string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(c.LogDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.logs = append(c.logs, f)
	c.mu.Unlock()
	return f, nil
}

// Start brings everything up. On error the returned cluster holds whatever
// was started; Stop it.
func Start(opts Options) (c *Cluster, err error) {
	c = &Cluster{ControllerLog: NewLineCatcher("not supported", "level=error", PluginError, "Desired weight",
		// the plugin's reasons for NotVerified (plugin/verify.go, plugin/settle.go)
		"weights not verified yet", "waiting for its data plane",
		// the plugin's writes and the controller's reconciles, counted by scenarios
		"applied route", "released route", "Reconciling TrafficRouting"),
		name: opts.Name, out: opts.Out, Dir: opts.Dir, pluginArgs: opts.PluginArgs}
	if c.name == "" {
		c.name = "cluster"
	}
	if c.out == nil {
		c.out = os.Stdout
	}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "rollouts-gatewayapi-ssa-"+c.name+"-"); err != nil {
			return c, err
		}
	}
	c.LogDir = filepath.Join(c.Dir, "logs")
	if err := os.MkdirAll(c.LogDir, 0o755); err != nil {
		return c, err
	}
	c.printf("logs of every process in %s\n", c.LogDir)
	if opts.PluginMetrics {
		port, err := freePort()
		if err != nil {
			return c, err
		}
		address := fmt.Sprintf("127.0.0.1:%d", port)
		c.pluginArgs = append(slices.Clip(c.pluginArgs), "-metrics-address="+address)
		c.PluginMetrics = "http://" + address + "/metrics"
	}
	ctrllog.SetLogger(logr.Discard()) // envtest's own logging; its processes log to files

	// Binaries: cached outside the repository, built from the Go module proxy when missing.
	t0 := time.Now()
	envtestAssets, err := script("hack/envtest-assets.sh")
	if err != nil {
		return c, err
	}
	c.Measure("binaries: kube-apiserver, etcd (hack/envtest-assets.sh)", t0)
	t0 = time.Now()
	assets, err := script("hack/e2e-assets.sh")
	if err != nil {
		return c, err
	}
	c.Measure("binaries: kcm, scheduler, kwok, controller (e2e-assets)", t0)
	t0 = time.Now()
	traefikAssets, err := script("hack/traefik-assets.sh")
	if err != nil {
		return c, err
	}
	c.Measure("binary: traefik (hack/traefik-assets.sh)", t0)
	t0 = time.Now()
	if c.Plugin, err = harness.BuildPlugin(filepath.Join(c.Dir, "bin")); err != nil {
		return c, err
	}
	c.Measure("binary: the plugin (harness.BuildPlugin)", t0)

	start := time.Now()
	if err := c.startControlPlane(envtestAssets); err != nil {
		return c, err
	}
	c.Measure("cluster: etcd + kube-apiserver + CRDs (envtest)", start)
	if opts.RouteCluster {
		// Before the controller, which reads the plugin's args once.
		t0 = time.Now()
		if err := c.startRouteControlPlane(envtestAssets); err != nil {
			return c, err
		}
		c.Measure("route cluster: etcd + kube-apiserver + CRDs (envtest)", t0)
	}

	t0 = time.Now()
	if err := c.startKubeControllers(assets); err != nil {
		return c, err
	}
	c.Measure("cluster: kube-controller-manager + kube-scheduler healthy", t0)

	t0 = time.Now()
	if err := c.startKwok(assets); err != nil {
		return c, err
	}
	c.Measure("cluster: kwok, Node Ready and schedulable", t0)

	t0 = time.Now()
	if err := c.startRolloutsController(assets); err != nil {
		return c, err
	}
	c.Measure("cluster: Argo Rollouts controller healthy", t0)

	t0 = time.Now()
	if err := c.startDataPlane(); err != nil {
		return c, err
	}
	if err := c.startTraefik(traefikAssets); err != nil {
		return c, err
	}
	c.Measure("cluster: Traefik, its Gateway Programmed, backends' netns", t0)
	if opts.RouteCluster {
		t0 = time.Now()
		if err := c.startRouteDataPlane(traefikAssets); err != nil {
			return c, err
		}
		c.Measure("route cluster: Traefik, its Gateway Programmed", t0)
	}
	c.Measure("cluster: total start", start)
	return c, nil
}

// script runs a hack/ script that prints a directory, its progress going to stderr.
func script(path string) (string, error) {
	cmd := exec.Command("bash", filepath.Join(harness.RepoRoot(), path))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("%s printed no directory", path)
	}
	return dir, nil
}

// gatewayCRDs are Gateway API v1.6.3's standard CRDs with the experimental
// TCPRoute in place of the standard one: Traefik v3.7 reads TCPRoutes only at
// v1alpha2, which the experimental CRD serves next to v1 (the plugin writes
// v1; both are the same objects). envtest installs CRDs only, so the
// safe-upgrades ValidatingAdmissionPolicy that refuses experimental CRDs over
// standard ones is not there.
func gatewayCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	standard, err := harness.CRDs(harness.Standard)
	if err != nil {
		return nil, err
	}
	experimental, err := harness.CRDs(harness.Experimental)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(standard, func(crd *apiextensionsv1.CustomResourceDefinition) bool { return crd.Spec.Names.Kind == "TCPRoute" })
	j := slices.IndexFunc(experimental, func(crd *apiextensionsv1.CustomResourceDefinition) bool { return crd.Spec.Names.Kind == "TCPRoute" })
	if i < 0 || j < 0 {
		return nil, fmt.Errorf("no TCPRoute CRD in Gateway API's channels")
	}
	standard[i] = experimental[j]
	return standard, nil
}

func (c *Cluster) startControlPlane(assets string) error {
	crds, err := gatewayCRDs()
	if err != nil {
		return err
	}
	rollouts, err := harness.RolloutsCRDs()
	if err != nil {
		return err
	}
	etcdLog, err := c.openLog("etcd")
	if err != nil {
		return err
	}
	apiLog, err := c.openLog("kube-apiserver")
	if err != nil {
		return err
	}
	pki := filepath.Join(c.Dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return err
	}
	// envtest generates the serving certificate, the client CA and the
	// service-account key pair in CertDir, and sets --service-account-issuer,
	// --service-account-key-file, --service-account-signing-key-file,
	// --service-cluster-ip-range, --authorization-mode=RBAC and
	// --disable-admission-plugins=ServiceAccount.
	api := &envtest.APIServer{CertDir: pki, Out: apiLog, Err: apiLog}
	api.Configure().Set("endpoint-reconciler-type", "none")
	c.env = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDs:                  append(crds, rollouts...),
		ErrorIfCRDPathMissing: true,
		ControlPlane: envtest.ControlPlane{
			APIServer: api,
			Etcd:      &envtest.Etcd{Out: etcdLog, Err: etcdLog},
		},
		ControlPlaneStartTimeout: 90 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	if _, err := c.env.Start(); err != nil {
		return fmt.Errorf("starting etcd and kube-apiserver (binaries in %s): %w", assets, err)
	}
	admin, err := c.env.AddUser(envtest.User{Name: "e2e-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		return err
	}
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, kc, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(pki, "serving-ca.crt"), api.SecureServing.CA, 0o644); err != nil {
		return err
	}
	c.Config = admin.Config()
	c.Config.QPS, c.Config.Burst = 200, 400
	c.Kube = kubernetes.NewForConfigOrDie(c.Config)
	c.Dynamic = dynamic.NewForConfigOrDie(c.Config)
	return nil
}

func (c *Cluster) startKubeControllers(assets string) error {
	pki := filepath.Join(c.Dir, "pki")
	kcmPort, err := freePort()
	if err != nil {
		return err
	}
	kubeconfigFlags := []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--authentication-kubeconfig=" + c.Kubeconfig,
		"--authorization-kubeconfig=" + c.Kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
	}
	kcm, err := c.start("kube-controller-manager", filepath.Join(assets, "kube-controller-manager"), append(kubeconfigFlags,
		// Without the EndpointSlice, mirroring and Endpoints controllers: the
		// test writes the EndpointSlices of its backends itself, and kwok's
		// fake pod IPs must not get traffic.
		"--controllers=*,-endpointslice-controller,-endpointslice-mirroring-controller,-endpoints-controller",
		"--service-account-private-key-file="+filepath.Join(pki, "sa-signer.key"),
		"--root-ca-file="+filepath.Join(pki, "serving-ca.crt"),
		"--secure-port="+strconv.Itoa(kcmPort),
		"--cert-dir="+filepath.Join(c.Dir, "kube-controller-manager"),
	), nil, c.Dir, nil)
	if err != nil {
		return err
	}
	schedPort, err := freePort()
	if err != nil {
		return err
	}
	sched, err := c.start("kube-scheduler", filepath.Join(assets, "kube-scheduler"), append(kubeconfigFlags,
		"--secure-port="+strconv.Itoa(schedPort),
		"--cert-dir="+filepath.Join(c.Dir, "kube-scheduler"),
	), nil, c.Dir, nil)
	if err != nil {
		return err
	}
	if err := waitHealthy(kcm, fmt.Sprintf("https://127.0.0.1:%d/healthz", kcmPort), 90*time.Second); err != nil {
		return err
	}
	return waitHealthy(sched, fmt.Sprintf("https://127.0.0.1:%d/healthz", schedPort), 90*time.Second)
}

func (c *Cluster) startKwok(assets string) error {
	stage := filepath.Join(assets, "kwok-stage")
	var configs []string
	for _, f := range []string{
		"node/fast/node-initialize.yaml",
		"node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
		"pod/fast/pod-ready.yaml",
		"pod/fast/pod-complete.yaml",
		"pod/fast/pod-delete.yaml",
	} {
		path := filepath.Join(stage, f)
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("kwok stage file: %w", err)
		}
		configs = append(configs, "--config="+path)
	}
	home := filepath.Join(c.Dir, "kwok")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return err
	}
	// HOME keeps kwok from reading ~/.kwok/kwok.yaml; without --node-port or
	// --server-address it serves nothing.
	kwok, err := c.start("kwok", filepath.Join(assets, "kwok"), append([]string{
		"--kubeconfig=" + c.Kubeconfig,
		"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=fake",
		"--node-lease-duration-seconds=40",
		"--cidr=10.244.0.0/16",
	}, configs...), []string{"HOME=" + home}, home, nil)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	quantity := resource.MustParse
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        NodeName,
			Annotations: map[string]string{kwokNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{
				"kubernetes.io/hostname": NodeName, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "type": "kwok",
			},
		},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{"cpu": quantity("32"), "memory": quantity("256Gi"), "pods": quantity("110")},
			Capacity:    corev1.ResourceList{"cpu": quantity("32"), "memory": quantity("256Gi"), "pods": quantity("110")},
		},
	}
	if _, err := c.Kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Node %s: %w", NodeName, err)
	}
	// Ready is kwok's work; the not-ready:NoSchedule taint goes once the
	// node-lifecycle controller has seen it Ready.
	var last string
	for {
		if kwok.exited() {
			return fmt.Errorf("kwok exited: %v (see %s)", kwok.err, kwok.logPath)
		}
		n, err := c.Kube.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err == nil {
			ready := false
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready = true
				}
			}
			if ready && len(n.Spec.Taints) == 0 {
				return nil
			}
			last = fmt.Sprintf("Ready=%v taints=%v", ready, n.Spec.Taints)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s not Ready and untainted within 90s: %s", NodeName, last)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func (c *Cluster) startRolloutsController(assets string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: RolloutsNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// Plugins are read once, at start: the ConfigMap comes first.
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "argo-rollouts-config", Namespace: RolloutsNamespace},
		Data:       map[string]string{"trafficRouterPlugins": pluginEntry(c.Plugin, c.pluginArgs)},
	}
	if _, err := c.Kube.CoreV1().ConfigMaps(RolloutsNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return err
	}
	// It copies file:// plugins to ./plugin-bin/<name>: a working directory of its own.
	if err := os.MkdirAll(filepath.Join(c.Dir, "rollouts-controller"), 0o755); err != nil {
		return err
	}
	c.controllerBin = filepath.Join(assets, "rollouts-controller")
	return c.runRolloutsController()
}

// runRolloutsController starts the Argo Rollouts controller and waits until
// it is healthy.
func (c *Cluster) runRolloutsController() error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	metricsPort, healthzPort := ports[0], ports[1]
	ctrl, err := c.start("rollouts-controller", c.controllerBin, []string{
		"--leader-elect=false",
		"--metricsPort=" + strconv.Itoa(metricsPort),
		"--healthzPort=" + strconv.Itoa(healthzPort),
		"--loglevel=info",
	}, []string{"KUBECONFIG=" + c.Kubeconfig, "POD_NAMESPACE=" + RolloutsNamespace}, filepath.Join(c.Dir, "rollouts-controller"), c.ControllerLog)
	if err != nil {
		return err
	}
	return waitHealthy(ctrl, fmt.Sprintf("http://127.0.0.1:%d/healthz", healthzPort), 90*time.Second)
}

// RestartRolloutsController kills the Argo Rollouts controller outright
// (SIGKILL to its process group: its plugin process dies with it, as when
// the controller's container is killed) and starts it again, and returns
// once it is healthy. It returns how long the controller was away.
func (c *Cluster) RestartRolloutsController() (time.Duration, error) {
	start := time.Now()
	c.mu.Lock()
	var ctrl *proc
	kept := c.procs[:0]
	for _, p := range c.procs {
		if p.name == "rollouts-controller" && !p.exited() {
			ctrl = p
			continue
		}
		kept = append(kept, p)
	}
	c.procs = kept
	c.mu.Unlock()
	if ctrl == nil {
		return 0, fmt.Errorf("no Argo Rollouts controller running")
	}
	_ = syscall.Kill(-ctrl.cmd.Process.Pid, syscall.SIGKILL)
	<-ctrl.done
	fmt.Fprintf(ctrl.logFile, "# killed (SIGKILL to its process group) at %s; started again below\n", time.Now().Format(time.RFC3339Nano))
	if err := c.runRolloutsController(); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// pluginEntry is the plugin's entry in argo-rollouts-config.
func pluginEntry(bin string, args []string) string {
	entry := fmt.Sprintf("- name: %q\n  location: %q\n", PluginName, "file://"+bin)
	if len(args) > 0 {
		entry += "  args:\n"
		for _, a := range args {
			entry += fmt.Sprintf("  - %q\n", a)
		}
	}
	return entry
}

// start runs a binary in a process group of its own, its output in
// logs/<name>.log (and in extra, if set). Its environment is the test's minus
// anything that would point it at another cluster, plus env.
func (c *Cluster) start(name, bin string, args, env []string, dir string, extra io.Writer) (*proc, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, err
	}
	f, err := c.openLog(name)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "# %s %s\n", bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), env...)
	var out io.Writer = f
	if extra != nil {
		out = io.MultiWriter(f, extra)
	}
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so that stopping it also stops what it started
	// (the controller's plugin process); killed if the test process dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: f.Name(), logFile: f, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return p, nil
}

// cleanEnv is the test's environment without KUBECONFIG and in-cluster
// settings (the plugin prefers in-cluster config), and without proxies.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "POD_NAMESPACE",
			// Everything here talks to 127.0.0.1 and the test's namespace only;
			// Traefik would send backend requests through a proxy.
			"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// Dead names the processes that have exited while they should be running.
func (c *Cluster) Dead() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, p := range c.procs {
		if p.exited() {
			out = append(out, fmt.Sprintf("%s exited (%v); log: %s", p.name, p.err, p.logPath))
		}
	}
	return out
}

// Stop stops the controller first (with the plugin in its process group),
// then every other process in reverse start order (Traefik among them), then
// the backends, deletes the network namespace, and stops kube-apiserver and
// etcd. Safe to call more than once and from a signal handler.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		procs := append([]*proc(nil), c.procs...)
		c.mu.Unlock()
		for i := len(procs) - 1; i >= 0; i-- {
			if procs[i].name == "rollouts-controller" {
				stopProc(procs[i])
			}
		}
		for i := len(procs) - 1; i >= 0; i-- {
			stopProc(procs[i])
		}
		// The backends and their network namespace (with its veth pair and
		// addresses) after Traefik, which sends them requests.
		if c.Meter != nil {
			c.Meter.Close()
		}
		if c.Backends != nil {
			c.Backends.Close()
		}
		if c.RouteCluster != nil {
			c.RouteCluster.stop(c.name)
		}
		if c.netns != nil {
			if err := c.netns.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "%s: deleting network namespace %s: %v\n", c.name, c.netns.Name, err)
			}
		}
		if c.env != nil {
			if err := c.env.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "%s: stopping etcd and kube-apiserver: %v\n", c.name, err)
			}
		}
		c.mu.Lock()
		for _, f := range c.logs {
			f.Close()
		}
		c.mu.Unlock()
		// The binaries (the plugin and the controller's copy of it) go; logs,
		// kubeconfig and PKI stay.
		if c.Dir != "" {
			os.RemoveAll(filepath.Join(c.Dir, "bin"))
			os.RemoveAll(filepath.Join(c.Dir, "rollouts-controller", "plugin-bin"))
		}
		if c.LogDir != "" {
			c.printf("everything stopped; logs in %s\n", c.LogDir)
		}
	})
}

func stopProc(p *proc) {
	pgid := p.cmd.Process.Pid
	if !p.exited() {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.done
		}
	}
	// Whatever else is left in its group (a plugin process restarted while the
	// controller shut down).
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// freePort is a TCP port free on 127.0.0.1 right now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// freePorts is n TCP ports free on 127.0.0.1 right now.
func freePorts(n int) ([]int, error) {
	out := make([]int, n)
	for i := range out {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

// waitHealthy polls url until it answers 200 or the process exits.
func waitHealthy(p *proc, url string, timeout time.Duration) error {
	client := &http.Client{
		Timeout: 2 * time.Second,
		// The components' self-signed serving certificates, on loopback.
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}
	deadline := time.Now().Add(timeout)
	last := "no answer yet"
	for {
		if p.exited() {
			return fmt.Errorf("%s exited: %v; last lines of %s:\n%s", p.name, p.err, p.logPath, tail(p.logPath, 20))
		}
		resp, err := client.Get(url)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(body))
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not healthy at %s within %s: %s; last lines of %s:\n%s", p.name, url, timeout, last, p.logPath, tail(p.logPath, 20))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// LineWriter is an io.Writer that hands every complete line written to it,
// without its newline, to a function. Output arriving in arbitrary chunks
// from several goroutines stays whole, one line at a time.
type LineWriter struct {
	mu   sync.Mutex
	buf  []byte
	line func(string)
}

// NewLineWriter returns a LineWriter calling line for every line.
func NewLineWriter(line func(string)) *LineWriter { return &LineWriter{line: line} }

func (w *LineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		w.line(line)
	}
	if len(w.buf) > 1<<20 { // a runaway line without newline
		w.buf = nil
	}
	return len(p), nil
}

// LineCatcher is an io.Writer that keeps the lines containing one of its
// phrases, with the time each arrived.
type LineCatcher struct {
	*LineWriter
	phrases []string
	mu      sync.Mutex
	lines   []Line
}

// Line is a line a LineCatcher kept.
type Line struct {
	At   time.Time
	Text string
}

// NewLineCatcher returns a LineCatcher for the phrases (matched ignoring case).
func NewLineCatcher(phrases ...string) *LineCatcher {
	for i := range phrases {
		phrases[i] = strings.ToLower(phrases[i])
	}
	l := &LineCatcher{phrases: phrases}
	l.LineWriter = NewLineWriter(l.keep)
	return l
}

func (l *LineCatcher) keep(line string) {
	at := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	lower := strings.ToLower(line)
	for _, ph := range l.phrases {
		if strings.Contains(lower, ph) && len(l.lines) < 100000 {
			l.lines = append(l.lines, Line{At: at, Text: line})
			return
		}
	}
}

// PluginError marks an error the plugin logged, in the controller's log: the
// plugin writes hclog entries, which the controller's go-plugin client logs
// at their level ("[ERROR]  plugin.<binary>: <message>: <fields>"); the
// controller's own errors are logrus lines, "level=error".
const PluginError = "[ERROR]"

// Errors returns the kept error lines (at most the last n of each kind, the
// controller's and the plugin's) that contain every one of the words.
func (l *LineCatcher) Errors(n int, words ...string) []string {
	return append(l.Find(n, append([]string{"level=error"}, words...)...), l.Find(n, append([]string{PluginError}, words...)...)...)
}

// Find returns the kept lines (at most the last n) that contain every one of the words.
func (l *LineCatcher) Find(n int, words ...string) []string {
	var out []string
	for _, line := range l.FindLines(n, words...) {
		out = append(out, line.Text)
	}
	return out
}

// FindLines is Find with the time each line arrived.
func (l *LineCatcher) FindLines(n int, words ...string) []Line {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Line
	for _, line := range l.lines {
		all := true
		for _, w := range words {
			if !strings.Contains(strings.ToLower(line.Text), strings.ToLower(w)) {
				all = false
				break
			}
		}
		if all {
			out = append(out, line)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}
