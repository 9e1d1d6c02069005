package events

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoevents "k8s.io/client-go/tools/events"
)

// The plugin records with its own Recorder, not client-go's tools/events
// (doc.go says why). These scenarios are that reason, run on client-go
// itself: a client-go that changes it fails them, and the choice is to be
// made again.

// memorySink is an Events API in memory, for client-go's broadcaster; hold,
// when set, keeps every request waiting until it is closed.
type memorySink struct {
	mu     sync.Mutex
	events map[string]*eventsv1.Event
	notes  []string
	hold   chan struct{}
	// waiting counts the requests held at once.
	waiting atomic.Int32
}

func (m *memorySink) wait() {
	if m.hold != nil {
		m.waiting.Add(1)
		<-m.hold
	}
}

func (m *memorySink) Create(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	m.wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.events[e.Name]; ok {
		return nil, apierrors.NewAlreadyExists(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, e.Name)
	}
	m.events[e.Name] = e.DeepCopy()
	m.notes = append(m.notes, e.Note)
	return e, nil
}

func (m *memorySink) Update(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return nil, fmt.Errorf("client-go's broadcaster was not expected to update an Event")
}

func (m *memorySink) Patch(_ context.Context, old *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	m.wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	stored, ok := m.events[old.Name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, old.Name)
	}
	stored.Series = old.Series.DeepCopy() // the patch sets the series, nothing else
	return stored, nil
}

func (m *memorySink) snapshot() (events []eventsv1.Event, notes []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.events {
		events = append(events, *e)
	}
	return events, append([]string(nil), m.notes...)
}

func clientGoRecorder(t *testing.T, sink *memorySink) clientgoevents.EventRecorder {
	t.Helper()
	b := clientgoevents.NewBroadcaster(sink)
	ctx, cancel := context.WithCancel(context.Background())
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sink.hold != nil {
			close(sink.hold)
		}
		cancel()
		b.Shutdown()
	})
	return b.NewRecorder(k8sruntime.NewScheme(), "argo-rollouts-gatewayapi")
}

func routeObject(name string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "HTTPRoute"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: "0a1b2c3d-0a1b-0a1b-0a1b-0a1b2c3d4e5f"},
	}
}

var rolloutMeta = &metav1.PartialObjectMetadata{
	TypeMeta:   metav1.TypeMeta{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout"},
	ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "demo"},
}

func eventually(t *testing.T, what string, done func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !done(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
	}
}

// Two steps of a walk change the same route: with client-go, the second
// step's Event is the same as the first but for its note, so it only
// raises the first one's count. kubectl describe shows "SetWeight(10) …
// (x2)", and the weights of SetWeight(30) are sent nowhere. The plugin's
// Recorder tells each step's change in an Event of its own.
func TestClientGoEventsWouldFoldTheNextStepIntoTheFirst(t *testing.T) {
	sink := &memorySink{events: map[string]*eventsv1.Event{}}
	rec := clientGoRecorder(t, sink)
	route := routeObject("checkout")
	steps := []string{
		"rollout shop/demo: SetWeight(10): rule 0 Service shop/stable 100→90; rule 0 Service shop/canary 0→10",
		"rollout shop/demo: SetWeight(30): rule 0 Service shop/stable 90→70; rule 0 Service shop/canary 10→30",
	}
	rec.Eventf(route, rolloutMeta, corev1.EventTypeNormal, reasonWeightsChanged, "SetWeight", "%s", steps[0])
	eventually(t, "the first step's Event is created", func() bool { _, notes := sink.snapshot(); return len(notes) == 1 })
	rec.Eventf(route, rolloutMeta, corev1.EventTypeNormal, reasonWeightsChanged, "SetWeight", "%s", steps[1])
	eventually(t, "the second step is counted", func() bool {
		events, _ := sink.snapshot()
		return len(events) == 1 && events[0].Series != nil && events[0].Series.Count == 2
	})
	events, notes := sink.snapshot()
	if len(events) != 1 || events[0].Note != steps[0] || len(notes) != 1 {
		t.Fatalf("client-go now keeps a step's note (%d Events, notes sent %q): its tools/events may serve the plugin (events/doc.go)", len(events), notes)
	}

	// The plugin's own Recorder, on the same two steps.
	a := newAPI()
	st, _ := testState(a)
	regarding := corev1.ObjectReference{APIVersion: "gateway.networking.k8s.io/v1", Kind: "HTTPRoute", Namespace: "shop", Name: "checkout"}
	for i, note := range steps {
		st.observe(Event{Regarding: regarding, Type: corev1.EventTypeNormal, Reason: reasonWeightsChanged, Action: "SetWeight", Note: note},
			t0.Add(time.Duration(i)*time.Second))
	}
	var sent []string
	for _, name := range a.created {
		sent = append(sent, a.events[name].Note)
	}
	if diff := cmp.Diff(steps, sent); diff != "" {
		t.Errorf("the plugin's Recorder: notes of the Events created (-want +got):\n%s", diff)
	}
}

// While the Events API is slow, client-go's broadcaster holds a goroutine
// for every Event on its way, each with its own request (and its own
// retries): a step over 200 routes holds 200 requests at once. The plugin's Recorder sends from one goroutine, from a
// bounded queue.
func TestClientGoEventsWouldHoldAGoroutinePerEvent(t *testing.T) {
	const routesN = 200
	sink := &memorySink{events: map[string]*eventsv1.Event{}, hold: make(chan struct{})}
	rec := clientGoRecorder(t, sink)
	for i := range routesN {
		rec.Eventf(routeObject(fmt.Sprintf("route-%d", i)), rolloutMeta, corev1.EventTypeNormal, reasonWeightsChanged, "SetWeight",
			"rollout shop/demo: SetWeight(30): rule 0 Service shop/stable 90→70; rule 0 Service shop/canary 10→30")
	}
	// Each request held is a goroutine of the broadcaster's, waiting.
	eventually(t, fmt.Sprintf("%d requests held at once", routesN), func() bool {
		return sink.waiting.Load() == routesN
	})
}
