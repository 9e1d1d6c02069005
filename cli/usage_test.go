package cli

import (
	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A command the binary does not have: exit status 2, and standard error
// lists the commands it has.
func TestUnknownCommand(t *testing.T) {
	api := kubetest.New(t, midCanaryRoute)
	code, out, errOut := runCLI(t, "undo", "--kubeconfig", api.Kubeconfig, "shop/demo")
	if code != 2 || out != "" {
		t.Errorf("unknown command: exit %d, stdout %q; want 2 and nothing", code, out)
	}
	want := `unknown command "undo"; commands: cleanup, copy, inspect, plan` + "\n"
	if diff := cmp.Diff(want, errOut); diff != "" {
		t.Errorf("unknown command's message (-want +got):\n%s", diff)
	}
	if got := api.Requests(); len(got) > 0 {
		t.Errorf("an unknown command reached the apiserver: %v", got)
	}
}

// Bad usage of a command a person runs by hand: exit status 2, the
// command's usage on standard error (the flags too), nothing on standard
// output, and not one request to the cluster, let alone a write.
func TestBadUsage(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		// usage is how the command's usage begins; then its flags follow.
		usage string
		// before is what comes before the usage: the flag package's word.
		before string
	}{
		"cleanup without a Rollout": {args: []string{"cleanup"},
			usage: "usage: rollouts-gatewayapi-ssa cleanup [flags] NAMESPACE/ROLLOUT\n"},
		"cleanup of a Rollout without its namespace": {args: []string{"cleanup", "demo"},
			usage: "usage: rollouts-gatewayapi-ssa cleanup [flags] NAMESPACE/ROLLOUT\n"},
		"cleanup with an unknown flag": {args: []string{"cleanup", "--dryrun", "shop/demo"},
			before: "flag provided but not defined: -dryrun\n", usage: "usage: rollouts-gatewayapi-ssa cleanup [flags] NAMESPACE/ROLLOUT\n"},
		"inspect without a route": {args: []string{"inspect", "-n", "shop"},
			usage: "usage: rollouts-gatewayapi-ssa inspect KIND/NAME [-n NAMESPACE] [flags]\n"},
		"inspect with an unknown output": {args: []string{"inspect", "httproute/web", "-o", "table"},
			usage: "usage: rollouts-gatewayapi-ssa inspect KIND/NAME [-n NAMESPACE] [flags]\n"},
		"plan without -f": {args: []string{"plan", "-n", "shop"},
			usage: "usage: rollouts-gatewayapi-ssa plan -f ROLLOUT.yaml [--routes FILE [--crds FILE]] [flags]\n"},
		"plan with --crds but no --routes": {args: []string{"plan", "-f", "rollout.yaml", "--crds", "crds.yaml"},
			usage: "usage: rollouts-gatewayapi-ssa plan -f ROLLOUT.yaml [--routes FILE [--crds FILE]] [flags]\n"},
		"plan with a flag without its value": {args: []string{"plan", "-f"},
			before: "flag needs an argument: -f\n", usage: "usage: rollouts-gatewayapi-ssa plan -f ROLLOUT.yaml [--routes FILE [--crds FILE]] [flags]\n"},
	} {
		t.Run(name, func(t *testing.T) {
			api := kubetest.New(t, midCanaryRoute, demoRollout)
			args := slices.Concat(tc.args[:1], []string{"--kubeconfig", api.Kubeconfig}, tc.args[1:])
			code, out, errOut := runCLI(t, args...)
			if code != 2 || out != "" {
				t.Errorf("exit %d, stdout %q; want 2 and nothing", code, out)
			}
			before, usage, ok := strings.Cut(errOut, "usage: ")
			if !ok {
				t.Fatalf("no usage on standard error:\n%s", errOut)
			}
			usage = "usage: " + usage
			if diff := cmp.Diff(tc.before, before); diff != "" {
				t.Errorf("before the usage (-want +got):\n%s", diff)
			}
			if !strings.HasPrefix(usage, tc.usage) || !strings.Contains(usage, "\nflags:\n") || !strings.Contains(usage, "-kubeconfig string") {
				t.Errorf("the usage does not begin with %q and list the flags:\n%s", tc.usage, usage)
			}
			if got := api.Requests(); len(got) > 0 {
				t.Errorf("bad usage reached the apiserver: %v", got)
			}
		})
	}
}

// A route argument that is not KIND/NAME: exit status 2, and the error says
// which kinds there are.
func TestInspectOfSomethingThatIsNotARoute(t *testing.T) {
	api := kubetest.New(t, midCanaryRoute)
	code, out, errOut := runCLI(t, "inspect", "--kubeconfig", api.Kubeconfig, "service/web")
	if code != 2 || out != "" {
		t.Errorf("exit %d, stdout %q; want 2 and nothing", code, out)
	}
	want := `"service/web" is not KIND/NAME with KIND one of httproute, grpcroute, tcproute, tlsroute, udproute` + "\n"
	if diff := cmp.Diff(want, errOut); diff != "" {
		t.Errorf("the error (-want +got):\n%s", diff)
	}
	if got := api.Requests(); len(got) > 0 {
		t.Errorf("bad usage reached the apiserver: %v", got)
	}
}
