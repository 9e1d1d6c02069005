package harness

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	rolloutsrpc "github.com/argoproj/argo-rollouts/rollout/trafficrouting/plugin/rpc"
	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
)

// BuildPlugin builds the plugin binary into dir and returns its path.
func BuildPlugin(dir string) (string, error) {
	bin := filepath.Join(dir, "rollouts-gatewayapi-ssa")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
}

// BuildInstrumentedPlugin builds the plugin with the race detector and the
// faultinject build tag (a route annotation can make it panic, see
// orchestrator/faults_on.go) into dir. It needs cgo; the first build compiles every
// dependency with the race detector (minutes on 2 cores; cached after).
func BuildInstrumentedPlugin(dir string) (string, error) {
	bin := filepath.Join(dir, "rollouts-gatewayapi-ssa-race")
	cmd := exec.Command("go", "build", "-race", "-tags", "faultinject", "-o", bin, ".")
	cmd.Dir = RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build -race -tags faultinject: %w\n%s", err, out)
	}
	return bin, nil
}

// PluginProcess is the plugin binary running under a go-plugin client, as the
// Argo Rollouts controller runs it.
type PluginProcess struct {
	client *goplugin.Client
	Plugin rolloutsrpc.TrafficRouterPlugin
}

// StartPlugin starts the binary with the kubeconfig in its environment, and
// POD_NAMESPACE as the controller has it (ControllerNamespace, or a view's
// own, Cluster.Own; unless the test's environment sets one), and dispenses
// the traffic router over RPC.
// logs receives the plugin's stderr, as text (-logformat=text unless args
// say otherwise), the lines the tests look for.
func StartPlugin(bin, kubeconfig string, logs io.Writer, args ...string) (*PluginProcess, error) {
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(strings.TrimLeft(a, "-"), "logformat") }) {
		args = append([]string{"-logformat=text"}, args...)
	}
	// The text lines are passed through as they are (Stderr); the logger,
	// which go-plugin logs them to at DEBUG, shows only what is above.
	return StartPluginLogged(bin, kubeconfig, logs, hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info, Name: "plugin"}), args...)
}

// StartPluginLogged is StartPlugin with the go-plugin client's logger, to
// which go-plugin logs each line of the plugin's stderr as the controller's
// client does, and no -logformat of its own.
func StartPluginLogged(bin, kubeconfig string, stderr io.Writer, logger hclog.Logger, args ...string) (*PluginProcess, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	if os.Getenv("POD_NAMESPACE") == "" {
		cmd.Env = append(cmd.Env, "POD_NAMESPACE="+peersNamespaceFor(kubeconfig))
	}
	client := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig: goplugin.HandshakeConfig{
			ProtocolVersion:  1,
			MagicCookieKey:   "ARGO_ROLLOUTS_RPC_PLUGIN",
			MagicCookieValue: "trafficrouter",
		},
		Plugins: map[string]goplugin.Plugin{"RpcTrafficRouterPlugin": &rolloutsrpc.RpcTrafficRouterPlugin{}},
		Cmd:     cmd,
		Stderr:  stderr,
		Logger:  logger,
	})
	rpcClient, err := client.Client()
	if err != nil {
		client.Kill()
		return nil, fmt.Errorf("starting the plugin: %w", err)
	}
	raw, err := rpcClient.Dispense("RpcTrafficRouterPlugin")
	if err != nil {
		client.Kill()
		return nil, fmt.Errorf("dispensing RpcTrafficRouterPlugin: %w", err)
	}
	p, ok := raw.(rolloutsrpc.TrafficRouterPlugin)
	if !ok {
		client.Kill()
		return nil, fmt.Errorf("dispensed %T, not a TrafficRouterPlugin", raw)
	}
	if e := p.InitPlugin(); e.HasError() {
		client.Kill()
		return nil, fmt.Errorf("InitPlugin: %s", e.ErrorString)
	}
	return &PluginProcess{client: client, Plugin: p}, nil
}

// Pid is the plugin process's id.
func (p *PluginProcess) Pid() int { return p.client.ReattachConfig().Pid }

// Stop kills the plugin process.
func (p *PluginProcess) Stop() { p.client.Kill() }
