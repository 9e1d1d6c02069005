package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
	"github.com/gatewayapi-ssa/rollouts-plugin/ssa"
)

// command is one subcommand.
type command struct {
	summary string
	run     func(args []string, out, errOut io.Writer) int
}

var commands = map[string]command{
	"cleanup": {"undo a deleted Rollout's claims on its routes", runCleanup},
	"copy":    {"copy this binary to a file, as the image's initContainer installs the plugin", runCopy},
	"plan":    {"show and check every step of a Rollout before it runs", runPlan},
	"inspect": {"explain what the plugin holds on a route", runInspect},
}

// Is says whether arg names a command (rather than a flag of the plugin).
func Is(arg string) bool {
	_, ok := commands[arg]
	return ok
}

// Run runs the command args[0] with the rest of args and returns the exit
// status: 0 done, 1 a problem it reports, 2 bad usage.
func Run(args []string, out, errOut io.Writer) int {
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(errOut, "unknown command %q; commands: %s\n", args[0], strings.Join(names(), ", "))
		return 2
	}
	return c.run(args[1:], out, errOut)
}

func names() []string {
	var out []string
	for n := range commands {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// connection holds kubectl's flags for reaching a cluster.
type connection struct {
	kubeconfig, context, namespace string
}

func (c *connection) register(fs *flag.FlagSet) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	fs.StringVar(&c.context, "context", "", "the kubeconfig context to use")
	fs.StringVar(&c.namespace, "n", "", "namespace of the routes (default: all)")
	fs.StringVar(&c.namespace, "namespace", "", "namespace of the routes (default: all)")
}

func (c *connection) config() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if c.kubeconfig != "" {
		rules.ExplicitPath = c.kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("no Kubernetes client config: %w", err)
	}
	cfg.UserAgent = "rollouts-gatewayapi-ssa-cli"
	return cfg, nil
}

func (c *connection) dynamic() (dynamic.Interface, *rest.Config, error) {
	cfg, err := c.config()
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	return dyn, cfg, err
}

// commandFlags are the flags every command takes: kubectl's connection
// flags, the plugin's field manager, and its route clusters.
type commandFlags struct {
	*flag.FlagSet
	conn          connection
	fieldManager  string
	routeClusters RouteClusterFlags
	// cluster is the route cluster the command's routes are in (--cluster;
	// inspect and cleanup), "" for the kubeconfig's own.
	cluster string
}

func newFlags(name, usage string, errOut io.Writer) *commandFlags {
	f := &commandFlags{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError)}
	f.SetOutput(errOut)
	f.conn.register(f.FlagSet)
	f.StringVar(&f.fieldManager, "field-manager", ssa.DefaultFieldManager, "the field manager the plugin writes with (its -field-manager)")
	f.routeClusters.Register(f.FlagSet)
	f.Usage = func() { fmt.Fprint(errOut, usage); f.PrintDefaults() }
	return f
}

// selectCluster adds --cluster: the command's routes are in that route
// cluster.
func (f *commandFlags) selectCluster() {
	f.StringVar(&f.cluster, "cluster", "", "the route cluster (one of --route-cluster, as the plugin is given them) that holds the routes; default: the kubeconfig's cluster")
}

// routeCluster is the route cluster --cluster names, nil when none.
func (f *commandFlags) routeCluster() (*rollout.RouteCluster, error) {
	if f.cluster == "" {
		return nil, nil
	}
	clusters, err := f.routeClusters.RouteClusters()
	if err != nil {
		return nil, err
	}
	var names []string
	for i, c := range clusters {
		if c.Name == f.cluster {
			return &clusters[i], nil
		}
		names = append(names, c.Name)
	}
	return nil, fmt.Errorf("--cluster %s: no --route-cluster is named %s (given: %s); give the plugin's -route-cluster and -route-namespaces values",
		f.cluster, f.cluster, strings.Join(names, ", "))
}

// routesConnection is how the command reaches the routes: the route
// cluster's kubeconfig, or the command's own connection.
func (f *commandFlags) routesConnection(rc *rollout.RouteCluster) *connection {
	if rc == nil {
		return &f.conn
	}
	return &connection{kubeconfig: rc.Kubeconfig, namespace: f.conn.namespace}
}

// encode writes v as JSON or YAML.
func encode(out io.Writer, format string, v any) error {
	if format == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	data, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	_, err = out.Write(data)
	return err
}

// quietLog is the log of a command: warnings and errors, to stderr.
func quietLog() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(os.Stderr)
	l.SetLevel(logrus.WarnLevel)
	return logrus.NewEntry(l)
}

func bufioReader(data []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(data)) }
