//go:build e2e

package e2e

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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// Names the cluster is set up with.
const (
	rolloutsNamespace = "argo-rollouts"
	// pluginName is the name Rollouts use under trafficRouting.plugins; the
	// plugin reads its config under the same name by default.
	pluginName = "argoproj-labs/gatewayAPI"
	nodeName   = "kwok-node-0"
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

// cluster is a Kubernetes cluster made of local processes: etcd and
// kube-apiserver (envtest), kube-controller-manager, kube-scheduler, kwok with
// one fake Node, and the Argo Rollouts controller running the plugin binary.
type cluster struct {
	dir        string // everything of this run
	logDir     string // one log file per process
	kubeconfig string // admin kubeconfig the processes use
	plugin     string // the plugin binary the controller loads
	cfg        *rest.Config
	kube       kubernetes.Interface
	dyn        dynamic.Interface
	env        *envtest.Environment
	// controllerLog keeps the controller's (and the plugin's) log lines that
	// report errors or say "not supported".
	controllerLog *lineCatcher

	mu       sync.Mutex
	procs    []*proc
	timings  []timing
	stopOnce sync.Once
	logs     []*os.File
}

func (c *cluster) measure(what string, since time.Time) {
	d := time.Since(since)
	c.mu.Lock()
	c.timings = append(c.timings, timing{what, d})
	c.mu.Unlock()
	fmt.Printf("e2e: %-58s %6.1fs\n", what, d.Seconds())
}

func (c *cluster) openLog(name string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(c.logDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.logs = append(c.logs, f)
	c.mu.Unlock()
	return f, nil
}

// startCluster brings everything up. On error the returned cluster holds
// whatever was started; stop it.
func startCluster() (c *cluster, err error) {
	c = &cluster{controllerLog: newLineCatcher("not supported", "level=error")}
	if c.dir = os.Getenv("E2E_DIR"); c.dir == "" {
		if c.dir, err = os.MkdirTemp("", "rollouts-gatewayapi-ssa-e2e-"); err != nil {
			return c, err
		}
	}
	c.logDir = filepath.Join(c.dir, "logs")
	if err := os.MkdirAll(c.logDir, 0o755); err != nil {
		return c, err
	}
	fmt.Printf("e2e: logs of every process in %s\n", c.logDir)

	// Binaries: cached outside the repository, built from the Go module proxy when missing.
	t0 := time.Now()
	envtestAssets, err := script("hack/envtest-assets.sh")
	if err != nil {
		return c, err
	}
	c.measure("binaries: kube-apiserver, etcd (hack/envtest-assets.sh)", t0)
	t0 = time.Now()
	assets, err := script("hack/e2e-assets.sh")
	if err != nil {
		return c, err
	}
	c.measure("binaries: kcm, scheduler, kwok, controller (e2e-assets)", t0)
	t0 = time.Now()
	if c.plugin, err = harness.BuildPlugin(filepath.Join(c.dir, "bin")); err != nil {
		return c, err
	}
	c.measure("binary: the plugin (harness.BuildPlugin)", t0)

	start := time.Now()
	if err := c.startControlPlane(envtestAssets); err != nil {
		return c, err
	}
	c.measure("cluster: etcd + kube-apiserver + CRDs (envtest)", start)

	t0 = time.Now()
	if err := c.startKubeControllers(assets); err != nil {
		return c, err
	}
	c.measure("cluster: kube-controller-manager + kube-scheduler healthy", t0)

	t0 = time.Now()
	if err := c.startKwok(assets); err != nil {
		return c, err
	}
	c.measure("cluster: kwok, Node Ready and schedulable", t0)

	t0 = time.Now()
	if err := c.startRolloutsController(assets); err != nil {
		return c, err
	}
	c.measure("cluster: Argo Rollouts controller healthy", t0)
	c.measure("cluster: total start", start)
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

func (c *cluster) startControlPlane(assets string) error {
	crds, err := harness.CRDs(harness.Standard)
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
	pki := filepath.Join(c.dir, "pki")
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
	c.kubeconfig = filepath.Join(c.dir, "kubeconfig")
	if err := os.WriteFile(c.kubeconfig, kc, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(pki, "serving-ca.crt"), api.SecureServing.CA, 0o644); err != nil {
		return err
	}
	c.cfg = admin.Config()
	c.cfg.QPS, c.cfg.Burst = 200, 400
	c.kube = kubernetes.NewForConfigOrDie(c.cfg)
	c.dyn = dynamic.NewForConfigOrDie(c.cfg)
	return nil
}

func (c *cluster) startKubeControllers(assets string) error {
	pki := filepath.Join(c.dir, "pki")
	kcmPort, err := freePort()
	if err != nil {
		return err
	}
	kubeconfigFlags := []string{
		"--kubeconfig=" + c.kubeconfig,
		"--authentication-kubeconfig=" + c.kubeconfig,
		"--authorization-kubeconfig=" + c.kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
	}
	kcm, err := c.start("kube-controller-manager", filepath.Join(assets, "kube-controller-manager"), append(kubeconfigFlags,
		"--controllers=*",
		"--service-account-private-key-file="+filepath.Join(pki, "sa-signer.key"),
		"--root-ca-file="+filepath.Join(pki, "serving-ca.crt"),
		"--secure-port="+strconv.Itoa(kcmPort),
		"--cert-dir="+filepath.Join(c.dir, "kube-controller-manager"),
	), nil, c.dir, nil)
	if err != nil {
		return err
	}
	schedPort, err := freePort()
	if err != nil {
		return err
	}
	sched, err := c.start("kube-scheduler", filepath.Join(assets, "kube-scheduler"), append(kubeconfigFlags,
		"--secure-port="+strconv.Itoa(schedPort),
		"--cert-dir="+filepath.Join(c.dir, "kube-scheduler"),
	), nil, c.dir, nil)
	if err != nil {
		return err
	}
	if err := waitHealthy(kcm, fmt.Sprintf("https://127.0.0.1:%d/healthz", kcmPort), 90*time.Second); err != nil {
		return err
	}
	return waitHealthy(sched, fmt.Sprintf("https://127.0.0.1:%d/healthz", schedPort), 90*time.Second)
}

func (c *cluster) startKwok(assets string) error {
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
	home := filepath.Join(c.dir, "kwok")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return err
	}
	// HOME keeps kwok from reading ~/.kwok/kwok.yaml; without --node-port or
	// --server-address it serves nothing.
	kwok, err := c.start("kwok", filepath.Join(assets, "kwok"), append([]string{
		"--kubeconfig=" + c.kubeconfig,
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
			Name:        nodeName,
			Annotations: map[string]string{kwokNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{
				"kubernetes.io/hostname": nodeName, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "type": "kwok",
			},
		},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{"cpu": quantity("32"), "memory": quantity("256Gi"), "pods": quantity("110")},
			Capacity:    corev1.ResourceList{"cpu": quantity("32"), "memory": quantity("256Gi"), "pods": quantity("110")},
		},
	}
	if _, err := c.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Node %s: %w", nodeName, err)
	}
	// Ready is kwok's work; the not-ready:NoSchedule taint goes once the
	// node-lifecycle controller has seen it Ready.
	var last string
	for {
		if kwok.exited() {
			return fmt.Errorf("kwok exited: %v (see %s)", kwok.err, kwok.logPath)
		}
		n, err := c.kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
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
			return fmt.Errorf("Node %s not Ready and untainted within 90s: %s", nodeName, last)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func (c *cluster) startRolloutsController(assets string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rolloutsNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// Plugins are read once, at start: the ConfigMap comes first.
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "argo-rollouts-config", Namespace: rolloutsNamespace},
		Data:       map[string]string{"trafficRouterPlugins": fmt.Sprintf("- name: %q\n  location: %q\n", pluginName, "file://"+c.plugin)},
	}
	if _, err := c.kube.CoreV1().ConfigMaps(rolloutsNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return err
	}
	// It copies file:// plugins to ./plugin-bin/<name>: a working directory of its own.
	wd := filepath.Join(c.dir, "rollouts-controller")
	if err := os.MkdirAll(wd, 0o755); err != nil {
		return err
	}
	metricsPort, err := freePort()
	if err != nil {
		return err
	}
	healthzPort, err := freePort()
	if err != nil {
		return err
	}
	ctrl, err := c.start("rollouts-controller", filepath.Join(assets, "rollouts-controller"), []string{
		"--leader-elect=false",
		"--metricsPort=" + strconv.Itoa(metricsPort),
		"--healthzPort=" + strconv.Itoa(healthzPort),
		"--loglevel=info",
	}, []string{"KUBECONFIG=" + c.kubeconfig, "POD_NAMESPACE=" + rolloutsNamespace}, wd, c.controllerLog)
	if err != nil {
		return err
	}
	return waitHealthy(ctrl, fmt.Sprintf("http://127.0.0.1:%d/healthz", healthzPort), 90*time.Second)
}

// start runs a binary in a process group of its own, its output in
// logs/<name>.log (and in extra, if set). Its environment is the test's minus
// anything that would point it at another cluster, plus env.
func (c *cluster) start(name, bin string, args, env []string, dir string, extra io.Writer) (*proc, error) {
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
// settings (the plugin prefers in-cluster config).
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "POD_NAMESPACE":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// dead names the processes that have exited while they should be running.
func (c *cluster) dead() []string {
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

// stop stops the controller first (with the plugin in its process group),
// then every other process in reverse start order, then kube-apiserver and
// etcd. Safe to call more than once and from a signal handler.
func (c *cluster) stop() {
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
		if c.env != nil {
			if err := c.env.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "e2e: stopping etcd and kube-apiserver: %v\n", err)
			}
		}
		c.mu.Lock()
		for _, f := range c.logs {
			f.Close()
		}
		c.mu.Unlock()
		// The binaries (the plugin and the controller's copy of it) go; logs,
		// kubeconfig and PKI stay.
		if c.dir != "" {
			os.RemoveAll(filepath.Join(c.dir, "bin"))
			os.RemoveAll(filepath.Join(c.dir, "rollouts-controller", "plugin-bin"))
		}
		if c.logDir != "" {
			fmt.Printf("e2e: everything stopped; logs in %s\n", c.logDir)
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

// lineCatcher is an io.Writer that keeps the lines containing one of its phrases.
type lineCatcher struct {
	phrases []string
	mu      sync.Mutex
	buf     []byte
	lines   []string
}

func newLineCatcher(phrases ...string) *lineCatcher {
	for i := range phrases {
		phrases[i] = strings.ToLower(phrases[i])
	}
	return &lineCatcher{phrases: phrases}
}

func (l *lineCatcher) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		line := string(l.buf[:i])
		l.buf = l.buf[i+1:]
		lower := strings.ToLower(line)
		for _, ph := range l.phrases {
			if strings.Contains(lower, ph) && len(l.lines) < 100000 {
				l.lines = append(l.lines, line)
				break
			}
		}
	}
	if len(l.buf) > 1<<20 { // a runaway line without newline
		l.buf = nil
	}
	return len(p), nil
}

// find returns the kept lines (at most the last n) that contain every one of the words.
func (l *lineCatcher) find(n int, words ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		all := true
		for _, w := range words {
			if !strings.Contains(strings.ToLower(line), strings.ToLower(w)) {
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
