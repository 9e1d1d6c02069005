package kube

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
)

// A watch stream as the apiserver sends it (JSON events one after another),
// read by the watch caches' decoder: each event comes out as the informer
// needs it, however the stream is cut into reads.
func TestWatchStreamDecodesEveryEvent(t *testing.T) {
	served := string(jsonOf(t, servedRoute()))
	want, err := decodeRoute([]byte(served))
	if err != nil {
		t.Fatal(err)
	}
	unreadable := strings.Replace(served, `"rules":[`, `"rules":["not an object",`, 1)
	// A value with braces, brackets and escaped quotes in a string must not
	// end an object early.
	tricky := strings.Replace(served, `"app":"web"`, `"app":"we}]b\"{["`, 1)
	stream := `{"type":"ADDED","object":` + served + "}\n" +
		` {"type":"MODIFIED","object":` + tricky + "}\n\n" +
		`{"type":"MODIFIED","object":` + unreadable + "}\n" +
		`{"type":"BOOKMARK","object":{"kind":"HTTPRoute","apiVersion":"gateway.networking.k8s.io/v1","metadata":{"resourceVersion":"500","annotations":{"k8s.io/initial-events-end":"true"}}}}` + "\n" +
		`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (2)","reason":"Expired","code":410}}` + "\n" +
		`{"type":"DELETED","object":` + served + "}\n"

	for name, r := range map[string]func(io.Reader) io.Reader{
		"whole":        func(r io.Reader) io.Reader { return r },
		"byte by byte": iotest.OneByteReader,
		"half reads":   iotest.HalfReader,
	} {
		t.Run(name, func(t *testing.T) {
			d := &eventDecoder{body: io.NopCloser(nil), frames: newFrames(r(strings.NewReader(stream)))}
			next := func(wantType watch.EventType) any {
				t.Helper()
				typ, obj, err := d.Decode()
				if err != nil {
					t.Fatalf("%s: %v", wantType, err)
				}
				if typ != wantType {
					t.Fatalf("event %s, want %s", typ, wantType)
				}
				return obj
			}
			if diff := cmp.Diff(&want, next(watch.Added).(*cachedRoute).route); diff != "" {
				t.Errorf("ADDED (-decodeRoute +event):\n%s", diff)
			}
			if got := next(watch.Modified).(*cachedRoute).route.Labels["app"]; got != `we}]b"{[` {
				t.Errorf("the label with braces and quotes read as %q", got)
			}
			bad := next(watch.Modified).(*cachedRoute)
			if bad.err == nil || bad.ref.Name != "web" || bad.resourceVersion != "7" {
				t.Errorf("an unreadable route: kept as %s at %s with error %v", bad.ref.Name, bad.resourceVersion, bad.err)
			}
			bookmark := next(watch.Bookmark).(*cachedRoute)
			if bookmark.resourceVersion != "500" || bookmark.annotations[metav1.InitialEventsAnnotationKey] != "true" {
				t.Errorf("bookmark %+v", bookmark)
			}
			if st := next(watch.Error).(*metav1.Status); st.Code != 410 || st.Reason != metav1.StatusReasonExpired {
				t.Errorf("error event %+v", st)
			}
			if diff := cmp.Diff(&want, next(watch.Deleted).(*cachedRoute).route); diff != "" {
				t.Errorf("DELETED (-decodeRoute +event):\n%s", diff)
			}
			if _, _, err := d.Decode(); err != io.EOF {
				t.Errorf("after the last event: %v, want EOF", err)
			}
		})
	}
}

// A watch cache keeps of a route no call uses only its identity: in the
// initial events the rest of such a route is not even read (an unreadable
// spec included), and what is kept is what a label selector reads; a route
// a call uses is kept whole, and a bookmark is read either way.
func TestWatchStreamKeepsOnlyTheIdentityOfRoutesNoCallUses(t *testing.T) {
	served := string(jsonOf(t, servedRoute()))
	unreadable := strings.Replace(served, `"rules":[`, `"rules":["not an object",`, 1)
	stream := `{"type":"ADDED","object":` + served + "}\n" +
		`{"type":"MODIFIED","object":` + unreadable + "}\n" +
		`{"type":"BOOKMARK","object":{"kind":"HTTPRoute","apiVersion":"gateway.networking.k8s.io/v1","metadata":{"resourceVersion":"500","annotations":{"k8s.io/initial-events-end":"true"}}}}` + "\n" +
		`{"type":"ADDED","object":` + strings.Replace(served, `"name":"web"`, `"name":"used"`, 1) + "}\n" +
		`{"type":"MODIFIED","object":` + served + "}\n"
	used := routes.Ref{Kind: routes.HTTPRoute, Namespace: wtNS, Name: "used"}
	d := &eventDecoder{body: io.NopCloser(nil), frames: newFrames(strings.NewReader(stream)),
		keep: &keeping{uses: func(r routes.Ref) bool { return r == used }, labels: &labelSets{}}, initial: true}
	wantSlim := &cachedRoute{resourceVersion: "7",
		ref: routes.Ref{Kind: routes.HTTPRoute, Namespace: wtNS, Name: "web"}, version: "v1", labels: labelPairs{"app", "web"}}
	for _, want := range []watch.EventType{watch.Added, watch.Modified} {
		typ, obj, err := d.Decode()
		if err != nil || typ != want {
			t.Fatalf("%s: %s, %v", want, typ, err)
		}
		if diff := cmp.Diff(wantSlim, obj, cmp.AllowUnexported(cachedRoute{}), cmpopts.IgnoreFields(cachedRoute{}, "err")); diff != "" {
			t.Errorf("%s of a route no call uses (-want +got):\n%s", want, diff)
		}
		wantSlim.resourceVersion = "7" // the unreadable one is served at the same version
	}
	if typ, obj, err := d.Decode(); err != nil || typ != watch.Bookmark || obj.(*cachedRoute).resourceVersion != "500" {
		t.Errorf("bookmark: %s %+v %v", typ, obj, err)
	}
	typ, obj, err := d.Decode()
	if err != nil || typ != watch.Added || obj.(*cachedRoute).route == nil || obj.(*cachedRoute).route.Ref != used {
		t.Errorf("the route a call uses: %s %+v %v; want it whole", typ, obj, err)
	}
	// After the initial events a route is read whole first (they are
	// mostly the plugin's own writes), and kept slim if no call uses it.
	typ, obj, err = d.Decode()
	if diff := cmp.Diff(wantSlim, obj, cmp.AllowUnexported(cachedRoute{}), cmpopts.IgnoreFields(cachedRoute{}, "err")); err != nil || typ != watch.Modified || diff != "" {
		t.Errorf("a later event of a route no call uses: %s, %v (-want +got):\n%s", typ, err, diff)
	}
}

// A stream cut inside an event, or holding something other than objects,
// is an error, not an event.
func TestWatchStreamRefusesWhatIsNotAnEvent(t *testing.T) {
	for name, stream := range map[string]string{
		"cut inside an event": `{"type":"ADDED","object":{"kind":"HTTPRoute"`,
		"not an object":       `["ADDED"]`,
		"an unknown type":     `{"type":"SOMETHING","object":{}}`,
	} {
		d := &eventDecoder{body: io.NopCloser(nil), frames: newFrames(strings.NewReader(stream))}
		if typ, obj, err := d.Decode(); err == nil || err == io.EOF {
			t.Errorf("%s: %s %T, %v; want an error", name, typ, obj, err)
		}
	}
}

// The labels of slim entries: a selector reads them as it reads a map, and
// entries with the same labels share one slice.
func TestSlimEntriesShareTheirLabels(t *testing.T) {
	sets := &labelSets{}
	a := sets.of(map[string]string{"app": "web", "tier": "front"})
	b := sets.of(map[string]string{"tier": "front", "app": "web"})
	if &a[0] != &b[0] {
		t.Error("two entries with the same labels do not share them")
	}
	sel, err := labels.Parse("app=web,tier in (front,back),!canary")
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(a) || sel.Matches(sets.of(map[string]string{"app": "web", "tier": "front", "canary": "x"})) || sel.Matches(labelPairs(nil)) {
		t.Error("a selector reads the pairs otherwise than a map")
	}
	if diff := cmp.Diff(map[string]string{"app": "web", "tier": "front"}, a.asMap()); diff != "" {
		t.Errorf("asMap (-want +got):\n%s", diff)
	}
}
