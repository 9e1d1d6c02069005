package harness

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// Namespace creates namespace name holding one Service per name in services,
// each selecting app=<its name> on port http 80.
func (c *Cluster) Namespace(name string, services ...string) error {
	ctx := context.Background()
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	for _, svc := range services {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svc, Namespace: name}, Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": svc},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		}}
		if _, err := c.Kube.CoreV1().Services(name).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Service %s/%s: %w", name, svc, err)
		}
	}
	return nil
}

// CreateYAML creates the object of a YAML manifest in namespace ns as
// `kubectl create` does (an Update by manager kubectl-create) and returns it
// as stored, server defaults included. The resource is the kind's lower-case
// plural, as for every Gateway API route.
func (c *Cluster) CreateYAML(ns, manifest string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		return nil, fmt.Errorf("bad manifest: %w\n%s", err, manifest)
	}
	u.SetNamespace(ns)
	gvr := u.GroupVersionKind().GroupVersion().WithResource(strings.ToLower(u.GetKind()) + "s")
	out, err := c.Dynamic.Resource(gvr).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{FieldManager: "kubectl-create"})
	if err != nil {
		return nil, fmt.Errorf("creating %s %s/%s: %w", u.GetKind(), ns, u.GetName(), err)
	}
	return out, nil
}
