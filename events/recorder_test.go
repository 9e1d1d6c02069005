package events

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// api is the Events API as the tests play it: it keeps what was created
// and patched, and answers what the test says.
type api struct {
	events  map[string]*eventsv1.Event // by name
	created []string                   // names, in order
	patches []string                   // names, in order
	// refuse, when set, answers every request instead.
	refuse error
	n      int
}

func newAPI() *api { return &api{events: map[string]*eventsv1.Event{}} }

func (a *api) create(_ context.Context, e *eventsv1.Event) (string, error) {
	if a.refuse != nil {
		return "", a.refuse
	}
	a.n++
	e = e.DeepCopy()
	e.Name = e.Regarding.Name + "." + string(rune('a'+a.n-1))
	a.events[e.Name] = e
	a.created = append(a.created, e.Name)
	return e.Name, nil
}

func (a *api) patch(_ context.Context, _, name string, data []byte) error {
	if a.refuse != nil {
		return a.refuse
	}
	e, ok := a.events[name]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, name)
	}
	var p struct{ Series *eventsv1.EventSeries }
	if err := json.Unmarshal(data, &p); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	e.Series = p.Series
	a.patches = append(a.patches, name)
	return nil
}

// count is the series count of an Event: 1 for one without a series.
func (a *api) count(name string) int32 {
	if s := a.events[name].Series; s != nil {
		return s.Count
	}
	return 1
}

var (
	t0           = time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	webRef       = corev1.ObjectReference{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Namespace: "shop", Name: "web", UID: "uid-web"}
	conflictText = "rollout shop/web: SetWeight(30): nothing was written: HTTPRoute shop/web: conflict: …"
)

func warning(note string) Event {
	return Event{Regarding: webRef, Type: corev1.EventTypeWarning, Reason: reasonConflict, Action: "SetWeight", Note: note}
}

func testState(a *api) (*state, *bytes.Buffer) {
	var logs bytes.Buffer
	log := logrus.New()
	log.SetOutput(&logs)
	return newState(a, Options{Controller: "argo-rollouts-gatewayapi", Instance: "host/42"}, logrus.NewEntry(log)), &logs
}

// The first Warning is one Event with every field the Events API wants.
func TestAWarningIsOneEvent(t *testing.T) {
	a := newAPI()
	st, _ := testState(a)
	st.observe(warning(conflictText), t0)
	want := []*eventsv1.Event{{
		ObjectMeta:          metav1.ObjectMeta{Name: "web.a", Namespace: "shop"},
		EventTime:           metav1.NewMicroTime(t0),
		ReportingController: "argo-rollouts-gatewayapi",
		ReportingInstance:   "host/42",
		Action:              "SetWeight",
		Reason:              "Conflict",
		Regarding:           webRef,
		Note:                conflictText,
		Type:                "Warning",
	}}
	var got []*eventsv1.Event
	for _, n := range a.created {
		got = append(got, a.events[n])
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// The controller repeats a failing call every few seconds: the same error
// raises one Event's count, sent at most every seriesEvery, never a second
// Event.
func TestRepeatsAreASeries(t *testing.T) {
	a := newAPI()
	st, _ := testState(a)
	for i := range 10 {
		now := t0.Add(time.Duration(i) * time.Second)
		st.observe(warning(conflictText), now)
		st.flush(now)
	}
	if len(a.created) != 1 {
		t.Fatalf("created %d Events, want 1", len(a.created))
	}
	// Sent at t0 (1), t0+5s (6), and nothing since: the next is due at t0+10s.
	if got := a.count("web.a"); got != 6 {
		t.Errorf("count %d after the patch at t0+5s, want 6", got)
	}
	st.flush(t0.Add(10 * time.Second))
	if got, s := a.count("web.a"), a.events["web.a"].Series; got != 10 || !s.LastObservedTime.Time.Equal(t0.Add(9*time.Second)) {
		t.Errorf("count %d, last observed %v after the flush at t0+10s; want 10 at t0+9s", got, s.LastObservedTime)
	}
	if len(a.patches) != 2 {
		t.Errorf("%d patches for 10 sightings in 10 s, want 2", len(a.patches))
	}
	st.flush(t0.Add(20 * time.Second))
	if len(a.patches) != 2 {
		t.Errorf("a flush without a new sighting patched again: %d patches", len(a.patches))
	}
}

// A Warning whose text changes every time (an elapsed time in it) is a new
// Event a few times, then counts in the newest one: no storm.
func TestNewTextsAreBounded(t *testing.T) {
	a := newAPI()
	st, _ := testState(a)
	for i := range 60 {
		now := t0.Add(time.Duration(i) * time.Second)
		st.observe(warning(conflictText+" attempt "+string(rune('0'+i%10))+time.Duration(i).String()), now)
		st.flush(now)
	}
	// newWarnings at once, then one per newWarningEvery: 5 + 59/30.
	if len(a.created) != 6 {
		t.Errorf("%d Events for 60 texts in a minute, want 6", len(a.created))
	}
	total := int32(0)
	st.flush(t0.Add(2 * time.Minute))
	for _, n := range a.created {
		total += a.count(n)
	}
	if total != 60 {
		t.Errorf("the Events count %d sightings, want 60", total)
	}
}

// Without permission the plugin says so once, sends nothing to that
// namespace for a while, and sends what it kept once it may.
func TestForbiddenIsSaidOnceAndRetried(t *testing.T) {
	a := newAPI()
	st, logs := testState(a)
	a.refuse = apierrors.NewForbidden(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "", nil)
	for i := range 30 {
		now := t0.Add(time.Duration(i) * time.Second)
		st.observe(warning(conflictText), now)
		st.observe(Event{Regarding: webRef, Type: corev1.EventTypeNormal, Reason: reasonRecovered, Action: "SetWeight", Note: "x" + now.String()}, now)
		st.flush(now)
	}
	if n := strings.Count(logs.String(), "may not record Events"); n != 1 {
		t.Errorf("the log says %d times that the plugin may not record Events, want once:\n%s", n, logs.String())
	}
	a.refuse = nil
	for s := 61; s < 65; s++ { // the token bucket's burst, then its rate
		st.flush(t0.Add(time.Duration(s) * time.Second))
	}
	warnings := 0
	for _, n := range a.created {
		if e := a.events[n]; e.Type == corev1.EventTypeWarning {
			warnings++
			if a.count(n) != 30 {
				t.Errorf("the Warning seen 30 times counts %d", a.count(n))
			}
		}
	}
	if len(a.created) != 31 || warnings != 1 {
		t.Errorf("once allowed: %d Events created, %d of them Warnings; want 31 and 1", len(a.created), warnings)
	}
}

// A 429 pauses the Recorder for the time the apiserver asks.
func TestTooManyRequestsPauses(t *testing.T) {
	a := newAPI()
	st, _ := testState(a)
	a.refuse = apierrors.NewTooManyRequests("slow down", 20)
	st.observe(warning(conflictText), t0)
	a.refuse = nil
	st.observe(warning("another text"), t0.Add(time.Second))
	st.flush(t0.Add(19 * time.Second))
	if len(a.created) != 0 {
		t.Fatalf("sent %d Events during the pause", len(a.created))
	}
	st.flush(t0.Add(20 * time.Second))
	if len(a.created) != 2 {
		t.Errorf("after the pause: %d Events, want 2", len(a.created))
	}
}

// An Event gone from the apiserver (its time to live passed) is created
// again with its count.
func TestASeriesWhoseEventIsGoneIsCreatedAgain(t *testing.T) {
	a := newAPI()
	st, _ := testState(a)
	st.observe(warning(conflictText), t0)
	delete(a.events, "web.a")
	st.observe(warning(conflictText), t0.Add(6*time.Second))
	if len(a.created) != 2 || a.count(a.created[1]) != 2 {
		t.Errorf("created %v; the second should count 2", a.created)
	}
}

// The Events API takes at most 1024 bytes of note: a longer text is cut on
// a character and says where the rest is.
func TestLongNotesAreCut(t *testing.T) {
	long := strings.Repeat("é", 600) // 1200 bytes
	got := cut(long)
	if len(got) > maxNote || !strings.HasSuffix(got, cutSuffix) || !strings.HasPrefix(long, strings.TrimSuffix(got, cutSuffix)) {
		t.Errorf("cut to %d bytes: %q", len(got), got)
	}
	if short := "short"; cut(short) != short {
		t.Error("a short note was changed")
	}
}

// A series not seen for seriesEnd is forgotten: seen again, it is a new
// Event; a change (Normal) sooner, after changeEnd.
func TestSeriesEnd(t *testing.T) {
	a := newAPI()
	st, _ := testState(a)
	st.observe(warning(conflictText), t0)
	st.flush(t0.Add(seriesEnd + time.Second))
	st.observe(warning(conflictText), t0.Add(seriesEnd+2*time.Second))
	if len(a.created) != 2 || st.series.len() != 1 {
		t.Errorf("created %v, remembering %d series", a.created, st.series.len())
	}
	change := Event{Regarding: webRef, Type: corev1.EventTypeNormal, Reason: reasonWeightsChanged, Action: "SetWeight", Note: "rule 0 …"}
	st.observe(change, t0)
	st.flush(t0.Add(changeEnd + time.Second))
	if st.series.len() != 1 {
		t.Errorf("a change is remembered after changeEnd: %d series", st.series.len())
	}
}

// Memory is bounded: a full Recorder forgets the oldest Event it has sent.
func TestSeriesAreBounded(t *testing.T) {
	a := newAPI()
	st, _ := testState(a)
	for i := range maxSeries + 10 {
		st.observe(warning(fmt.Sprintf("text %d", i)), t0.Add(time.Duration(i)*time.Minute)) // a minute apart: each a new Event
	}
	if st.series.len() != maxSeries {
		t.Errorf("%d series remembered, want %d", st.series.len(), maxSeries)
	}
	if _, ok := st.series.get(key{regarding: webRef, typ: "Warning", reason: reasonConflict, note: "text 0"}); ok {
		t.Error("the oldest series is still remembered")
	}
}

// Record never waits: with nothing sending, a full queue drops.
func TestRecordNeverBlocks(t *testing.T) {
	quiet := logrus.New()
	quiet.SetOutput(io.Discard)
	r := newRecorder(newAPI(), Options{}, logrus.NewEntry(quiet))
	done := make(chan struct{})
	go func() {
		for range queueSize + 10 {
			r.Record(warning(conflictText))
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Record blocked")
	}
	queued, dropped := r.Recorded()
	if diff := cmp.Diff([2]int64{queueSize, 10}, [2]int64{queued, dropped}); diff != "" {
		t.Errorf("Events [queued, dropped] (-want +got):\n%s", diff)
	}
	var nilRecorder *Recorder
	nilRecorder.Record(warning(conflictText))
	if queued, dropped := nilRecorder.Recorded(); queued != 0 || dropped != 0 {
		t.Errorf("a nil Recorder says it queued %d and dropped %d", queued, dropped)
	}
}

// An Event the apiserver refuses as invalid is never sent again.
func TestInvalidIsNotRetried(t *testing.T) {
	a := newAPI()
	st, logs := testState(a)
	a.refuse = apierrors.NewInvalid(schema.GroupKind{Group: "events.k8s.io", Kind: "Event"}, "x", nil)
	st.observe(warning(conflictText), t0)
	a.refuse = nil
	for i := range 5 {
		st.observe(warning(conflictText), t0.Add(time.Duration(10*i)*time.Second))
		st.flush(t0.Add(time.Duration(10*i) * time.Second))
	}
	if len(a.created) != 0 || !strings.Contains(logs.String(), "refused an Event") {
		t.Errorf("created %v; log: %s", a.created, logs.String())
	}
}
