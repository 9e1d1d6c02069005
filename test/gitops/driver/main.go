// Command driver is the plugin's side of the GitOps test modules
// (test/gitops/argocd, test/gitops/flux). Those modules run Argo CD's and
// Flux's own code, which pin other Kubernetes libraries than this module, so
// they cannot import the harness; they start this command instead.
//
// It starts a control plane (envtest with Gateway API v1.6.3's standard CRDs
// and the Argo Rollouts CRDs), builds the real plugin binary and starts it over
// go-plugin RPC as the Argo Rollouts controller does, and prints one JSON line:
//
//	{"kubeconfig": "<admin kubeconfig>", "fieldManager": "argo-rollouts-gatewayapi"}
//
// Then it reads one call per line on stdin and answers one line each:
//
//	{"rollout": "web", "namespace": "ns", "config": {"tcpRoute": "web"}, "setWeight": 30}
//	{"error": ""}
//
// config is the Rollout's trafficRouting.plugins["argoproj-labs/gatewayAPI"];
// the Rollout's Services are "stable" and "canary". At the end of stdin it
// stops everything. The plugin's log goes to stderr.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

const fieldManager = "argo-rollouts-gatewayapi"

// call is one request from the test module.
type call struct {
	Rollout   string          `json:"rollout"`
	Namespace string          `json:"namespace"`
	Config    json.RawMessage `json:"config"`
	SetWeight int32           `json:"setWeight"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "driver:", err)
		os.Exit(1)
	}
}

func run() error {
	dir, err := os.MkdirTemp("", "gatewayapi-ssa-gitops-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := harness.BuildPlugin(dir)
	if err != nil {
		return err
	}
	c, err := harness.Start(harness.Standard)
	if err != nil {
		return err
	}
	defer c.Stop()
	admin, err := c.Env.AddUser(envtest.User{Name: "gitops-test", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		return err
	}
	adminPath := filepath.Join(dir, "admin.kubeconfig")
	if err := os.WriteFile(adminPath, kubeconfig, 0o600); err != nil {
		return err
	}
	p, err := harness.StartPlugin(bin, c.Kubeconfig, os.Stderr)
	if err != nil {
		return err
	}
	defer p.Stop()

	out := json.NewEncoder(os.Stdout)
	if err := out.Encode(map[string]string{"kubeconfig": adminPath, "fieldManager": fieldManager}); err != nil {
		return err
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var req call
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			return fmt.Errorf("bad call %q: %w", in.Text(), err)
		}
		ro := &v1alpha1.Rollout{
			ObjectMeta: metav1.ObjectMeta{Name: req.Rollout, Namespace: req.Namespace},
			Spec: v1alpha1.RolloutSpec{Strategy: v1alpha1.RolloutStrategy{Canary: &v1alpha1.CanaryStrategy{
				StableService: "stable",
				CanaryService: "canary",
				TrafficRouting: &v1alpha1.RolloutTrafficRouting{
					Plugins: map[string]json.RawMessage{"argoproj-labs/gatewayAPI": req.Config},
				},
			}}},
		}
		answer := p.Plugin.SetWeight(ro, req.SetWeight, nil)
		if err := out.Encode(map[string]string{"error": answer.ErrorString}); err != nil {
			return err
		}
	}
	return in.Err()
}
