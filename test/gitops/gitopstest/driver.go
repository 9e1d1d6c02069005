package gitopstest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RepoRoot is the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// Driver is the plugin's side: test/gitops/driver running a control plane and
// the real plugin binary over go-plugin RPC.
type Driver struct {
	// Config is an admin client config for the control plane.
	Config *rest.Config
	// Dynamic is a client with that config.
	Dynamic dynamic.Interface
	// FieldManager is the plugin's server-side apply field manager.
	FieldManager string

	cmd *exec.Cmd
	in  *json.Encoder
	out *bufio.Scanner
}

// StartDriver builds and starts test/gitops/driver (it stops when the test
// ends). The driver's own log and the plugin's go to the test log.
func StartDriver(t *testing.T) *Driver {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "driver")
	// The driver (and the plugin it builds) belong to the root module, built
	// with the machine's Go whatever this module's settings are (the Flux
	// v1.10 build runs under GOTOOLCHAIN=go1.27.3): the build cache of
	// `make test` serves them.
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local")
	build := exec.Command("go", "build", "-o", bin, "./test/gitops/driver")
	build.Dir = RepoRoot()
	build.Env = env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building test/gitops/driver: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.Dir = RepoRoot()
	cmd.Env = env
	cmd.Stderr = testLog{t}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &Driver{cmd: cmd, in: json.NewEncoder(stdin), out: bufio.NewScanner(stdout)}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	var ready struct{ Kubeconfig, FieldManager string }
	if err := d.read(&ready); err != nil {
		t.Fatalf("test/gitops/driver did not start: %v", err)
	}
	d.FieldManager = ready.FieldManager
	if d.Config, err = clientcmd.BuildConfigFromFlags("", ready.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	d.Config.QPS, d.Config.Burst = 100, 200
	d.Dynamic = dynamic.NewForConfigOrDie(d.Config)
	return d
}

func (d *Driver) read(v any) error {
	if !d.out.Scan() {
		if err := d.out.Err(); err != nil {
			return err
		}
		return fmt.Errorf("the driver exited (its log is above)")
	}
	return json.Unmarshal(d.out.Bytes(), v)
}

// SetWeight is the controller's SetWeight call for Rollout "web" in ns, whose
// plugin config names the route of kind k; it returns the plugin's error
// text, "" for none.
func (d *Driver) SetWeight(t *testing.T, ns string, k Kind, weight int32) string {
	t.Helper()
	call := map[string]any{
		"rollout": RouteName, "namespace": ns, "setWeight": weight,
		"config": map[string]string{k.ConfigKey: RouteName},
	}
	if err := d.in.Encode(call); err != nil {
		t.Fatalf("SetWeight(%d) on %s %s/%s: %v", weight, k.Kind, ns, RouteName, err)
	}
	var answer struct{ Error string }
	if err := d.read(&answer); err != nil {
		t.Fatalf("SetWeight(%d) on %s %s/%s: %v", weight, k.Kind, ns, RouteName, err)
	}
	return answer.Error
}

type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.t.Log(line)
	}
	return len(p), nil
}
