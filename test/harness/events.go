package harness

import (
	"context"
	"slices"
	"strings"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// PluginEvents are the Events the plugin (reportingController: its field
// manager, manager) recorded in ns about the object of kind and name
// (about any object when kind is ""), oldest first.
func PluginEvents(ctx context.Context, kube kubernetes.Interface, manager, ns, kind, name string) ([]eventsv1.Event, error) {
	list, err := kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.ReportingController == manager && (kind == "" || e.Regarding.Kind == kind && e.Regarding.Name == name) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b eventsv1.Event) int {
		if c := a.EventTime.Time.Compare(b.EventTime.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}
