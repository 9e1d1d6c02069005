package kubeclient

import (
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/dynamic"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gatewayapi-ssa/rollouts-plugin/retry"
)

// Config is the client config of the cluster the plugin runs against:
// in-cluster config, else KUBECONFIG (or ~/.kube/config), else an error
// saying neither is there.
func Config() (*rest.Config, error) {
	cfg, inClusterErr := rest.InClusterConfig()
	if inClusterErr == nil {
		return cfg, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("no Kubernetes client config: not running in a cluster (%v), and KUBECONFIG (%q) gives none: %v",
			inClusterErr, os.Getenv("KUBECONFIG"), err)
	}
	return cfg, nil
}

// ConfigFromFile is the client config a kubeconfig file gives (its current
// context): how the plugin reaches a route cluster.
func ConfigFromFile(path string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// Clients are the plugin's clients of one cluster: the gateway clientset
// (typed applies; its REST client also reads, watches and discovers routes),
// the dynamic client (Services, the release), access reviews and Leases
// (package peers). No client of every built-in API: the plugin uses three
// of them, and the rest would cost memory in every process.
type Clients struct {
	Gateway gateway.Interface
	Dynamic dynamic.Interface
	Reviews authorizationv1.SelfSubjectAccessReviewInterface
	Leases  coordinationv1.LeasesGetter
	// Requests counts every attempt of every request they sent.
	Requests *Requests
}

// NewClients builds the clients for a cluster. They share one token bucket
// (cfg.RateLimiter, or one made from cfg.QPS and cfg.Burst), so the process's
// requests together stay within it, of which the cleanup sweeps' requests
// take at most a quarter (ForSweeps); and one transport that times out and
// retries every request as policy says (transport.go), and counts every
// attempt (Requests).
func NewClients(cfg *rest.Config, policy retry.Requests, log *logrus.Entry) (Clients, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.RateLimiter = newShares(cfg.RateLimiter, cfg.QPS, cfg.Burst)
	limiter := cfg.RateLimiter
	requests := &Requests{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return newTransport(rt, limiter, policy, log, requests) })
	c := Clients{Requests: requests}
	var errs [4]error
	c.Gateway, errs[0] = gateway.NewForConfig(cfg)
	c.Dynamic, errs[1] = dynamic.NewForConfig(cfg)
	authz, err := authorizationv1.NewForConfig(cfg)
	if errs[2] = err; err == nil {
		c.Reviews = authz.SelfSubjectAccessReviews()
	}
	c.Leases, errs[3] = coordinationv1.NewForConfig(cfg)
	if err := errors.Join(errs[:]...); err != nil {
		return Clients{}, fmt.Errorf("building the Kubernetes clients: %w", err)
	}
	return c, nil
}

// tokenBucket is client-go's limiter for qps and burst, with its defaults
// (5 and 10) for zero and no limit for a negative qps.
func tokenBucket(qps float32, burst int) flowcontrol.RateLimiter {
	switch {
	case qps < 0:
		return flowcontrol.NewFakeAlwaysRateLimiter()
	case qps == 0:
		qps = rest.DefaultQPS
	}
	if burst <= 0 {
		burst = rest.DefaultBurst
	}
	return flowcontrol.NewTokenBucketRateLimiter(qps, burst)
}
