package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/gatewayapi-ssa/rollouts-plugin/kubeclient"
)

// Services reads the ports of a Service: those an experiment step's
// backendRefs take (orchestrator.ReadPorts). A Service that does not exist
// is a *MissingServiceError.
type Services interface {
	Ports(ctx context.Context, namespace, name string) ([]corev1.ServicePort, error)
}

// ServicesResource is the core API's Services, as the dynamic client names them.
var ServicesResource = schema.GroupVersionResource{Version: "v1", Resource: "services"}

// DynamicServices reads Services with a dynamic client, with a GET each:
// an experiment's Services are new at its step, so no watch cache would
// hold them yet.
type DynamicServices struct{ Dynamic dynamic.Interface }

// Ports reads the ports of Service namespace/name.
func (s DynamicServices) Ports(ctx context.Context, namespace, name string) ([]corev1.ServicePort, error) {
	u, err := s.Dynamic.Resource(ServicesResource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, &MissingServiceError{Namespace: namespace, Name: name}
	}
	if err != nil {
		return nil, fmt.Errorf("reading Service %s/%s: %w", namespace, name, kubeclient.AsPermissionError(err, "get", "services", namespace))
	}
	var svc corev1.Service
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &svc); err != nil {
		return nil, fmt.Errorf("reading Service %s/%s: %w", namespace, name, err)
	}
	return svc.Spec.Ports, nil
}

// MissingServiceError says a Service a call needs does not exist.
type MissingServiceError struct{ Namespace, Name string }

// Reason is the Event reason of the error (package events).
func (e *MissingServiceError) Reason() string { return "ServiceNotFound" }

func (e *MissingServiceError) Error() string {
	return fmt.Sprintf("Service %s/%s not found; nothing was written", e.Namespace, e.Name)
}
