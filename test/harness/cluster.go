package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	"sigs.k8s.io/yaml"
)

// Channel is a set of Gateway API CRDs to install.
type Channel string

const (
	// Standard is Gateway API v1.6.3's standard channel: TCPRoute, TLSRoute
	// and UDPRoute as v1 only.
	Standard Channel = "standard"
	// Experimental is v1.6.3's experimental channel.
	Experimental Channel = "experimental"
	// V1Alpha2Only is a cluster as older Gateway API installs left it: TCPRoute,
	// TLSRoute and UDPRoute served only as v1alpha2 (the experimental CRDs with
	// every other version removed).
	V1Alpha2Only Channel = "v1alpha2-only"
)

// ControllerNamespace is the Argo Rollouts controller's namespace in every
// cluster Start brings up: the plugins StartPlugin starts keep their Leases
// there (POD_NAMESPACE), as they do under the controller.
const ControllerNamespace = "argo-rollouts"

// Cluster is a running control plane.
type Cluster struct {
	Env     *envtest.Environment
	Config  *rest.Config
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	Gateway gateway.Interface
	// Recorder sits between the plugin and the apiserver.
	Recorder *Recorder
	// Kubeconfig is a file that points at the Recorder; give it to the plugin.
	Kubeconfig string
	// GatewayCRDs are the Gateway API CRDs installed, as read.
	GatewayCRDs []*apiextensionsv1.CustomResourceDefinition
	dir         string
	// restarted are the kube-apiservers RestartAPIServer started.
	restarted []*exec.Cmd
}

// RepoRoot is the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// assets returns KUBEBUILDER_ASSETS, building the binaries if needed.
func assets() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	cmd := exec.Command("bash", filepath.Join(RepoRoot(), "hack", "envtest-assets.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/envtest-assets.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Start brings up etcd, kube-apiserver and the recording proxy, and installs
// the channel's route CRDs.
func Start(ch Channel) (*Cluster, error) {
	crds, err := CRDs(ch)
	if err != nil {
		return nil, err
	}
	return start(crds)
}

// start is Start with the given Gateway API CRDs, and more CRDs besides.
func start(crds []*apiextensionsv1.CustomResourceDefinition, more ...*apiextensionsv1.CustomResourceDefinition) (*Cluster, error) {
	dir, err := assets()
	if err != nil {
		return nil, err
	}
	gatewayCRDs := crds
	rollouts, err := RolloutsCRDs()
	if err != nil {
		return nil, err
	}
	crds = slices.Concat(crds, rollouts, more)
	ctrllog.SetLogger(logr.Discard())
	env := &envtest.Environment{
		BinaryAssetsDirectory: dir,
		CRDs:                  crds,
		ErrorIfCRDPathMissing: true,
	}
	// Every test namespace holds Services: envtest's default range (a /24)
	// runs out of ClusterIPs within one run.
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.96.0.0/16")
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest (assets in %s): %w", dir, err)
	}
	c := &Cluster{Env: env, Config: cfg, GatewayCRDs: gatewayCRDs}
	if c.dir, err = os.MkdirTemp("", "gatewayapi-ssa-cluster-"); err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	c.Kube = kubernetes.NewForConfigOrDie(cfg)
	c.Dynamic = dynamic.NewForConfigOrDie(cfg)
	c.Gateway = gateway.NewForConfigOrDie(cfg)
	// The controller's namespace, where the plugin's processes keep their
	// Leases (POD_NAMESPACE, StartPlugin).
	if _, err := c.Kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ControllerNamespace}}, metav1.CreateOptions{}); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	if c.Recorder, err = NewRecorder(cfg); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	c.Kubeconfig = filepath.Join(c.dir, "kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, []byte(kubeconfigFor(c.Recorder.URL)), 0o600); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return c, nil
}

// Stop stops everything Start started.
func (c *Cluster) Stop() error {
	if c.Recorder != nil {
		c.Recorder.Close()
	}
	for _, cmd := range c.restarted {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if c.dir != "" {
		os.RemoveAll(c.dir)
	}
	return c.Env.Stop()
}

func kubeconfigFor(server string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: envtest
  cluster:
    server: %s
users:
- name: plugin
contexts:
- name: envtest
  context: {cluster: envtest, user: plugin}
current-context: envtest
`, server)
}

// ModuleDir is a dependency's directory in the module cache.
func ModuleDir(module string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating %s: %w", module, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// RolloutsCRDs reads Argo Rollouts' CRDs (Rollout, Experiment, analysis), so
// documented Rollouts can be applied and checked against their schema.
func RolloutsCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	dir, err := ModuleDir("github.com/argoproj/argo-rollouts")
	if err != nil {
		return nil, err
	}
	return readCRDFiles(filepath.Join(dir, "manifests", "crds", "*-crd.yaml"))
}

func readCRDFiles(pattern string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no CRDs match %s: %v", pattern, err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		crds, err := decodeCRDs(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, crds...)
	}
	return out, nil
}

// CRDs reads the Gateway API CRDs of a channel.
func CRDs(ch Channel) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	dir, err := ModuleDir("sigs.k8s.io/gateway-api")
	if err != nil {
		return nil, err
	}
	sub := string(ch)
	if ch == V1Alpha2Only {
		sub = string(Experimental)
	}
	out, err := readCRDFiles(filepath.Join(dir, "config", "crd", sub, "gateway.networking.k8s.io_*.yaml"))
	if err != nil {
		return nil, err
	}
	if ch == V1Alpha2Only {
		for _, crd := range out {
			switch crd.Spec.Names.Kind {
			case "TCPRoute", "TLSRoute", "UDPRoute":
				onlyVersion(crd, "v1alpha2")
			}
		}
	}
	return out, nil
}

func onlyVersion(crd *apiextensionsv1.CustomResourceDefinition, version string) {
	var keep []apiextensionsv1.CustomResourceDefinitionVersion
	for _, v := range crd.Spec.Versions {
		if v.Name == version {
			v.Served, v.Storage, v.Deprecated, v.DeprecationWarning = true, true, false, nil
			keep = append(keep, v)
		}
	}
	crd.Spec.Versions = keep
}

func decodeCRDs(data []byte) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var out []*apiextensionsv1.CustomResourceDefinition
	dec := utilyaml.NewYAMLReader(bufioReader(data))
	for {
		doc, err := dec.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(doc, &crd); err != nil {
			return nil, err
		}
		if crd.Kind == "CustomResourceDefinition" {
			out = append(out, &crd)
		}
	}
}

func bufioReader(data []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(data)) }

// Own returns a view of the cluster for one test: the same apiserver and
// clients, with a recorder and a kubeconfig of its own, so that the
// requests a test looks at, its hooks and its faults are its alone and tests
// can run in parallel. close stops the recorder. RestartAPIServer and
// StopAPIServer are for c itself: a view does not keep the processes they
// start.
//
// The plugins started with the view's kubeconfig keep their Leases (package
// peers) in a namespace of the view's, not in ControllerNamespace: processes
// of one field manager in one namespace wait for each other's
// acknowledgement and write with resourceVersions, which would make every
// test's plugin a peer of every other test's running beside it.
func (c *Cluster) Own() (view *Cluster, close func(), err error) {
	peers := fmt.Sprintf("%s-%d", ControllerNamespace, views.Add(1))
	if _, err := c.Kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: peers}}, metav1.CreateOptions{}); err != nil {
		return nil, nil, err
	}
	rec, err := NewRecorder(c.Config)
	if err != nil {
		return nil, nil, err
	}
	path, err := writeKubeconfig(c.dir, "kubeconfig-own-", rec.URL)
	if err != nil {
		rec.Close()
		return nil, nil, err
	}
	peersNamespaces.Store(path, peers)
	v := *c
	v.Recorder, v.Kubeconfig, v.restarted = rec, path, nil
	return &v, func() { rec.Close(); peersNamespaces.Delete(path); _ = os.Remove(path) }, nil
}

// views numbers the namespaces of the views' plugins' Leases.
var views atomic.Int32

// peersNamespaces maps a view's kubeconfig to the namespace of the Leases
// of the plugins started with it (StartPlugin's POD_NAMESPACE).
var peersNamespaces sync.Map

// peersNamespaceFor is the POD_NAMESPACE of a plugin started with kubeconfig.
func peersNamespaceFor(kubeconfig string) string {
	if ns, ok := peersNamespaces.Load(kubeconfig); ok {
		return ns.(string)
	}
	return ControllerNamespace
}

// writeKubeconfig writes a kubeconfig for server into a new file in dir
// whose name starts with prefix: a file of its own, as tests in parallel may
// ask for the same user's kubeconfig.
func writeKubeconfig(dir, prefix, server string) (string, error) {
	f, err := os.CreateTemp(dir, prefix+"*")
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(kubeconfigFor(server))
	return f.Name(), errors.Join(err, f.Close())
}

// usersMu serialises envtest's AddUser, which is not documented as safe
// for concurrent use.
var usersMu sync.Mutex

// KubeconfigAs returns a kubeconfig for a plugin that talks to the cluster as
// user (through a recorder of its own) and that recorder; RBAC applies to it.
func (c *Cluster) KubeconfigAs(user string) (string, *Recorder, error) {
	usersMu.Lock()
	u, err := c.Env.AddUser(envtest.User{Name: user}, nil)
	usersMu.Unlock()
	if err != nil {
		return "", nil, err
	}
	rec, err := NewRecorder(u.Config())
	if err != nil {
		return "", nil, err
	}
	// KUBECONFIG is a list separated by ':', which a ServiceAccount's user name holds.
	path, err := writeKubeconfig(c.dir, "kubeconfig-"+strings.ReplaceAll(user, ":", "_")+"-", rec.URL)
	if err != nil {
		rec.Close()
		return "", nil, err
	}
	return path, rec, nil
}

// KubeconfigForServiceAccount returns a kubeconfig for a plugin that talks to
// the cluster with a token of ServiceAccount namespace/name (through a
// recorder of its own) and that recorder: RBAC applies to it as it does to
// the controller's ServiceAccount in a cluster.
func (c *Cluster) KubeconfigForServiceAccount(namespace, name string) (string, *Recorder, error) {
	ctx := context.Background()
	seconds := int64(3600)
	tok, err := c.Kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	if err != nil {
		return "", nil, fmt.Errorf("token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	cfg := &rest.Config{Host: c.Config.Host, BearerToken: tok.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: c.Config.CAData}}
	rec, err := NewRecorder(cfg)
	if err != nil {
		return "", nil, err
	}
	path, err := writeKubeconfig(c.dir, "kubeconfig-sa-"+namespace+"-"+name+"-", rec.URL)
	if err != nil {
		rec.Close()
		return "", nil, err
	}
	return path, rec, nil
}

// ArgoCDVersion is the Argo CD release whose CRDs documented Applications are
// checked against.
const ArgoCDVersion = "v3.1.8"

// FluxKustomizeVersion is the kustomize-controller release whose CRD
// documented Flux Kustomizations are checked against.
const FluxKustomizeVersion = "v1.9.4"

// ArgoCDCRDs fetches Argo CD's CRDs (Application, AppProject, ApplicationSet).
func ArgoCDCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return publishedCRDs("github.com/argoproj/argo-cd/v3@"+ArgoCDVersion, "manifests/crds/*-crd.yaml")
}

// FluxCRDs fetches kustomize-controller's CRD (Kustomization).
func FluxCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return publishedCRDs("github.com/fluxcd/kustomize-controller@"+FluxKustomizeVersion, "config/crd/bases/*.yaml")
}

// PrometheusOperatorVersion is the Prometheus Operator release whose CRDs
// documented PodMonitors and PrometheusRules are checked against.
const PrometheusOperatorVersion = "v0.85.0"

// PrometheusOperatorCRDs fetches the Prometheus Operator's PodMonitor and
// PrometheusRule CRDs (docs/metrics.md), not the others: the Prometheus
// and Alertmanager CRDs are megabytes the docs do not need.
func PrometheusOperatorCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, resource := range []string{"podmonitors", "prometheusrules"} {
		crds, err := publishedCRDs("github.com/prometheus-operator/prometheus-operator@"+PrometheusOperatorVersion,
			"example/prometheus-operator-crd/monitoring.coreos.com_"+resource+".yaml")
		if err != nil {
			return nil, err
		}
		out = append(out, crds...)
	}
	return out, nil
}

// publishedCRDs reads the CRDs matching pattern in a module fetched from the
// Go module proxy.
func publishedCRDs(moduleAtVersion, pattern string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	m, err := download(moduleAtVersion)
	if err != nil {
		return nil, err
	}
	if m.Dir == "" {
		return nil, fmt.Errorf("go mod download %s: no directory: %s", moduleAtVersion, m.Error)
	}
	return readCRDFiles(filepath.Join(m.Dir, filepath.FromSlash(pattern)))
}

// downloaded is what go mod download -json says of a module.
type downloaded struct {
	Dir, Zip, Error string
}

// download fetches a module into the module cache (from the Go module proxy
// unless it is there), in a throwaway module so go.mod is not touched. A
// module that needs a newer Go than this one is still downloaded: the go
// command reports the error but names the module's zip (no Dir), which is
// what the caller reads then. GOTOOLCHAIN=local keeps the go command from
// fetching that newer toolchain instead.
func download(moduleAtVersion string) (downloaded, error) {
	dir, err := os.MkdirTemp("", "published-crds-")
	if err != nil {
		return downloaded{}, err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module publishedcrds\n"), 0o644); err != nil {
		return downloaded{}, err
	}
	cmd := exec.Command("go", "mod", "download", "-json", moduleAtVersion)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, runErr := cmd.Output()
	var m downloaded
	if err := json.Unmarshal(out, &m); err != nil {
		return downloaded{}, fmt.Errorf("go mod download %s: %v (%v) %s", moduleAtVersion, err, runErr, stderr.Bytes())
	}
	if m.Dir == "" && m.Zip == "" {
		return downloaded{}, fmt.Errorf("go mod download %s: neither directory nor zip: %s %s", moduleAtVersion, m.Error, stderr.Bytes())
	}
	return m, nil
}

// RestartAPIServer stops kube-apiserver at once, as a crash or a node going
// down does (etcd keeps running), starts it again with the same binary,
// arguments, certificates and port, and waits until it serves again. It
// returns how long the apiserver was away. Stop stops the new process.
func (c *Cluster) RestartAPIServer() (time.Duration, error) {
	start, err := c.StopAPIServer()
	if err != nil {
		return 0, err
	}
	return start()
}

// StopAPIServer stops kube-apiserver at once, as a crash or a node going
// down does (etcd keeps running). start starts it again with the same
// binary, arguments, certificates and port, waits until it serves again,
// and returns how long the apiserver was away. Stop stops the new process.
func (c *Cluster) StopAPIServer() (start func() (time.Duration, error), err error) {
	u, err := url.Parse(c.Config.Host)
	if err != nil {
		return nil, err
	}
	pid, args, env, err := findProcess("kube-apiserver", "--secure-port="+u.Port())
	if err != nil {
		return nil, err
	}
	stopped := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return nil, fmt.Errorf("stopping kube-apiserver (pid %d): %w", pid, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("kube-apiserver (pid %d) did not stop", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return func() (time.Duration, error) {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return 0, fmt.Errorf("starting kube-apiserver again: %w", err)
		}
		c.restarted = append(c.restarted, cmd)
		go func() { _ = cmd.Wait() }()
		for deadline := time.Now().Add(60 * time.Second); ; {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			cancel()
			if err == nil {
				return time.Since(stopped), nil
			}
			if time.Now().After(deadline) {
				return 0, fmt.Errorf("kube-apiserver did not serve again within a minute: %w", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}, nil
}

// findProcess finds the process whose command line holds name and arg, and
// returns its pid, arguments and environment.
func findProcess(name, arg string) (int, []string, []string, error) {
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return 0, nil, nil, err
	}
	for _, d := range dirs {
		raw, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !bytes.Contains(raw, []byte(name)) || !bytes.Contains(raw, []byte(arg)) {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if filepath.Base(args[0]) != name {
			continue
		}
		envRaw, err := os.ReadFile(filepath.Join(d, "environ"))
		if err != nil {
			return 0, nil, nil, err
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		return pid, args, strings.Split(strings.TrimRight(string(envRaw), "\x00"), "\x00"), nil
	}
	return 0, nil, nil, fmt.Errorf("no %s process with %s", name, arg)
}
